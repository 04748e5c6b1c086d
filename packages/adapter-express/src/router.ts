// Why this file is over 400 lines: it is the one place where the route table meets Express:
// callers (keys, cookies, conversation keys), body limits and JSON depth, validation of every
// part, error mapping, method and OPTIONS answers, sign-in redirects and the live channels'
// attach. Each is short; together they are one request pipeline. The SSE streams are in
// event-stream.ts.
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import helmet from 'helmet';
import {
  findUnstorableText,
  toFieldIssues,
  UNSTORABLE_TEXT_MESSAGE,
  validationFailed,
  type AgentConversationService,
  type DomainError,
  type FieldIssue,
} from '@acs/core';
import { normalizeId, silentLogger, type Logger } from '@acs/core/ports';
import { z } from 'zod';
import { presentedKeyOf, type Authenticate } from './auth/api-keys.js';
import {
  ownSandboxKeyCheck,
  SANDBOX_KEY_REFUSALS,
  sandboxKeyChecker,
  type SandboxKeyChecker,
} from './auth/sandbox-keys.js';
import { sessionCookie, type BrowserSessionStore, type CookieScope } from './auth/browser-sessions.js';
import { requestOrigin, type ProxyTrust } from './auth/origin.js';
import { clientAddressOf } from './auth/client-address.js';
import { signInHandler } from './auth/sign-in.js';
import { crossSiteRefusal, type Caller } from './auth/caller.js';
import { createRouterAuth, type RouterAuth } from './router-auth.js';
import { HTTP_ERROR_CODES, sendDomainError, sendError } from './http-error.js';
import { buildOpenApiDocument, type OpenApiDocument, type OpenApiInfo } from './openapi.js';
import type { Server as HttpServer, IncomingMessage } from 'node:http';
import { jsonDepthExceeds } from './json-depth.js';
import { attachRealtime, type RealtimeChannels } from './realtime/attach.js';
import { LiveConnections, resolveLiveChannelLimits, type LiveChannelLimits } from './realtime/live-connections.js';
import { notFoundOf, toExpressPath, type RouteDefinition } from './route.js';
import { createEventStreams } from './event-stream.js';
import { sendBodyStream } from './body-stream.js';
import { DEFAULT_EXPORT_LIMITS, type ExportLimits } from './views/trajectory-zip.js';
import { buildRoutes } from './routes.js';
import { createSandboxProxy, type SandboxProxy } from './sandbox-proxy.js';
import { defaultRouteContext } from './route-context.js';

