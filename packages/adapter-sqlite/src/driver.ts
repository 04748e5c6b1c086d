/**
 * The little the stores need from a SQLite driver, structurally: Node's built-in `node:sqlite`
 * (`DatabaseSync`) has this shape, and so has a better-sqlite3 `Database`, so a host may pass
 * either. Every call is synchronous; the stores keep each one short.
 */
export type SqliteValue = string | number | bigint | null | Uint8Array;

export interface SqliteStatement {
  run(...params: SqliteValue[]): { changes: number | bigint };
  get(...params: SqliteValue[]): unknown;
  all(...params: SqliteValue[]): unknown[];
}

export interface SqliteDatabase {
  exec(sql: string): unknown;
  prepare(sql: string): SqliteStatement;
  close(): unknown;
}

/**
 * Opens (creating it if missing) the database file at `path` with Node's built-in `node:sqlite`,
 * imported only here, so a host that passes its own driver never loads it. Node 22.13 and later
 * have it unflagged; Node 22 prints an ExperimentalWarning the first time it is loaded.
 */
export async function openNodeSqlite(path: string): Promise<SqliteDatabase> {
  const sqlite = await import('node:sqlite').catch((error: unknown) => {
    throw new Error(`node:sqlite is not available in Node ${process.versions.node} (it needs Node 22.13 or later); or pass a better-sqlite3 Database as \`db\``, {
      cause: error,
    });
  });
  return new sqlite.DatabaseSync(path);
}

/**
 * How long store calls may run back to back before the event loop gets a turn. A call is never
 * cut short; this bounds how long a new connection waits to be accepted (Node accepts one per
 * turn) while the database is busy.
 */
const SLICE_MS = 2;

/**
 * Store calls run one after another, in arrival order, never for more than SLICE_MS without a
 * turn of the event loop between them. The driver is synchronous and a durable commit waits for
 * its fsync on the calling thread, while the promises of a store call settle without going back
 * to the event loop: callers that await one call after another, and everything their
 * continuations start, would otherwise run in a single turn, however long the backlog (in the
 * storage benchmark's mixed load the event loop's delay reached p99 438 ms that way). The same
 * reason, and the same remedy, as the PGlite executor of @acs/adapter-postgres.
 */
class Turns {
  readonly #queue: (() => void)[] = [];
  #draining = false;
  /** When the calls of the current turn started; null once the event loop has turned since. */
  #sliceStarted: number | null = null;

  run<T>(work: () => T): Promise<T> {
    return new Promise<T>((resolve) => {
      // The work runs now, in the drain; a throw rejects the promise resolve adopts.
      this.#queue.push(() => resolve(new Promise<T>((settle) => settle(work()))));
      if (!this.#draining) this.#drain();
    });
  }

  #drain(): void {
    this.#draining = true;
    for (let next = this.#queue.shift(); next; next = this.#queue.shift()) {
      // The budget spans drains: a caller that awaits one call after another finds the queue
      // empty in between, and must still not keep the turn to itself.
      if (this.#sliceStarted !== null && performance.now() - this.#sliceStarted >= SLICE_MS) {
        this.#queue.unshift(next);
        setImmediate(() => this.#drain());
        return;
      }
      if (this.#sliceStarted === null) {
        this.#sliceStarted = performance.now();
        setImmediate(() => {
          this.#sliceStarted = null;
        });
      }
      next();
    }
    this.#draining = false;
  }
}

/** A database with its statements prepared once and kept, one-statement transactions, and store calls in turns. */
export class Sqlite {
  readonly #statements = new Map<string, SqliteStatement>();
  readonly #turns = new Turns();
  #inTransaction = false;

  constructor(readonly db: SqliteDatabase) {}

  /** Runs one store call whole, in its turn (see Turns). */
  call<T>(work: () => T): Promise<T> {
    return this.#turns.run(work);
  }

  statement(sql: string): SqliteStatement {
    let prepared = this.#statements.get(sql);
    if (!prepared) this.#statements.set(sql, (prepared = this.db.prepare(sql)));
    return prepared;
  }

  run(sql: string, ...params: SqliteValue[]): number {
    return Number(this.statement(sql).run(...params).changes);
  }

  get<R>(sql: string, ...params: SqliteValue[]): R | undefined {
    return (this.statement(sql).get(...params) as R | undefined) ?? undefined;
  }

  all<R>(sql: string, ...params: SqliteValue[]): R[] {
    return this.statement(sql).all(...params) as R[];
  }

  /**
   * Runs `work` in one write transaction (BEGIN IMMEDIATE: the file's write lock is taken at
   * once, waiting up to busy_timeout for another connection). `work` is synchronous, so no other
   * store call of this process runs in between: the transaction is atomic and isolated by
   * construction. Committed when `work` returns (durable then: synchronous=FULL), rolled back
   * when it throws.
   */
  transaction<T>(work: () => T): T {
    if (this.#inTransaction) throw new Error('A SQLite transaction does not nest.');
    this.#inTransaction = true;
    try {
      this.db.exec('BEGIN IMMEDIATE');
      try {
        const result = work();
        this.db.exec('COMMIT');
        return result;
      } catch (error) {
        try {
          this.db.exec('ROLLBACK');
        } catch {
          // The transaction is gone already (SQLite rolled it back on its own error).
        }
        throw error;
      }
    } finally {
      this.#inTransaction = false;
    }
  }
}
