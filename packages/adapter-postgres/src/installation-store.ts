import { randomUUID } from 'node:crypto';
import type { ResultAsync } from 'neverthrow';
import type { InstallationStore, StoreFailure } from '@acs/core/ports';
import { run } from './query-helpers.js';
import type { SqlExecutor } from './sql.js';
import type { Tables } from './tables.js';

/**
 * The installation's identity, one row in its database: written by the first process that
 * asks (concurrent first calls agree on one id), read by every later one, so the identity
 * lives exactly as long as the data does.
 */
export class PostgresInstallationStore implements InstallationStore {
  constructor(
    private readonly db: SqlExecutor,
    private readonly t: Tables,
  ) {}

  identity(): ResultAsync<string, StoreFailure> {
    return run('read the installation id', async () => {
      const existing = await this.db.query<{ id: string }>(`SELECT id FROM ${this.t.installation}`);
      if (existing.rows[0]) return existing.rows[0].id;
      await this.db.query(`INSERT INTO ${this.t.installation} (id) VALUES ($1) ON CONFLICT (singleton) DO NOTHING`, [
        randomUUID().replaceAll('-', ''),
      ]);
      const chosen = await this.db.query<{ id: string }>(`SELECT id FROM ${this.t.installation}`);
      const id = chosen.rows[0]?.id;
      if (!id) throw new Error('the installation id was written but cannot be read back');
      return id;
    });
  }
}