export interface AcsRouterOptions {
  /** Who is calling: return a user id or null (401). Takes precedence over apiKeys. */
  authenticate?: Authenticate;
  /** The default authenticator: X-Session-API-Key value → user id. */
  apiKeys?: Readonly<Record<string, string>>;
  /**
   * Browser sign-in (with `apiKeys`): opening any page with `?key=<API key>` starts a session
   * (an HttpOnly, SameSite=Strict cookie holding an opaque id, never the key; named
   * `__Host-acs_session` on https where the router is mounted at `/`, else `acs_session`) and
   * redirects to the same URL without the key; the cookie then authenticates like the header,
   * CSRF-guarded. A session remembers the key that made it and ends when that key is revoked or
   * expires (with a store that implements `sessionOf`); `POST /api/sign-out` with
   * `{"everywhere": true}` ends all of a user's (with `endAllOf`). Default: sessions in memory
   * (`MemoryBrowserSessions`: 7 days idle, 30 days at most). `false` turns browser sign-in off.
   * Ignored with `authenticate`, which keeps full control.
   */
  browserSessions?: BrowserSessionStore | false;
  /**
   * At least 32 bytes: signs the per-conversation keys (`session_api_key` of a conversation,
   * which opens only that conversation's realtime channels and agent routes). Give a stable one
   * so keys survive restarts; default: random per process.
   */
  secret?: Uint8Array;
  /**
   * Where the console's page that answers device sign-ins is, as a path of this origin (the
   * OpenHands CLI's `login` opens it with `?user_code=`). Default `/console/device`, where the
   * example server mounts `@acs/web-console`.
   */
  deviceVerificationPath?: string;
  /** The model names `GET /api/options/models` offers the UI (e.g. the LLM adapter's price table). Default: none; users type their own. */
  models?: () => readonly string[];
  /**
   * What `GET /api/v1/app-conversations/{id}/download` may hold: at most `maxEvents` events
   * (default 10,000, as OpenHands; a longer log is refused with 413) and `maxBytes` of event JSON
   * (default 512 MiB; past it the archive ends with a TRUNCATED.txt note).
   */
  conversationExport?: Partial<ExportLimits>;
  /** Largest accepted JSON body (default 1 MiB). */
  bodyLimit?: number;
  /**
   * Deepest nesting of arrays and objects a JSON body may have (default 64). Deeper bodies
   * are refused while parsing (400 JSON_TOO_DEEP), before anything reads or stores them.
   */
  maxJsonDepth?: number;
  logger?: Logger;
  openApi?: OpenApiInfo;
  /**
   * Believe `X-Forwarded-Proto` and `X-Forwarded-Host` (default false): set it when the router is
   * behind a proxy that sets them (e.g. TLS ends at nginx). The session cookie is then `Secure`
   * when the proxy says https, and the same-origin checks compare with the origin the browser
   * sees. Without it a client could claim https or another host by a header.
   */
  trustProxy?: boolean;
  /**
   * The base host of sandboxes' exposed URLs: a sandbox's AGENT_SERVER is served at
   * `<scheme>://agent-server-<sandbox id>.<sandboxUrlHost>` (give a name with a wildcard DNS
   * record, and certificate, for this server, e.g. `sandboxes.example.com`). Default: the host
   * the client reached (`localhost:<port>` when that is a loopback address).
   */
  sandboxUrlHost?: string;
  /**
   * Give a client that reached the router on a loopback address (and no `sandboxUrlHost` is set)
   * each sandbox exposed URL as `http://<that address>:<a port of its own>`, which resolves
   * everywhere, instead of `http://agent-server-<id>.localhost:<port>`, which resolves only where
   * the resolver knows `*.localhost` (not glibc without `libnss-myhostname`, nor Python on macOS).
   * Each port listens on that address and serves only that URL, proxied and authenticated as the
   * host name is; every `Set-Cookie` from it is dropped (it shares the service's host: cookies
   * ignore ports). A port opens when its URL is first given out and closes when the sandbox is
   * deleted or found gone (checked every `checkIntervalMs`, default 60 s), and when the realtime
   * channels close (`attach`'s `close()`) or `shutdownSignal` aborts. At most `maxPorts` (default
   * 256) are open; past that URLs are host names again, with a warning logged once. A port is
   * this process's: with several replicas, a URL names a port on the machine of the replica
   * that gave it out. Default false.
   */
  loopbackSandboxPorts?: boolean | { maxPorts?: number; checkIntervalMs?: number };
  /** How often an event stream sends a `: ping` comment so proxies keep it open (default 15 s). */
  sseHeartbeatMs?: number;
  /**
   * An event stream whose client stops reading is ended once this much data waits to be
   * sent (default: `liveChannels.maxBufferedBytes`), so a stalled client cannot hold
   * unbounded memory; it resumes with Last-Event-ID.
   */
  sseMaxBufferedBytes?: number;
  /**
   * Bounds of every live channel (SSE event streams, socket.io, the agent-server WebSocket):
   * connections per user (32), bytes waiting for a client that does not read (8 MiB), the
   * deadline to authenticate (10 s), how often credentials are checked again (1 s). A message
   * sent over a channel has the same limit as a REST body (`bodyLimit`).
   */
  liveChannels?: LiveChannelLimits;
  /**
   * Abort it when the host shuts down: every open event stream ends at once (its client
   * resumes with Last-Event-ID from whichever process serves it next), so closing the HTTP
   * server does not wait for streams, and new streams are refused with 503 SHUTTING_DOWN.
   */
  shutdownSignal?: AbortSignal;
}

