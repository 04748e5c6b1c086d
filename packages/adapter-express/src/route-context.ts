import { errAsync } from 'neverthrow';
import type { EndBrowserSession } from './auth/caller.js';
import type { OwnSandboxKeyCheck } from './auth/sandbox-keys.js';
import { ConversationKeys } from './auth/conversation-keys.js';
import { DEFAULT_EXPORT_LIMITS, type ExportLimits } from './views/trajectory-zip.js';
import type { LoopbackSandboxPorts } from './sandbox-loopback-ports.js';

/** What route handlers need from the router besides the service. */
export interface RouteContext {
  /** Ends the caller's browser session, or every one of the user's (sign-out, sign-out everywhere). */
  endBrowserSession: EndBrowserSession;
  /** Mints each conversation's own key (`session_api_key`), bound to its sandbox and key generation. */
  conversationKeys: ConversationKeys;
  /** The model names the UI offers (`GET /api/options/models`, `/api/v1/config/models/search`). */
  models: () => readonly string[];
  /** When (epoch ms) the router last answered a request other than the status routes (`/server_info`'s idle time). */
  lastRequestAt: () => number;
  /** The console's page that answers device sign-ins, as a path of the origin. */
  deviceVerificationPath: string;
  /** What a conversation's download may hold. */
  exportLimits: ExportLimits;
  /** The base host of sandboxes' exposed URLs (`<name>-<id>.<base host>`); null: the host the client reached. */
  sandboxUrlHost: string | null;
  /** Loopback ports for the exposed URLs given to clients on loopback (router option `loopbackSandboxPorts`); null: off. */
  loopbackSandboxPorts: LoopbackSandboxPorts | null;
  /** Whether a key is that of one of the user's running sandboxes (for secret values shown to code in it). */
  ownSandboxKey: OwnSandboxKeyCheck;
}

/** A context for building the routes outside a router (tests, the OpenAPI document). */
export function defaultRouteContext(overrides: Partial<RouteContext> = {}): RouteContext {
  return {
    endBrowserSession: () => Promise.resolve(0),
    conversationKeys: new ConversationKeys(),
    models: () => [],
    lastRequestAt: () => Date.now(),
    deviceVerificationPath: '/console/device',
    exportLimits: DEFAULT_EXPORT_LIMITS,
    sandboxUrlHost: null,
    loopbackSandboxPorts: null,
    ownSandboxKey: () => errAsync({ type: 'SecretsNotExposed', reason: 'invalid' }),
    ...overrides,
  };
}
