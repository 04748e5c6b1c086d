import type { ResultAsync } from 'neverthrow';
import { openSettings, sealSettings } from '@acs/core';
import type { SecretCipher, SettingsStore, StoreFailure } from '@acs/core/ports';
import type { StoredSettings } from '@acs/core/schemas';
import type { Sqlite } from './driver.js';
import { run } from './query-helpers.js';

/**
 * Settings in SQLite, one row per user, every secret value sealed with the SecretCipher exactly
 * as the PostgreSQL adapter seals it (core's `sealSettings`), so a row can move between them as
 * it is. An update reads, mutates and writes in one write transaction.
 */
export class SqliteSettingsStore implements SettingsStore {
  constructor(
    private readonly db: Sqlite,
    private readonly cipher: SecretCipher,
  ) {}

  private read(userId: string): StoredSettings | null {
    const row = this.db.get<{ data: string }>(`SELECT data FROM acs_settings WHERE user_id = ?`, userId);
    if (!row) return null;
    const opened = openSettings(JSON.parse(row.data) as StoredSettings, userId, this.cipher);
    if (opened.isErr()) throw opened.error;
    return opened.value;
  }

  get(userId: string): ResultAsync<StoredSettings | null, StoreFailure> {
    return run(this.db, 'load settings', () => this.read(userId));
  }

  update(
    userId: string,
    mutate: (current: StoredSettings | null) => StoredSettings,
  ): ResultAsync<StoredSettings, StoreFailure> {
    return run(this.db, 'store settings', () =>
      this.db.transaction(() => {
        const next = mutate(this.read(userId));
        const sealed = sealSettings(next, userId, this.cipher);
        this.db.run(
          `INSERT INTO acs_settings (user_id, data, key_ids, updated_at) VALUES (?, ?, ?, ?)
           ON CONFLICT (user_id) DO UPDATE SET data = excluded.data, key_ids = excluded.key_ids, updated_at = excluded.updated_at`,
          userId,
          JSON.stringify(sealed.data),
          JSON.stringify(sealed.keyIds),
          new Date().toISOString(),
        );
        return structuredClone(next);
      }),
    );
  }
}
