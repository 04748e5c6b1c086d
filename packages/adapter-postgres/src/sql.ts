/**
 * The little the stores need from a database: parameterised queries and
 * transactions. Implemented over a node-postgres pool and over PGlite, so the same
 * SQL runs on a PostgreSQL server and on the embedded WASM build.
 */
export interface SqlQueryable {
  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<{ rows: R[] }>;
}

/** A connection of its own until released: what session-level state (advisory locks) lives on. */
export interface SqlSession extends SqlQueryable {
  /** Called once if the connection breaks (everything held on it is gone then). */
  onLost(listener: (error: Error) => void): void;
  /** Gives the connection back to the pool; only once nothing is held on it any more. */
  release(): void;
  /** Closes the connection (not back to the pool): whatever it held ends with it. */
  end(): void;
}

export interface SqlExecutor extends SqlQueryable {
  readonly kind: 'pg' | 'pglite';
  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: SqlQueryable) => Promise<T>): Promise<T>;
  /** A dedicated connection (PostgreSQL servers only; PGlite is one connection already). */
  session?(): Promise<SqlSession>;
  /** Closes the connection only if this executor opened it (a host's pool or PGlite stays open). */
  close(): Promise<void>;
}

/** The shape of a node-postgres `Pool` we use (structural, so pg stays an optional peer). */
export interface PgPoolLike {
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }>;
  connect(): Promise<PgClientLike>;
  end(): Promise<void>;
  on?(event: 'error', listener: (error: Error) => void): unknown;
}

interface PgClientLike {
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }>;
  release(error?: Error | boolean): void;
  on?(event: 'error', listener: (error: Error) => void): unknown;
  off?(event: 'error', listener: (error: Error) => void): unknown;
}

/** The shape of a PGlite instance we use. */
export interface PGliteLike {
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }>;
  transaction<T>(
    work: (tx: { query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }> }) => Promise<T>,
  ): Promise<T>;
  close(): Promise<void>;
  readonly waitReady: Promise<void>;
}

/** What `createPostgresStorage` accepts as its database. */
export type DatabaseInput = PgPoolLike | PGliteLike | SqlExecutor | string;

const isExecutor = (db: object): db is SqlExecutor =>
  'kind' in db && 'transaction' in db && 'close' in db && !('waitReady' in db);
const isPGlite = (db: object): db is PGliteLike => 'waitReady' in db && 'transaction' in db;
const isPgPool = (db: object): db is PgPoolLike => 'connect' in db && 'end' in db && 'query' in db;

export function fromPgPool(pool: PgPoolLike, owned = false): SqlExecutor {
  return {
    kind: 'pg',
    query: async <R>(text: string, params: readonly unknown[] = []) =>
      (await pool.query(text, [...params])) as { rows: R[] },
    async transaction(work) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await work({
          query: async <R>(text: string, params: readonly unknown[] = []) =>
            (await client.query(text, [...params])) as { rows: R[] },
        });
        await client.query('COMMIT');
        client.release();
        return result;
      } catch (error) {
        try {
          await client.query('ROLLBACK');
          client.release();
        } catch {
          client.release(true);
        }
        throw error;
      }
    },
    async session() {
      const client = await pool.connect();
      let lost: ((error: Error) => void) | null = null;
      let ended = false;
      let turn: Promise<void> = Promise.resolve();
      // A checked-out client that loses its connection emits 'error': without a listener that would end the process.
      const onError = (error: Error) => {
        if (ended) return;
        ended = true;
        client.off?.('error', onError);
        lost?.(error);
        client.release(error);
      };
      client.on?.('error', onError);
      return {
        // One statement at a time on the connection (node-postgres would queue them too, but that is deprecated).
        query: <R>(text: string, params: readonly unknown[] = []) => {
          const result = turn.then(() => client.query(text, [...params]) as Promise<{ rows: R[] }>);
          turn = result.then(
            () => undefined,
            () => undefined,
          );
          return result;
        },
        onLost: (listener) => {
          lost = listener;
        },
        release: () => {
          if (ended) return;
          ended = true;
          client.off?.('error', onError);
          client.release();
        },
        end: () => {
          if (ended) return;
          ended = true;
          client.off?.('error', onError);
          client.release(true);
        },
      };
    },
    close: async () => {
      if (owned) await pool.end();
    },
  };
}

import { PGliteStatements } from './pglite-statements.js';

/**
 * How long PGlite may run statements before the event loop gets a turn. Node accepts one new
 * connection per turn of its event loop, so this bounds how long a new request waits to be
 * accepted while the database is busy. A statement (or a transaction) is never cut short.
 */
