import { afterAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { ResultAsync } from 'neverthrow';
import { describeLocksContract } from '@acs/core/testing';
import { InProcessLocks } from '@acs/core/ports';
import { createPostgresStorage, fromPgPool, PostgresLocks } from '@acs/adapter-postgres';
import { DATABASE_URL, freshSchema, postgresDatabase, testCipher } from './databases.js';

const pools: pg.Pool[] = [];
const made: PostgresLocks[] = [];
/** Locks over a pool of their own; closed after the file (a role held keeps its connection until then). */
const locksOn = (pool: pg.Pool, namespace: string) => {
  const locks = new PostgresLocks(fromPgPool(pool), { namespace });
  made.push(locks);
  return locks;
};
/** A pool of its own, as a process of its own would have. */
const poolOf = (max: number) => {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max });
  pool.on('error', () => {});
  pools.push(pool);
  return pool;
};

describeLocksContract(
  'postgres',
  () => {
    const namespace = `t${Math.random()}`;
    const first = locksOn(poolOf(4), namespace);
    const second = locksOn(poolOf(4), namespace);
    return Promise.resolve({ first, second, endFirst: () => Promise.resolve(first.close()) });
  },
  { processes: true },
);

describe('PostgresLocks', () => {
  it('never deadlocks the pool: holders whose work needs the pool go on however many wait', async () => {
    // Two connections in all: one for the locks' session, one for the work. Waiters hold none.
    const pool = poolOf(2);
    const locks = new PostgresLocks(fromPgPool(pool), { namespace: `t${Math.random()}` });
    const work = (n: number) => () =>
      ResultAsync.fromSafePromise(pool.query<{ n: number }>('SELECT $1::int AS n', [n]).then((r) => r.rows[0]!.n));
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, n) => locks.withLock(n % 3 === 0 ? 'shared' : `own ${n}`, work(n))),
    );
    expect(results.map((r) => r._unsafeUnwrap())).toEqual(Array.from({ length: 30 }, (_, n) => n));
    // Nothing held: the session went back to the pool.
    expect(pool.totalCount - pool.idleCount).toBe(0);
    locks.close();
  });

  it('keeps installations in different schemas apart: each leads its own maintenance', async () => {
    await postgresDatabase.executor();
    const one = await createPostgresStorage({
      db: fromPgPool(poolOf(3)),
      cipher: testCipher(),
      schema: freshSchema(postgresDatabase),
      migrations: 'auto',
    });
    const two = await createPostgresStorage({
      db: fromPgPool(poolOf(3)),
      cipher: testCipher(),
      schema: freshSchema(postgresDatabase),
      migrations: 'auto',
    });
    expect((await one.locks.lead('maintenance', 'A'))._unsafeUnwrap()).toBe(true);
    expect((await two.locks.lead('maintenance', 'B'))._unsafeUnwrap()).toBe(true);
    await one.close();
    await two.close();
  });

  it('on PGlite, storage gives in-process locks (PGlite is one process)', async () => {
    const { PGlite } = await import('@electric-sql/pglite');
    const pglite = await PGlite.create();
    const storage = await createPostgresStorage({ db: pglite, cipher: testCipher(), migrations: 'auto' });
    expect(storage.locks).toBeInstanceOf(InProcessLocks);
    await pglite.close();
  });
});

afterAll(async () => {
  for (const locks of made.splice(0)) locks.close();
  for (const pool of pools.splice(0)) await pool.end();
});
