import type { ResultAsync } from 'neverthrow';
import type { ApiKeyStore, StoredApiKey, StoreFailure } from '@acs/core/ports';
import { run } from './query-helpers.js';
import type { SqlExecutor } from './sql.js';
import type { Tables } from './tables.js';

interface ApiKeyRow {
  id: string;
  user_id: string;
  name: string;
  key_hash: string;
  created_at: Date | string;
  last_used_at: Date | string | null;
  expires_at: Date | string | null;
}

const iso = (value: Date | string) => new Date(value).toISOString();

const keyOf = (row: ApiKeyRow): StoredApiKey => ({
  id: row.id,
  user_id: row.user_id,
  name: row.name,
  key_hash: row.key_hash,
  created_at: iso(row.created_at),
  last_used_at: row.last_used_at === null ? null : iso(row.last_used_at),
  expires_at: row.expires_at === null ? null : iso(row.expires_at),
});

const COLUMNS = 'id, user_id, name, key_hash, created_at, last_used_at, expires_at';

/**
 * API keys in PostgreSQL: one row per key with the SHA-256 of its secret (unique, so a presented
 * key is one index lookup). A user's keys are counted and added under a per-user advisory lock,
 * so replicas never let a user past the limit.
 */
export class PostgresApiKeyStore implements ApiKeyStore {
  constructor(
    private readonly db: SqlExecutor,
    private readonly t: Tables,
  ) {}

  insert(key: StoredApiKey, maxPerUser: number): ResultAsync<'inserted' | 'limit_reached', StoreFailure> {
    return run('add an API key', () =>
      this.db.transaction(async (tx) => {
        await tx.query(`SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))`, [
          `acs.api_keys:${this.t.schema ?? ''}`,
          key.user_id,
        ]);
        await tx.query(
          `DELETE FROM ${this.t.apiKeys} WHERE user_id = $1 AND expires_at IS NOT NULL AND expires_at <= $2::timestamptz`,
          [key.user_id, key.created_at],
        );
        const held = await tx.query<{ n: string }>(`SELECT count(*) AS n FROM ${this.t.apiKeys} WHERE user_id = $1`, [
          key.user_id,
        ]);
        if (Number(held.rows[0]?.n ?? 0) >= maxPerUser) return 'limit_reached' as const;
        await tx.query(`INSERT INTO ${this.t.apiKeys} (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)`, [
          key.id,
          key.user_id,
          key.name,
          key.key_hash,
          key.created_at,
          key.last_used_at,
          key.expires_at,
        ]);
        return 'inserted' as const;
      }),
    );
  }

  list(userId: string): ResultAsync<StoredApiKey[], StoreFailure> {
    return run('list API keys', async () => {
      const rows = await this.db.query<ApiKeyRow>(
        `SELECT ${COLUMNS} FROM ${this.t.apiKeys} WHERE user_id = $1 ORDER BY created_at, id`,
        [userId],
      );
      return rows.rows.map(keyOf);
    });
  }

  delete(userId: string, keyId: string): ResultAsync<boolean, StoreFailure> {
    return run('revoke an API key', async () => {
      const rows = await this.db.query(`DELETE FROM ${this.t.apiKeys} WHERE user_id = $1 AND id = $2 RETURNING id`, [
        userId,
        keyId,
      ]);
      return rows.rows.length > 0;
    });
  }

  findByHash(keyHash: string): ResultAsync<StoredApiKey | null, StoreFailure> {
    return run('look up an API key', async () => {
      const rows = await this.db.query<ApiKeyRow>(`SELECT ${COLUMNS} FROM ${this.t.apiKeys} WHERE key_hash = $1`, [
        keyHash,
      ]);
      const row = rows.rows[0];
      return row ? keyOf(row) : null;
    });
  }

  recordUse(keyId: string, at: string): ResultAsync<void, StoreFailure> {
    return run('note an API key’s use', async () => {
      await this.db.query(
        `UPDATE ${this.t.apiKeys} SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2::timestamptz)`,
        [keyId, at],
      );
    });
  }
}
