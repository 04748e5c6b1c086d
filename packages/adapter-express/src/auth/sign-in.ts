import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import helmet from 'helmet';
import type { Logger } from '@acs/core/ports';
import { sessionCookie, type BrowserSessionStore } from './browser-sessions.js';
import { requestOrigin, type ProxyTrust } from './origin.js';

/** A key that signs a browser in: its user, and the credential the session keeps (it ends when the key stops opening things). */
export interface SignInKey {
  userId: string;
  credential: string;
}

export interface SignInDeps {
  sessions: BrowserSessionStore;
  /** The user of an API key (configured or made by the service), or null. */
  userOfKey(key: string): Promise<SignInKey | null>;
  /** The browser's live session from its cookie (the key that made it still holding), or null. */
  currentSession(req: Request): Promise<{ id: string; userId: string } | null>;
  logger: Logger;
  proxy: ProxyTrust;
  /** The path below the router's mount point (`/api/…` paths never sign in). */
  routePathOf(req: Request): string;
  /** Where the router is mounted (the cookie's path). */
  mountOf(req: Request): string;
}

/** The one field the confirmation form posts. */
const CONFIRM_FIELD = 'sign_in';

/**
 * Browser sign-in: any page opened with `?key=<API key>` signs the browser in (a session cookie)
 * and comes back without the key, but only when the browser says the user opened it
 * themselves (`Sec-Fetch-Site: none`, a typed or pasted URL) or this origin led there
 * (`same-origin`), and no other user is signed in. Otherwise (a link or redirect from another
 * site, a browser that says nothing, or a session of another user) it answers a page asking
 * "Sign in as <user>?" whose button posts back to the same URL from this origin; a page
 * elsewhere cannot press it (the page refuses to be framed, and a post from another origin is
 * refused). So another site can neither sign a victim in as the attacker nor switch a session.
 */
export function signInHandler(deps: SignInDeps): RequestHandler {
  const readForm = express.urlencoded({ extended: false, limit: '1kb', parameterLimit: 4 });
  const pageHeaders = confirmationPageHeaders();

  return (req, res, next) => {
    const key = req.query.key;
    const isPage = req.method === 'GET' || req.method === 'HEAD';
    if ((!isPage && req.method !== 'POST') || typeof key !== 'string' || deps.routePathOf(req).startsWith('/api/')) {
      next();
      return;
    }
    res.set('Cache-Control', 'no-store');
    deps.userOfKey(key).then((signedBy) => {
      if (!signedBy) {
        res
          .status(401)
          .type('text/plain')
          .send('This sign-in link holds no valid API key. Use the URL the server printed at start.\n');
        return;
      }
      const target = keylessLocation(req);
      if (isPage) void answerPage(deps, pageHeaders, req, res, next, signedBy, target);
      else
        readForm(req, res, (error?: unknown) =>
          error ? next(error) : void confirm(deps, req, res, next, signedBy, target),
        );
    }, next);
  };
}

/** The confirmation page's headers: no script, no framing, nothing sent elsewhere, its form posting only here. */
function confirmationPageHeaders(): RequestHandler {
  return helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'none'"],
        styleSrc: ["'unsafe-inline'"],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
        baseUri: ["'none'"],
      },
    },
    referrerPolicy: { policy: 'no-referrer' },
    frameguard: { action: 'deny' },
    strictTransportSecurity: false,
  });
}

/** A GET with a valid key: sign in at once when the user opened it and no one else is signed in, else ask. */
async function answerPage(
  deps: SignInDeps,
  pageHeaders: RequestHandler,
  req: Request,
  res: Response,
  next: NextFunction,
  signedBy: SignInKey,
  target: string,
): Promise<void> {
  const userId = signedBy.userId;
  try {
    const current = await deps.currentSession(req);
    if (current?.userId === userId) {
      // Already signed in as this user: only drop the key from the address.
      res.status(303).set('Referrer-Policy', 'no-referrer').location(target).end();
      return;
    }
    const site = req.get('sec-fetch-site');
    if (!current && (site === 'none' || site === 'same-origin')) {
      await startSession(deps, req, res, signedBy, target, null);
      return;
    }
    pageHeaders(req, res, () => {
      res
        .status(200)
        .type('html')
        .send(confirmationPage(userId, current?.userId ?? null, target));
    });
  } catch (error) {
    next(error);
  }
}

