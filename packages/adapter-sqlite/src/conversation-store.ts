import type { Result, ResultAsync } from 'neverthrow';
import {
  pageOf,
  type Page,
  type PageRequest,
  type ConversationFilter,
  type ConversationStore,
  type StoreFailure,
} from '@acs/core/ports';
import type { ConversationRecord, ExecutionStatus } from '@acs/core/schemas';
import type { Sqlite } from './driver.js';
import { instant, jsonList, keyset, Params, run } from './query-helpers.js';
import { RecordTable } from './record-table.js';

/** The conversations table: the record and the columns filtered and sorted on. */
export const conversationTable = (db: Sqlite) =>
  new RecordTable<ConversationRecord>(db, 'acs_conversations', {
    names: [
      'title_folded',
      'status',
      'execution_status',
      'sandbox_id',
      'parent_conversation_id',
      'selected_repository',
      'trigger',
      'created_at',
      'updated_at',
    ],
    values: (r) => [
      r.title.toLowerCase(),
      r.status,
      r.execution_status ?? null,
      r.sandbox_id,
      r.parent_conversation_id,
      r.selected_repository,
      r.trigger,
      instant(r.created_at),
      instant(r.updated_at),
    ],
  });

/**
 * Conversations in SQLite: filters and keyset pages run in SQL on indexed columns; the record is
 * JSON text. Titles are matched case-insensitively on a copy folded by JavaScript (SQLite's own
 * `lower` and `LIKE` fold ASCII letters only).
 */
export class SqliteConversationStore implements ConversationStore {
  private readonly table: RecordTable<ConversationRecord>;

  constructor(private readonly db: Sqlite) {
    this.table = conversationTable(db);
  }

  insert(record: ConversationRecord): ResultAsync<'inserted' | 'exists', StoreFailure> {
    return run(this.db, 'insert conversation', () => (this.table.insert(record) ? 'inserted' : 'exists'));
  }

  get(userId: string, id: string): ResultAsync<ConversationRecord | null, StoreFailure> {
    return run(this.db, 'get conversation', () => this.table.get(userId, id));
  }

  getMany(userId: string, ids: readonly string[]): ResultAsync<(ConversationRecord | null)[], StoreFailure> {
    return run(this.db, 'get conversations', () => this.table.getMany(userId, ids));
  }

  update<E>(
    userId: string,
    id: string,
    mutate: (current: ConversationRecord) => Result<ConversationRecord, E>,
  ): ResultAsync<ConversationRecord | null, E | StoreFailure> {
    return run(this.db, 'update conversation', () => this.table.update(userId, id, mutate)).andThen((result) => result);
  }

  delete(userId: string, id: string): ResultAsync<boolean, StoreFailure> {
    return run(this.db, 'delete conversation', () => this.table.delete(userId, id));
  }

  search(
    userId: string,
    filter: ConversationFilter,
    page: PageRequest,
  ): ResultAsync<Page<ConversationRecord>, StoreFailure> {
    return run(this.db, 'search conversations', () => {
      const params = new Params();
      const where = this.filterSql(userId, filter, params);
      const { where: after, orderBy } = keyset(page, params);
      const records = this.table.select(
        `${where} AND ${after} ORDER BY ${orderBy} LIMIT ${params.add(page.limit + 1)}`,
        params.values,
      );
      return pageOf(records, page.limit);
    });
  }

  count(userId: string, filter: ConversationFilter): ResultAsync<number, StoreFailure> {
    return run(this.db, 'count conversations', () => {
      const params = new Params();
      const row = this.db.get<{ n: number }>(
        `SELECT count(*) AS n FROM acs_conversations WHERE ${this.filterSql(userId, filter, params)}`,
        ...params.values,
      );
      return Number(row?.n ?? 0);
    });
  }

  listBySandbox(userId: string, sandboxId: string): ResultAsync<ConversationRecord[], StoreFailure> {
    return run(this.db, 'list conversations of a sandbox', () =>
      this.table.select(`user_id = ? AND sandbox_id = ? ORDER BY created_at, id`, [userId, sandboxId]),
    );
  }

  listByExecutionStatus(statuses: readonly ExecutionStatus[]): ResultAsync<ConversationRecord[], StoreFailure> {
    return run(this.db, 'list conversations by execution status', () =>
      this.table.select(`execution_status IN (SELECT value FROM json_each(?)) ORDER BY created_at, id`, [
        jsonList(statuses),
      ]),
    );
  }

  childrenOf(userId: string, parentIds: readonly string[]): ResultAsync<Map<string, string[]>, StoreFailure> {
    return run(this.db, 'list sub-conversations', () => {
      const children = new Map<string, string[]>();
      if (parentIds.length === 0) return children;
      const rows = this.db.all<{ parent_conversation_id: string; id: string }>(
        `SELECT parent_conversation_id, id FROM acs_conversations WHERE user_id = ? AND parent_conversation_id IN (SELECT value FROM json_each(?)) ORDER BY created_at, id`,
        userId,
        jsonList(parentIds),
      );
      for (const row of rows)
        children.set(row.parent_conversation_id, [...(children.get(row.parent_conversation_id) ?? []), row.id]);
      return children;
    });
  }

  private filterSql(userId: string, filter: ConversationFilter, params: Params): string {
    const clauses = [`user_id = ${params.add(userId)}`];
    if (!filter.include_sub_conversations) clauses.push('parent_conversation_id IS NULL');
    if (filter.title_contains !== undefined)
      clauses.push(`instr(title_folded, ${params.add(filter.title_contains.toLowerCase())}) > 0`);
    if (filter.created_at_gte !== undefined)
      clauses.push(`created_at >= ${params.add(instant(filter.created_at_gte))}`);
    if (filter.created_at_lt !== undefined) clauses.push(`created_at < ${params.add(instant(filter.created_at_lt))}`);
    if (filter.updated_at_gte !== undefined)
      clauses.push(`updated_at >= ${params.add(instant(filter.updated_at_gte))}`);
    if (filter.updated_at_lt !== undefined) clauses.push(`updated_at < ${params.add(instant(filter.updated_at_lt))}`);
    if (filter.selected_repository !== undefined)
      clauses.push(`selected_repository = ${params.add(filter.selected_repository)}`);
    if (filter.trigger !== undefined) clauses.push(`"trigger" = ${params.add(filter.trigger)}`);
    if (filter.sandbox_id !== undefined) clauses.push(`sandbox_id = ${params.add(filter.sandbox_id)}`);
    return clauses.join(' AND ');
  }
}
