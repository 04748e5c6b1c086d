import { createHash, randomBytes } from 'node:crypto';
import { err, ok, type Result, type ResultAsync } from 'neverthrow';
import type { Clock } from '../clock.js';
import type { DomainErrorType, ErrorsOf } from '../errors.js';
import type { IdGenerator } from '../ids.js';
import { resultAsync } from '../result.js';
import type { StoreFailure } from '../store-failure.js';
import type { ApiKeyInfo, CreatedApiKey } from './schema.js';
import type { ApiKeyStore, StoredApiKey } from './store.js';

/** What each API key operation can fail with (the compiler holds the implementation to it). */
export const ApiKeyServiceErrors = {
  list: ['StoreUnavailable'],
  create: ['ApiKeyLimitReached', 'StoreUnavailable'],
  revoke: ['ApiKeyNotFound', 'StoreUnavailable'],
} as const satisfies Record<string, readonly DomainErrorType[]>;

/** The key of a request, when it is one the service made: its user, and which key it is. */
export interface ApiKeyHolder {
  userId: string;
  keyId: string;
  /** The hex SHA-256 of its secret: what `holderOfHash` checks again later (a browser session remembers it). */
  keyHash: string;
}

/** How a new key is made besides its name. */
export interface NewApiKeyOptions {
  /** How long it opens things (ms); null or absent: until it is revoked. */
  lifetimeMs?: number | null;
}

export interface ApiKeyService {
  /** How many keys one user may hold. */
  readonly maxPerUser: number;
  /** The user's keys, oldest first, without secrets. */
  list(userId: string): ResultAsync<ApiKeyInfo[], ErrorsOf<typeof ApiKeyServiceErrors.list>>;
  /** Makes a key for the user; its secret is in the answer and nowhere else. */
  create(
    userId: string,
    name: string,
    options?: NewApiKeyOptions,
  ): ResultAsync<CreatedApiKey, ErrorsOf<typeof ApiKeyServiceErrors.create>>;
  /** Revokes one of the user's keys: from now on it opens nothing. */
  revoke(userId: string, keyId: string): ResultAsync<void, ErrorsOf<typeof ApiKeyServiceErrors.revoke>>;
  /**
   * Whose key this is, when the service made it and it is neither revoked nor expired; null
   * otherwise (also for text that is no key of ours, without asking the store). Notes the use,
   * at most once a minute.
   */
  authenticate(presented: string): ResultAsync<ApiKeyHolder | null, StoreFailure>;
  /**
   * The holder of the key whose secret hashes to `keyHash`, while it still opens things (neither
   * revoked nor expired); null otherwise. Notes no use: it checks again what was checked before
   * (a browser session's key, on each of the session's requests).
   */
  holderOfHash(keyHash: string): ResultAsync<ApiKeyHolder | null, StoreFailure>;
}

export interface ApiKeyServiceDeps {
  store: ApiKeyStore;
  clock: Clock;
  ids: IdGenerator;
  /** How many keys one user may hold (default 100). */
  maxPerUser?: number;
}

/** Every key the service makes starts so: a router can tell them from configured keys and conversation keys. */
export const API_KEY_PREFIX = 'acsk_';
/** 32 random bytes, base64url. */
const SECRET_LENGTH = API_KEY_PREFIX.length + 43;
/** A use is written when the last one noted is older than this, so requests do not each write. */
const USE_RESOLUTION_MS = 60_000;

export const hashSecret = (secret: string) => createHash('sha256').update(secret, 'utf8').digest('hex');

const infoOf = (key: StoredApiKey): ApiKeyInfo => ({
  id: key.id,
  name: key.name,
  created_at: key.created_at,
  last_used_at: key.last_used_at,
  expires_at: key.expires_at,
});

/** Whether a key has expired at `now` (an instant). */
export const isExpired = (key: Pick<StoredApiKey, 'expires_at'>, now: string): boolean =>
  key.expires_at !== null && Date.parse(key.expires_at) <= Date.parse(now);

