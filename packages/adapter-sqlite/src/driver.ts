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
    throw new Error(
      `node:sqlite is not available in Node ${process.versions.node} (it needs Node 22.13 or later); or pass a better-sqlite3 Database as \`db\``,
      {
        cause: error,
      },
    );
  });
  return new sqlite.DatabaseSync(path);
}

/**
 * How long store calls may run back to back before the event loop gets a turn. A call is never
 * cut short; this bounds how long a new connection waits to be accepted (Node accepts one per
 * turn) while the database is busy.
 */
const SLICE_MS = 2;

/** The most store calls one commit carries. */
const MAX_GROUP = 64;

interface Queued {
  work: () => unknown;
  settle: (outcome: { ok: true; value: unknown } | { ok: false; error: unknown }) => void;
  /** Runs outside any transaction (closing the database). */
  alone: boolean;
}

/**
 * A database with its statements prepared once and kept, and store calls run in turns and
 * committed in groups.
 *
 * Turns: store calls run one after another, in arrival order, never for more than SLICE_MS
 * without a turn of the event loop between them. The driver is synchronous, while the promises
 * of a store call settle without going back to the event loop: callers that await one call after
 * another would otherwise run in a single turn, however long the backlog (in the storage
 * benchmark's mixed load the event loop's delay reached p99 438 ms that way). The same reason,
 * and the same remedy, as the PGlite executor of @acs/adapter-postgres.
 *
 * Groups: a call waits for the end of the event loop's turn (setImmediate), so the calls made by
 * everything that turn ran (each answer of a model, each request) queue together; the calls
 * waiting when a drain starts run inside one write transaction, each in a
 * savepoint of its own (a call that throws is rolled back alone and fails alone), and are
 * answered after its COMMIT: one fsync for the group instead of one per call. A write is still
 * acknowledged only once it is durable (synchronous=FULL). With 200 conversations stepping at
 * once, a commit per write queued the whole service behind the disk (issue 27: event loop 100%
 * busy at 14% CPU); a group commit is how databases answer that.
 */
export class Sqlite {
  readonly #statements = new Map<string, SqliteStatement>();
  readonly #queue: Queued[] = [];
  #draining = false;
  /** When the calls of the current turn started; null once the event loop has turned since. */
  #sliceStarted: number | null = null;
  #inTransaction = false;
  /** Inside a group's transaction: transaction() makes a savepoint instead. */
  #inGroup = false;
  #savepoints = 0;

  constructor(readonly db: SqliteDatabase) {}

  /** Runs one store call whole, in its turn, committed with the others of its group. */
  call<T>(work: () => T): Promise<T> {
    return this.#enqueue(work, false);
  }

  /** Runs `work` in its turn, after the calls before it are committed and outside any transaction (closing the database). */
  callAlone<T>(work: () => T): Promise<T> {
    return this.#enqueue(work, true);
  }

  #enqueue<T>(work: () => T, alone: boolean): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      // A call that failed rejects with what its work threw, as it was thrown (the store's run() turns it into a StoreFailure).
      this.#queue.push({
        work,
        alone,
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
        settle: (outcome) => (outcome.ok ? resolve(outcome.value as T) : reject(outcome.error)),
      });
      if (this.#draining) return;
      // After the I/O callbacks of this turn of the event loop: the calls they make join one group.
      this.#draining = true;
      setImmediate(() => this.#drain());
    });
  }

  #drain(): void {
    this.#draining = true;
    while (this.#queue.length > 0) {
      // The budget spans drains: a caller that awaits one call after another finds the queue
      // empty in between, and must still not keep the turn to itself.
      if (this.#sliceStarted !== null && performance.now() - this.#sliceStarted >= SLICE_MS) {
        setImmediate(() => this.#drain());
        return;
      }
      if (this.#sliceStarted === null) {
        this.#sliceStarted = performance.now();
        setImmediate(() => {
          this.#sliceStarted = null;
        });
      }
      if (this.#queue[0]!.alone) this.#runAlone(this.#queue.shift()!);
      else this.#runGroup(this.#takeGroup());
    }
    this.#draining = false;
  }

  #takeGroup(): Queued[] {
    let n = 0;
    while (n < this.#queue.length && n < MAX_GROUP && !this.#queue[n]!.alone) n++;
    return this.#queue.splice(0, n);
  }

  #runAlone(call: Queued): void {
    try {
      call.settle({ ok: true, value: call.work() });
    } catch (error) {
      call.settle({ ok: false, error });
    }
  }

  #runGroup(group: Queued[]): void {
    if (group.length === 1) {
      // Alone in its turn: its statements commit as they would on their own (no savepoint needed).
      this.#runAlone(group[0]!);
      return;
    }
    try {
      this.db.exec('BEGIN IMMEDIATE');
    } catch {
      // The write lock is not to be had (another connection held it past busy_timeout): each call on its own.
      for (const call of group) this.#runAlone(call);
      return;
    }
    this.#inGroup = true;
    const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    try {
      for (const call of group) {
        this.db.exec('SAVEPOINT acs_call');
        try {
          const value = call.work();
          this.db.exec('RELEASE acs_call');
          outcomes.push({ ok: true, value });
        } catch (error) {
          this.db.exec('ROLLBACK TO acs_call');
          this.db.exec('RELEASE acs_call');
          outcomes.push({ ok: false, error });
        }
      }
      this.db.exec('COMMIT');
    } catch (error) {
      // The commit (or a savepoint) failed: nothing of the group is durable, so every call fails.
      this.#inGroup = false;
      try {
        this.db.exec('ROLLBACK');
      } catch {
        // Already rolled back by SQLite.
      }
      for (const call of group) call.settle({ ok: false, error });
      return;
    }
    this.#inGroup = false;
    group.forEach((call, i) => call.settle(outcomes[i]!));
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
   * when it throws. Inside a store call of a group (see the class), a savepoint of the group's
   * transaction: rolled back alone when `work` throws, durable with the group's commit.
   */
  transaction<T>(work: () => T): T {
    if (this.#inTransaction) throw new Error('A SQLite transaction does not nest.');
    if (this.#inGroup) return this.#savepoint(work);
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

  /** A transaction inside a group's: a savepoint, rolled back alone when `work` throws. */
  #savepoint<T>(work: () => T): T {
    const name = `acs_tx_${++this.#savepoints}`;
    this.#inTransaction = true;
    this.db.exec(`SAVEPOINT ${name}`);
    try {
      const result = work();
      this.db.exec(`RELEASE ${name}`);
      return result;
    } catch (error) {
      this.db.exec(`ROLLBACK TO ${name}`);
      this.db.exec(`RELEASE ${name}`);
      throw error;
    } finally {
      this.#inTransaction = false;
    }
  }
}
