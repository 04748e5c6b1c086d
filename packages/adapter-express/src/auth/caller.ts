import type { IncomingMessage } from 'node:http';
import express, { type Request } from 'express';
import { normalizeId } from '@acs/core/ports';
import { presentedKeyOf, type ApiKeyLookup, type Authenticate } from './api-keys.js';
import type { ConversationKeyCheck } from './conversation-keys.js';
import { requestOrigin, type ProxyTrust } from './origin.js';

/** Who is calling, and how they proved it. */
export interface Caller {
  userId: string;
  /**
   * An API key (configured or stored) in X-Session-API-Key or as a Bearer token, the browser
   * session cookie, the host's own `authenticate`, a conversation's key, or a sandbox's key (only
   * on the routes a sandbox reads its owner's secrets by).
   */
  via: 'api-key' | 'session' | 'host' | 'conversation-key' | 'sandbox-key';
  /** With a conversation key: the one conversation it opens (its channels and agent routes only). */
  conversationId: string | null;
  /** With the session cookie: the session's id (sign-out ends it). */
  sessionId: string | null;
}

/**
 * Whether a caller may open a conversation's live channel. A key in the channel's URL may only
 * be a conversation's own key (API keys stay out of URLs), and a conversation key opens its own
 * conversation only.
 */
export function channelAccess(
  caller: Caller | null,
  urlKey: string | null,
  conversationId: string,
): { caller: Caller } | { refused: string } {
  if (!caller || (urlKey !== null && caller.via !== 'conversation-key'))
    return { refused: 'Not authenticated: sign in (session cookie), or send the conversation’s session_api_key.' };
  if (caller.conversationId !== null && caller.conversationId !== normalizeId(conversationId))
    return { refused: `This key opens conversation ${caller.conversationId} only.` };
  return { caller };
}

/**
 * Ends the caller's browser session, if it came with one; with `everywhere`, every browser
 * session of the caller's user as well (whoever calls: a key may end its user's sessions).
 * Resolves to how many sessions ended.
 */
export type EndBrowserSession = (caller: Caller, options?: { everywhere?: boolean }) => Promise<number>;

export interface CallerSources {
  /** The host's own authentication; when given it decides alone (no configured keys, no session cookie). */
  authenticate?: Authenticate;
  /** The default: configured API keys. */
  apiKeys?: ApiKeyLookup;
  /**
   * The keys the service made (users' named keys, device sign-ins): the user of a key, or null.
   * Asked only for keys of their form (`acsk_…`), before the host's or the configured keys:
   * like conversation keys, they are the service's own to verify.
   */
  storedKeys?: (key: string) => Promise<string | null>;
  /** The browser session the request's cookie names, while it is live and the key that made it still holds. */
  browserSession?: (req: Request) => Promise<{ id: string; userId: string } | null>;
  /** What a conversation key opens now (not rotated, its sandbox not deleted). */
  conversationKey: ConversationKeyCheck;
}

/**
 * Finds the caller of a request: a conversation key (`acsc_…`) in X-Session-API-Key opens its
 * conversation only (while it is its key as the conversation is bound now); a key the service made (`acsk_…`, not revoked) is its user's; otherwise
 * the host's `authenticate` decides, or, by default, an API key in the header or the browser
 * session cookie. A store that fails while a key is looked up is thrown (a 500, as a failing
 * `authenticate` is), never taken for a wrong key: a client that drops keys on 401 keeps it. `key` overrides where the presented key comes
 * from (the realtime channels take it from the query, as the OpenHands UI sends it there).
 */
export function callerResolver(sources: CallerSources) {
  return async (incoming: Request | IncomingMessage, presentedKey?: string | null): Promise<Caller | null> => {
    const req = asExpressRequest(incoming);
    const key = presentedKey ?? presentedKeyOf(req);
    if (key) {
      const scoped = await sources.conversationKey(key);
      if (scoped)
        return {
          userId: scoped.userId,
          via: 'conversation-key',
          conversationId: scoped.conversationId,
          sessionId: null,
        };
      const stored = sources.storedKeys ? await sources.storedKeys(key) : null;
      if (stored) return { userId: stored, via: 'api-key', conversationId: null, sessionId: null };
    }
    if (sources.authenticate) {
      const userId = await sources.authenticate(req);
      return userId ? { userId, via: 'host', conversationId: null, sessionId: null } : null;
    }
    if (key && sources.apiKeys) {
      const userId = sources.apiKeys(key);
      return userId ? { userId, via: 'api-key', conversationId: null, sessionId: null } : null;
    }
    const session = sources.browserSession ? await sources.browserSession(req) : null;
    return session ? { userId: session.userId, via: 'session', conversationId: null, sessionId: session.id } : null;
  };
}

/**
 * The CSRF guard for cookie-authenticated requests that change state: the browser must say
 * it comes from this origin. SameSite=Strict already keeps the cookie off cross-site
 * requests; this refuses what a cross-origin page or an older browser could still send.
 * Null when the request may go on, else why not.
 */
export function crossSiteRefusal(req: Request, proxy: ProxyTrust): string | null {
  if (req.method === 'GET' || req.method === 'HEAD' || req.method === 'OPTIONS') return null;
  const site = req.get('sec-fetch-site');
  if (site && site !== 'same-origin' && site !== 'none') return `a ${site} request`;
  const origin = req.get('origin');
  if (origin && origin !== requestOrigin(req, proxy).origin) return `a request from ${origin}`;
  const type = req.get('content-type');
  if (type && !/^application\/([\w.+-]+\+)?json\b/i.test(type)) return `a ${type.split(';')[0]} body (send JSON)`;
  return null;
}

/**
 * A realtime upgrade from another origin riding on the session cookie (a page elsewhere opening a
 * socket to us). Without a trusted proxy the scheme of an upgrade is not known (TLS may end in
 * front), so either scheme with this host counts as this origin.
 */
export function crossSiteUpgrade(req: IncomingMessage, proxy: ProxyTrust): boolean {
  const origin = req.headers.origin;
  if (typeof origin !== 'string') return false;
  const ours = requestOrigin(req, proxy);
  if (proxy.trustProxy) return origin !== ours.origin;
  const host = ours.origin.slice(ours.origin.indexOf('://') + 3);
  return origin !== `http://${host}` && origin !== `https://${host}`;
}

/**
 * A raw request (a realtime channel's upgrade) seen as an Express request, so the host's
 * `authenticate(req)` can call `req.get()` on it as on any other.
 */
function asExpressRequest(req: Request | IncomingMessage): Request {
  if (typeof (req as Partial<Request>).get === 'function') return req as Request;
  Object.setPrototypeOf(req, express.request);
  return req as Request;
}
