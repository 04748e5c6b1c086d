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
import { keyset, likeEscape, Params, run } from './query-helpers.js';
import type { RecordCache } from './record-cache.js';
import { RecordTable } from './record-table.js';
import type { SqlExecutor } from './sql.js';
import type { Tables } from './tables.js';

/** Conversations in PostgreSQL: filters and keyset pages run in SQL on indexed columns; the record is jsonb. */
export class PostgresConversationStore implements ConversationStore {
  private readonly table: RecordTable<ConversationRecord>;

  constructor(
    private readonly db: SqlExecutor,
    private readonly t: Tables,
    /** Set on an exclusive storage: the records read and written, so the agent's per-step reads are not queries. */
    cache: RecordCache<ConversationRecord> | null = null,
  ) {
    this.table = new RecordTable(
      db,
      t.conversations,
      {
        names: [
          'title',
          'status',
          'sandbox_id',
          'parent_conversation_id',
          'selected_repository',
          'trigger',
          'created_at',
          'updated_at',
        ],
        values: (r) => [
          r.title,
          r.status,
          r.sandbox_id,
          r.parent_conversation_id,
          r.selected_repository,
          r.trigger,
          r.created_at,
          r.updated_at,
        ],
      },
      cache,
    );
  }

  insert(record: ConversationRecord): ResultAsync<'inserted' | 'exists', StoreFailure> {
    return run('insert conversation', async () => ((await this.table.insert(record)) ? 'inserted' : 'exists'));
  }

  get(userId: string, id: string): ResultAsync<ConversationRecord | null, StoreFailure> {
    return run('get conversation', () => this.table.get(userId, id));
  }

  getMany(userId: string, ids: readonly string[]): ResultAsync<(ConversationRecord | null)[], StoreFailure> {
    return run('get conversations', () => this.table.getMany(userId, ids));
  }

  update<E>(
    userId: string,
    id: string,
    mutate: (current: ConversationRecord) => Result<ConversationRecord, E>,
  ): ResultAsync<ConversationRecord | null, E | StoreFailure> {
    return run('update conversation', () => this.table.update(userId, id, mutate)).andThen((result) => result);
  }

  delete(userId: string, id: string): ResultAsync<boolean, StoreFailure> {
    return run('delete conversation', () => this.table.delete(userId, id));
  }

  search(
    userId: string,
    filter: ConversationFilter,
    page: PageRequest,
  ): ResultAsync<Page<ConversationRecord>, StoreFailure> {
    return run('search conversations', async () => {
      const params = new Params();
      const where = this.filterSql(userId, filter, params);
      const { where: after, orderBy } = keyset(page, params);
      const rows = await this.db.query<{ record: ConversationRecord }>(
        `SELECT record FROM ${this.t.conversations} WHERE ${where} AND ${after} ORDER BY ${orderBy} LIMIT ${params.add(page.limit + 1)}`,
        params.values,
      );
      return pageOf(
        rows.rows.map((r) => r.record),
        page.limit,
      );
    });
  }

  count(userId: string, filter: ConversationFilter): ResultAsync<number, StoreFailure> {
    return run('count conversations', async () => {
      const params = new Params();
      const rows = await this.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${this.t.conversations} WHERE ${this.filterSql(userId, filter, params)}`,
        params.values,
      );
      return Number(rows.rows[0]?.n ?? 0);
    });
  }

  listBySandbox(userId: string, sandboxId: string): ResultAsync<ConversationRecord[], StoreFailure> {
    return run('list conversations of a sandbox', async () => {
      const rows = await this.db.query<{ record: ConversationRecord }>(
        `SELECT record FROM ${this.t.conversations} WHERE user_id = $1 AND sandbox_id = $2 ORDER BY created_at, id`,
        [userId, sandboxId],
      );
      return rows.rows.map((r) => r.record);
    });
  }

  listByExecutionStatus(statuses: readonly ExecutionStatus[]): ResultAsync<ConversationRecord[], StoreFailure> {
    return run('list conversations by execution status', async () => {
      const rows = await this.db.query<{ record: ConversationRecord }>(
        `SELECT record FROM ${this.t.conversations} WHERE record->>'execution_status' = ANY($1::text[]) ORDER BY created_at, id`,
        [[...statuses]],
      );
      return rows.rows.map((r) => r.record);
    });
  }

  childrenOf(userId: string, parentIds: readonly string[]): ResultAsync<Map<string, string[]>, StoreFailure> {
    return run('list sub-conversations', async () => {
      const children = new Map<string, string[]>();
      if (parentIds.length === 0) return children;
      const rows = await this.db.query<{ parent_conversation_id: string; id: string }>(
        `SELECT parent_conversation_id, id FROM ${this.t.conversations} WHERE user_id = $1 AND parent_conversation_id = ANY($2::text[]) ORDER BY created_at, id`,
        [userId, [...parentIds]],
      );
      for (const row of rows.rows)
        children.set(row.parent_conversation_id, [...(children.get(row.parent_conversation_id) ?? []), row.id]);
      return children;
    });
  }

  private filterSql(userId: string, filter: ConversationFilter, params: Params): string {
    const clauses = [`user_id = ${params.add(userId)}`];
    if (!filter.include_sub_conversations) clauses.push('parent_conversation_id IS NULL');
    if (filter.title_contains !== undefined)
      clauses.push(`title ILIKE ${params.add(`%${likeEscape(filter.title_contains)}%`)}`);
    if (filter.created_at_gte !== undefined)
      clauses.push(`created_at >= ${params.add(filter.created_at_gte)}::timestamptz`);
    if (filter.created_at_lt !== undefined)
      clauses.push(`created_at < ${params.add(filter.created_at_lt)}::timestamptz`);
    if (filter.updated_at_gte !== undefined)
      clauses.push(`updated_at >= ${params.add(filter.updated_at_gte)}::timestamptz`);
    if (filter.updated_at_lt !== undefined)
      clauses.push(`updated_at < ${params.add(filter.updated_at_lt)}::timestamptz`);
    if (filter.selected_repository !== undefined)
      clauses.push(`selected_repository = ${params.add(filter.selected_repository)}`);
    if (filter.trigger !== undefined) clauses.push(`trigger = ${params.add(filter.trigger)}`);
    if (filter.sandbox_id !== undefined) clauses.push(`sandbox_id = ${params.add(filter.sandbox_id)}`);
    return clauses.join(' AND ');
  }
}
