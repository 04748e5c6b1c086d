import { type Logger } from '@acs/core/ports';
import type { Authenticate } from './auth/api-keys.js';
import type { BrowserSessionStore } from './auth/browser-sessions.js';
import type { OpenApiInfo } from './openapi.js';
import {
  resolveLiveChannelLimits,
  type LiveChannelLimits,
  type ResolvedLiveChannelLimits,
} from './realtime/live-connections.js';
import { DEFAULT_EXPORT_LIMITS, type ExportLimits } from './views/trajectory-zip.js';

/** What `createAcsRouter` takes besides the service. */
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

/** The options with their defaults, each checked once: a wrong one throws (a bug of the host's, found at start). */
export interface ResolvedRouterOptions {
  deviceVerificationPath: string;
  sseHeartbeatMs: number;
  sseMaxBufferedBytes: number;
  liveChannels: ResolvedLiveChannelLimits;
  bodyLimit: number;
  maxJsonDepth: number;
  exportLimits: ExportLimits;
  /** Null: loopback sandbox ports are off. */
  loopbackSandboxPorts: { maxPorts: number; checkIntervalMs: number } | null;
}

export function resolveRouterOptions(options: AcsRouterOptions): ResolvedRouterOptions {
  if (!options.authenticate && !options.apiKeys) {
    throw new Error('createAcsRouter needs `authenticate` (your own auth) or `apiKeys` (X-Session-API-Key → user id).');
  }
  const deviceVerificationPath = options.deviceVerificationPath ?? '/console/device';
  if (!deviceVerificationPath.startsWith('/'))
    throw new Error('deviceVerificationPath must be a path of this origin, starting with /.');
  const sseHeartbeatMs = options.sseHeartbeatMs ?? 15_000;
  if (!(Number.isFinite(sseHeartbeatMs) && sseHeartbeatMs > 0))
    throw new Error('sseHeartbeatMs must be a positive number of milliseconds.');
  const liveChannels = resolveLiveChannelLimits(options.liveChannels);
  const sseMaxBufferedBytes = options.sseMaxBufferedBytes ?? liveChannels.maxBufferedBytes;
  if (!(Number.isFinite(sseMaxBufferedBytes) && sseMaxBufferedBytes > 0))
    throw new Error('sseMaxBufferedBytes must be a positive number of bytes.');
  const maxJsonDepth = options.maxJsonDepth ?? 64;
  if (!(Number.isInteger(maxJsonDepth) && maxJsonDepth > 0))
    throw new Error('maxJsonDepth must be a positive integer.');
  return {
    deviceVerificationPath,
    sseHeartbeatMs,
    sseMaxBufferedBytes,
    liveChannels,
    bodyLimit: options.bodyLimit ?? 1024 * 1024,
    maxJsonDepth,
    exportLimits: exportLimitsOf(options.conversationExport),
    loopbackSandboxPorts: loopbackPortsOf(options),
  };
}

function exportLimitsOf(limits: Partial<ExportLimits> = {}): ExportLimits {
  const resolved = { ...DEFAULT_EXPORT_LIMITS, ...limits };
  for (const [name, value] of Object.entries(resolved)) {
    if (!(Number.isSafeInteger(value) && value > 0))
      throw new Error(`conversationExport.${name} must be a positive integer.`);
  }
  return resolved;
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
