import type { Result, ResultAsync } from 'neverthrow';
import { pageOf, type Page, type PageRequest, type SandboxStore, type StoreFailure } from '@acs/core/ports';
import { POOLED_SANDBOX_OWNER, type SandboxLifecycleStatus, type SandboxRecord } from '@acs/core/schemas';
import type { Sqlite } from './driver.js';
import { instant, jsonList, keyset, Params, run } from './query-helpers.js';
import { RecordTable } from './record-table.js';

/** The sandboxes table: the record and the columns filtered and sorted on. */
export const sandboxTable = (db: Sqlite) =>
  new RecordTable<SandboxRecord>(db, 'acs_sandboxes', {
    names: ['status', 'created_at'],
    values: (r) => [r.status, instant(r.created_at)],
  });

/** Sandbox records in SQLite; DELETED tombstones stay readable by id but are never listed. */
export class SqliteSandboxStore implements SandboxStore {
  private readonly table: RecordTable<SandboxRecord>;

  constructor(private readonly db: Sqlite) {
    this.table = sandboxTable(db);
  }

  insert(record: SandboxRecord): ResultAsync<void, StoreFailure> {
    return run(this.db, 'insert sandbox', () => {
      if (!this.table.insert(record)) throw new Error(`sandbox ${record.id} already exists`);
    });
  }

  get(userId: string, id: string): ResultAsync<SandboxRecord | null, StoreFailure> {
    return run(this.db, 'get sandbox', () => this.table.get(userId, id));
  }

  ownerOf(id: string): ResultAsync<string | null, StoreFailure> {
    return run(
      this.db,
      'find the owner of a sandbox',
      () =>
        this.db.get<{ user_id: string }>(
          `SELECT user_id FROM acs_sandboxes WHERE id = ? AND status <> 'DELETED' LIMIT 1`,
          id,
        )?.user_id ?? null,
    );
  }

  getMany(userId: string, ids: readonly string[]): ResultAsync<(SandboxRecord | null)[], StoreFailure> {
    return run(this.db, 'get sandboxes', () => this.table.getMany(userId, ids));
  }

  update<E>(
    userId: string,
    id: string,
    mutate: (current: SandboxRecord) => Result<SandboxRecord, E>,
  ): ResultAsync<SandboxRecord | null, E | StoreFailure> {
    return run(this.db, 'update sandbox', () => this.table.update(userId, id, mutate)).andThen((result) => result);
  }

  listByStatus(
    userId: string | null,
    statuses: readonly SandboxLifecycleStatus[],
  ): ResultAsync<SandboxRecord[], StoreFailure> {
    return run(this.db, 'list sandboxes by status', () =>
      this.table.select(
        `(?1 IS NULL OR user_id = ?1) AND status IN (SELECT value FROM json_each(?2)) ORDER BY created_at, id`,
        [userId, jsonList(statuses)],
      ),
    );
  }

  claimPooled(specId: string, userId: string, claimedAt: string): ResultAsync<SandboxRecord | null, StoreFailure> {
    // One write transaction (SQLite has one writer at a time): the oldest ready pooled record of
    // the spec is read and moved to the user before any other claim can read it.
    return run(this.db, 'claim a pooled sandbox', () =>
      this.db.transaction(() => {
        const [pooled] = this.table.select(
          `user_id = ? AND status = 'RUNNING' AND json_extract(record, '$.sandbox_spec_id') = ? ORDER BY created_at, id LIMIT 1`,
          [POOLED_SANDBOX_OWNER, specId],
        );
        if (!pooled) return null;
        const claimed: SandboxRecord = { ...pooled, user_id: userId, updated_at: claimedAt, last_active_at: claimedAt };
        this.db.run(
          `UPDATE acs_sandboxes SET user_id = ?, record = ? WHERE user_id = ? AND id = ?`,
          userId,
          JSON.stringify(claimed),
          POOLED_SANDBOX_OWNER,
          pooled.id,
        );
        return claimed;
      }),
    );
  }

  search(userId: string, page: PageRequest): ResultAsync<Page<SandboxRecord>, StoreFailure> {
    return run(this.db, 'search sandboxes', () => {
      const params = new Params();
      const user = params.add(userId);
      const { where, orderBy } = keyset(page, params);
      return pageOf(
        this.table.select(
          `user_id = ${user} AND status <> 'DELETED' AND ${where} ORDER BY ${orderBy} LIMIT ${params.add(page.limit + 1)}`,
          params.values,
        ),
        page.limit,
      );
    });
  }
}
