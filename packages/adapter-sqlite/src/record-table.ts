import { ok, type Result } from 'neverthrow';
import { cloneData } from '@acs/core';
import type { Sqlite, SqliteValue } from './driver.js';
import { jsonList } from './query-helpers.js';

/**
 * A table of user-owned records: the whole record as JSON text in `record`, keyed by
 * (user_id, id), plus copies of the fields queries filter and sort on. Every store of this
 * adapter that keeps such records reads and writes them through here.
 */
export class RecordTable<R extends { id: string; user_id: string }> {
  private readonly insertSql: string;
  /** The UPDATE of each set of changed columns (by bit mask), made when first needed. */
  private readonly updateSql = new Map<number, string>();

  constructor(
    private readonly db: Sqlite,
    readonly name: string,
    /** The copied columns, in order, and how to read them off a record. */
    private readonly columns: { names: readonly string[]; values: (record: R) => SqliteValue[] },
  ) {
    const placeholders = columns.names.map(() => '?');
    this.insertSql = `INSERT INTO ${name} (user_id, id, ${columns.names.map(quote).join(', ')}, record) VALUES (?, ?, ${placeholders.join(', ')}, ?) ON CONFLICT (user_id, id) DO NOTHING`;
  }

  /**
   * Writes `next` over `current`, setting only the copied columns whose value changed: SQLite
   * rewrites the index entries of every column an UPDATE sets, and the agent's per-step update
   * (metrics, updated_at) changes none of the indexed ones, so its commit writes the table's page
   * and no index pages to the WAL.
   */
  private write(userId: string, id: string, current: R, next: R): void {
    const before = this.columns.values(current);
    const after = this.columns.values(next);
    let mask = 0;
    const changed: SqliteValue[] = [];
    after.forEach((value, i) => {
      if (value === before[i]) return;
      mask |= 1 << i;
      changed.push(value);
    });
    let sql = this.updateSql.get(mask);
    if (!sql) {
      const set = this.columns.names.filter((_, i) => mask & (1 << i)).map((c) => `${quote(c)} = ?, `);
      sql = `UPDATE ${this.name} SET ${set.join('')}record = ? WHERE user_id = ? AND id = ?`;
      this.updateSql.set(mask, sql);
    }
    this.db.run(sql, ...changed, JSON.stringify(next), userId, id);
  }

  /** False when this user already has a record with that id (nothing is written then). */
  insert(record: R): boolean {
    return (
      this.db.run(this.insertSql, record.user_id, record.id, ...this.columns.values(record), JSON.stringify(record)) > 0
    );
  }

  get(userId: string, id: string): R | null {
    const row = this.db.get<{ record: string }>(
      `SELECT record FROM ${this.name} WHERE user_id = ? AND id = ?`,
      userId,
      id,
    );
    return row ? (JSON.parse(row.record) as R) : null;
  }

  getMany(userId: string, ids: readonly string[]): (R | null)[] {
    const rows = this.db.all<{ record: string }>(
      `SELECT record FROM ${this.name} WHERE user_id = ? AND id IN (SELECT value FROM json_each(?))`,
      userId,
      jsonList(ids),
    );
    const byId = new Map(rows.map((r) => JSON.parse(r.record) as R).map((r) => [r.id, r]));
    return ids.map((id) => byId.get(id) ?? null);
  }

  /** Runs `mutate` inside one write transaction; writes only when it returns a different record. */
  update<E>(userId: string, id: string, mutate: (current: R) => Result<R, E>): Result<R | null, E> {
    return this.db.transaction(() => {
      const current = this.get(userId, id);
      if (!current) return ok(null);
      const next = mutate(current);
      if (next.isErr() || next.value === current) return next;
      if (next.value.id !== id || next.value.user_id !== userId)
        throw new Error('A store update may not change the id or the owner of a record.');
      this.write(userId, id, current, next.value);
      return ok(cloneData(next.value));
    });
  }

  delete(userId: string, id: string): boolean {
    return this.db.run(`DELETE FROM ${this.name} WHERE user_id = ? AND id = ?`, userId, id) > 0;
  }

  /** Records of a query on this table (`SELECT record FROM … WHERE …`). */
  select(whereAndOrder: string, params: readonly SqliteValue[]): R[] {
    return this.db
      .all<{ record: string }>(`SELECT record FROM ${this.name} WHERE ${whereAndOrder}`, ...params)
      .map((r) => JSON.parse(r.record) as R);
  }
}

/** `trigger` is a keyword of SQLite. */
const quote = (column: string) => `"${column}"`;
