import { ok, type Result, type ResultAsync } from 'neverthrow';
import type { Page, PageRequest, SandboxRecord, SandboxStore, StoreFailure } from '@acs/core';
import { keyset, Params, run, toPage } from './query-helpers.js';
import type { SqlExecutor } from './sql.js';
import type { Tables } from './tables.js';

/** Sandbox records in PostgreSQL; DELETED tombstones stay readable by id but are never listed. */
export class PostgresSandboxStore implements SandboxStore {
  constructor(
    private readonly db: SqlExecutor,
    private readonly t: Tables,
  ) {}

  insert(record: SandboxRecord): ResultAsync<void, StoreFailure> {
    return run('insert sandbox', async () => {
      await this.db.query(`INSERT INTO ${this.t.sandboxes} (user_id, id, status, created_at, record) VALUES ($1, $2, $3, $4, $5::jsonb)`, [
        record.user_id,
        record.id,
        record.status,
        record.created_at,
        JSON.stringify(record),
      ]);
    });
  }

  get(userId: string, id: string): ResultAsync<SandboxRecord | null, StoreFailure> {
    return run('get sandbox', async () => {
      const rows = await this.db.query<{ record: SandboxRecord }>(`SELECT record FROM ${this.t.sandboxes} WHERE user_id = $1 AND id = $2`, [userId, id]);
      return rows.rows[0]?.record ?? null;
    });
  }

  getMany(userId: string, ids: readonly string[]): ResultAsync<(SandboxRecord | null)[], StoreFailure> {
    return run('get sandboxes', async () => {
      const rows = await this.db.query<{ record: SandboxRecord }>(`SELECT record FROM ${this.t.sandboxes} WHERE user_id = $1 AND id = ANY($2::text[])`, [userId, [...ids]]);
      const byId = new Map(rows.rows.map((r) => [r.record.id, r.record]));
      return ids.map((id) => byId.get(id) ?? null);
    });
  }

  update<E>(userId: string, id: string, mutate: (current: SandboxRecord) => Result<SandboxRecord, E>): ResultAsync<SandboxRecord | null, E | StoreFailure> {
    return run('update sandbox', () =>
      this.db.transaction(async (tx): Promise<Result<SandboxRecord | null, E>> => {
        const rows = await tx.query<{ record: SandboxRecord }>(`SELECT record FROM ${this.t.sandboxes} WHERE user_id = $1 AND id = $2 FOR UPDATE`, [userId, id]);
        const current = rows.rows[0]?.record;
        if (!current) return ok(null);
        const next = mutate(current);
        if (next.isErr()) return next;
        // mutate handed back the record it was given: nothing changed, nothing to write.
        if (next.value === current) return ok(current);
        if (next.value.id !== id || next.value.user_id !== userId) throw new Error('A store update may not change the id or the owner of a record.');
        await tx.query(`UPDATE ${this.t.sandboxes} SET status = $3, record = $4::jsonb WHERE user_id = $1 AND id = $2`, [userId, id, next.value.status, JSON.stringify(next.value)]);
        return ok(next.value);
      }),
    ).andThen((result) => result);
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
      return toPage(rows.rows.map((r) => r.record), page.limit);
    });
  }
}
