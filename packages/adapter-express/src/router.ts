// The request pipeline where the route table meets Express: what comes before the routes (the
// sandbox hosts' proxy, the request log, security headers, browser sign-in, OPTIONS), the
// routes in the order their callers are checked, and the realtime channels' attach. Its parts
// are made once in router-parts.ts from the options (router-options.ts); one route's handling is
// route-handler.ts, methods and 405s router-methods.ts, errors router-errors.ts.
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import helmet from 'helmet';
import type { AgentConversationService } from '@acs/core';
import type { Server as HttpServer } from 'node:http';
import { presentedKeyOf } from './auth/api-keys.js';
import { SANDBOX_KEY_REFUSALS, sandboxKeyChecker, type SandboxKeyChecker } from './auth/sandbox-keys.js';
import { clientAddressOf } from './auth/client-address.js';
import { signInHandler } from './auth/sign-in.js';
import { crossSiteRefusal, crossSiteUpgrade, type Caller } from './auth/caller.js';
import { HTTP_ERROR_CODES, sendDomainError, sendError } from './http-error.js';
import { attachRealtime, type RealtimeChannels } from './realtime/attach.js';
import { toExpressPath } from './route.js';
import type { AcsRouterOptions } from './router-options.js';
import { createRouterParts, type RouterParts } from './router-parts.js';
import { handlerFor } from './route-handler.js';
import { allowHeader, methodNotAllowed } from './router-methods.js';
import { errorHandler } from './router-errors.js';
import { admit, callerOf, mountOf, noteMount, routePathOf } from './router-request.js';

/** The router, plus what needs the host's HTTP server: the realtime channels the OpenHands UI uses. */
export interface AcsRouter extends Router {
  /**
   * Adds the realtime channels (socket.io at `<mountPath>/socket.io`, the agent-server event
   * socket at `<mountPath>/sockets/events/<id>`) to the server the app listens on. Call once,
   * after `listen`; `mountPath` is where the router is mounted (default the root). They end when
   * `shutdownSignal` aborts, or with `close()`.
   */
  attach(server: HttpServer, options?: { mountPath?: string }): RealtimeChannels;
}

/**
 * The whole HTTP interface as an Express router. Mount it where you like
 * (`app.use(createAcsRouter(service, { apiKeys }))`); it serves `/alive`, `/health`,
 * `/api/...` and `/api/v1/...` relative to the mount point, and never calls listen().
 */
export function createAcsRouter(service: AgentConversationService, options: AcsRouterOptions = {}): AcsRouter {
  const parts = createRouterParts(service, options);
  const router = express.Router();
  mountFront(router, parts);
  mountRoutes(router, parts);
  router.use(errorHandler(parts));
  return Object.assign(router, {
    attach: (server: HttpServer, attachOptions: { mountPath?: string } = {}): RealtimeChannels =>
      attach(parts, server, attachOptions.mountPath ?? ''),
  });
}

/** What comes before the routes: the sandbox hosts' proxy, the request log, security headers, browser sign-in, OPTIONS. */
function mountFront(router: Router, parts: RouterParts): void {
  // A request for a sandbox's own host name is that sandbox's, whatever its path (sandbox-proxy.ts).
  router.use((req, res, next) => (parts.sandboxProxy.claims(req) ? parts.sandboxProxy.http(req, res, next) : next()));

  router.use((req, res, next) => {
    // Where the host mounted the router: paths below it are what the route table knows.
    noteMount(req);
    if (!parts.openPaths.includes(routePathOf(req))) parts.activity.lastRequestAt = Date.now();
    const started = performance.now();
    res.on('finish', () => {
      parts.logger.info(
        {
          method: req.method,
          path: req.baseUrl + req.path,
          status: res.statusCode,
          ms: Math.round(performance.now() - started),
          user: callerOf(req)?.userId ?? null,
        },
        'request',
      );
    });
    next();
  });

  // What the router answers is data, never a page: no sniffing it into one, no framing it, no referrer.
  router.use(
    ['/api', ...parts.openPaths],
    helmet({
      contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
      frameguard: { action: 'deny' },
      strictTransportSecurity: false,
    }),
  );

  // Browser sign-in: a page opened with ?key=<API key> starts a session and comes back without the key (auth/sign-in.ts).
  const { sessions, apiKeys } = parts.auth;
  if (sessions && apiKeys) {
    router.use(
      signInHandler({
        sessions,
        userOfKey: (key) => parts.auth.signInKey(key),
        currentSession: (req) => parts.auth.browserSession(req),
        logger: parts.logger,
        proxy: parts.proxy,
        routePathOf,
        mountOf: (req) => mountOf(req) ?? '',
      }),
    );
  }
  // The device sign-in's token endpoint hands out keys: never cached (RFC 6749 §5.1).
  router.use('/oauth', (_req, res, next) => {
    res.set('Cache-Control', 'no-store');
    next();
  });

  // Which methods a path takes, for anyone (no key needed, as for a CORS preflight).
  router.use((req, res, next) => {
    const allowed = req.method === 'OPTIONS' ? parts.methodsFor(routePathOf(req)) : null;
    if (!allowed) {
      next();
      return;
    }
    res.set('Allow', allowHeader(allowed)).status(204).end();
  });
}