const PGLITE_SLICE_MS = 2;

/**
 * The statements and transactions of one PGlite instance, run one after another in arrival
 * order, never for longer than PGLITE_SLICE_MS without a turn of the event loop in between.
 *
 * PGlite executes SQL synchronously on the calling thread (WASM), and its promises settle
 * without going back to the event loop. With a database server every statement waits for a
 * socket, so the event loop runs between statements; with PGlite, callers that await one
 * statement after another, and everything their continuations start (start pipelines, status
 * polls, event appends, the statements of other requests) all ran in a single turn, however
 * long the backlog. Under mixed load those turns grew to hundreds of ms, and as Node accepts one
 * new connection per turn, 50 requests on new connections waited 5–12 s and more before their
 * first line of JavaScript ran (no log line, no record), while requests on open keep-alive
 * connections went on being served. Here the backlog runs in slices with a turn of the event
 * loop (setImmediate) between them, as it would with a socket.
 */
class PGliteTurns {
  readonly #queue: (() => Promise<void>)[] = [];
  #draining = false;
  /** When the statements of the current turn started; null once the event loop has turned since. */
  #sliceStarted: number | null = null;

  run<T>(work: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queue.push(() => {
        const done = new Promise<T>((settle) => settle(work()));
        done.then(resolve, reject);
        return done.then(
          () => undefined,
          () => undefined,
        );
      });
      if (!this.#draining) void this.#drain();
    });
  }

  async #drain(): Promise<void> {
    this.#draining = true;
    try {
      for (let next = this.#queue.shift(); next; next = this.#queue.shift()) {
        // The budget spans drains: a caller that awaits one statement after another may find
        // the queue empty in between, and must still not keep the turn to itself.
        if (this.#sliceStarted !== null && performance.now() - this.#sliceStarted >= PGLITE_SLICE_MS) {
          await new Promise<void>((resolve) => setImmediate(resolve));
        }
        if (this.#sliceStarted === null) {
          this.#sliceStarted = performance.now();
          setImmediate(() => {
            this.#sliceStarted = null;
          });
        }
        await next();
      }
    } finally {
      this.#draining = false;
    }
  }
}

/** One queue (and one set of prepared statements) per PGlite instance, shared by every executor made from it. */
const pgliteTurns = new WeakMap<PGliteLike, { queue: PGliteTurns; statements: PGliteStatements | null }>();

export function fromPGlite(db: PGliteLike, owned = false): SqlExecutor {
  const shared = pgliteTurns.get(db) ?? {
    queue: new PGliteTurns(),
    statements: PGliteStatements.supported(db) ? new PGliteStatements(db) : null,
  };
  pgliteTurns.set(db, shared);
  const { queue, statements } = shared;
  return {
    kind: 'pglite',
    // A statement with parameters is one the stores run again and again: prepared once, then one
    // call into PGlite each time. Those without (DDL, the migrations) go through PGlite's query.
    query: <R>(text: string, params: readonly unknown[] = []) =>
      queue.run(async () =>
        statements && params.length > 0
          ? statements.query<R>(text, params)
          : ((await db.query(text, [...params])) as { rows: R[] }),
      ),
    // The whole transaction is one entry: its statements (on `tx`) run inside it, never queued
    // behind it. (A statement on this executor from inside `work` would wait for the transaction
    // to end, forever, as it would on PGlite itself: transactions use `tx` only.)
    transaction: (work) =>
      queue.run(() =>
        db.transaction((tx) =>
          work({
            query: async <R>(text: string, params: readonly unknown[] = []) =>
              (await tx.query(text, [...params])) as { rows: R[] },
          }),
        ),
      ),
    close: async () => {
      if (owned) await db.close();
    },
  };
}

/** A pg.Pool, a PGlite instance, an executor, or a connection string (a pool is created and owned). */
export async function toExecutor(db: DatabaseInput): Promise<SqlExecutor> {
  if (typeof db === 'string') {
    const pg = await import('pg').catch(() => {
      throw new Error('A connection string needs the "pg" package: npm install pg');
    });
    const pool = new pg.default.Pool({ connectionString: db, max: 10 });
    // An idle client that loses its connection must not crash the process.
    pool.on('error', () => {});
    return fromPgPool(pool, true);
  }
  if (isExecutor(db)) return db;
  if (isPGlite(db)) {
    await db.waitReady;
    return fromPGlite(db);
  }
  if (isPgPool(db)) return fromPgPool(db);
  throw new Error('createPostgresStorage: `db` must be a pg.Pool, a PGlite instance or a connection string.');
}
