import { ok, type Result } from 'neverthrow';
import { recordKey, type RecordCache } from './record-cache.js';
import type { SqlExecutor } from './sql.js';

/**
 * A table of user-owned records: the whole record as `jsonb` in `record`, keyed by
 * (user_id, id), plus copies of the fields queries filter and sort on. Every store of
 * this adapter that keeps such records reads and writes them through here.
 *
 * With a cache (an exclusive storage: nothing else writes the database), a record read or
 * written once is read from memory, and an update of a held record is one UPDATE instead of a
 * transaction of a locking read and a write.
 */
export class RecordTable<R extends { id: string; user_id: string }> {
  private readonly insertSql: string;
  private readonly updateSql: string;

  constructor(
    private readonly db: SqlExecutor,
    readonly name: string,
    /** The copied columns, in order, and how to read them off a record. */
    private readonly columns: { names: readonly string[]; values: (record: R) => unknown[] },
    private readonly cache: RecordCache<R> | null = null,
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
  insert(record: R): Promise<boolean> {
    const cache = this.cache;
    if (!cache) return this.insertRow(record);
    const key = recordKey(record.user_id, record.id);
    return cache.serially(key, async () => {
      const inserted = await this.insertRow(record);
      if (inserted) cache.set(key, record);
      return inserted;
    });
  }

  private async insertRow(record: R): Promise<boolean> {
    const rows = await this.db.query(
      `${this.insertSql} ON CONFLICT (user_id, id) DO NOTHING RETURNING id`,
      this.params(record),
    );
    return rows.rows.length > 0;
  }

  get(userId: string, id: string): Promise<R | null> {
    const cache = this.cache;
    if (!cache) return this.getRow(userId, id);
    const key = recordKey(userId, id);
    const held = cache.get(key);
    if (held) return Promise.resolve(held);
    return cache.serially(key, async () => {
      const row = await this.getRow(userId, id);
      if (row) cache.set(key, row);
      return row;
    });
  }

  private async getRow(userId: string, id: string): Promise<R | null> {
    const rows = await this.db.query<{ record: R }>(`SELECT record FROM ${this.name} WHERE user_id = $1 AND id = $2`, [
      userId,
      id,
    ]);
    return rows.rows[0]?.record ?? null;
  }

  async getMany(userId: string, ids: readonly string[]): Promise<(R | null)[]> {
    const held = ids.map((id) => this.cache?.get(recordKey(userId, id)));
    const missing = ids.filter((_, i) => held[i] === undefined);
    if (missing.length === 0) return held as R[];
    const rows = await this.db.query<{ record: R }>(
      `SELECT record FROM ${this.name} WHERE user_id = $1 AND id = ANY($2::text[])`,
      [userId, missing],
    );
    const byId = new Map(rows.rows.map((r) => [r.record.id, r.record]));
    return ids.map((id, i) => held[i] ?? byId.get(id) ?? null);
  }

  /** Runs `mutate` on the row locked FOR UPDATE (or on the held record); writes only when it returns a different record. */
  update<E>(userId: string, id: string, mutate: (current: R) => Result<R, E>): Promise<Result<R | null, E>> {
    const cache = this.cache;
    if (!cache) return this.updateRow(userId, id, mutate);
    const key = recordKey(userId, id);
    return cache.serially(key, async () => {
      const held = cache.get(key);
      if (!held) {
        const updated = await this.updateRow(userId, id, mutate);
        if (updated.isOk() && updated.value) cache.set(key, updated.value);
        return updated;
      }
      const next = this.mutated(userId, id, held, mutate);
      if (next.isErr() || next.value === held) return next;
      try {
        await this.db.query(this.updateSql, this.params(next.value));
      } catch (error) {
        cache.delete(key);
        throw error;
      }
      cache.set(key, next.value);
      return ok(next.value);
    });
  }

  private updateRow<E>(userId: string, id: string, mutate: (current: R) => Result<R, E>): Promise<Result<R | null, E>> {
    return this.db.transaction(async (tx) => {
      const rows = await tx.query<{ record: R }>(
        `SELECT record FROM ${this.name} WHERE user_id = $1 AND id = $2 FOR UPDATE`,
        [userId, id],
      );
      const current = rows.rows[0]?.record;
      if (!current) return ok(null);
      const next = this.mutated(userId, id, current, mutate);
      if (next.isErr() || next.value === current) return next;
      await tx.query(this.updateSql, this.params(next.value));
      return ok(next.value);
    });
  }

  private mutated<E>(userId: string, id: string, current: R, mutate: (current: R) => Result<R, E>): Result<R, E> {
    const next = mutate(current);
    if (next.isOk() && next.value !== current && (next.value.id !== id || next.value.user_id !== userId))
      throw new Error('A store update may not change the id or the owner of a record.');
    return next;
  }

  delete(userId: string, id: string): Promise<boolean> {
    const cache = this.cache;
    if (!cache) return this.deleteRow(userId, id);
    const key = recordKey(userId, id);
    return cache.serially(key, () => {
      cache.delete(key);
      return this.deleteRow(userId, id);
    });
  }

  private async deleteRow(userId: string, id: string): Promise<boolean> {
    const rows = await this.db.query(`DELETE FROM ${this.name} WHERE user_id = $1 AND id = $2 RETURNING id`, [
      userId,
      id,
    ]);
    return rows.rows.length > 0;
  }
}
