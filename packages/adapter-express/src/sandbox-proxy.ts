import { Agent, STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';
import { explainDomainError, isSandboxKey, type AgentConversationService, type SandboxEndpoint } from '@acs/core';
import type { Logger } from '@acs/core/ports';
import type { Caller } from './auth/caller.js';
import { HTTP_ERROR_CODES, statusOf, type ErrorBody } from './http-error.js';
import type { PendingLimits } from './realtime/pending-authentication.js';
import { createSocketRelay, type SocketRelay } from './sandbox-socket-relay.js';
import { createLoopbackPorts, type LoopbackSandboxPorts, type PortTarget } from './sandbox-loopback-ports.js';
import { TOO_MANY_UNAUTHENTICATED } from './realtime/agent-server-channel.js';

/**
 * A sandbox's exposed URL (e.g. its OpenHands agent-server) is served by this router on a host
 * name of its own: `<name>-<sandbox id>.<base host>` (AGENT_SERVER → `agent-server-<id>`), at the
 * root of it, because the OpenHands SDK takes an agent-server URL with a path for a different
 * server (`OpenHandsCloudWorkspace` asserts its HTTP client's base URL equals the URL, and
 * httpx adds a slash to one with a path). The base host needs a wildcard DNS name (and
 * certificate) in front of this server; by default it is the host the client reached, with
 * `localhost` for an address on loopback (`*.localhost` is loopback, RFC 6761). With
 * `loopbackPorts`, a client on loopback is given a port of this server instead, which resolves
 * everywhere (sandbox-loopback-ports.ts), and the same proxy serves it.
 */
const LABEL = /^([a-z][a-z0-9-]{0,29})-([0-9a-f]{32})\./;

/** The exposed URL of a sandbox's port `name`, given the origin the client reached and the configured base host, if any. */
export function exposedUrlOf(sandboxId: string, name: string, origin: string, baseHost: string | null): string {
  const { protocol, host } = new URL(origin);
  const base = baseHost ?? (isLoopbackHost(host) ? `localhost${portOf(host)}` : host);
  return `${protocol}//${name.toLowerCase().replaceAll('_', '-')}-${sandboxId}.${base}`;
}

const portOf = (host: string) => {
  const match = /:(\d+)$/.exec(host);
  return match ? `:${match[1]}` : '';
};

const isLoopbackHost = (host: string) => /^(localhost|127\.\d+\.\d+\.\d+|\[::1\])(:\d+)?$/i.test(host);

/** What a request's Host names: a sandbox's exposed URL, or nothing (null: the router's own request). */
interface ProxyPath {
  sandboxId: string;
  /** The exposed URL's name, e.g. AGENT_SERVER. */
  name: string;
}

function sandboxHostOf(host: string | undefined): ProxyPath | null {
  const match = host ? LABEL.exec(host.toLowerCase()) : null;
  return match?.[1] && match[2] ? { sandboxId: match[2], name: match[1].toUpperCase().replaceAll('-', '_') } : null;
}

/** Paths the agent-server answers without a key (the SDK's readiness and liveness checks send none). */
const OPEN_PATHS = new Set(['/health', '/alive']);

export interface SandboxProxyDeps {
  service: AgentConversationService;
  /** The caller of a request by its API key or browser session (null: none, or refused as cross-site). */
  resolveCaller(req: IncomingMessage, upgrade: boolean): Promise<Caller | null>;
  logger: Logger;
  /**
   * Counts a WebSocket opened with no key against its client address's unauthenticated
   * connections (null: the address holds the most allowed) — LiveConnections.enterUnauthenticated.
   */
  enterUnauthenticated(req: IncomingMessage): (() => void) | null;
  /** How long and how large a keyless WebSocket's authentication frame may be. */
  pendingLimits: PendingLimits;
  /** Serve exposed URLs on loopback ports of their own for clients on loopback (null: host names only). */
  loopbackPorts: { maxPorts: number; checkIntervalMs: number } | null;
}

/** A refusal; `gone` when the sandbox no longer exists (its loopback ports close). */
type Refusal = { status: number; code: string; message: string; gone?: true };
/**
 * How a caller goes through: `keyed` (the sandbox's key or its owner's credentials: the server
 * gets the sandbox key), `open` (a health check: no credentials, none given on), or
 * `first-frame` (a WebSocket with no key, which authenticates in its first frame).
 */
type Access = 'keyed' | 'open' | 'first-frame';
type Admission = { endpoint: SandboxEndpoint & { target: string }; access: Access } | Refusal;

/** What the router does with a sandbox's exposed URLs (see createSandboxProxy). */
export interface SandboxProxy {
  /** Whether a request (by its Host) is for a sandbox's exposed URL. */
  claims(req: IncomingMessage): boolean;
  /** Express middleware, first in the router: a request for a sandbox's host goes there, whatever its path. */
  http(req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void): void;
  /** An upgrade for a sandbox's host (see `claims`). */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** The loopback ports of exposed URLs (null: off). */
  readonly ports: LoopbackSandboxPorts | null;
  /** Ends every proxied WebSocket and the kept connections to sandboxes, and closes the loopback ports. */
  close(): void;
}

/** The proxy's own parts: its deps, the http-proxy server, the kept connections and the open WebSockets. */
interface ProxyParts {
  readonly deps: SandboxProxyDeps;
  readonly server: ReturnType<typeof proxyServer>;
  readonly agent: Agent;
  readonly sockets: Set<Duplex>;
  readonly relay: SocketRelay;
  /** Requests that came in on a loopback port: the answer's cookies are dropped (see `cookiesFromSandbox`). */
  readonly viaPort: WeakSet<IncomingMessage>;
  ports: LoopbackSandboxPorts | null;
}

/** The sandbox and path a request is for. */
type ProxyTarget = { path: ProxyPath & { rest: string }; query: URLSearchParams };

/**
 * Reverse proxy (http-proxy-3) from a sandbox's exposed URL on this server to the runtime's
 * address of it, HTTP and WebSocket alike. Opened by the sandbox's own key (X-Session-API-Key,
 * or `session_api_key` in a WebSocket's query) or by its owner's credentials; the sandbox's
 * server gets the sandbox key instead, and never the caller's API key or cookies. `/health`
 * and `/alive` need no key. A sandbox that is not RUNNING answers 503 (starting, paused: resume
 * it) or 404, at once, without a connection to it. A WebSocket opened with no credentials at all
 * authenticates with its first frame, read here before the sandbox is asked (sandbox-socket-relay.ts).
 * What a sandbox's server answers goes back as it is, but for its cookies: a sandbox's page must
 * not set cookies for this service's host (see `cookiesFromSandbox`).
 */
export function createSandboxProxy(deps: SandboxProxyDeps): SandboxProxy {
  const agent = new Agent({ keepAlive: true, maxFreeSockets: 16 });
  const viaPort = new WeakSet<IncomingMessage>();
  const parts: ProxyParts = {
    deps,
    server: proxyServer(deps, agent, viaPort),
    agent,
    sockets: new Set(),
    relay: createSocketRelay(deps.pendingLimits, deps.logger),
    viaPort,
    ports: null,
  };
  parts.ports = deps.loopbackPorts && loopbackPortsOf(parts, deps.loopbackPorts);
  return {
    claims: (req) => sandboxHostOf(req.headers.host) !== null,
    http: (req, res, next) => proxyHttp(parts, req, res, next),
    upgrade: (req, socket, head) => proxyUpgrade(parts, req, socket, head),
    ports: parts.ports,
    close: () => {
      parts.ports?.close();
      for (const socket of parts.sockets) socket.destroy();
      parts.sockets.clear();
      parts.relay.close();
      agent.destroy();
    },
  };
}

/** Loopback ports served by this proxy: a port's requests are its sandbox's, whatever their Host says. */
function loopbackPortsOf(
  parts: ProxyParts,
  options: { maxPorts: number; checkIntervalMs: number },
): LoopbackSandboxPorts {
  const { service, logger } = parts.deps;
  const onPort = (target: PortTarget, req: IncomingMessage): ProxyPath => {
    parts.viaPort.add(req);
    return target;
  };
  return createLoopbackPorts({
    ...options,
    logger,
    http: (target, req, res) =>
      proxyHttp(parts, req, res, (error?: unknown) => answerUnserved(parts, res, error), onPort(target, req)),
    upgrade: (target, req, socket, head) => proxyUpgrade(parts, req, socket, head, onPort(target, req)),
    exists: async (target) => {
      const found = await service.sandboxes.endpoint(target.sandboxId, target.name);
      if (found.isOk()) return found.value.status !== 'MISSING';
      return found.error.type === 'SandboxNotFound' ? false : null;
    },
  });
}

/** A port's request the proxy did not take: a target that is not a path (no error), or a failure. */
function answerUnserved(parts: ProxyParts, res: ServerResponse, error?: unknown): void {
  if (error === undefined)
    sendJson(res, refusal(400, HTTP_ERROR_CODES.BAD_REQUEST, 'The request target must be a path (/…).'));
  else answerFailure(parts, res, error);
}

function answerFailure(parts: ProxyParts, res: ServerResponse, error: unknown): void {
  parts.deps.logger.error({ err: error instanceof Error ? error.message : String(error) }, 'sandbox proxy failed');
  if (res.headersSent) res.destroy();
  else sendJson(res, refusal(500, HTTP_ERROR_CODES.INTERNAL_ERROR, 'The sandbox proxy failed; it has been logged.'));
}

function proxyServer(deps: SandboxProxyDeps, agent: Agent, viaPort: WeakSet<IncomingMessage>) {
  // An agent-server may take minutes to answer a request that waits for the agent (10 min at most).
  const server = createProxyServer({ agent, xfwd: false, changeOrigin: true, proxyTimeout: 600_000 });
  // Errors are answered per request (the callbacks below); this keeps the emitter from throwing.
  server.on('error', (error) => deps.logger.debug({ err: error.message }, 'sandbox proxy error'));
  // Every answer's cookies are dealt with before its headers are copied: the answer to a request,
  // and to a WebSocket upgrade (its 101, or the plain answer of a server that refuses it).
  server.on('proxyRes', (proxyRes, req) => cookiesFromSandbox(proxyRes, viaPort.has(req)));
  server.on('proxyReqWs', (proxyReq, req) => {
    const dropAll = viaPort.has(req);
    proxyReq.prependListener('upgrade', (proxyRes) => cookiesFromSandbox(proxyRes, dropAll));
    proxyReq.prependListener('response', (proxyRes) => cookiesFromSandbox(proxyRes, dropAll));
  });
  return server;
}

/**
 * A sandbox's cookies: host-only on its own host name (`hostOnlyCookies`); none at all from a
 * loopback port, which shares the service's host (cookies ignore ports), so any cookie it set
 * would be the console's too.
 */
function cookiesFromSandbox(answer: IncomingMessage, viaPort: boolean): void {
  if (viaPort) delete answer.headers['set-cookie'];
  else hostOnlyCookies(answer);
}

/**
 * A sandbox's server may set cookies, but only for its own host name (`agent-server-<id>.<base>`):
 * every `Domain` attribute is removed (all of them: with several, a browser takes the last), so
 * a page in one user's sandbox cannot set a cookie for the service's domain (a session cookie
 * planted on the console, "cookie tossing") or for other sandboxes under the same base host.
 * A sandbox's server is only ever reached by a browser through this proxy (its published ports
 * are bound to loopback and handed to no client): on a host name of its own, or on a loopback
 * port of the service's own host, whose cookies are dropped instead (`cookiesFromSandbox`).
 */
function hostOnlyCookies(answer: IncomingMessage): void {
  const cookies = answer.headers['set-cookie'];
  if (!cookies) return;
  answer.headers['set-cookie'] = cookies.map((cookie) =>
    cookie
      .split(';')
      .filter((part, index) => index === 0 || !/^\s*domain\s*(=|$)/i.test(part))
      .join(';'),
  );
}

const refusal = (status: number, code: string, message: string): Refusal => ({ status, code, message });

/** Whether and how the caller may use the sandbox's URL (see `Access`), or the refusal. */
async function authorize(
  deps: SandboxProxyDeps,
  req: IncomingMessage,
  endpoint: SandboxEndpoint,
  { path, query }: ProxyTarget,
  upgrade: boolean,
): Promise<Access | Refusal> {
  const header = req.headers['x-session-api-key'];
  const presented =
    (typeof header === 'string' && header !== '' ? header : null) ?? (upgrade ? query.get('session_api_key') : null);
  if (presented !== null && isSandboxKey({ session_api_key: endpoint.sessionApiKey }, presented)) return 'keyed';
  const caller = await deps.resolveCaller(req, upgrade);
  if (caller && caller.via !== 'conversation-key' && caller.userId === endpoint.userId) return 'keyed';
  if (caller) return refusal(404, 'SANDBOX_NOT_FOUND', `There is no sandbox ${path.sandboxId}.`);
  if (presented !== null)
    return refusal(
      401,
      HTTP_ERROR_CODES.UNAUTHENTICATED,
      `That is not the key of sandbox ${path.sandboxId}: send its session_api_key as X-Session-API-Key.`,
    );
  const health = (req.method === 'GET' || req.method === 'HEAD') && OPEN_PATHS.has(path.rest);
  if (health) return 'open';
  // A socket with no credentials at all authenticates with its first frame, which must hold the sandbox's key.
  if (upgrade && path.rest.startsWith('/sockets/') && endpoint.sessionApiKey !== null) return 'first-frame';
  return refusal(
    401,
    HTTP_ERROR_CODES.UNAUTHENTICATED,
    "Send the sandbox's session_api_key as X-Session-API-Key (or your API key).",
  );
}

/** Why a sandbox that is not RUNNING (or has no address for the URL) cannot be reached now; null when it can. */
function notReady(endpoint: SandboxEndpoint): Refusal | null {
  const { sandboxId: id, status, statusDetail: detail } = endpoint;
  if (status === 'PAUSED')
    return refusal(
      503,
      'SANDBOX_PAUSED',
      `Sandbox ${id} is paused; resume it with POST /api/v1/sandboxes/${id}/resume.`,
    );
  if (status === 'STARTING')
    return refusal(
      503,
      'SANDBOX_STARTING',
      `Sandbox ${id} is starting${detail ? ` (${detail})` : ''}; try again shortly.`,
    );
  if (status !== 'RUNNING' || endpoint.target === null)
    return refusal(
      status === 'ERROR' ? 502 : 404,
      'SANDBOX_NOT_RUNNING',
      `Sandbox ${id} is ${status}${detail ? `: ${detail}` : ''}.`,
    );
  return null;
}

/** Who may go through, and to where: the caller first, then the sandbox's state. */
async function admit(
  deps: SandboxProxyDeps,
  req: IncomingMessage,
  target: ProxyTarget,
  upgrade: boolean,
): Promise<Admission> {
  const found = await deps.service.sandboxes.endpoint(target.path.sandboxId, target.path.name);
  if (found.isErr()) {
    const { code, message } = explainDomainError(found.error);
    const refused = refusal(statusOf(found.error), code, message);
    return found.error.type === 'SandboxNotFound' ? { ...refused, gone: true } : refused;
  }
  const endpoint = found.value;
  if (!endpoint.offered)
    return refusal(
      404,
      'SANDBOX_URL_NOT_FOUND',
      `Sandbox ${target.path.sandboxId} has no exposed URL ${target.path.name}.`,
    );
  const access = await authorize(deps, req, endpoint, target, upgrade);
  if (typeof access !== 'string') return access;
  const refused = notReady(endpoint);
  if (refused && endpoint.status === 'MISSING') return { ...refused, gone: true };
  return refused ?? { endpoint: { ...endpoint, target: endpoint.target as string }, access };
}

/** The request as the sandbox's server gets it: its own path, its own key, none of the caller's credentials. */
function rewrite(
  deps: SandboxProxyDeps,
  req: IncomingMessage,
  { path, query }: ProxyTarget,
  admitted: Exclude<Admission, Refusal>,
): void {
  query.delete('session_api_key');
  const search = query.toString();
  req.url = `${path.rest}${search ? `?${search}` : ''}`;
  delete req.headers.authorization;
  delete req.headers.cookie;
  delete req.headers['x-session-api-key'];
  if (admitted.access === 'keyed' && admitted.endpoint.sessionApiKey)
    req.headers['x-session-api-key'] = admitted.endpoint.sessionApiKey;
  deps.service.sandboxes.touch(admitted.endpoint.userId, admitted.endpoint.sandboxId);
}

/**
 * The sandbox and path a request is for (the port's sandbox, else its Host's, and its target),
 * or null when it is not for a sandbox.
 */
function targetOf(req: IncomingMessage, port: ProxyPath | undefined): ProxyTarget | null {
  const sandbox = port ?? sandboxHostOf(req.headers.host);
  const url = req.url ?? '/';
  if (!sandbox || !url.startsWith('/')) return null;
  const mark = url.indexOf('?');
  return {
    path: { ...sandbox, rest: mark < 0 ? url : url.slice(0, mark) },
    query: new URLSearchParams(mark < 0 ? '' : url.slice(mark + 1)),
  };
}

/** Serves a request for a sandbox's URL: on its host name, or on its loopback port (`port`). */
function proxyHttp(
  parts: ProxyParts,
  req: IncomingMessage,
  res: ServerResponse,
  next: (error?: unknown) => void,
  port?: ProxyPath,
): void {
  const target = targetOf(req, port);
  if (!target) {
    next();
    return;
  }
  admit(parts.deps, req, target, false).then((admitted) => {
    if ('status' in admitted) {
      sendJson(res, admitted);
      if (admitted.gone) parts.ports?.forget(target.path.sandboxId);
      return;
    }
    rewrite(parts.deps, req, target, admitted);
    parts.server.web(req, res, { target: admitted.endpoint.target }, (error) => {
      parts.deps.logger.warn({ sandboxId: target.path.sandboxId, err: error.message }, 'sandbox server did not answer');
      if (!res.headersSent)
        sendJson(
          res,
          refusal(502, 'SANDBOX_UNREACHABLE', `Sandbox ${target.path.sandboxId} did not answer (${error.message}).`),
        );
      else res.destroy();
    });
  }, next);
}

function proxyUpgrade(parts: ProxyParts, req: IncomingMessage, socket: Duplex, head: Buffer, port?: ProxyPath): void {
  const target = targetOf(req, port);
  if (!target) {
    refuse(socket, refusal(400, HTTP_ERROR_CODES.BAD_REQUEST, 'The request target must be a path (/…).'));
    return;
  }
  admit(parts.deps, req, target, true).then(
    (admitted) => {
      if ('status' in admitted) {
        refuse(socket, admitted);
        if (admitted.gone) parts.ports?.forget(target.path.sandboxId);
      } else if (admitted.access === 'first-frame') relayKeyless(parts, req, socket, head, target, admitted);
      else pipeSocket(parts, req, socket, head, target, admitted);
    },
    (error: unknown) => {
      parts.deps.logger.error({ err: error instanceof Error ? error.message : String(error) }, 'sandbox proxy failed');
      socket.destroy();
    },
  );
}

/** A socket opened with the sandbox's key or its owner's credentials: the bytes go through as they are. */
function pipeSocket(
  parts: ProxyParts,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  target: ProxyTarget,
  admitted: Exclude<Admission, Refusal>,
): void {
  rewrite(parts.deps, req, target, admitted);
  parts.sockets.add(socket);
  socket.once('close', () => parts.sockets.delete(socket));
  const { userId, sandboxId } = admitted.endpoint;
  // A socket in use is the sandbox in use (idle pausing leaves it alone).
  socket.on('data', () => parts.deps.service.sandboxes.touch(userId, sandboxId));
  parts.server.ws(req, socket, head, { target: admitted.endpoint.target }, (error) => {
    parts.deps.logger.warn({ sandboxId, err: error.message }, 'sandbox server did not take the WebSocket');
    socket.destroy();
  });
}

/** A socket opened with no key: it authenticates with its first frame here, then is relayed (sandbox-socket-relay.ts). */
function relayKeyless(
  parts: ProxyParts,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  target: ProxyTarget,
  admitted: Exclude<Admission, Refusal>,
): void {
  const leave = parts.deps.enterUnauthenticated(req);
  if (!leave) {
    refuse(socket, refusal(429, HTTP_ERROR_CODES.TOO_MANY_UNAUTHENTICATED, TOO_MANY_UNAUTHENTICATED));
    return;
  }
  socket.once('close', leave);
  rewrite(parts.deps, req, target, admitted);
  const { userId, sandboxId, target: server, sessionApiKey } = admitted.endpoint;
  socket.on('data', () => parts.deps.service.sandboxes.touch(userId, sandboxId));
  parts.relay.take({ req, socket, head, target: server, sessionApiKey: sessionApiKey as string, leave });
}

function sendJson(res: ServerResponse, refused: Refusal): void {
  const body: ErrorBody = { code: refused.code, message: refused.message, detail: refused.message };
  res.statusCode = refused.status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Cache-Control', 'no-store');
  if (refused.status === 503) res.setHeader('Retry-After', '2');
  res.end(JSON.stringify(body));
}

/** Answers an upgrade with the refusal as a JSON body and closes the connection. */
function refuse(socket: Duplex, refused: Refusal): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify({
    code: refused.code,
    message: refused.message,
    detail: refused.message,
  } satisfies ErrorBody);
  socket.end(
    `HTTP/1.1 ${refused.status} ${STATUS_CODES[refused.status] ?? 'Error'}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\n\r\n${body}`,
  );
  setTimeout(() => socket.destroy(), 5_000).unref();
}
