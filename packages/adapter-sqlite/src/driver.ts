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

/** A database with its statements prepared once and kept, and one-statement transactions. */
export class Sqlite {
  readonly #statements = new Map<string, SqliteStatement>();
  #inTransaction = false;

  constructor(readonly db: SqliteDatabase) {}

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
