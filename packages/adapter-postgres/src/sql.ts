/**
 * The little the stores need from a database: parameterised queries and
 * transactions. Implemented over a node-postgres pool and over PGlite, so the same
 * SQL runs on a PostgreSQL server and on the embedded WASM build.
 */
export interface SqlQueryable {
  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<{ rows: R[] }>;
}

export interface SqlExecutor extends SqlQueryable {
  readonly kind: 'pg' | 'pglite';
  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: SqlQueryable) => Promise<T>): Promise<T>;
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

export interface PgClientLike {
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }>;
  release(error?: Error | boolean): void;
}

/** The shape of a PGlite instance we use. */
export interface PGliteLike {
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }>;
  transaction<T>(work: (tx: { query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }> }) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  readonly waitReady: Promise<void>;
}

/** What `createPostgresStorage` accepts as its database. */
export type DatabaseInput = PgPoolLike | PGliteLike | SqlExecutor | string;

const isExecutor = (db: object): db is SqlExecutor => 'kind' in db && 'transaction' in db && 'close' in db && !('waitReady' in db);
const isPGlite = (db: object): db is PGliteLike => 'waitReady' in db && 'transaction' in db;
const isPgPool = (db: object): db is PgPoolLike => 'connect' in db && 'end' in db && 'query' in db;

export function fromPgPool(pool: PgPoolLike, owned = false): SqlExecutor {
  return {
    kind: 'pg',
    query: async <R>(text: string, params: readonly unknown[] = []) => (await pool.query(text, [...params])) as { rows: R[] },
    async transaction(work) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await work({ query: async <R>(text: string, params: readonly unknown[] = []) => (await client.query(text, [...params])) as { rows: R[] } });
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
    close: async () => {
      if (owned) await pool.end();
    },
  };
}

export function fromPGlite(db: PGliteLike, owned = false): SqlExecutor {
  return {
    kind: 'pglite',
    query: async <R>(text: string, params: readonly unknown[] = []) => (await db.query(text, [...params])) as { rows: R[] },
    transaction: (work) => db.transaction((tx) => work({ query: async <R>(text: string, params: readonly unknown[] = []) => (await tx.query(text, [...params])) as { rows: R[] } })),
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
