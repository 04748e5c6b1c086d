import type { Result, ResultAsync } from 'neverthrow';
import { pageOf, type Page, type PageRequest, type SandboxStore, type StoreFailure } from '@acs/core/ports';
import { POOLED_SANDBOX_OWNER, type SandboxLifecycleStatus, type SandboxRecord } from '@acs/core/schemas';
import { keyset, Params, run } from './query-helpers.js';
import { RecordTable } from './record-table.js';
import type { SqlExecutor } from './sql.js';
import type { Tables } from './tables.js';

/** Sandbox records in PostgreSQL; DELETED tombstones stay readable by id but are never listed. */
export class PostgresSandboxStore implements SandboxStore {
  private readonly table: RecordTable<SandboxRecord>;

  constructor(
    private readonly db: SqlExecutor,
    private readonly t: Tables,
  ) {
    this.table = new RecordTable(db, t.sandboxes, {
      names: ['status', 'created_at'],
      values: (r) => [r.status, r.created_at],
    });
  }

  insert(record: SandboxRecord): ResultAsync<void, StoreFailure> {
    return run('insert sandbox', async () => {
      if (!(await this.table.insert(record))) throw new Error(`sandbox ${record.id} already exists`);
    });
  }

  get(userId: string, id: string): ResultAsync<SandboxRecord | null, StoreFailure> {
    return run('get sandbox', () => this.table.get(userId, id));
  }

  ownerOf(id: string): ResultAsync<string | null, StoreFailure> {
    return run('find the owner of a sandbox', async () => {
      const rows = await this.db.query<{ user_id: string }>(
        `SELECT user_id FROM ${this.t.sandboxes} WHERE id = $1 AND status <> 'DELETED' LIMIT 1`,
        [id],
      );
      return rows.rows[0]?.user_id ?? null;
    });
  }

  getMany(userId: string, ids: readonly string[]): ResultAsync<(SandboxRecord | null)[], StoreFailure> {
    return run('get sandboxes', () => this.table.getMany(userId, ids));
  }

  update<E>(
    userId: string,
    id: string,
    mutate: (current: SandboxRecord) => Result<SandboxRecord, E>,
  ): ResultAsync<SandboxRecord | null, E | StoreFailure> {
    return run('update sandbox', () => this.table.update(userId, id, mutate)).andThen((result) => result);
  }

  listByStatus(
    userId: string | null,
    statuses: readonly SandboxLifecycleStatus[],
  ): ResultAsync<SandboxRecord[], StoreFailure> {
    return run('list sandboxes by status', async () => {
      const rows = await this.db.query<{ record: SandboxRecord }>(
        `SELECT record FROM ${this.t.sandboxes} WHERE ($1::text IS NULL OR user_id = $1) AND status = ANY($2::text[]) ORDER BY created_at, id`,
        [userId, [...statuses]],
      );
      return rows.rows.map((r) => r.record);
    });
  }

  claimPooled(specId: string, userId: string, claimedAt: string): ResultAsync<SandboxRecord | null, StoreFailure> {
    // One statement: the row is picked and locked (SKIP LOCKED: a row another claim holds is
    // passed over, not waited for) and moved to the user, so no two claims get the same one.
    return run('claim a pooled sandbox', async () => {
      const rows = await this.db.query<{ record: SandboxRecord }>(
        `UPDATE ${this.t.sandboxes} SET user_id = $2,
            record = record || jsonb_build_object('user_id', $2::text, 'updated_at', $4::text, 'last_active_at', $4::text)
          WHERE user_id = $3 AND id = (
            SELECT id FROM ${this.t.sandboxes}
              WHERE user_id = $3 AND status = 'RUNNING' AND record->>'sandbox_spec_id' = $1
              ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
          RETURNING record`,
        [specId, userId, POOLED_SANDBOX_OWNER, claimedAt],
      );
      return rows.rows[0]?.record ?? null;
    });
  }

  search(userId: string, page: PageRequest): ResultAsync<Page<SandboxRecord>, StoreFailure> {
    return run('search sandboxes', async () => {
      const params = new Params();
      const user = params.add(userId);
      const { where, orderBy } = keyset(page, params);
      const rows = await this.db.query<{ record: SandboxRecord }>(
        `SELECT record FROM ${this.t.sandboxes} WHERE user_id = ${user} AND status <> 'DELETED' AND ${where} ORDER BY ${orderBy} LIMIT ${params.add(page.limit + 1)}`,
        params.values,
      );
      return pageOf(
        rows.rows.map((r) => r.record),
        page.limit,
      );
    });
  }
}