const USER = Symbol('acs.user');
const MOUNT = Symbol('acs.mount');
const CALLER = Symbol('acs.caller');
type WithUser = Request & { [USER]?: string; [MOUNT]?: string; [CALLER]?: Caller };

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

/** What the router's request handling is made of, made once from the service and the options (`createRouterParts`). */
interface RouterParts {
  readonly service: AgentConversationService;
  readonly options: AcsRouterOptions;
  readonly logger: Logger;
  readonly proxy: ProxyTrust;
  readonly bodyLimit: number;
  readonly maxJsonDepth: number;
  /** The route table (routes.ts) and the status paths outside /api among it (/alive, /health, /ready, /server_info). */
  readonly routes: RouteDefinition[];
  readonly openPaths: string[];
  readonly methodsFor: AllowedMethods;
  /** API keys given as an option, browser sessions (unless off or the host authenticates), keys users made, conversations' keys. */
  readonly auth: RouterAuth;
  readonly resolveCaller: RouterAuth['resolveCaller'];
  /** Where `attach` was told the router is mounted: the cookie path of the realtime channels' upgrades. */
  readonly attached: { mountPath: string };
  readonly live: LiveConnections;
  readonly eventStreams: ReturnType<typeof createEventStreams>;
  readonly bodyStream: ReturnType<typeof sendBodyStream>;
  readonly parseForm: express.RequestHandler;
  readonly parseJson: express.RequestHandler;
  readonly sandboxProxy: SandboxProxy;
  readonly openApiDocument: () => OpenApiDocument;
  /** When a request under /api last came in (`GET /server_info`'s idle time). */
  readonly activity: { lastRequestAt: number };
}

/** Checks the options (a wrong one throws: a bug of the host's, found at start) and makes each part once. */
function createRouterParts(service: AgentConversationService, options: AcsRouterOptions): RouterParts {
  if (!options.authenticate && !options.apiKeys) {
    throw new Error('createAcsRouter needs `authenticate` (your own auth) or `apiKeys` (X-Session-API-Key → user id).');
  }
  const deviceVerificationPath = options.deviceVerificationPath ?? '/console/device';
  if (!deviceVerificationPath.startsWith('/'))
    throw new Error('deviceVerificationPath must be a path of this origin, starting with /.');
  const heartbeatMs = options.sseHeartbeatMs ?? 15_000;
  if (!(Number.isFinite(heartbeatMs) && heartbeatMs > 0))
    throw new Error('sseHeartbeatMs must be a positive number of milliseconds.');
  const logger = options.logger ?? silentLogger;
  const live = new LiveConnections(resolveLiveChannelLimits(options.liveChannels), logger);
  const maxBufferedBytes = options.sseMaxBufferedBytes ?? live.limits.maxBufferedBytes;
  if (!(Number.isFinite(maxBufferedBytes) && maxBufferedBytes > 0))
    throw new Error('sseMaxBufferedBytes must be a positive number of bytes.');

  const proxy: ProxyTrust = { trustProxy: options.trustProxy ?? false };
  const attached = { mountPath: '' };
  const auth = createRouterAuth({
    service,
    options,
    logger,
    cookieScopeOf: (req) => cookieScopeOf(req, proxy, attached),
    // Every live channel the session opened closes now, not at its next check.
    endSessionChannels: (sessionId) => live.endSession(sessionId),
    endUserSessionChannels: (userId) => live.endSessionsOf(userId),
  });
  const resolveCaller = auth.resolveCaller;
  const bodyLimit = options.bodyLimit ?? 1024 * 1024;
  const activity = { lastRequestAt: Date.now() };
  const sandboxProxy = sandboxProxyOf(service, options, { logger, live, proxy, resolveCaller });
  const routes = buildRoutes(
    service,
    defaultRouteContext({
      lastRequestAt: () => activity.lastRequestAt,
      endBrowserSession: auth.endBrowserSession,
      conversationKeys: auth.conversationKeys,
      models: () => options.models?.() ?? [],
      deviceVerificationPath,
      exportLimits: exportLimitsOf(options.conversationExport),
      sandboxUrlHost: options.sandboxUrlHost ?? null,
      loopbackSandboxPorts: sandboxProxy.ports,
      ownSandboxKey: ownSandboxKeyCheck({ conversationKey: auth.conversationKey, service }),
    }),
  );
  const maxJsonDepth = options.maxJsonDepth ?? 64;
  if (!(Number.isInteger(maxJsonDepth) && maxJsonDepth > 0))
    throw new Error('maxJsonDepth must be a positive integer.');
  const onBackendFailure = (req: Request, route: RouteDefinition, error: DomainError) =>
    logBackendFailure(logger, req, route, error);
  let document: OpenApiDocument | undefined;
  return {
    service,
    options,
    logger,
    proxy,
    bodyLimit,
    maxJsonDepth,
    routes,
    // The status routes outside /api (/alive, /health, /ready, /server_info): they do not count as activity.
    openPaths: [...new Set(routes.filter((r) => !r.path.startsWith('/api/')).map((r) => r.path))],
    methodsFor: allowedMethods(routes),
    auth,
    resolveCaller,
    attached,
    live,
    eventStreams: createEventStreams({
      logger,
      live,
      resolveCaller,
      heartbeatMs,
      maxBufferedBytes,
      ...(options.shutdownSignal ? { shutdownSignal: options.shutdownSignal } : {}),
      onBackendFailure,
    }),
    bodyStream: sendBodyStream({ logger, onBackendFailure }),
    parseForm: express.urlencoded({ extended: false, limit: bodyLimit, parameterLimit: 32 }),
    parseJson: jsonParser(bodyLimit, maxJsonDepth),
    sandboxProxy,
    openApiDocument: () => (document ??= buildOpenApiDocument(routes, options.openApi)),
    activity,
  };
}

