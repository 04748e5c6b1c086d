import type { IncomingMessage } from 'node:http';
import type { Request } from 'express';
import type { AgentConversationService, ApiKeyHolder } from '@acs/core';
import type { Logger } from '@acs/core/ports';
import { apiKeyLookup, type ApiKeyLookup, type Authenticate } from './auth/api-keys.js';
import {
  MemoryBrowserSessions,
  sessionIdOf,
  type BrowserSessionStore,
  type CookieScope,
} from './auth/browser-sessions.js';
import { callerResolver, type Caller, type EndBrowserSession } from './auth/caller.js';
import { conversationKeyCheck, ConversationKeys, type ConversationKeyCheck } from './auth/conversation-keys.js';
import {
  configuredKeyCredential,
  configuredKeyDigests,
  liveSessionUser,
  storedKeyCredential,
  type CredentialChecks,
} from './auth/session-credentials.js';
import type { SignInKey } from './auth/sign-in.js';

/** The router options that say how callers authenticate (see `AcsRouterOptions`). */
interface RouterAuthOptions {
  authenticate?: Authenticate;
  apiKeys?: Readonly<Record<string, string>>;
  browserSessions?: BrowserSessionStore | false;
  secret?: Uint8Array;
}

export interface RouterAuthDeps {
  service: AgentConversationService;
  options: RouterAuthOptions;
  logger: Logger;
  /** Where a request's session cookie applies: https or not, and the router's mount path. */
  cookieScopeOf(req: IncomingMessage): CookieScope;
  /** Closes the live channels a browser session opened, at once (sign-out). */
  endSessionChannels(sessionId: string): void;
  /** Closes, now, the live channels every browser session of the user opened (sign-out everywhere). */
  endUserSessionChannels(userId: string): void;
}

/** How the router knows its callers: keys (configured, stored, conversations'), browser sessions, the host's own auth. */
export interface RouterAuth {
  /** API keys given as an option. */
  readonly apiKeys: ApiKeyLookup | undefined;
  /** Browser sessions (unless off, or the host authenticates). */
  readonly sessions: BrowserSessionStore | undefined;
  /** The user of a key users made (`acsk_…`, neither revoked nor expired), or null. */
  readonly storedKeys: (key: string) => Promise<string | null>;
  /** Mints the conversations' own keys. */
  readonly conversationKeys: ConversationKeys;
  /** What a presented conversation key opens now. */
  readonly conversationKey: ConversationKeyCheck;
  readonly resolveCaller: ReturnType<typeof callerResolver>;
  /** The user of a key that may sign a browser in, with the credential its session keeps. */
  signInKey(key: string): Promise<SignInKey | null>;
  /** The live session a request's cookie names (its key still holding), or null. */
  browserSession(req: IncomingMessage): Promise<{ id: string; userId: string } | null>;
  readonly endBrowserSession: EndBrowserSession;
}

export function createRouterAuth(deps: RouterAuthDeps): RouterAuth {
  const { options } = deps;
  const apiKeys = options.apiKeys ? apiKeyLookup(options.apiKeys) : undefined;
  const sessions =
    options.authenticate || options.browserSessions === false
      ? undefined
      : (options.browserSessions ?? new MemoryBrowserSessions());
  const conversationKeys = new ConversationKeys(options.secret);
  const conversationKey = conversationKeyCheck(conversationKeys, deps.service, deps.logger);
  const checks: CredentialChecks = {
    storedKeyHolder: async (keyHash) => {
      const held = await deps.service.apiKeys.holderOfHash(keyHash);
      return storeAnswer(deps.logger, held.isErr() ? held.error : null, held.unwrapOr(null))?.userId ?? null;
    },
    configured: configuredKeyDigests(options.apiKeys),
  };
  const browserSession = (req: IncomingMessage) => sessionOfRequest(deps, sessions, checks, req);
  const storedKeys = async (key: string) => (await storedKeyHolder(deps, key))?.userId ?? null;
  return {
    apiKeys,
    sessions,
    storedKeys,
    conversationKeys,
    conversationKey,
    resolveCaller: callerResolver({
      ...(options.authenticate ? { authenticate: options.authenticate } : {}),
      ...(apiKeys ? { apiKeys } : {}),
      ...(sessions ? { browserSession } : {}),
      storedKeys,
      conversationKey,
    }),
    signInKey: (key) => signInKey(deps, apiKeys, key),
    browserSession,
    endBrowserSession: (caller, endOptions) => endBrowserSessions(deps, sessions, caller, endOptions?.everywhere),
  };
}

/** A store's answer, or (on a storage failure) a log line and a throw: the request fails as a 500 rather than a 401. */
function storeAnswer<T>(logger: Logger, failure: { operation: string; errorClass: string | null } | null, value: T): T {
  if (failure) {
    logger.error({ operation: failure.operation, errorClass: failure.errorClass }, 'storage failed');
    throw new Error('storage failed while an API key was checked');
  }
  return value;
}

/** The holder of an API key a user made (null: no such key, revoked, or expired). */
async function storedKeyHolder(deps: RouterAuthDeps, key: string): Promise<ApiKeyHolder | null> {
  const found = await deps.service.apiKeys.authenticate(key);
  return storeAnswer(deps.logger, found.isErr() ? found.error : null, found.unwrapOr(null));
}

/** A key the service made, then one of the configured keys: its user, and the credential a session made with it keeps. */
async function signInKey(
  deps: RouterAuthDeps,
  apiKeys: ApiKeyLookup | undefined,
  key: string,
): Promise<SignInKey | null> {
  const stored = await storedKeyHolder(deps, key);
  if (stored) return { userId: stored.userId, credential: storedKeyCredential(stored.keyHash) };
  const configured = apiKeys?.(key) ?? null;
  return configured ? { userId: configured, credential: configuredKeyCredential(key) } : null;
}

/** The session the request's cookie names (by the cookie's name for where the request came), while it and its key hold. */
async function sessionOfRequest(
  deps: RouterAuthDeps,
  sessions: BrowserSessionStore | undefined,
  checks: CredentialChecks,
  req: IncomingMessage,
): Promise<{ id: string; userId: string } | null> {
  const id = sessions ? sessionIdOf(req as Request, deps.cookieScopeOf(req)) : null;
  if (!sessions || !id) return null;
  const userId = await liveSessionUser(sessions, checks, id);
  return userId ? { id, userId } : null;
}

/**
 * Ends the caller's session (its live channels close at once) and, with `everywhere`, every
 * session of its user, and their channels close at once. Resolves to how many sessions ended.
 */
async function endBrowserSessions(
  deps: RouterAuthDeps,
  sessions: BrowserSessionStore | undefined,
  caller: Caller,
  everywhere: boolean | undefined,
): Promise<number> {
  if (!sessions) return 0;
  let ended = 0;
  if (caller.sessionId) {
    await sessions.end(caller.sessionId);
    deps.endSessionChannels(caller.sessionId);
    ended++;
  }
  if (everywhere && sessions.endAllOf) {
    ended += await sessions.endAllOf(caller.userId);
    deps.endUserSessionChannels(caller.userId);
  }
  return ended;
}