/** The route table: open routes, routes a sandbox's key opens, then the caller check under /api and the routes behind it. */
function mountRoutes(router: Router, parts: RouterParts): void {
  const { routes, methodsFor } = parts;
  for (const route of routes.filter((r) => !r.authenticated)) {
    router[route.method](toExpressPath(route.path), handlerFor(parts, route));
  }
  // Routes a sandbox's key opens (and nothing else): before the user auth, which would refuse that key.
  const sandboxKeyGuard = sandboxKeyGuardFor(
    parts,
    sandboxKeyChecker({ conversationKey: parts.auth.conversationKey, service: parts.service }),
  );
  for (const route of routes.filter((r) => r.sandboxKeyOnly)) {
    router[route.method](toExpressPath(route.path), sandboxKeyGuard, handlerFor(parts, route));
  }
  // The open routes outside /api answer other methods with a JSON 405 too (not the host's 404 page).
  router.use(parts.openPaths, (req, res, next) => {
    const allowed = methodsFor(routePathOf(req));
    if (!allowed) {
      next();
      return;
    }
    methodNotAllowed(req, res, allowed);
  });

  router.use('/api', (req, res, next) => {
    res.set('Cache-Control', 'no-store');
    parts.resolveCaller(req).then(
      (caller) => admitCaller(parts, req, res, next, caller),
      (error: unknown) => next(error),
    );
  });

  router.get('/api/openapi.json', (_req, res) => {
    res.json(parts.openApiDocument());
  });

  for (const route of routes.filter((r) => r.authenticated && !r.sandboxKeyOnly)) {
    router[route.method](toExpressPath(route.path), handlerFor(parts, route));
  }

  router.use('/api', (req, res) => {
    const path = routePathOf(req);
    const allowed = methodsFor(path);
    if (allowed) {
      methodNotAllowed(req, res, allowed);
      return;
    }
    sendError(
      res,
      404,
      HTTP_ERROR_CODES.ROUTE_NOT_FOUND,
      `There is no route ${req.method} ${path}; see /api/openapi.json.`,
    );
  });
}

/** Lets a request under /api on with its caller, or answers 401 (no caller) or 403 (a session's request from another site). */
function admitCaller(parts: RouterParts, req: Request, res: Response, next: NextFunction, caller: Caller | null): void {
  if (!caller) {
    sendError(
      res,
      401,
      HTTP_ERROR_CODES.UNAUTHENTICATED,
      'Send a valid API key in the X-Session-API-Key header or as Authorization: Bearer <key> (or sign in in the browser with ?key=).',
    );
    return;
  }
  const refused = caller.via === 'session' ? crossSiteRefusal(req, parts.proxy) : null;
  if (refused) {
    sendError(
      res,
      403,
      HTTP_ERROR_CODES.CROSS_SITE_REQUEST,
      `Refused ${refused}: a browser session only changes things from this origin.`,
    );
    return;
  }
  admit(req, caller);
  next();
}

/** Adds the realtime channels to the host's HTTP server (`AcsRouter.attach`). */
function attach(parts: RouterParts, server: HttpServer, mountPath: string): RealtimeChannels {
  parts.attached.mountPath = mountPath;
  const channels = attachRealtime(server, mountPath, {
    service: parts.service,
    logger: parts.logger,
    live: parts.live,
    sandboxProxy: parts.sandboxProxy,
    maxMessageBytes: parts.bodyLimit,
    clientAddressOf: (req) => clientAddressOf(req, parts.proxy),
    resolveCaller: (req, key) =>
      parts
        .resolveCaller(req, key)
        .then((caller) => (caller && caller.via === 'session' && crossSiteUpgrade(req, parts.proxy) ? null : caller)),
  });
  parts.options.shutdownSignal?.addEventListener('abort', () => void channels.close(), { once: true });
  return channels;
}

/**
 * Lets a request on only with the key of the sandbox its path names (auth/sandbox-keys.ts);
 * the caller is then that sandbox's owner.
 */
function sandboxKeyGuardFor(parts: RouterParts, check: SandboxKeyChecker) {
  return (req: Request, res: Response, next: NextFunction) => {
    if (parts.methodsFor.isLiteral(routePathOf(req))) {
      next('route');
      return;
    }
    res.set('Cache-Control', 'no-store');
    check(presentedKeyOf(req), String(req.params.sandbox_id ?? '')).then((outcome) => {
      if ('failed' in outcome) {
        sendDomainError(res, outcome.failed);
        return;
      }
      if ('refused' in outcome) {
        const refusal = SANDBOX_KEY_REFUSALS[outcome.refused];
        sendError(res, refusal.status, refusal.code, refusal.message);
        return;
      }
      admit(req, { userId: outcome.userId, via: 'sandbox-key', conversationId: null, sessionId: null });
      next();
    }, next);
  };
}