/** The confirmation form's post: only from this origin. */
async function confirm(
  deps: SignInDeps,
  req: Request,
  res: Response,
  next: NextFunction,
  signedBy: SignInKey,
  target: string,
): Promise<void> {
  const userId = signedBy.userId;
  try {
    const form = (req.body ?? {}) as Record<string, unknown>;
    if (form[CONFIRM_FIELD] !== userId) {
      res.status(400).type('text/plain').send('Sign in from the page this link opens.\n');
      return;
    }
    if (!fromThisOrigin(deps, req)) {
      deps.logger.warn({ user: userId }, 'browser sign-in refused: the confirmation came from another site');
      res.status(403).type('text/plain').send('Refused: sign-in is confirmed only from this site.\n');
      return;
    }
    await startSession(deps, req, res, signedBy, target, await deps.currentSession(req));
  } catch (error) {
    next(error);
  }
}

/** Signs the browser in as the key's user (ending the session it replaces) and sends it to `target`. */
async function startSession(
  deps: SignInDeps,
  req: Request,
  res: Response,
  signedBy: SignInKey,
  target: string,
  replaced: { id: string } | null,
): Promise<void> {
  const userId = signedBy.userId;
  if (replaced) await deps.sessions.end(replaced.id);
  // The session remembers its key, so it ends when the key is revoked or expires.
  const sessionId = await deps.sessions.create(userId, signedBy.credential);
  const secure = requestOrigin(req, deps.proxy).protocol === 'https';
  res
    .status(303)
    .set('Set-Cookie', sessionCookie(sessionId, { secure, path: deps.mountOf(req) || '/' }))
    .set('Referrer-Policy', 'no-referrer')
    .location(target)
    .end();
  deps.logger.info({ user: userId, replacedSession: replaced !== null }, 'browser signed in');
}

/** Same-origin evidence for a post: the browser's Sec-Fetch-Site, or else its Origin. */
function fromThisOrigin(deps: SignInDeps, req: Request): boolean {
  const site = req.get('sec-fetch-site');
  if (site) return site === 'same-origin';
  return req.get('origin') === requestOrigin(req, deps.proxy).origin;
}

/**
 * Where a sign-in sends the browser: the same path and query without the key, always a path of
 * this site. The raw path may spell another host (`/.//evil.com/`, `/./\evil.com/`): URL
 * parsing turns those into `//evil.com/`, so leading slashes and backslashes are folded into one.
 */
function keylessLocation(req: Pick<Request, 'originalUrl'>): string {
  const url = new URL(req.originalUrl.replace(/\\/g, '/'), 'http://local');
  url.searchParams.delete('key');
  return `/${url.pathname.replace(/^\/+/, '')}${url.search}`;
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The page that asks before signing in: plain HTML, no script; its button posts back to this URL. */
function confirmationPage(userId: string, current: string | null, target: string): string {
  const user = escapeHtml(userId);
  const question = current
    ? `<p>This browser is signed in as <b>${escapeHtml(current)}</b>. The link you opened signs in as <b>${user}</b> instead.</p>`
    : `<p>The link you opened signs this browser in as <b>${user}</b>.</p>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Sign in as ${user}?</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:4rem auto;padding:0 1rem;color:#1f2328}button{font:inherit;padding:.5rem 1rem;margin-right:.5rem;cursor:pointer}a{color:#0969da}</style></head>
<body><h1>Sign in as ${user}?</h1>${question}
<p>Only continue if you opened this link yourself: a link from another site could sign you in to someone else's account, and what you store next would be theirs.</p>
<form method="post"><input type="hidden" name="${CONFIRM_FIELD}" value="${user}"><button type="submit">Sign in as ${user}</button>
<a href="${escapeHtml(target)}">${current ? `Stay signed in as ${escapeHtml(current)}` : 'Do not sign in'}</a></form>
</body></html>
`;
}