const holderOf = (key: StoredApiKey): ApiKeyHolder => ({ userId: key.user_id, keyId: key.id, keyHash: key.key_hash });

export function createApiKeyService(deps: ApiKeyServiceDeps): ApiKeyService {
  const maxPerUser = deps.maxPerUser ?? 100;
  if (!(Number.isInteger(maxPerUser) && maxPerUser > 0))
    throw new Error('maxApiKeysPerUser must be a positive integer.');
  return {
    maxPerUser,
    list: (userId) => deps.store.list(userId).map((keys) => keys.map(infoOf)),
    create: (userId, name, options = {}) => resultAsync(create(deps, maxPerUser, userId, name, options)),
    revoke: (userId, keyId) => resultAsync(revoke(deps, userId, keyId)),
    authenticate: (presented) => resultAsync(authenticate(deps, presented)),
    holderOfHash: (keyHash) => resultAsync(holderOfHash(deps, keyHash)),
  };
}

async function create(
  deps: ApiKeyServiceDeps,
  maxPerUser: number,
  userId: string,
  name: string,
  options: NewApiKeyOptions,
): Promise<Result<CreatedApiKey, ErrorsOf<typeof ApiKeyServiceErrors.create>>> {
  const lifetimeMs = options.lifetimeMs ?? null;
  if (lifetimeMs !== null && !(Number.isSafeInteger(lifetimeMs) && lifetimeMs > 0))
    throw new Error('An API key’s lifetime must be a positive whole number of milliseconds.');
  const secret = `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  const now = deps.clock.now();
  const key: StoredApiKey = {
    id: deps.ids.next(),
    user_id: userId,
    name,
    key_hash: hashSecret(secret),
    created_at: now,
    last_used_at: null,
    expires_at: lifetimeMs === null ? null : new Date(Date.parse(now) + lifetimeMs).toISOString(),
  };
  const outcome = await deps.store.insert(key, maxPerUser);
  if (outcome.isErr()) return err(outcome.error);
  if (outcome.value !== 'inserted') return err({ type: 'ApiKeyLimitReached', limit: maxPerUser });
  return ok({ ...infoOf(key), key: secret });
}

async function revoke(
  deps: ApiKeyServiceDeps,
  userId: string,
  keyId: string,
): Promise<Result<void, ErrorsOf<typeof ApiKeyServiceErrors.revoke>>> {
  const deleted = await deps.store.delete(userId, keyId);
  if (deleted.isErr()) return err(deleted.error);
  if (!deleted.value) return err({ type: 'ApiKeyNotFound', keyId });
  return ok(undefined);
}

async function authenticate(
  deps: ApiKeyServiceDeps,
  presented: string,
): Promise<Result<ApiKeyHolder | null, StoreFailure>> {
  if (!presented.startsWith(API_KEY_PREFIX) || presented.length !== SECRET_LENGTH) return ok(null);
  const key = await deps.store.findByHash(hashSecret(presented));
  if (key.isErr()) return err(key.error);
  const now = deps.clock.now();
  if (!key.value || isExpired(key.value, now)) return ok(null);
  const holder = holderOf(key.value);
  const stale =
    key.value.last_used_at === null || Date.parse(now) - Date.parse(key.value.last_used_at) >= USE_RESOLUTION_MS;
  // Noting the use is best effort: a key that works must not fail because its last use could not be written.
  if (stale) await deps.store.recordUse(key.value.id, now);
  return ok(holder);
}

async function holderOfHash(
  deps: ApiKeyServiceDeps,
  keyHash: string,
): Promise<Result<ApiKeyHolder | null, StoreFailure>> {
  const key = await deps.store.findByHash(keyHash);
  if (key.isErr()) return err(key.error);
  if (!key.value || isExpired(key.value, deps.clock.now())) return ok(null);
  return ok(holderOf(key.value));
}
