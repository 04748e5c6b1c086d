import { createHash, randomBytes } from 'node:crypto';
import type { Request } from 'express';

/** A live browser session: its user, and what signed it in. */
export interface BrowserSession {
  userId: string;
  /** What signed the session in, as the router named it when it made the session; null when none was kept. */
  credential: string | null;
}

/**
 * Where browser sessions live: an opaque session id (the cookie's value) names a user. The
 * id is never an API key, so a leaked cookie is not a leaked key, and ending the session
 * (sign-out) ends it everywhere.
 *
 * `sessionOf` and `endAllOf` are optional, so a store written before them still works: without
 * `sessionOf` a session outlives the revocation of the key that made it (until it expires), and
 * without `endAllOf` signing out everywhere ends only the caller's own session.
 */
export interface BrowserSessionStore {
  /**
   * Starts a session for the user; resolves to its id (at least 128 random bits). `credential`
   * names what signed it in, in the router's words (`acsk:<SHA-256 of the key>` for a key the
   * service made, `configured:<SHA-256>` for one of the router's `apiKeys`; never a secret):
   * keep it and give it back in `sessionOf`, so the session ends when that key stops opening
   * things (revoked, expired, no longer configured).
   */
  create(userId: string, credential?: string): Promise<string>;
  /** The user of a live session, or null (unknown, ended or expired). */
  userOf(sessionId: string): Promise<string | null>;
  /** The live session (its use counted as `userOf` counts it), or null. */
  sessionOf?(sessionId: string): Promise<BrowserSession | null>;
  /** Ends the session. Idempotent. */
  end(sessionId: string): Promise<void>;
  /** Ends every session of the user ("sign out everywhere"); resolves to how many it ended. */
  endAllOf?(userId: string): Promise<number>;
}

export interface MemoryBrowserSessionsOptions {
  /** A session unused this long ends (default 7 days); each use starts the wait again. */
  idleMs?: number;
  /** A session ends this long after it was made, however often it is used (default 30 days). */
  maxAgeMs?: number;
  now?: () => number;
}

interface HeldSession extends BrowserSession {
  createdAt: number;
  lastUsed: number;
}

/**
 * Sessions in this process's memory, ended after `idleMs` without use (default 7 days) and
 * `maxAgeMs` after they were made (default 30 days), whichever comes first. Kept by the SHA-256
 * of their id, so a heap dump holds no usable cookie. A restart ends them all (the user signs in
 * again with the URL the server prints), and so does signing out everywhere: only the sessions
 * of this process, which are all there are.
 */
export class MemoryBrowserSessions implements BrowserSessionStore {
  readonly #sessions = new Map<string, HeldSession>();
  readonly #idleMs: number;
  readonly #maxAgeMs: number;
  readonly #now: () => number;

  constructor(options: MemoryBrowserSessionsOptions = {}) {
    this.#idleMs = options.idleMs ?? 7 * 24 * 3600_000;
    this.#maxAgeMs = options.maxAgeMs ?? 30 * 24 * 3600_000;
    this.#now = options.now ?? Date.now;
    for (const [name, value] of [
      ['idleMs', this.#idleMs],
      ['maxAgeMs', this.#maxAgeMs],
    ] as const)
      if (!(Number.isFinite(value) && value > 0)) throw new Error(`MemoryBrowserSessions: ${name} must be positive.`);
  }

  create(userId: string, credential?: string): Promise<string> {
    this.#sweep();
    const id = randomBytes(32).toString('base64url');
    const now = this.#now();
    this.#sessions.set(digest(id), { userId, credential: credential ?? null, createdAt: now, lastUsed: now });
    return Promise.resolve(id);
  }

  async userOf(sessionId: string): Promise<string | null> {
    return (await this.sessionOf(sessionId))?.userId ?? null;
  }

  sessionOf(sessionId: string): Promise<BrowserSession | null> {
    const key = digest(sessionId);
    const session = this.#sessions.get(key);
    if (!session) return Promise.resolve(null);
    if (this.#over(session, this.#now())) {
      this.#sessions.delete(key);
      return Promise.resolve(null);
    }
    session.lastUsed = this.#now();
    return Promise.resolve({ userId: session.userId, credential: session.credential });
  }

  end(sessionId: string): Promise<void> {
    this.#sessions.delete(digest(sessionId));
    return Promise.resolve();
  }

  endAllOf(userId: string): Promise<number> {
    let ended = 0;
    for (const [key, session] of this.#sessions)
      if (session.userId === userId) {
        this.#sessions.delete(key);
        ended++;
      }
    return Promise.resolve(ended);
  }

  /** Idle too long, or older than the longest a session lives. */
  #over(session: HeldSession, now: number): boolean {
    return now - session.lastUsed > this.#idleMs || now - session.createdAt > this.#maxAgeMs;
  }

  /** Drops expired sessions now and then, so abandoned ones do not pile up. */
  #sweep(): void {
    if (this.#sessions.size < 1_000) return;
    const now = this.#now();
    for (const [key, session] of this.#sessions) if (this.#over(session, now)) this.#sessions.delete(key);
  }
}

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest('base64url');

/** The name of the session cookie. */
export const SESSION_COOKIE = 'acs_session';

/**
 * The session cookie's name on https where the router is mounted at `/`: a browser keeps a
 * `__Host-` cookie only when it is Secure, has Path=/ and no Domain, so no other host (a
 * sandbox's exposed URL under the same domain) can set or replace it.
 */
export const HOST_SESSION_COOKIE = '__Host-acs_session';

/** Where a session cookie applies: over https or not, and the cookie's path (the router's mount, `/` at the root). */
export interface CookieScope {
  secure: boolean;
  path: string;
}

/** The session cookie's name for a scope: `__Host-acs_session` on https at `/`, else `acs_session`. */
const sessionCookieName = (scope: CookieScope): string =>
  scope.secure && scope.path === '/' ? HOST_SESSION_COOKIE : SESSION_COOKIE;

/**
 * The session id a request carries. A `__Host-` cookie is taken wherever it comes (no other
 * host can have set it); the plain one only where the session cookie is not a `__Host-` one, so
 * on https at `/` a cookie planted from a sibling host is never read.
 */
export function sessionIdOf(req: Pick<Request, 'headers'>, scope: CookieScope): string | null {
  const prefixed = readCookie(req, HOST_SESSION_COOKIE);
  if (prefixed) return prefixed;
  return sessionCookieName(scope) === HOST_SESSION_COOKIE ? null : readCookie(req, SESSION_COOKIE);
}

/** A cookie's value from the request's Cookie header, or null. */
function readCookie(req: Pick<Request, 'headers'>, name: string): string | null {
  const header = req.headers.cookie;
  if (!header) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    try {
      return decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      return null;
    }
  }
  return null;
}

/**
 * The Set-Cookie value for a session (or, with null, for ending it). HttpOnly, SameSite=Strict,
 * Secure behind https; named `__Host-acs_session` on https at `/` (see `sessionCookieName`).
 */
export function sessionCookie(sessionId: string | null, options: CookieScope): string {
  return [
    `${sessionCookieName(options)}=${sessionId === null ? '' : encodeURIComponent(sessionId)}`,
    `Path=${options.path}`,
    'HttpOnly',
    'SameSite=Strict',
    ...(options.secure ? ['Secure'] : []),
    ...(sessionId === null ? ['Max-Age=0'] : []),
  ].join('; ');
}
