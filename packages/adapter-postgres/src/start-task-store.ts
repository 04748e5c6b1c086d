import type { Result, ResultAsync } from 'neverthrow';
import {
  pageOf,
  type Page,
  type PageRequest,
  type StartTaskFilter,
  type StartTaskStore,
  type StoreFailure,
} from '@acs/core/ports';
import type { StartTaskRecord } from '@acs/core/schemas';
import { keyset, Params, run } from './query-helpers.js';
import { RecordTable } from './record-table.js';
import type { SqlExecutor } from './sql.js';
import type { Tables } from './tables.js';

/** Conversation start tasks in PostgreSQL. */
export class PostgresStartTaskStore implements StartTaskStore {
  private readonly table: RecordTable<StartTaskRecord>;

  constructor(
    private readonly db: SqlExecutor,
    private readonly t: Tables,
  ) {
    this.table = new RecordTable(db, t.startTasks, {
      names: ['app_conversation_id', 'created_at'],
      values: (r) => [r.app_conversation_id, r.created_at],
    });
  }

  insert(record: StartTaskRecord): ResultAsync<void, StoreFailure> {
    return run('insert start task', async () => {
      if (!(await this.table.insert(record))) throw new Error(`start task ${record.id} already exists`);
    });
  }

  get(userId: string, id: string): ResultAsync<StartTaskRecord | null, StoreFailure> {
    return run('get start task', () => this.table.get(userId, id));
  }

  getMany(userId: string, ids: readonly string[]): ResultAsync<(StartTaskRecord | null)[], StoreFailure> {
    return run('get start tasks', () => this.table.getMany(userId, ids));
  }

  update<E>(
    userId: string,
    id: string,
    mutate: (current: StartTaskRecord) => Result<StartTaskRecord, E>,
  ): ResultAsync<StartTaskRecord | null, E | StoreFailure> {
    return run('update start task', () => this.table.update(userId, id, mutate)).andThen((result) => result);
  }

  search(
    userId: string,
    filter: StartTaskFilter,
    page: PageRequest,
    order: 'newest_first' | 'oldest_first',
  ): ResultAsync<Page<StartTaskRecord>, StoreFailure> {
    return run('search start tasks', async () => {
      const params = new Params();
      const where = this.filterSql(userId, filter, params);
      const { where: after, orderBy } = keyset(page, params, order);
      const rows = await this.db.query<{ record: StartTaskRecord }>(
        `SELECT record FROM ${this.t.startTasks} WHERE ${where} AND ${after} ORDER BY ${orderBy} LIMIT ${params.add(page.limit + 1)}`,
        params.values,
      );
      return pageOf(
        rows.rows.map((r) => r.record),
        page.limit,
      );
    });
  }

  count(userId: string, filter: StartTaskFilter): ResultAsync<number, StoreFailure> {
    return run('count start tasks', async () => {
      const params = new Params();
      const rows = await this.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${this.t.startTasks} WHERE ${this.filterSql(userId, filter, params)}`,
        params.values,
      );
      return Number(rows.rows[0]?.n ?? 0);
    });
  }

  deleteByConversation(userId: string, conversationId: string): ResultAsync<number, StoreFailure> {
    return run('delete start tasks', async () => {
      const rows = await this.db.query(
        `DELETE FROM ${this.t.startTasks} WHERE user_id = $1 AND app_conversation_id = $2 RETURNING id`,
        [userId, conversationId],
      );
      return rows.rows.length;
    });
  }

  private filterSql(userId: string, filter: StartTaskFilter, params: Params): string {
    const clauses = [`user_id = ${params.add(userId)}`];
    if (filter.app_conversation_id !== undefined)
      clauses.push(`app_conversation_id = ${params.add(filter.app_conversation_id)}`);
    if (filter.created_at_gte !== undefined)
      clauses.push(`created_at >= ${params.add(filter.created_at_gte)}::timestamptz`);
    return clauses.join(' AND ');
  }
}
