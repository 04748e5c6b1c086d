import { createHash, randomBytes } from 'node:crypto';
import { errAsync, okAsync, type ResultAsync } from 'neverthrow';
import type { Clock } from '../clock.js';
import type { DomainErrorType, ErrorsOf } from '../errors.js';
import type { IdGenerator } from '../ids.js';
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
}

export interface ApiKeyService {
  /** How many keys one user may hold. */
  readonly maxPerUser: number;
  /** The user's keys, oldest first, without secrets. */
  list(userId: string): ResultAsync<ApiKeyInfo[], ErrorsOf<typeof ApiKeyServiceErrors.list>>;
  /** Makes a key for the user; its secret is in the answer and nowhere else. */
  create(userId: string, name: string): ResultAsync<CreatedApiKey, ErrorsOf<typeof ApiKeyServiceErrors.create>>;
  /** Revokes one of the user's keys: from now on it opens nothing. */
  revoke(userId: string, keyId: string): ResultAsync<void, ErrorsOf<typeof ApiKeyServiceErrors.revoke>>;
  /**
   * Whose key this is, when the service made it and it is not revoked; null otherwise (also for
   * text that is no key of ours, without asking the store). Notes the use, at most once a minute.
   */
  authenticate(presented: string): ResultAsync<ApiKeyHolder | null, StoreFailure>;
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

const infoOf = (key: StoredApiKey): ApiKeyInfo => ({ id: key.id, name: key.name, created_at: key.created_at, last_used_at: key.last_used_at });

export function createApiKeyService(deps: ApiKeyServiceDeps): ApiKeyService {
  const maxPerUser = deps.maxPerUser ?? 100;
  if (!(Number.isInteger(maxPerUser) && maxPerUser > 0)) throw new Error('maxApiKeysPerUser must be a positive integer.');
  const { store, clock, ids } = deps;
  return {
    maxPerUser,
    list: (userId) => store.list(userId).map((keys) => keys.map(infoOf)),
    create: (userId, name) => {
      const secret = `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
      const key: StoredApiKey = { id: ids.next(), user_id: userId, name, key_hash: hashSecret(secret), created_at: clock.now(), last_used_at: null };
      return store
        .insert(key, maxPerUser)
        .andThen((outcome) =>
          outcome === 'inserted' ? okAsync({ ...infoOf(key), key: secret }) : errAsync({ type: 'ApiKeyLimitReached' as const, limit: maxPerUser }),
        );
    },
    revoke: (userId, keyId) =>
      store.delete(userId, keyId).andThen((deleted) => (deleted ? okAsync(undefined) : errAsync({ type: 'ApiKeyNotFound' as const, keyId }))),
    authenticate: (presented) => {
      if (!presented.startsWith(API_KEY_PREFIX) || presented.length !== SECRET_LENGTH) return okAsync(null);
      return store.findByHash(hashSecret(presented)).andThen((key) => {
        if (!key) return okAsync(null);
        const holder = { userId: key.user_id, keyId: key.id };
        const now = clock.now();
        const stale = key.last_used_at === null || Date.parse(now) - Date.parse(key.last_used_at) >= USE_RESOLUTION_MS;
        // Noting the use is best effort: a key that works must not fail because its last use could not be written.
        return stale ? store.recordUse(key.id, now).map(() => holder).orElse(() => okAsync(holder)) : okAsync(holder);
      });
    },
  };
}
