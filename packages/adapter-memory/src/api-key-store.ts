import { okAsync, type ResultAsync } from 'neverthrow';
import type { ApiKeyStore, StoredApiKey, StoreFailure } from '@acs/core/ports';

/** API keys in memory, found by the hash of their secret. */
export class MemoryApiKeyStore implements ApiKeyStore {
  readonly #byHash = new Map<string, StoredApiKey>();

  insert(key: StoredApiKey, maxPerUser: number): ResultAsync<'inserted' | 'limit_reached', StoreFailure> {
    const now = Date.parse(key.created_at);
    for (const held of this.#ofUser(key.user_id))
      if (held.expires_at !== null && Date.parse(held.expires_at) <= now) this.#byHash.delete(held.key_hash);
    if (this.#ofUser(key.user_id).length >= maxPerUser) return okAsync('limit_reached');
    this.#byHash.set(key.key_hash, { ...key });
    return okAsync('inserted');
  }

  list(userId: string): ResultAsync<StoredApiKey[], StoreFailure> {
    const keys = this.#ofUser(userId).sort((a, b) =>
      a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : 1,
    );
    return okAsync(keys.map((k) => ({ ...k })));
  }

  delete(userId: string, keyId: string): ResultAsync<boolean, StoreFailure> {
    const key = this.#ofUser(userId).find((k) => k.id === keyId);
    if (key) this.#byHash.delete(key.key_hash);
    return okAsync(key !== undefined);
  }

  findByHash(keyHash: string): ResultAsync<StoredApiKey | null, StoreFailure> {
    const key = this.#byHash.get(keyHash);
    return okAsync(key ? { ...key } : null);
  }

  recordUse(keyId: string, at: string): ResultAsync<void, StoreFailure> {
    for (const key of this.#byHash.values()) {
      if (key.id === keyId && (key.last_used_at === null || key.last_used_at < at)) key.last_used_at = at;
    }
    return okAsync(undefined);
  }

  #ofUser(userId: string): StoredApiKey[] {
    return [...this.#byHash.values()].filter((k) => k.user_id === userId);
  }
}