/** A sandbox's exposed URLs (its OpenHands agent-server): proxied, with the sandbox's own auth. */
function sandboxProxyOf(
  service: AgentConversationService,
  options: AcsRouterOptions,
  made: { logger: Logger; live: LiveConnections; proxy: ProxyTrust; resolveCaller: RouterAuth['resolveCaller'] },
): SandboxProxy {
  const { logger, live, proxy, resolveCaller } = made;
  const sandboxProxy = createSandboxProxy({
    service,
    logger,
    enterUnauthenticated: (req) => live.enterUnauthenticated(clientAddressOf(req, proxy)),
    pendingLimits: live.limits,
    resolveCaller: (req, upgrade) =>
      resolveCaller(req).then((caller) => {
        if (caller?.via !== 'session') return caller;
        // A loopback port's raw request is an Express one by now (resolveCaller made it so).
        const crossSite = upgrade ? crossSiteUpgrade(req, proxy) : crossSiteRefusal(req as Request, proxy) !== null;
        return crossSite ? null : caller;
      }),
    loopbackPorts: loopbackPortsOf(options),
  });
  // The loopback ports close with the host even where the realtime channels are never attached.
  options.shutdownSignal?.addEventListener('abort', () => sandboxProxy.ports?.close(), { once: true });
  return sandboxProxy;
}

/** The `loopbackSandboxPorts` option, checked, with its defaults; null when off. */
function loopbackPortsOf(options: AcsRouterOptions): { maxPorts: number; checkIntervalMs: number } | null {
  const chosen = options.loopbackSandboxPorts ?? false;
  if (chosen === false) return null;
  const { maxPorts = 256, checkIntervalMs = 60_000 } = chosen === true ? {} : chosen;
  if (!(Number.isInteger(maxPorts) && maxPorts > 0))
    throw new Error('loopbackSandboxPorts.maxPorts must be a positive integer.');
  if (!(Number.isFinite(checkIntervalMs) && checkIntervalMs > 0))
    throw new Error('loopbackSandboxPorts.checkIntervalMs must be a positive number of milliseconds.');
  return { maxPorts, checkIntervalMs };
}

