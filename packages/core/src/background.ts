import type { Logger } from './logger.js';

/**
 * Tracks work that outlives the request that started it (sandbox start-up, the
 * start pipeline), so a host can wait for it in tests and drain it on shutdown.
 */
export class BackgroundTasks {
  readonly #running = new Map<Promise<void>, string>();
  readonly #logger: Logger;
  readonly #abort = new AbortController();

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** Aborted when the service closes; long waits listen to it. */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  get closed(): boolean {
    return this.#abort.signal.aborted;
  }

  /** Runs `work` in the background. A throw is a defect: it is logged, never lost silently. */
  spawn(name: string, work: () => Promise<void>): void {
    const task = Promise.resolve()
      .then(work)
      .catch((error: unknown) => {
        this.#logger.error(
          { task: name, err: error instanceof Error ? error.message : String(error) },
          'background task failed',
        );
      })
      .finally(() => {
        this.#running.delete(task);
      });
    this.#running.set(task, name);
  }

  /** The names of the work still running, oldest first (e.g. to say what a shutdown waits for). */
  pending(): string[] {
    return [...this.#running.values()];
  }

  /** Resolves once no background work is left (including work spawned meanwhile). */
  async idle(): Promise<void> {
    while (this.#running.size > 0) {
      await Promise.allSettled([...this.#running.keys()]);
    }
  }

  /** Stops waits early and drains what is running. */
  async close(): Promise<void> {
    this.#abort.abort();
    await this.idle();
  }
}
