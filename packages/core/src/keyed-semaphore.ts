/**
 * At most `limit` pieces of work per key at once; more wait their turn, in arrival order, while
 * other keys go on. The agent keeps each user to a few model calls at a time with it, so one
 * user's hundred conversations take turns instead of taking the server. A key is forgotten
 * once nothing of it runs or waits.
 */
export class KeyedSemaphore {
  readonly #keys = new Map<string, { running: number; waiting: (() => void)[] }>();

  constructor(readonly limit: number) {
    if (!(Number.isInteger(limit) && limit > 0)) throw new Error('A KeyedSemaphore needs a positive integer limit.');
  }

  /**
   * Runs `work` once the key has a free place; resolves to null, running nothing, when `signal`
   * aborts first (the caller treats it as cancelled).
   */
  async run<T>(key: string, signal: AbortSignal | undefined, work: () => PromiseLike<T>): Promise<T | null> {
    if (!(await this.#enter(key, signal))) return null;
    try {
      return await work();
    } finally {
      this.#leave(key);
    }
  }

  /** Pieces of work running or waiting, by key (for tests and diagnostics). */
  pending(key: string): { running: number; waiting: number } {
    const held = this.#keys.get(key);
    return { running: held?.running ?? 0, waiting: held?.waiting.length ?? 0 };
  }

  #enter(key: string, signal: AbortSignal | undefined): Promise<boolean> {
    if (signal?.aborted) return Promise.resolve(false);
    const held = this.#keys.get(key) ?? { running: 0, waiting: [] };
    this.#keys.set(key, held);
    if (held.running < this.limit) {
      held.running++;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const onAbort = () => {
        held.waiting.splice(held.waiting.indexOf(admit), 1);
        this.#forgetIfIdle(key, held);
        resolve(false);
      };
      // Given the place of work that ended (`running` stays as it was).
      const admit = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve(true);
      };
      held.waiting.push(admit);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  #leave(key: string): void {
    const held = this.#keys.get(key);
    if (!held) return;
    const next = held.waiting.shift();
    if (next) next();
    else {
      held.running--;
      this.#forgetIfIdle(key, held);
    }
  }

  #forgetIfIdle(key: string, held: { running: number; waiting: (() => void)[] }): void {
    if (held.running === 0 && held.waiting.length === 0 && this.#keys.get(key) === held) this.#keys.delete(key);
  }
}
