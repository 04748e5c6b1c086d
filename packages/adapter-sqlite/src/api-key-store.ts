import type { ResultAsync } from 'neverthrow';
import type { ApiKeyStore, StoredApiKey, StoreFailure } from '@acs/core/ports';
import type { Sqlite } from './driver.js';
import { run } from './query-helpers.js';

const COLUMNS = 'id, user_id, name, key_hash, created_at, last_used_at, expires_at';

/** An instant as the record shows it (what PostgreSQL gives back: ISO 8601 with milliseconds). */
const iso = (value: string) => new Date(value).toISOString();

/** Writes one key's row (the caller holds the transaction). */
export function insertApiKey(db: Sqlite, key: StoredApiKey): void {
  db.run(
    `INSERT INTO acs_api_keys (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)`,
    key.id,
    key.user_id,
    key.name,
    key.key_hash,
    iso(key.created_at),
    key.last_used_at === null ? null : iso(key.last_used_at),
    key.expires_at === null ? null : iso(key.expires_at),
  );
}

/**
 * API keys in SQLite: one row per key with the SHA-256 of its secret (unique, so a presented key
 * is one index lookup). A user's keys are counted and added in one write transaction, so the
 * limit holds under concurrent adds.
 */
export class SqliteApiKeyStore implements ApiKeyStore {
  constructor(private readonly db: Sqlite) {}

  insert(key: StoredApiKey, maxPerUser: number): ResultAsync<'inserted' | 'limit_reached', StoreFailure> {
    return run(this.db, 'add an API key', () =>
      this.db.transaction(() => {
        // ISO 8601 with milliseconds in UTC sorts as the instants do.
        this.db.run(
          `DELETE FROM acs_api_keys WHERE user_id = ? AND expires_at IS NOT NULL AND expires_at <= ?`,
          key.user_id,
          iso(key.created_at),
        );
        const held = this.db.get<{ n: number }>(
          `SELECT count(*) AS n FROM acs_api_keys WHERE user_id = ?`,
          key.user_id,
        );
        if (Number(held?.n ?? 0) >= maxPerUser) return 'limit_reached' as const;
        insertApiKey(this.db, key);
        return 'inserted' as const;
      }),
    );
  }

  list(userId: string): ResultAsync<StoredApiKey[], StoreFailure> {
    return run(this.db, 'list API keys', () =>
      this.db
        .all<StoredApiKey>(`SELECT ${COLUMNS} FROM acs_api_keys WHERE user_id = ? ORDER BY created_at, id`, userId)
        .map(plain),
    );
  }

  delete(userId: string, keyId: string): ResultAsync<boolean, StoreFailure> {
    return run(
      this.db,
      'revoke an API key',
      () => this.db.run(`DELETE FROM acs_api_keys WHERE user_id = ? AND id = ?`, userId, keyId) > 0,
    );
  }

  findByHash(keyHash: string): ResultAsync<StoredApiKey | null, StoreFailure> {
    return run(this.db, 'look up an API key', () => {
      const row = this.db.get<StoredApiKey>(`SELECT ${COLUMNS} FROM acs_api_keys WHERE key_hash = ?`, keyHash);
      return row ? plain(row) : null;
    });
  }

  recordUse(keyId: string, at: string): ResultAsync<void, StoreFailure> {
    return run(this.db, 'note an API key’s use', () => {
      // ISO 8601 with milliseconds in UTC sorts as the instants do.
      this.db.run(
        `UPDATE acs_api_keys SET last_used_at = ?2 WHERE id = ?1 AND (last_used_at IS NULL OR last_used_at < ?2)`,
        keyId,
        iso(at),
      );
    });
  }
}

/** A row as a plain object (node:sqlite's rows have no prototype). */
const plain = (row: StoredApiKey): StoredApiKey => ({
  id: row.id,
  user_id: row.user_id,
  name: row.name,
  key_hash: row.key_hash,
  created_at: row.created_at,
  last_used_at: row.last_used_at,
  expires_at: row.expires_at ?? null,
});