/** Any content type as JSON (the handler checked it), refused as too deep while it is read. */
function jsonParser(bodyLimit: number, maxJsonDepth: number): express.RequestHandler {
  return express.json({
    limit: bodyLimit,
    strict: true,
    type: () => true,
    // Runs on the raw bytes before JSON.parse, so a deep body is refused before it is built.
    verify: (_req, _res, raw) => {
      if (jsonDepthExceeds(raw, maxJsonDepth))
        throw Object.assign(new Error('JSON nested too deep'), { type: 'entity.too.deep', status: 400 });
    },
  });
}

/**
 * Where a request's session cookie applies: over https or not (as `requestOrigin` sees it), and
 * the router's mount (the cookie's path): a request's own, or for a realtime upgrade, which no
 * Express router saw, where `attach` was told the router is.
 */
function cookieScopeOf(req: IncomingMessage, proxy: ProxyTrust, attached: { mountPath: string }): CookieScope {
  const mount = (req as WithUser)[MOUNT] ?? (req as Partial<Request>).baseUrl ?? attached.mountPath;
  return { secure: requestOrigin(req, proxy).protocol === 'https', path: mount || '/' };
}

/** What comes before the routes: the sandbox hosts' proxy, the request log, security headers, browser sign-in, OPTIONS. */
function mountFront(router: Router, parts: RouterParts): void {
  // A request for a sandbox's own host name is that sandbox's, whatever its path (sandbox-proxy.ts).
  router.use((req, res, next) => (parts.sandboxProxy.claims(req) ? parts.sandboxProxy.http(req, res, next) : next()));

  router.use((req, res, next) => {
    // Where the host mounted the router: paths below it are what the route table knows.
    (req as WithUser)[MOUNT] = req.baseUrl;
    if (!parts.openPaths.includes(routePathOf(req))) parts.activity.lastRequestAt = Date.now();
    const started = performance.now();
    res.on('finish', () => {
      parts.logger.info(
        {
          method: req.method,
          path: req.baseUrl + req.path,
          status: res.statusCode,
          ms: Math.round(performance.now() - started),
          user: (req as WithUser)[USER] ?? null,
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
        mountOf: (req) => (req as WithUser)[MOUNT] ?? '',
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
  (req as WithUser)[USER] = caller.userId;
  (req as WithUser)[CALLER] = caller;
  next();
}

/** Errors Express and the body parsers raise, as the router's JSON errors; anything else is a 500, logged. */
function errorHandler(parts: RouterParts) {
  return (error: unknown, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) {
      next(error);
      return;
    }
    const type = (error as { type?: unknown } | null)?.type;
    switch (type) {
      case 'entity.parse.failed':
        sendError(res, 400, HTTP_ERROR_CODES.MALFORMED_JSON, 'The request body is not valid JSON.');
        return;
      case 'entity.too.deep':
        sendError(
          res,
          400,
          HTTP_ERROR_CODES.JSON_TOO_DEEP,
          `The request body nests arrays and objects more than ${parts.maxJsonDepth} levels deep; nothing was stored.`,
        );
        return;
      case 'entity.too.large':
        sendError(
          res,
          413,
          HTTP_ERROR_CODES.PAYLOAD_TOO_LARGE,
          `The request body is larger than ${parts.bodyLimit} bytes.`,
        );
        return;
      case 'charset.unsupported':
      case 'encoding.unsupported':
        sendError(
          res,
          415,
          HTTP_ERROR_CODES.UNSUPPORTED_MEDIA_TYPE,
          'Send the body as UTF-8 JSON (Content-Type: application/json).',
        );
        return;
      case 'request.aborted':
      case 'request.size.invalid':
        sendError(res, 400, HTTP_ERROR_CODES.MALFORMED_JSON, 'The request body was incomplete.');
        return;
      default:
        // Other client errors raised by Express or the body parser (a path parameter that is not
        // valid percent-encoding, a body that cannot be decompressed): the request is bad, not the server.
        if (isClientHttpError(error)) {
          sendError(
            res,
            error.status,
            HTTP_ERROR_CODES.BAD_REQUEST,
            'The request could not be read: its URL or body is not correctly encoded.',
          );
          return;
        }
        parts.logger.error(
          {
            method: req.method,
            path: req.baseUrl + req.path,
            err: error instanceof Error ? error.message : String(error),
          },
          'unhandled error',
        );
        sendError(
          res,
          500,
          HTTP_ERROR_CODES.INTERNAL_ERROR,
          'The server failed to handle this request; it has been logged.',
        );
    }
  };
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

/** One route's handler: who may call it, its body's type, then (once the body is read) `runRoute`. */
function handlerFor(parts: RouterParts, route: RouteDefinition) {
  const acceptsBody = !(route.body instanceof z.ZodUndefined);
  const hasPathParams = route.path.includes('{');
  return (req: Request, res: Response, next: NextFunction) => {
    // `/api/v1/sandboxes/search` is the search route's path, never a sandbox called "search".
    if (hasPathParams && parts.methodsFor.isLiteral(routePathOf(req))) {
      next('route');
      return;
    }
    if (route.conversationKeyOnly && (req as WithUser)[CALLER]?.via !== 'conversation-key') {
      sendError(
        res,
        401,
        HTTP_ERROR_CODES.UNAUTHENTICATED,
        "This route acts on the conversation whose key opens it: send that conversation's session_api_key as X-Session-API-Key.",
      );
      return;
    }
    if (route.apiKeyOnly && (req as WithUser)[CALLER]?.via === 'session') {
      sendError(
        res,
        403,
        HTTP_ERROR_CODES.API_KEY_REQUIRED,
        'This route answers a secret: call it with an API key (X-Session-API-Key or Authorization: Bearer), not from a browser session.',
      );
      return;
    }
    const withBody = acceptsBody && requestHasBody(req);
    const asForm = withBody && route.formBody === true && req.is('application/x-www-form-urlencoded') !== false;
    if (withBody && !asForm && !req.is(['application/json', 'application/*+json'])) {
      sendError(
        res,
        415,
        HTTP_ERROR_CODES.UNSUPPORTED_MEDIA_TYPE,
        'Send the body as JSON with Content-Type: application/json.',
      );
      return;
    }
    if (!withBody && route.bodyRequired) {
      refuseMissingBody(req, res);
      return;
    }
    const run = () => runRoute(parts, route, withBody, req, res, next);
    if (withBody)
      (asForm ? parts.parseForm : parts.parseJson)(req, res, (error?: unknown) => (error ? next(error) : run()));
    else run();
  };
}

/** A route that needs a body got none: 415 without a JSON content type, 400 with one. */
function refuseMissingBody(req: Request, res: Response): void {
  if (req.get('content-type') && !req.is(['application/json', 'application/*+json'])) {
    sendError(
      res,
      415,
      HTTP_ERROR_CODES.UNSUPPORTED_MEDIA_TYPE,
      'Send the body as JSON with Content-Type: application/json.',
    );
  } else if (req.get('content-type')) {
    sendError(res, 400, HTTP_ERROR_CODES.MALFORMED_JSON, 'The request body is empty; send a JSON object.');
  } else {
    sendError(
      res,
      415,
      HTTP_ERROR_CODES.UNSUPPORTED_MEDIA_TYPE,
      'This route needs a JSON body with Content-Type: application/json.',
    );
  }
}

/** Validates every part of the request, checks a conversation key's scope, and answers: JSON, an event stream or a body stream. */
function runRoute(
  parts: RouterParts,
  route: RouteDefinition,
  withBody: boolean,
  req: Request,
  res: Response,
  next: NextFunction,
): void {
  const issues: FieldIssue[] = [];
  const params = parsePart(route.params, req.params, 'path', issues);
  const notFound = notFoundOf(route.params);
  if (notFound && findUnstorableText(req.params) !== null) {
    // No record can have such an id.
    sendDomainError(res, notFound(req.params as Record<string, string>));
    return;
  }
  const query = parsePart(route.query, req.query, 'query', issues);
  const body = parsePart(route.body, withBody ? (req.body as unknown) : undefined, null, issues);
  const headers = parsePart(route.headers, headersOf(req, route.headers), 'header', issues);
  if (issues.length > 0) {
    sendDomainError(res, validationFailed(issues));
    return;
  }
  const caller = (req as WithUser)[CALLER] ?? {
    userId: '',
    via: 'host' as const,
    conversationId: null,
    sessionId: null,
  };
  const input = {
    userId: caller.userId,
    caller,
    mountPath: (req as WithUser)[MOUNT] ?? '',
    origin: requestOrigin(req, parts.proxy).origin,
    // Read only by the routes that count per client (device sign-in), not worked out for every request.
    get client() {
      return clientAddressOf(req, parts.proxy);
    },
    localAddress: req.socket.localAddress ?? null,
    params,
    query,
    body,
    headers,
  };
  if (caller.via === 'conversation-key') {
    // A conversation's key opens that conversation's channels and agent routes, nothing else.
    const scope = route.conversationScope?.(input) ?? null;
    if (scope === null || normalizeId(scope) !== caller.conversationId) {
      sendError(
        res,
        401,
        HTTP_ERROR_CODES.UNAUTHENTICATED,
        `This is the key of conversation ${caller.conversationId}; it opens only that conversation's channels and agent routes. Use an API key here.`,
      );
      return;
    }
  }
  if (route.stream) {
    parts.eventStreams.open(route, input, req, res, next);
    return;
  }
  if (route.respond) {
    parts.bodyStream(route, input, req, res, next);
    return;
  }
  route
    .handle(input)
    .match(
      (value) => {
        if (route.clearsBrowserSession)
          res.set(
            'Set-Cookie',
            sessionCookie(null, {
              secure: requestOrigin(req, parts.proxy).protocol === 'https',
              path: (req as WithUser)[MOUNT] || '/',
            }),
          );
        if (route.success.text) res.status(route.success.status).type('text/plain').send(String(value));
        else res.status(route.success.status).json(value);
      },
      (error) => {
        logBackendFailure(parts.logger, req, route, error);
        sendDomainError(res, error);
      },
    )
    .catch(next);
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
      (req as WithUser)[USER] = outcome.userId;
      (req as WithUser)[CALLER] = { userId: outcome.userId, via: 'sandbox-key', conversationId: null, sessionId: null };
      next();
    }, next);
  };
}

/** A backend failure is the operator's to see: the operation and the error's class, never values. */
function logBackendFailure(logger: Logger, req: Request, route: RouteDefinition, error: DomainError) {
  const where = { method: req.method, path: req.baseUrl + req.path, route: route.operationId };
  if (error.type === 'StoreUnavailable')
    logger.error({ ...where, operation: error.operation, errorClass: error.errorClass }, 'storage failed');
  else if (error.type === 'SandboxRuntimeFailed')
    logger.warn({ ...where, operation: error.operation, sandboxId: error.sandboxId }, 'sandbox runtime failed');
  else if (error.type === 'SandboxesUnavailable') logger.warn(where, 'sandbox runtime unavailable');
}

function exportLimitsOf(limits: Partial<ExportLimits> = {}): ExportLimits {
  const resolved = { ...DEFAULT_EXPORT_LIMITS, ...limits };
  for (const [name, value] of Object.entries(resolved)) {
    if (!(Number.isSafeInteger(value) && value > 0))
      throw new Error(`conversationExport.${name} must be a positive integer.`);
  }
  return resolved;
}

/** The declared headers of a request, by their declared names; an empty header counts as absent. */
function headersOf(req: Request, schema: z.ZodType): Record<string, string | undefined> {
  if (!(schema instanceof z.ZodObject)) return {};
  return Object.fromEntries(Object.keys(schema.shape).map((name) => [name, req.get(name) || undefined]));
}

function requestHasBody(req: Request): boolean {
  const length = req.get('content-length');
  return req.get('transfer-encoding') !== undefined || (length !== undefined && length !== '0');
}

/**
 * Validates one part of the request. What the schema accepts is also checked once for text
 * storage cannot hold (NUL, unpaired surrogates), so such input is a 422 naming the field
 * rather than a storage failure later.
 */
function parsePart(schema: z.ZodType, value: unknown, prefix: string | null, issues: FieldIssue[]): unknown {
  const at = (path: string) => (prefix ? (path ? `${prefix}.${path}` : prefix) : path);
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    for (const issue of toFieldIssues(parsed.error)) issues.push({ path: at(issue.path), message: issue.message });
    return undefined;
  }
  const unstorable = findUnstorableText(parsed.data);
  if (unstorable !== null) {
    issues.push({ path: at(unstorable), message: UNSTORABLE_TEXT_MESSAGE });
    return undefined;
  }
  return parsed.data;
}

/** The path below the router's mount point, e.g. `/api/v1/sandboxes/search` wherever the host mounted it. */
function routePathOf(req: Request): string {
  return (req.baseUrl + req.path).slice((req as WithUser)[MOUNT]?.length ?? 0);
}

type AllowedMethods = ((path: string) => string[] | null) & { isLiteral(path: string): boolean };

/**
 * The methods each path takes. A path that is a literal route (`/api/v1/sandboxes/search`)
 * takes only its own methods, never those of a parameterised route it also matches.
 */
function allowedMethods(routes: readonly RouteDefinition[]): AllowedMethods {
  const entries = [
    ...routes.map((r) => ({ method: r.method.toUpperCase(), path: r.path })),
    { method: 'GET', path: '/api/openapi.json' },
  ].map((r) => ({
    ...r,
    literal: !r.path.includes('{'),
    pattern: new RegExp(`^${r.path.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}/?$`, 'i'),
  }));
  const isLiteral = (path: string) => entries.some((e) => e.literal && e.pattern.test(path));
  const forPath = (path: string) => {
    const literal = isLiteral(path);
    const methods = entries.filter((e) => e.literal === literal && e.pattern.test(path)).map((e) => e.method);
    return methods.length > 0 ? [...new Set(methods)] : null;
  };
  return Object.assign(forPath, { isLiteral });
}

function allowHeader(methods: readonly string[]): string {
  const all = new Set(methods);
  if (all.has('GET')) all.add('HEAD');
  all.add('OPTIONS');
  return [...all].join(', ');
}

function methodNotAllowed(req: Request, res: Response, allowed: readonly string[]) {
  res.set('Allow', allowHeader(allowed));
  sendError(
    res,
    405,
    HTTP_ERROR_CODES.METHOD_NOT_ALLOWED,
    `${req.method} is not allowed here; use ${allowed.join(' or ')}.`,
  );
}

/** An http-errors style error (Express, body-parser) with a 4xx status. */
function isClientHttpError(error: unknown): error is { status: number } {
  const status = (error as { status?: unknown } | null)?.status;
  return typeof status === 'number' && Number.isInteger(status) && status >= 400 && status < 500;
}

/**
 * A realtime upgrade from another origin riding on the session cookie (a page elsewhere opening a
 * socket to us). Without a trusted proxy the scheme of an upgrade is not known (TLS may end in
 * front), so either scheme with this host counts as this origin.
 */
function crossSiteUpgrade(req: IncomingMessage, proxy: ProxyTrust): boolean {
  const origin = req.headers.origin;
  if (typeof origin !== 'string') return false;
  const ours = requestOrigin(req, proxy);
  if (proxy.trustProxy) return origin !== ours.origin;
  const host = ours.origin.slice(ours.origin.indexOf('://') + 3);
  return origin !== `http://${host}` && origin !== `https://${host}`;
}
