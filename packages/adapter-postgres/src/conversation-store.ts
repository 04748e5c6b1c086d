import { ok, type Result, type ResultAsync } from 'neverthrow';
import type { ConversationFilter, ConversationRecord, ConversationStore, Page, PageRequest, StoreFailure } from '@acs/core';
import { keyset, likeEscape, Params, run, toPage } from './query-helpers.js';
import type { SqlExecutor, SqlQueryable } from './sql.js';
import type { Tables } from './tables.js';

const columns = (r: ConversationRecord) => [
  r.user_id,
  r.id,
  r.title,
  r.status,
  r.sandbox_id,
  r.parent_conversation_id,
  r.selected_repository,
  r.trigger,
  r.created_at,
  r.updated_at,
  JSON.stringify(r),
];

/** Conversations in PostgreSQL: filters and keyset pages run in SQL on indexed columns; the record is jsonb. */
export class PostgresConversationStore implements ConversationStore {
  constructor(
    private readonly db: SqlExecutor,
    private readonly t: Tables,
  ) {}

  insert(record: ConversationRecord): ResultAsync<'inserted' | 'exists', StoreFailure> {
    return run('insert conversation', async () => {
      const inserted = await this.db.query(
        `INSERT INTO ${this.t.conversations} (user_id, id, title, status, sandbox_id, parent_conversation_id, selected_repository, trigger, created_at, updated_at, record)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb) ON CONFLICT (user_id, id) DO NOTHING RETURNING id`,
        columns(record),
      );
      return inserted.rows.length > 0 ? 'inserted' : 'exists';
    });
  }

  get(userId: string, id: string): ResultAsync<ConversationRecord | null, StoreFailure> {
    return run('get conversation', async () => {
      const rows = await this.db.query<{ record: ConversationRecord }>(`SELECT record FROM ${this.t.conversations} WHERE user_id = $1 AND id = $2`, [userId, id]);
      return rows.rows[0]?.record ?? null;
    });
  }

  getMany(userId: string, ids: readonly string[]): ResultAsync<(ConversationRecord | null)[], StoreFailure> {
    return run('get conversations', async () => {
      const rows = await this.db.query<{ record: ConversationRecord }>(
        `SELECT record FROM ${this.t.conversations} WHERE user_id = $1 AND id = ANY($2::text[])`,
        [userId, [...ids]],
      );
      const byId = new Map(rows.rows.map((r) => [r.record.id, r.record]));
      return ids.map((id) => byId.get(id) ?? null);
    });
  }

  update<E>(userId: string, id: string, mutate: (current: ConversationRecord) => Result<ConversationRecord, E>): ResultAsync<ConversationRecord | null, E | StoreFailure> {
    return run('update conversation', () =>
      this.db.transaction(async (tx): Promise<Result<ConversationRecord | null, E>> => {
        const rows = await tx.query<{ record: ConversationRecord }>(`SELECT record FROM ${this.t.conversations} WHERE user_id = $1 AND id = $2 FOR UPDATE`, [userId, id]);
        const current = rows.rows[0]?.record;
        if (!current) return ok(null);
        const next = mutate(current);
        if (next.isErr()) return next;
        // mutate handed back the record it was given: nothing changed, nothing to write.
        if (next.value === current) return ok(current);
        if (next.value.id !== id || next.value.user_id !== userId) throw new Error('A store update may not change the id or the owner of a record.');
        await this.write(tx, next.value);
        return ok(next.value);
      }),
    ).andThen((result) => result);
  }

  private async write(tx: SqlQueryable, r: ConversationRecord): Promise<void> {
    await tx.query(
      `UPDATE ${this.t.conversations} SET title = $3, status = $4, sandbox_id = $5, parent_conversation_id = $6, selected_repository = $7, trigger = $8,
       created_at = $9, updated_at = $10, record = $11::jsonb WHERE user_id = $1 AND id = $2`,
      columns(r),
    );
  }

  delete(userId: string, id: string): ResultAsync<boolean, StoreFailure> {
    return run('delete conversation', async () => {
      const rows = await this.db.query(`DELETE FROM ${this.t.conversations} WHERE user_id = $1 AND id = $2 RETURNING id`, [userId, id]);
      return rows.rows.length > 0;
    });
  }

  search(userId: string, filter: ConversationFilter, page: PageRequest): ResultAsync<Page<ConversationRecord>, StoreFailure> {
    return run('search conversations', async () => {
      const params = new Params();
      const where = this.filterSql(userId, filter, params);
      const { where: after, orderBy } = keyset(page, params);
      const rows = await this.db.query<{ record: ConversationRecord }>(
        `SELECT record FROM ${this.t.conversations} WHERE ${where} AND ${after} ORDER BY ${orderBy} LIMIT ${params.add(page.limit + 1)}`,
        params.values,
      );
      return toPage(rows.rows.map((r) => r.record), page.limit);
    });
  }

  count(userId: string, filter: ConversationFilter): ResultAsync<number, StoreFailure> {
    return run('count conversations', async () => {
      const params = new Params();
      const rows = await this.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${this.t.conversations} WHERE ${this.filterSql(userId, filter, params)}`, params.values);
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

  childrenOf(userId: string, parentIds: readonly string[]): ResultAsync<Map<string, string[]>, StoreFailure> {
    return run('list sub-conversations', async () => {
      const children = new Map<string, string[]>();
      if (parentIds.length === 0) return children;
      const rows = await this.db.query<{ parent_conversation_id: string; id: string }>(
        `SELECT parent_conversation_id, id FROM ${this.t.conversations} WHERE user_id = $1 AND parent_conversation_id = ANY($2::text[]) ORDER BY created_at, id`,
        [userId, [...parentIds]],
      );
      for (const row of rows.rows) children.set(row.parent_conversation_id, [...(children.get(row.parent_conversation_id) ?? []), row.id]);
      return children;
    });
  }

  private filterSql(userId: string, filter: ConversationFilter, params: Params): string {
    const clauses = [`user_id = ${params.add(userId)}`];
    if (!filter.include_sub_conversations) clauses.push('parent_conversation_id IS NULL');
    if (filter.title_contains !== undefined) clauses.push(`title ILIKE ${params.add(`%${likeEscape(filter.title_contains)}%`)}`);
    if (filter.created_at_gte !== undefined) clauses.push(`created_at >= ${params.add(filter.created_at_gte)}::timestamptz`);
    if (filter.created_at_lt !== undefined) clauses.push(`created_at < ${params.add(filter.created_at_lt)}::timestamptz`);
    if (filter.updated_at_gte !== undefined) clauses.push(`updated_at >= ${params.add(filter.updated_at_gte)}::timestamptz`);
    if (filter.updated_at_lt !== undefined) clauses.push(`updated_at < ${params.add(filter.updated_at_lt)}::timestamptz`);
    if (filter.selected_repository !== undefined) clauses.push(`selected_repository = ${params.add(filter.selected_repository)}`);
    if (filter.trigger !== undefined) clauses.push(`trigger = ${params.add(filter.trigger)}`);
    return clauses.join(' AND ');
  }
}
