import { okAsync, ResultAsync } from 'neverthrow';
import { KeyedQueue } from './keyed-queue.js';
import type { StoreFailure } from './store-failure.js';

/**
 * Mutual exclusion and leadership among the processes that share a store. The sandbox service
 * takes a user's lock around "is there room for one more sandboxes of this user? then record
 * it", so the per-user limit holds however many processes start sandboxes at once; and one
 * process leads the maintenance (idle pause, periodic reconcile) instead of every process.
 *
 * One process needs no more than `InProcessLocks` (the default). Several processes on one
 * PostgreSQL use `createPostgresStorage(...).locks`, whose locks and leaderships are held by a
 * database session, so they end with the process that held them, however it ends.
 */
export interface Locks {
  /**
   * Runs `work` while holding the lock `key`; whoever else asks for the same key (here or in
   * another process) waits until `work` settled. Failing to take the lock (the database is
   * unreachable, or the lock stayed taken for a minute) is a StoreFailure and `work` never ran.
   */
  withLock<T, E>(key: string, work: () => ResultAsync<T, E>): ResultAsync<T, E | StoreFailure>;
  /**
   * Whether `candidate` leads `role`: takes the role when nobody holds it, and keeps it until
   * `resign` or until the process dies. Asked again and again (each maintenance round): true
   * for as long as the role is held by `candidate`.
   */
  lead(role: string, candidate: string): ResultAsync<boolean, StoreFailure>;
  /** Gives a role up (nothing happens unless `candidate` holds it). */
  resign(role: string, candidate: string): ResultAsync<void, StoreFailure>;
}

/**
 * Locks and leaderships within one process: enough for one service, or for several services
 * in one process that share these locks (as tests of replicas do).
 */
export class InProcessLocks implements Locks {
  /** Each key's takers, one after another. */
  readonly #queue = new KeyedQueue();
  readonly #leaders = new Map<string, string>();

  withLock<T, E>(key: string, work: () => ResultAsync<T, E>): ResultAsync<T, E | StoreFailure> {
    return new ResultAsync(this.#queue.run(key, work));
  }

  lead(role: string, candidate: string): ResultAsync<boolean, StoreFailure> {
    const holder = this.#leaders.get(role);
    if (holder === undefined) this.#leaders.set(role, candidate);
    return okAsync((holder ?? candidate) === candidate);
  }

  resign(role: string, candidate: string): ResultAsync<void, StoreFailure> {
    if (this.#leaders.get(role) === candidate) this.#leaders.delete(role);
    return okAsync(undefined);
  }
}
