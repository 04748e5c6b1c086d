import { cloneData, KeyedQueue } from '@acs/core';

/** How many records of one kind an exclusive storage keeps in memory (conversations, settings). */
const RECORD_CACHE_CAPACITY = 1_000;

/**
 * Records of one table that this process has read or written, for a database that nothing else
 * writes (`exclusive`: PGlite in a data directory this process has locked). The agent reads its
 * conversation and the user's settings, and updates the conversation, on every step; on PGlite
 * each of those statements costs 0.2–0.3 ms of CPU on the event loop (issue 27), and a cached
 * record costs a copy (about 1 µs).
 *
 * - Bounded: the least recently used record is dropped past `capacity`.
 * - Every value is copied in and out, so no caller shares an object with the cache.
 * - The work that reads a missing record, writes or deletes one runs through `serially`, one call
 *   per key at a time in arrival order: a read that misses can never put back a value older than
 *   a write that overtook it, and an update reads what the update before it wrote.
 */
export class RecordCache<V> {
  readonly #entries = new Map<string, V>();
  readonly #queue = new KeyedQueue();

  constructor(readonly capacity: number = RECORD_CACHE_CAPACITY) {}

  /** A copy of the record, or undefined when it is not held. */
  get(key: string): V | undefined {
    const value = this.#entries.get(key);
    if (value === undefined) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, value);
    return cloneData(value);
  }

  set(key: string, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, cloneData(value));
    if (this.#entries.size > this.capacity) {
      const oldest = this.#entries.keys().next().value as string;
      this.#entries.delete(oldest);
    }
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Keys with work queued or running in `serially` (each is forgotten once its work has settled). */
  get waiting(): number {
    return this.#queue.size;
  }

  /** Runs `work` once every earlier `serially` call for this key has settled (whether or not it failed). */
  serially<T>(key: string, work: () => Promise<T>): Promise<T> {
    return this.#queue.run(key, work);
  }
}

/** The cache key of a user's record. */
export const recordKey = (userId: string, id: string): string => `${userId}\u0000${id}`;
