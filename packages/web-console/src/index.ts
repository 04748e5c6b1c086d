/**
 * @acs/web-console: the service's own web console, for any Express host.
 *
 * ```ts
 * app.use(createAcsRouter(service, { apiKeys }));          // the API, with browser sign-in (?key=)
 * app.use('/console', createWebConsole());                  // the console, speaking that API
 * ```
 *
 * The console is a built single-page app (Preact) shipped in this package (`app-dist/`); this
 * module serves it: its hashed assets cached for a year, and its page, with the path it is
 * mounted at and where the API is, for every other GET (so a reload of any console URL works).
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import express, { type Request, type Response, type Router } from 'express';
import helmet from 'helmet';

export interface WebConsoleOptions {
  /**
   * Where the browser reaches the ACS router: a path on the same origin (`''`, the default, when
   * it is mounted at the root; `/agents` when the host did `app.use('/agents', router)`). The
   * console signs in with the router's session cookie, so it must be the same origin.
   */
  apiBase?: string;
  /** The title of the browser tab. Default "Agent Conversation Service". */
  title?: string;
  /** Where the built app is (default: this package's `app-dist/`). */
  appDir?: string;
}

/** The directory of the console's built app in this package. */
export const WEB_CONSOLE_APP_DIR = fileURLToPath(new URL('../app-dist/', import.meta.url));

/** The pages of the app: each is an HTML template that gets the mount path and the API base. */
const PAGES = { app: 'index.html', apiReference: 'api-reference/index.html' } as const;

/**
 * The console as an Express router; mount it where the browser should find it. Throws at once
 * when the app is not built, saying how to build it.
 */
export function createWebConsole(options: WebConsoleOptions = {}): Router {
  const dir = options.appDir ?? WEB_CONSOLE_APP_DIR;
  const templates = Object.fromEntries(
    Object.entries(PAGES).map(([name, file]) => {
      const path = `${dir.replace(/\/+$/, '')}/${file}`;
      if (!existsSync(path)) {
        throw new Error(
          `createWebConsole: ${path} is missing; build the console's app first (npm run build --workspace @acs/web-console).`,
        );
      }
      return [name, readFileSync(path, 'utf8')];
    }),
  ) as Record<keyof typeof PAGES, string>;
  const apiBase = normalizeBase(options.apiBase ?? '');
  const title = options.title ?? 'Agent Conversation Service';

  const router = express.Router();
  router.use(
    helmet({
      contentSecurityPolicy: { useDefaults: false, directives: CONTENT_SECURITY_POLICY },
      referrerPolicy: { policy: 'same-origin' },
      frameguard: { action: 'sameorigin' },
      strictTransportSecurity: false,
    }),
  );
  // The page itself, for / and (below) every route of the app.
  router.get(['/', '/index.html'], (req, res) => sendPage(req, res, templates.app, { apiBase, title }));
  router.get(['/api-reference', '/api-reference/', '/api-reference/index.html'], (req, res) => {
    if (req.path === '/api-reference') return res.redirect(301, `${req.baseUrl}/api-reference/`);
    sendPage(req, res, templates.apiReference, { apiBase, title: `API reference · ${title}` }, 'api-reference/');
  });
  router.use(
    express.static(dir, {
      index: false,
      fallthrough: true,
      setHeaders: (res, path) => {
        // Vite names assets by their content; a changed file is a new URL.
        res.setHeader('Cache-Control', path.includes('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache');
      },
    }),
  );
  router.use((req, res, next) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      next();
      return;
    }
    // A missing asset is a 404 from the console itself, not the page, and not whatever the host
    // serves after it (a UI at / would answer its index.html): a stale tab asking for an old bundle fails clearly.
    if (/\.[a-z0-9]+$/i.test(req.path)) {
      res.status(404).type('text/plain').send(`${req.baseUrl}${req.path} is not part of the console.\n`);
      return;
    }
    sendPage(req, res, templates.app, { apiBase, title });
  });
  return router;
}

/**
 * Scripts, styles, fonts and data only from this origin; images also from data: URLs (images a
 * user attached). Styles allow inline attributes (Swagger UI sets them).
 */
const CONTENT_SECURITY_POLICY = {
  defaultSrc: ["'self'"],
  scriptSrc: ["'self'"],
  styleSrc: ["'self'", "'unsafe-inline'"],
  imgSrc: ["'self'", 'data:', 'blob:'],
  fontSrc: ["'self'"],
  connectSrc: ["'self'"],
  frameAncestors: ["'self'"],
  baseUri: ["'self'"],
  formAction: ["'self'"],
};

/** The page with its <base> (where the mount path puts it, and the page's own folder in the app), the API base and the title. */
function sendPage(
  req: Request,
  res: Response,
  template: string,
  values: { apiBase: string; title: string },
  folder = '',
) {
  const mount = `${req.baseUrl.replace(/\/+$/, '')}/${folder}`;
  const html = template
    .replace('<meta charset="utf-8">', `<meta charset="utf-8">\n    <base href="${escapeHtml(mount)}">`)
    .replace(
      '<meta name="acs-api-base" content="">',
      `<meta name="acs-api-base" content="${escapeHtml(values.apiBase)}">`,
    )
    .replace(/<title>[^<]*<\/title>/, `<title>${escapeHtml(values.title)}</title>`);
  res.setHeader('Cache-Control', 'no-cache');
  res.type('html').send(html);
}

function normalizeBase(base: string): string {
  const trimmed = base.trim().replace(/\/+$/, '');
  if (trimmed !== '' && !trimmed.startsWith('/')) {
    throw new Error(
      `createWebConsole: apiBase must be a path on this origin, like "/agents" (got ${JSON.stringify(base)}).`,
    );
  }
  return trimmed;
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
