import type { ResultAsync } from 'neverthrow';
import type { SecretCipher, SettingsStore, StoreFailure } from '@acs/core/ports';
import type { StoredSettings } from '@acs/core/schemas';
import { run } from './query-helpers.js';
import { openSettings, sealSettings } from '@acs/core';
import type { RecordCache } from './record-cache.js';
import type { SqlExecutor } from './sql.js';
import type { Tables } from './tables.js';

/**
 * Settings in PostgreSQL, one row per user, every secret value encrypted with the
 * SecretCipher. Updates of one user are serialised with a transaction-scoped advisory
 * lock (which also covers the first insert, when there is no row to lock yet).
 *
 * On an exclusive storage (nothing else writes the database) the sealed rows read and written
 * are kept in a cache: the agent reads the user's settings on every step. They stay sealed there;
 * every read opens a copy, as a read of the row would.
 */
export class PostgresSettingsStore implements SettingsStore {
  constructor(
    private readonly db: SqlExecutor,
    private readonly t: Tables,
    private readonly cipher: SecretCipher,
    private readonly cache: RecordCache<StoredSettings> | null = null,
  ) {}

  private open(data: StoredSettings, userId: string): StoredSettings {
    const opened = openSettings(data, userId, this.cipher);
    if (opened.isErr()) throw opened.error;
    return opened.value;
  }

  get(userId: string): ResultAsync<StoredSettings | null, StoreFailure> {
    return run('load settings', async () => {
      const cache = this.cache;
      const held = cache?.get(userId);
      if (held) return this.open(held, userId);
      const data = cache ? await cache.serially(userId, () => this.readSealed(userId)) : await this.readSealed(userId);
      return data ? this.open(data, userId) : null;
    });
  }

  private async readSealed(userId: string): Promise<StoredSettings | null> {
    const rows = await this.db.query<{ data: StoredSettings }>(
      `SELECT data FROM ${this.t.settings} WHERE user_id = $1`,
      [userId],
    );
    const data = rows.rows[0]?.data ?? null;
    if (data) this.cache?.set(userId, data);
    return data;
  }

  update(
    userId: string,
    mutate: (current: StoredSettings | null) => StoredSettings,
  ): ResultAsync<StoredSettings, StoreFailure> {
    const cache = this.cache;
    return run('store settings', () =>
      cache ? cache.serially(userId, () => this.write(userId, mutate)) : this.write(userId, mutate),
    );
  }

  private write(userId: string, mutate: (current: StoredSettings | null) => StoredSettings): Promise<StoredSettings> {
    this.cache?.delete(userId);
    return this.db
      .transaction(async (tx) => {
        await tx.query(`SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))`, [
          `acs.settings:${this.t.schema ?? ''}`,
          userId,
        ]);
        const rows = await tx.query<{ data: StoredSettings }>(
          `SELECT data FROM ${this.t.settings} WHERE user_id = $1`,
          [userId],
        );
        const stored = rows.rows[0]?.data;
        const current = stored ? this.open(stored, userId) : null;
        const next = mutate(current);
        const sealed = sealSettings(next, userId, this.cipher);
        await tx.query(
          `INSERT INTO ${this.t.settings} (user_id, data, key_ids, updated_at) VALUES ($1, $2::jsonb, $3::text[], now())
           ON CONFLICT (user_id) DO UPDATE SET data = EXCLUDED.data, key_ids = EXCLUDED.key_ids, updated_at = now()`,
          [userId, JSON.stringify(sealed.data), sealed.keyIds],
        );
        return { next: structuredClone(next), sealed: sealed.data };
      })
      .then(({ next, sealed }) => {
        this.cache?.set(userId, sealed);
        return next;
      });
  }
}
