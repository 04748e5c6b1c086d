import { ok, type Result } from 'neverthrow';
import type { SqlExecutor } from './sql.js';

/**
 * A table of user-owned records: the whole record as `jsonb` in `record`, keyed by
 * (user_id, id), plus copies of the fields queries filter and sort on. Every store of
 * this adapter that keeps such records reads and writes them through here.
 */
export class RecordTable<R extends { id: string; user_id: string }> {
  private readonly insertSql: string;
  private readonly updateSql: string;

  constructor(
    private readonly db: SqlExecutor,
    readonly name: string,
    /** The copied columns, in order, and how to read them off a record. */
    private readonly columns: { names: readonly string[]; values: (record: R) => unknown[] },
  ) {
    const n = columns.names.length;
    const placeholders = columns.names.map((_, i) => `$${i + 3}`);
    this.insertSql = `INSERT INTO ${name} (user_id, id, ${columns.names.join(', ')}, record) VALUES ($1, $2, ${placeholders.join(', ')}, $${n + 3}::jsonb)`;
    this.updateSql = `UPDATE ${name} SET ${columns.names.map((c, i) => `${c} = ${placeholders[i]}`).join(', ')}, record = $${n + 3}::jsonb WHERE user_id = $1 AND id = $2`;
  }

  private params(record: R): unknown[] {
    return [record.user_id, record.id, ...this.columns.values(record), JSON.stringify(record)];
  }

  /** False when this user already has a record with that id (nothing is written then). */
  async insert(record: R): Promise<boolean> {
    const rows = await this.db.query(
      `${this.insertSql} ON CONFLICT (user_id, id) DO NOTHING RETURNING id`,
      this.params(record),
    );
    return rows.rows.length > 0;
  }

  async get(userId: string, id: string): Promise<R | null> {
    const rows = await this.db.query<{ record: R }>(`SELECT record FROM ${this.name} WHERE user_id = $1 AND id = $2`, [
      userId,
      id,
    ]);
    return rows.rows[0]?.record ?? null;
  }

  async getMany(userId: string, ids: readonly string[]): Promise<(R | null)[]> {
    const rows = await this.db.query<{ record: R }>(
      `SELECT record FROM ${this.name} WHERE user_id = $1 AND id = ANY($2::text[])`,
      [userId, [...ids]],
    );
    const byId = new Map(rows.rows.map((r) => [r.record.id, r.record]));
    return ids.map((id) => byId.get(id) ?? null);
  }

  /** Runs `mutate` on the row locked FOR UPDATE; writes only when it returns a different record. */
  update<E>(userId: string, id: string, mutate: (current: R) => Result<R, E>): Promise<Result<R | null, E>> {
    return this.db.transaction(async (tx) => {
      const rows = await tx.query<{ record: R }>(
        `SELECT record FROM ${this.name} WHERE user_id = $1 AND id = $2 FOR UPDATE`,
        [userId, id],
      );
      const current = rows.rows[0]?.record;
      if (!current) return ok(null);
      const next = mutate(current);
      if (next.isErr() || next.value === current) return next;
      if (next.value.id !== id || next.value.user_id !== userId)
        throw new Error('A store update may not change the id or the owner of a record.');
      await tx.query(this.updateSql, this.params(next.value));
      return ok(next.value);
    });
  }

  async delete(userId: string, id: string): Promise<boolean> {
    const rows = await this.db.query(`DELETE FROM ${this.name} WHERE user_id = $1 AND id = $2 RETURNING id`, [
      userId,
      id,
    ]);
    return rows.rows.length > 0;
  }
}
