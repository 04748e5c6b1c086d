import { existsSync, realpathSync, statSync } from 'node:fs';
import { realpath } from 'node:fs/promises';
import { join, resolve, sep } from 'node:path';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import helmet from 'helmet';

export interface UiHandlerOptions {
  /**
   * Paths that are never a page of the UI (answered by the API or left to the host): requests
   * for them pass through instead of getting index.html. Default: `/api`, `/socket.io`,
   * `/sockets`, `/alive`, `/health`.
   */
  reservedPrefixes?: readonly string[];
}

const DEFAULT_RESERVED = ['/api', '/socket.io', '/sockets', '/alive', '/health'] as const;

/**
 * Serves a single-page web UI build (e.g. the OpenHands frontend the user built) from `dir`:
 * its files as they are, hashed assets (`/assets/…`) cached for a year, and `index.html`
 * (never cached) for every other GET that is not an API path, so the UI's own routes work on
 * reload. Mount it after the ACS router: `app.use(createAcsRouter(…)); app.use(serveUi(dir))`.
 * Throws at once if `dir` holds no `index.html`.
 */
export function serveUi(dir: string, options: UiHandlerOptions = {}): Router {
  const root = resolve(dir);
  const index = join(root, 'index.html');
  if (!existsSync(index) || !statSync(index).isFile()) {
    throw new Error(
      `serveUi: ${root} has no index.html; point it at the directory of a built web UI (e.g. the OpenHands frontend's build/).`,
    );
  }
  const reserved = options.reservedPrefixes ?? DEFAULT_RESERVED;
  const isReserved = (path: string) => reserved.some((prefix) => path === prefix || path.startsWith(`${prefix}/`));
  const router = express.Router();
  // The UI is framed by no other origin (another port of this host gets the same cookies), and
  // its files are never sniffed into another type. Its own scripts and styles are left alone.
  router.use(
    helmet({
      // Only who may frame it: the UI's own loading rules are its builder's to set.
      contentSecurityPolicy: {
        useDefaults: false,
        directives: {
          defaultSrc: helmet.contentSecurityPolicy.dangerouslyDisableDefaultSrc,
          frameAncestors: ["'self'"],
        },
      },
      frameguard: { action: 'sameorigin' },
      strictTransportSecurity: false,
      crossOriginEmbedderPolicy: false,
    }),
  );
  router.use(insideRoot(root));
  router.use(
    express.static(root, {
      index: false,
      fallthrough: true,
      setHeaders: (res, path) => {
        // Vite names assets by their content hash: a changed file is a new URL.
        res.setHeader(
          'Cache-Control',
          path.startsWith(join(root, 'assets')) ? 'public, max-age=31536000, immutable' : 'no-cache',
        );
      },
    }),
  );
  router.use((req, res, next) => {
    if ((req.method !== 'GET' && req.method !== 'HEAD') || isReserved(req.path)) {
      next();
      return;
    }
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile(index);
  });
  return router;
}

/**
 * Refuses (404) a file whose real path is outside the build: a symbolic link in the UI folder
 * is served only when it leads to a file of the build itself.
 */
function insideRoot(root: string) {
  const realRoot = realpathSync(root);
  return (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      next();
      return;
    }
    let relative: string;
    try {
      relative = decodeURIComponent(req.path);
    } catch {
      res.status(400).type('text/plain').send('Bad path.\n');
      return;
    }
    const candidate = join(root, relative);
    realpath(candidate).then(
      (real) =>
        real === realRoot || real.startsWith(realRoot + sep)
          ? next()
          : res.status(404).type('text/plain').send('Not found.\n'),
      // Nothing there: the page (index.html) or the next handler answers.
      () => next(),
    );
  };
}
