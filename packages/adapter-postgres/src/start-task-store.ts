import { ok, type Result, type ResultAsync } from 'neverthrow';
import type { Page, PageRequest, StartTaskFilter, StartTaskRecord, StartTaskStore, StoreFailure } from '@acs/core';
import { keyset, Params, run, toPage } from './query-helpers.js';
import type { SqlExecutor } from './sql.js';
import type { Tables } from './tables.js';

/** Conversation start tasks in PostgreSQL. */
export class PostgresStartTaskStore implements StartTaskStore {
  constructor(
    private readonly db: SqlExecutor,
    private readonly t: Tables,
  ) {}

  insert(record: StartTaskRecord): ResultAsync<void, StoreFailure> {
    return run('insert start task', async () => {
      await this.db.query(
        `INSERT INTO ${this.t.startTasks} (user_id, id, app_conversation_id, created_at, record) VALUES ($1, $2, $3, $4, $5::jsonb)`,
        [record.user_id, record.id, record.app_conversation_id, record.created_at, JSON.stringify(record)],
      );
    });
  }

  get(userId: string, id: string): ResultAsync<StartTaskRecord | null, StoreFailure> {
    return run('get start task', async () => {
      const rows = await this.db.query<{ record: StartTaskRecord }>(`SELECT record FROM ${this.t.startTasks} WHERE user_id = $1 AND id = $2`, [userId, id]);
      return rows.rows[0]?.record ?? null;
    });
  }

  getMany(userId: string, ids: readonly string[]): ResultAsync<(StartTaskRecord | null)[], StoreFailure> {
    return run('get start tasks', async () => {
      const rows = await this.db.query<{ record: StartTaskRecord }>(`SELECT record FROM ${this.t.startTasks} WHERE user_id = $1 AND id = ANY($2::text[])`, [userId, [...ids]]);
      const byId = new Map(rows.rows.map((r) => [r.record.id, r.record]));
      return ids.map((id) => byId.get(id) ?? null);
    });
  }

  update<E>(userId: string, id: string, mutate: (current: StartTaskRecord) => Result<StartTaskRecord, E>): ResultAsync<StartTaskRecord | null, E | StoreFailure> {
    return run('update start task', () =>
      this.db.transaction(async (tx): Promise<Result<StartTaskRecord | null, E>> => {
        const rows = await tx.query<{ record: StartTaskRecord }>(`SELECT record FROM ${this.t.startTasks} WHERE user_id = $1 AND id = $2 FOR UPDATE`, [userId, id]);
        const current = rows.rows[0]?.record;
        if (!current) return ok(null);
        const next = mutate(current);
        if (next.isErr()) return next;
        // mutate handed back the record it was given: nothing changed, nothing to write.
        if (next.value === current) return ok(current);
        if (next.value.id !== id || next.value.user_id !== userId) throw new Error('A store update may not change the id or the owner of a record.');
        await tx.query(`UPDATE ${this.t.startTasks} SET app_conversation_id = $3, record = $4::jsonb WHERE user_id = $1 AND id = $2`, [
          userId,
          id,
          next.value.app_conversation_id,
          JSON.stringify(next.value),
        ]);
        return ok(next.value);
      }),
    ).andThen((result) => result);
  }

  search(userId: string, filter: StartTaskFilter, page: PageRequest, order: 'newest_first' | 'oldest_first'): ResultAsync<Page<StartTaskRecord>, StoreFailure> {
    return run('search start tasks', async () => {
      const params = new Params();
      const where = this.filterSql(userId, filter, params);
      const { where: after, orderBy } = keyset(page, params, order);
      const rows = await this.db.query<{ record: StartTaskRecord }>(
        `SELECT record FROM ${this.t.startTasks} WHERE ${where} AND ${after} ORDER BY ${orderBy} LIMIT ${params.add(page.limit + 1)}`,
        params.values,
      );
      return toPage(rows.rows.map((r) => r.record), page.limit);
    });
  }

  count(userId: string, filter: StartTaskFilter): ResultAsync<number, StoreFailure> {
    return run('count start tasks', async () => {
      const params = new Params();
      const rows = await this.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${this.t.startTasks} WHERE ${this.filterSql(userId, filter, params)}`, params.values);
      return Number(rows.rows[0]?.n ?? 0);
    });
  }

  deleteByConversation(userId: string, conversationId: string): ResultAsync<number, StoreFailure> {
    return run('delete start tasks', async () => {
      const rows = await this.db.query(`DELETE FROM ${this.t.startTasks} WHERE user_id = $1 AND app_conversation_id = $2 RETURNING id`, [userId, conversationId]);
      return rows.rows.length;
    });
  }

  private filterSql(userId: string, filter: StartTaskFilter, params: Params): string {
    const clauses = [`user_id = ${params.add(userId)}`];
    if (filter.app_conversation_id !== undefined) clauses.push(`app_conversation_id = ${params.add(filter.app_conversation_id)}`);
    if (filter.created_at_gte !== undefined) clauses.push(`created_at >= ${params.add(filter.created_at_gte)}::timestamptz`);
    return clauses.join(' AND ');
  }
}
