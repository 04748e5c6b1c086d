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
import type { Sqlite } from './driver.js';
import { instant, keyset, Params, run } from './query-helpers.js';
import { RecordTable } from './record-table.js';

/** The start tasks table: the record and the columns filtered and sorted on. */
export const startTaskTable = (db: Sqlite) =>
  new RecordTable<StartTaskRecord>(db, 'acs_start_tasks', {
    names: ['app_conversation_id', 'created_at'],
    values: (r) => [r.app_conversation_id, instant(r.created_at)],
  });

/** Conversation start tasks in SQLite. */
export class SqliteStartTaskStore implements StartTaskStore {
  private readonly table: RecordTable<StartTaskRecord>;

  constructor(private readonly db: Sqlite) {
    this.table = startTaskTable(db);
  }

  insert(record: StartTaskRecord): ResultAsync<void, StoreFailure> {
    return run(this.db, 'insert start task', () => {
      if (!this.table.insert(record)) throw new Error(`start task ${record.id} already exists`);
    });
  }

  get(userId: string, id: string): ResultAsync<StartTaskRecord | null, StoreFailure> {
    return run(this.db, 'get start task', () => this.table.get(userId, id));
  }

  getMany(userId: string, ids: readonly string[]): ResultAsync<(StartTaskRecord | null)[], StoreFailure> {
    return run(this.db, 'get start tasks', () => this.table.getMany(userId, ids));
  }

  update<E>(
    userId: string,
    id: string,
    mutate: (current: StartTaskRecord) => Result<StartTaskRecord, E>,
  ): ResultAsync<StartTaskRecord | null, E | StoreFailure> {
    return run(this.db, 'update start task', () => this.table.update(userId, id, mutate)).andThen((result) => result);
  }

  search(
    userId: string,
    filter: StartTaskFilter,
    page: PageRequest,
    order: 'newest_first' | 'oldest_first',
  ): ResultAsync<Page<StartTaskRecord>, StoreFailure> {
    return run(this.db, 'search start tasks', () => {
      const params = new Params();
      const where = this.filterSql(userId, filter, params);
      const { where: after, orderBy } = keyset(page, params, order);
      return pageOf(
        this.table.select(
          `${where} AND ${after} ORDER BY ${orderBy} LIMIT ${params.add(page.limit + 1)}`,
          params.values,
        ),
        page.limit,
      );
    });
  }

  count(userId: string, filter: StartTaskFilter): ResultAsync<number, StoreFailure> {
    return run(this.db, 'count start tasks', () => {
      const params = new Params();
      const row = this.db.get<{ n: number }>(
        `SELECT count(*) AS n FROM acs_start_tasks WHERE ${this.filterSql(userId, filter, params)}`,
        ...params.values,
      );
      return Number(row?.n ?? 0);
    });
  }

  deleteByConversation(userId: string, conversationId: string): ResultAsync<number, StoreFailure> {
    return run(this.db, 'delete start tasks', () =>
      this.db.run(`DELETE FROM acs_start_tasks WHERE user_id = ? AND app_conversation_id = ?`, userId, conversationId),
    );
  }

  private filterSql(userId: string, filter: StartTaskFilter, params: Params): string {
    const clauses = [`user_id = ${params.add(userId)}`];
    if (filter.app_conversation_id !== undefined)
      clauses.push(`app_conversation_id = ${params.add(filter.app_conversation_id)}`);
    if (filter.created_at_gte !== undefined)
      clauses.push(`created_at >= ${params.add(instant(filter.created_at_gte))}`);
    return clauses.join(' AND ');
  }
}
