import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request } from 'express';

/**
 * Decides who is calling. Return the user id, or null to answer 401.
 * Throwing is treated as a server error, so return null for "not authenticated".
 */
export type Authenticate = (req: Request) => string | null | Promise<string | null>;

export const SESSION_API_KEY_HEADER = 'x-session-api-key';

/**
 * The key a request presents: `X-Session-API-Key`, or the token of `Authorization: Bearer <key>`
 * (as OpenHands 1.x clients send it). The header wins when both are there, except when it holds
 * a sandbox's or a conversation's key (`acss_…`, `acsc_…`) beside a Bearer: then the Bearer says
 * who calls and the header is that caller's proof of a sandbox, as the SDK's
 * `OpenHandsCloudWorkspace.get_llm()` sends them (`/api/v1/users/me?expose_secrets=true`).
 */
export function presentedKeyOf(req: Pick<Request, 'get'>): string | null {
  const header = req.get(SESSION_API_KEY_HEADER);
  const bearer = /^Bearer[ \t]+([^\s]+)[ \t]*$/i.exec(req.get('authorization') ?? '')?.[1] ?? null;
  if (header && !(bearer && SANDBOX_ISSUED.test(header))) return header;
  return bearer;
}

/** Keys this service gives sandboxes and conversations (sandbox/keys.ts in core, conversation-keys.ts). */
const SANDBOX_ISSUED = /^acs[sc]_/;

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/** The user a key belongs to, or null; constant-time over every configured key. */
export type ApiKeyLookup = (key: string) => string | null;

/** Checks presented keys against the configured ones (key → user id); keys must be at least 16 characters. */
export function apiKeyLookup(keys: Readonly<Record<string, string>>): ApiKeyLookup {
  const entries = Object.entries(keys).map(([key, userId]) => {
    if (key.length < 16) throw new Error('API keys must be at least 16 characters long.');
    if (!userId) throw new Error('Every API key must map to a non-empty user id.');
    return { key: digest(key), userId };
  });
  if (entries.length === 0) throw new Error('apiKeyAuthenticator needs at least one key.');
  return (presented) => {
    const candidate = digest(presented);
    let userId: string | null = null;
    for (const entry of entries) {
      if (timingSafeEqual(candidate, entry.key)) userId = entry.userId;
    }
    return userId;
  };
}

/**
 * The default authenticator: `X-Session-API-Key` (or `Authorization: Bearer`) must equal one of
 * the configured keys; each key belongs to one user. Comparison is constant-time.
 */
export function apiKeyAuthenticator(keys: Readonly<Record<string, string>>): Authenticate {
  const lookup = apiKeyLookup(keys);
  return (req) => {
    const presented = presentedKeyOf(req);
    return presented ? lookup(presented) : null;
  };
}
