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

const infoOf = (key: StoredApiKey): ApiKeyInfo => ({
  id: key.id,
  name: key.name,
  created_at: key.created_at,
  last_used_at: key.last_used_at,
});

export function createApiKeyService(deps: ApiKeyServiceDeps): ApiKeyService {
  const maxPerUser = deps.maxPerUser ?? 100;
  if (!(Number.isInteger(maxPerUser) && maxPerUser > 0))
    throw new Error('maxApiKeysPerUser must be a positive integer.');
  return {
    maxPerUser,
    list: (userId) => deps.store.list(userId).map((keys) => keys.map(infoOf)),
    create: (userId, name) => resultAsync(create(deps, maxPerUser, userId, name)),
    revoke: (userId, keyId) => resultAsync(revoke(deps, userId, keyId)),
    authenticate: (presented) => resultAsync(authenticate(deps, presented)),
  };
}

async function create(
  deps: ApiKeyServiceDeps,
  maxPerUser: number,
  userId: string,
  name: string,
): Promise<Result<CreatedApiKey, ErrorsOf<typeof ApiKeyServiceErrors.create>>> {
  const secret = `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  const key: StoredApiKey = {
    id: deps.ids.next(),
    user_id: userId,
    name,
    key_hash: hashSecret(secret),
    created_at: deps.clock.now(),
    last_used_at: null,
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
  if (!key.value) return ok(null);
  const holder = { userId: key.value.user_id, keyId: key.value.id };
  const now = deps.clock.now();
  const stale =
    key.value.last_used_at === null || Date.parse(now) - Date.parse(key.value.last_used_at) >= USE_RESOLUTION_MS;
  // Noting the use is best effort: a key that works must not fail because its last use could not be written.
  if (stale) await deps.store.recordUse(key.value.id, now);
  return ok(holder);
}
