/**
 * Work queued per key: the work of one key runs one after another, in arrival order (also after
 * a failure), while other keys go on at once. A key is forgotten once its queue is empty, so the
 * queue holds only the keys with work pending. `InProcessLocks` and the record caches of the SQL
 * adapters order their work with it.
 */
export class KeyedQueue {
  /** The tail of each key's queue: the next work of that key starts once it has settled. */
  readonly #tails = new Map<string, Promise<unknown>>();

  /** Runs `work` once every earlier work of `key` has settled (whether or not it failed). */
  run<T>(key: string, work: () => PromiseLike<T>): Promise<T> {
    const before = this.#tails.get(key) ?? Promise.resolve();
    const result = before.then(work);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }

  /** Keys with work queued or running. */
  get size(): number {
    return this.#tails.size;
  }
}
