import { randomUUID } from 'node:crypto';
import type { ResultAsync } from 'neverthrow';
import type { InstallationStore, StoreFailure } from '@acs/core/ports';
import type { Sqlite } from './driver.js';
import { run } from './query-helpers.js';

/**
 * The installation's identity, one row in its database: written on the first call, read by every
 * later one, so the identity lives exactly as long as the data does.
 */
export class SqliteInstallationStore implements InstallationStore {
  constructor(private readonly db: Sqlite) {}

  identity(): ResultAsync<string, StoreFailure> {
    return run(this.db, 'read the installation id', () => {
      const existing = this.db.get<{ id: string }>(`SELECT id FROM acs_installation`);
      if (existing) return existing.id;
      return this.db.transaction(() => {
        this.db.run(
          `INSERT INTO acs_installation (singleton, id, created_at) VALUES (1, ?, ?) ON CONFLICT (singleton) DO NOTHING`,
          randomUUID().replaceAll('-', ''),
          new Date().toISOString(),
        );
        const row = this.db.get<{ id: string }>(`SELECT id FROM acs_installation`);
        if (!row) throw new Error('the installation id was written but cannot be read back');
        return row.id;
      });
    });
  }
}
