import { hashSecret } from '@acs/core';
import type { BrowserSessionStore } from './browser-sessions.js';

/**
 * What signed a browser session in, as the session store keeps it, and whether it still would:
 * a session ends with the key that made it (revoked, expired, or no longer configured). A
 * credential names a key by a hash, never by the key itself.
 */

/** A key the service made (`acsk_…`), by the hex SHA-256 the key store finds it by. */
export const storedKeyCredential = (keyHash: string): string => `acsk:${keyHash}`;

/** One of the router's configured API keys, by its hex SHA-256. */
export const configuredKeyCredential = (key: string): string => `configured:${hashSecret(key)}`;

/** The configured keys (key → user) as credentials check them: the hex SHA-256 of each key → its user. */
export function configuredKeyDigests(keys: Readonly<Record<string, string>> | undefined): ReadonlyMap<string, string> {
  return new Map(Object.entries(keys ?? {}).map(([key, userId]) => [hashSecret(key), userId]));
}

/** What a credential is checked against. */
export interface CredentialChecks {
  /** The user of the stored key whose secret hashes to `keyHash`, while it opens things (neither revoked nor expired); null otherwise. */
  storedKeyHolder(keyHash: string): Promise<string | null>;
  /** The configured keys, by the hex SHA-256 of each → its user. */
  configured: ReadonlyMap<string, string>;
}

/**
 * Whether what signed a session in would still sign in the same user. A session kept without a
 * credential (a store that keeps none) holds as it is; one this router did not make never does.
 */
async function credentialHolds(checks: CredentialChecks, credential: string | null, userId: string): Promise<boolean> {
  if (credential === null) return true;
  const colon = credential.indexOf(':');
  const kind = credential.slice(0, colon);
  const digest = credential.slice(colon + 1);
  if (kind === 'acsk') return (await checks.storedKeyHolder(digest)) === userId;
  if (kind === 'configured') return checks.configured.get(digest) === userId;
  return false;
}

/**
 * The user of a live session, while what signed it in still holds; a session whose key no
 * longer opens anything is ended on the spot. A store without `sessionOf` keeps no credential:
 * its sessions are taken as they are.
 */
export async function liveSessionUser(
  sessions: BrowserSessionStore,
  checks: CredentialChecks,
  sessionId: string,
): Promise<string | null> {
  if (!sessions.sessionOf) return sessions.userOf(sessionId);
  const session = await sessions.sessionOf(sessionId);
  if (!session) return null;
  if (await credentialHolds(checks, session.credential, session.userId)) return session.userId;
  await sessions.end(sessionId);
  return null;
}
