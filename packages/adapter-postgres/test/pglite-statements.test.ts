import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromPGlite, type SqlExecutor } from '@acs/adapter-postgres';

/**
 * Statements with parameters run on PGlite as named prepared statements, one call into it each
 * (src/pglite-statements.ts). What a caller sees must be what PGlite's own `query` gives.
 */
describe('prepared statements on PGlite', () => {
  let pglite: PGlite;
  let db: SqlExecutor;
  let calls = 0;

  beforeAll(async () => {
    pglite = await PGlite.create();
    const execProtocol = pglite.execProtocol.bind(pglite);
    pglite.execProtocol = (...args: Parameters<typeof execProtocol>) => {
      calls++;
      return execProtocol(...args);
    };
    db = fromPGlite(pglite);
    await db.query(`CREATE TABLE things (id integer PRIMARY KEY, name text, tags text[], body jsonb, at timestamptz)`);
  });
  afterAll(async () => {
    await pglite.close();
  });

  it('reads and writes every kind of value the stores use as PGlite itself does', async () => {
    const row = [
      1,
      'one',
      ['a', 'b,c', 'd"e'],
      { nested: { list: [1, 2] }, text: 'ü\u2028' },
      '2026-01-02T03:04:05.000Z',
    ];
    await db.query(`INSERT INTO things VALUES ($1, $2, $3, $4::jsonb, $5)`, [
      row[0],
      row[1],
      row[2],
      JSON.stringify(row[3]),
      row[4],
    ]);
    await db.query(`INSERT INTO things VALUES ($1, $2, $3, $4::jsonb, $5)`, [2, null, null, null, null]);
    const select = `SELECT id, name, tags, body, at, id * 2 AS twice FROM things WHERE id = ANY($1::int[]) ORDER BY id`;
    const ours = await db.query(select, [[1, 2]]);
    const theirs = await pglite.query(select, [[1, 2]]);
    expect(ours.rows).toEqual(theirs.rows);
    expect(ours.rows[0]).toMatchObject({ id: 1, name: 'one', tags: ['a', 'b,c', 'd"e'], body: row[3], twice: 2 });
    expect(ours.rows[1]).toMatchObject({ id: 2, name: null, tags: null, body: null, at: null });
  });

  it('prepares a text once: from then on a statement is one call into PGlite', async () => {
    const text = `SELECT name FROM things WHERE id = $1`;
    await db.query(text, [1]);
    const before = calls;
    for (let i = 0; i < 10; i++) expect((await db.query(text, [1])).rows).toEqual([{ name: 'one' }]);
    expect(calls - before).toBe(10);
  });

  it("gives a statement's error with its SQLSTATE, and the next statement runs", async () => {
    const insert = `INSERT INTO things (id, name) VALUES ($1, $2)`;
    const failed = await db.query(insert, [1, 'again']).then(
      () => null,
      (error: unknown) => error as { code?: string; message: string },
    );
    expect(failed?.code).toBe('23505');
    expect(failed?.message).toMatch(/duplicate key/);
    await db.query(insert, [3, 'three']);
    expect((await db.query(`SELECT name FROM things WHERE id = $1`, [3])).rows).toEqual([{ name: 'three' }]);
  });

  it('prepares a text again when the table under it changed the shape of its rows', async () => {
    const text = `SELECT * FROM things WHERE id = $1`;
    expect(Object.keys((await db.query<Record<string, unknown>>(text, [1])).rows[0]!)).not.toContain('extra');
    await db.query(`ALTER TABLE things ADD COLUMN extra text DEFAULT 'x'`);
    expect((await db.query<Record<string, unknown>>(text, [1])).rows[0]).toMatchObject({ id: 1, extra: 'x' });
  });

  it('keeps at most 256 texts prepared, closing the least recently used', async () => {
    for (let i = 0; i < 300; i++) await db.query(`SELECT $1::int + ${i} AS n`, [1]);
    const prepared = await pglite.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_prepared_statements`);
    expect(prepared.rows[0]!.n).toBeLessThanOrEqual(256);
    expect((await db.query(`SELECT $1::int + 299 AS n`, [1])).rows).toEqual([{ n: 300 }]);
    expect((await db.query(`SELECT $1::int + 0 AS n`, [1])).rows).toEqual([{ n: 1 }]);
  });

  it('runs a statement without parameters (DDL, migrations) through PGlite as it is', async () => {
    const before = calls;
    await db.query(`CREATE TABLE plain (id integer)`);
    expect(calls).toBe(before);
  });
});
