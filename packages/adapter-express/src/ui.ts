import { existsSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import express, { type Router } from 'express';

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
    throw new Error(`serveUi: ${root} has no index.html; point it at the directory of a built web UI (e.g. the OpenHands frontend's build/).`);
  }
  const reserved = options.reservedPrefixes ?? DEFAULT_RESERVED;
  const isReserved = (path: string) => reserved.some((prefix) => path === prefix || path.startsWith(`${prefix}/`));
  const router = express.Router();
  router.use(
    express.static(root, {
      index: false,
      fallthrough: true,
      setHeaders: (res, path) => {
        // Vite names assets by their content hash: a changed file is a new URL.
        res.setHeader('Cache-Control', path.startsWith(join(root, 'assets')) ? 'public, max-age=31536000, immutable' : 'no-cache');
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
