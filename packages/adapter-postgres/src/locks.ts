import { err, okAsync, type Result, type ResultAsync } from 'neverthrow';
import { InProcessLocks, resultAsync, type Locks, type StoreFailure } from '@acs/core/ports';
import { run } from './query-helpers.js';
import type { SqlExecutor, SqlSession } from './sql.js';

export interface PostgresLocksOptions {
  /** How long `withLock` waits for a lock another process holds before it fails. Default 60 s. */
  waitMs?: number;
  /** Names of one installation's locks (e.g. its schema); installations sharing a database keep theirs apart. */
  namespace?: string;
}

/**
 * The Locks port on PostgreSQL session advisory locks. Whatever a process holds (a lock, a
 * role) is held by one connection of its own, so it ends with the process however the process
 * ends (a crash closes the connection); nothing is left to expire.
 *
 * - One connection per process at most, taken from the pool while something is held or asked
 *   for, and given back when nothing is (so a process that leads nothing and locks nothing
 *   keeps no connection).
 * - `pg_try_advisory_lock`, polled, rather than a blocking lock: a waiter blocked in the
 *   database would keep a pool connection, and with enough waiters the holder's own work could
 *   not get one (a deadlock in the pool). Here the work uses the pool as usual.
 * - This process's own takers of one key queue in memory first: advisory locks are re-entrant
 *   within a session, so two takers here would both get it.
 */
export class PostgresLocks implements Locks {
  readonly #db: SqlExecutor;
  readonly #waitMs: number;
  readonly #namespace: string;
  /** One taker per key (or role) at a time in this process. */
  readonly #local = new InProcessLocks();
  /** Roles this session holds, and for which candidate. */
  readonly #leaders = new Map<string, string>();
  #session: Promise<SqlSession> | null = null;
  /** Locks and roles held on the session, and tries under way: the session goes back to the pool at 0. */
  #uses = 0;
  #closed = false;

  constructor(db: SqlExecutor, options: PostgresLocksOptions = {}) {
    if (!db.session)
      throw new Error(
        'PostgresLocks needs a PostgreSQL server (a pool); PGlite is one process, where InProcessLocks do.',
      );
    this.#db = db;
    this.#waitMs = options.waitMs ?? 60_000;
    this.#namespace = options.namespace ?? '';
  }

  withLock<T, E>(key: string, work: () => ResultAsync<T, E>): ResultAsync<T, E | StoreFailure> {
    const id = this.#id('lock', key);
    return this.#local.withLock(`lock ${key}`, () => resultAsync(this.#underLock(id, key, work)));
  }

  lead(role: string, candidate: string): ResultAsync<boolean, StoreFailure> {
    return this.#local.withLock(`role ${role}`, () => {
      const holder = this.#leaders.get(role);
      if (holder !== undefined) return okAsync(holder === candidate);
      return run('lead', async () => {
        const session = await this.#use();
        let got = false;
        try {
          got = await this.#tryLock(session, this.#id('role', role));
        } finally {
          // Held: the role keeps its use of the session (unless the session was lost while we asked).
          if (got && this.#session && (await this.#session) === session) this.#leaders.set(role, candidate);
          else this.#done();
        }
        return this.#leaders.get(role) === candidate;
      });
    });
  }

  resign(role: string, candidate: string): ResultAsync<void, StoreFailure> {
    return this.#local.withLock(`role ${role}`, () =>
      run('resign', async () => {
        if (this.#leaders.get(role) !== candidate || !this.#session) return;
        this.#leaders.delete(role);
        const session = await this.#session;
        try {
          await session.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [this.#id('role', role)]);
        } finally {
          this.#done();
        }
      }),
    );
  }

  /** Ends the session: every lock and role this process held is free for others at once. */
  close(): void {
    this.#closed = true;
    const session = this.#session;
    this.#session = null;
    this.#leaders.clear();
    void session?.then((s) => s.end()).catch(() => undefined);
  }

  #id(kind: 'lock' | 'role', name: string): string {
    return `acs:${this.#namespace}:${kind}:${name}`;
  }

  /** Polls for the lock until it is this session's (then it keeps a use of the session), or fails after `waitMs`. */
  /** Takes the advisory lock, runs `work`, and lets the lock go whatever `work` did. */
  async #underLock<T, E>(id: string, key: string, work: () => ResultAsync<T, E>): Promise<Result<T, E | StoreFailure>> {
    const session = await this.#take(id, key);
    if (session.isErr()) return err(session.error);
    try {
      return await work();
    } finally {
      // A session that was lost meanwhile released it already.
      await session.value.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [id]).catch(() => undefined);
      this.#done();
    }
  }

  #take(id: string, key: string): ResultAsync<SqlSession, StoreFailure> {
    return run('take lock', async () => {
      const deadline = Date.now() + this.#waitMs;
      for (let attempt = 0; ; attempt++) {
        const session = await this.#use();
        let got = false;
        try {
          got = await this.#tryLock(session, id);
        } finally {
          if (!got) this.#done();
        }
        if (got) return session;
        if (Date.now() >= deadline) break;
        const backoff = Math.min(100, 5 * 2 ** attempt);
        await new Promise((resolve) => setTimeout(resolve, backoff / 2 + Math.random() * (backoff / 2)));
      }
      throw new Error(`the lock "${key}" stayed taken by another process for ${Math.round(this.#waitMs / 1000)} s`);
    });
  }

  async #tryLock(session: SqlSession, id: string): Promise<boolean> {
    const rows = await session.query<{ got: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS got', [
      id,
    ]);
    return rows.rows[0]?.got === true;
  }

  /** The session, counted as used until `#done()`. */
  async #use(): Promise<SqlSession> {
    if (this.#closed) throw new Error('these locks were closed');
    this.#uses++;
    if (!this.#session) {
      const opening: Promise<SqlSession> = this.#db.session!().then((session) => {
        session.onLost(() => {
          if (this.#session !== opening) return;
          // Everything this session held is gone, the roles too (and their uses with them).
          this.#session = null;
          this.#uses -= this.#leaders.size;
          this.#leaders.clear();
        });
        return session;
      });
      this.#session = opening;
    }
    const opening = this.#session;
    try {
      return await opening;
    } catch (error) {
      if (this.#session === opening) this.#session = null;
      this.#uses--;
      throw error;
    }
  }

  #done(): void {
    this.#uses--;
    if (this.#uses > 0 || !this.#session) return;
    const idle = this.#session;
    this.#session = null;
    void idle.then((s) => s.release()).catch(() => undefined);
  }
}
