import type { ResultAsync } from 'neverthrow';
import type { StoreFailure } from '../store-failure.js';

/** An API key as a store keeps it: the SHA-256 of its secret, never the secret. */
export interface StoredApiKey {
  id: string;
  user_id: string;
  name: string;
  /** Hex SHA-256 of the secret: keys are 256 random bits, so a plain hash is as good as a slow one. */
  key_hash: string;
  created_at: string;
  last_used_at: string | null;
  /** After this it opens nothing (a device sign-in's key, or one made with a lifetime); null: it never expires, it is revoked. */
  expires_at: string | null;
}

/**
 * Keeps the API keys users made. Every read and change but `findByHash` names the user, so one
 * user's keys are invisible to another; `findByHash` is how a presented key finds its user.
 */
export interface ApiKeyStore {
  /**
   * Adds a key, unless its user already has `maxPerUser` (checked and added atomically). The
   * user's keys that have expired by the new key's `created_at` are dropped in the same step
   * (they open nothing), so they neither count nor pile up.
   */
  insert(key: StoredApiKey, maxPerUser: number): ResultAsync<'inserted' | 'limit_reached', StoreFailure>;
  /** The user's keys, oldest first. */
  list(userId: string): ResultAsync<StoredApiKey[], StoreFailure>;
  /** Removes one of the user's keys; false when the user has no key of that id. */
  delete(userId: string, keyId: string): ResultAsync<boolean, StoreFailure>;
  /** The key whose secret hashes to `keyHash`, whoever's it is; null when there is none (revoked keys are gone). */
  findByHash(keyHash: string): ResultAsync<StoredApiKey | null, StoreFailure>;
  /** Sets when the key was last used, unless it already says `at` or later (a revoked key stays gone). */
  recordUse(keyId: string, at: string): ResultAsync<void, StoreFailure>;
}

/** A pending device sign-in (RFC 8628): what the device polls with, what the person confirms, and the answer. */
export interface DeviceGrant {
  /** Hex SHA-256 of the device code (the device's secret); the grant's key. */
  device_code_hash: string;
  /** The code the person confirms, normalised (8 letters, no dash); unique among stored grants. */
  user_code: string;
  client_name: string;
  status: 'pending' | 'approved' | 'denied';
  /** Who approved or denied it; null while pending. */
  user_id: string | null;
  created_at: string;
  expires_at: string;
  /** Seconds the device must wait between polls (grows with each slow_down). */
  interval_seconds: number;
  last_polled_at: string | null;
  /**
   * Who asked, as a digest the service made of the client's address (an IPv4 address or an IPv6
   * /64): at most so many grants of one client wait at once. Null when the edge gave none (and on
   * grants stored before it was kept).
   */
  client: string | null;
}

/** The bounds `DeviceGrantStore.insert` holds. */
export interface DeviceGrantLimits {
  now: string;
  /** Grants not yet expired, of every client together. */
  maxLive: number;
  /** Grants not yet expired of the new grant's client (ignored for a grant without one). */
  maxLivePerClient?: number;
  dropExpiredBefore: string;
}

export type DeviceGrantInsertOutcome = 'inserted' | 'full' | 'client_full' | 'user_code_taken';

/** Which grant an update is about: by the device's code (polling) or by the user code (the approval page). */
export type DeviceGrantKey = { device_code_hash: string } | { user_code: string };

/**
 * Keeps pending device sign-ins where every replica sees them (one store for all processes on a
 * database). Nothing the network sends grows it without bound: `insert` drops grants long
 * expired and refuses past `maxLive`, and failed user-code attempts are one counter per user.
 */
export interface DeviceGrantStore {
  /**
   * Drops the grants that expired before `dropExpiredBefore`, then stores `grant`, unless
   * `maxLive` grants not yet expired at `now` are stored (`full`), `maxLivePerClient` of them
   * have the grant's `client` (`client_full`; only when both are given), or another grant has
   * its user code (`user_code_taken`: draw another). Atomic among replicas.
   */
  insert(grant: DeviceGrant, limits: DeviceGrantLimits): ResultAsync<DeviceGrantInsertOutcome, StoreFailure>;
  /**
   * Changes one grant atomically: `change` gets the stored grant (or null) and returns the next
   * one, null to delete it, or the very object it got to leave it as it is (nothing is written).
   * Resolves to what is stored afterwards.
   */
  update(
    key: DeviceGrantKey,
    change: (current: DeviceGrant | null) => DeviceGrant | null,
  ): ResultAsync<DeviceGrant | null, StoreFailure>;
  /**
   * Counts one failed user-code attempt of the user. A window opens at the user's first failure
   * and lasts `windowMs`; resolves to the failures in the window that holds `now`, this one included.
   */
  recordFailure(userId: string, now: string, windowMs: number): ResultAsync<number, StoreFailure>;
  /** The failures counted in the user's window that holds `now` (0 when it has closed). */
  failures(userId: string, now: string, windowMs: number): ResultAsync<number, StoreFailure>;
}
