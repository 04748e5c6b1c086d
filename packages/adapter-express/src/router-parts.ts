import type { IncomingMessage } from 'node:http';
import express, { type Request } from 'express';
import type { AgentConversationService, DomainError } from '@acs/core';
import { silentLogger, type Logger } from '@acs/core/ports';
import { ownSandboxKeyCheck } from './auth/sandbox-keys.js';
import type { CookieScope } from './auth/browser-sessions.js';
import { requestOrigin, type ProxyTrust } from './auth/origin.js';
import { clientAddressOf } from './auth/client-address.js';
import { crossSiteRefusal, crossSiteUpgrade } from './auth/caller.js';
import { createRouterAuth, type RouterAuth } from './router-auth.js';
import { buildOpenApiDocument, type OpenApiDocument } from './openapi.js';
import { jsonDepthExceeds } from './json-depth.js';
import { LiveConnections } from './realtime/live-connections.js';
import type { RouteDefinition } from './route.js';
import { createEventStreams } from './event-stream.js';
import { sendBodyStream } from './body-stream.js';
import { buildRoutes } from './routes.js';
import { createSandboxProxy, type SandboxProxy } from './sandbox-proxy.js';
import { defaultRouteContext } from './route-context.js';
import { resolveRouterOptions, type AcsRouterOptions, type ResolvedRouterOptions } from './router-options.js';
import { allowedMethods, type AllowedMethods } from './router-methods.js';
import { logBackendFailure } from './router-errors.js';
import { mountOf } from './router-request.js';

/** What the router's request handling is made of, made once from the service and the options (`createRouterParts`). */
export interface RouterParts {
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
export function createRouterParts(service: AgentConversationService, options: AcsRouterOptions): RouterParts {
  const resolved = resolveRouterOptions(options);
  const { bodyLimit, maxJsonDepth } = resolved;
  const logger = options.logger ?? silentLogger;
  const live = new LiveConnections(resolved.liveChannels, logger);
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
  const activity = { lastRequestAt: Date.now() };
  const sandboxProxy = sandboxProxyOf(service, options, resolved, { logger, live, proxy, resolveCaller });
  const routes = buildRoutes(
    service,
    defaultRouteContext({
      lastRequestAt: () => activity.lastRequestAt,
      endBrowserSession: auth.endBrowserSession,
      conversationKeys: auth.conversationKeys,
      models: () => options.models?.() ?? [],
      deviceVerificationPath: resolved.deviceVerificationPath,
      exportLimits: resolved.exportLimits,
      sandboxUrlHost: options.sandboxUrlHost ?? null,
      loopbackSandboxPorts: sandboxProxy.ports,
      ownSandboxKey: ownSandboxKeyCheck({ conversationKey: auth.conversationKey, service }),
    }),
  );
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
      heartbeatMs: resolved.sseHeartbeatMs,
      maxBufferedBytes: resolved.sseMaxBufferedBytes,
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
  resolved: ResolvedRouterOptions,
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
    loopbackPorts: resolved.loopbackSandboxPorts,
  });
  // The loopback ports close with the host even where the realtime channels are never attached.
  options.shutdownSignal?.addEventListener('abort', () => sandboxProxy.ports?.close(), { once: true });
  return sandboxProxy;
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
  const mount = mountOf(req) ?? (req as Partial<Request>).baseUrl ?? attached.mountPath;
  return { secure: requestOrigin(req, proxy).protocol === 'https', path: mount || '/' };
}
