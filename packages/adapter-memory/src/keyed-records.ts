import { errAsync, okAsync, type Result, type ResultAsync } from 'neverthrow';
import type { StoreFailure } from '@acs/core/ports';
import { cloneData } from '@acs/core';

/**
 * A map of records owned by users, keyed by (user, id). Records are copied in and
 * out, so callers can never change what is stored behind the store's back.
 * JavaScript runs one callback at a time, so a synchronous read-modify-write here
 * is atomic without locks.
 */
export class KeyedRecords<R extends { id: string; user_id: string }> {
  readonly #records = new Map<string, R>();

  static #key(userId: string, id: string): string {
    return `${userId}\u0000${id}`;
  }

  has(userId: string, id: string): boolean {
    return this.#records.has(KeyedRecords.#key(userId, id));
  }

  get(userId: string, id: string): R | null {
    const record = this.#records.get(KeyedRecords.#key(userId, id));
    return record ? cloneData(record) : null;
  }

  put(record: R): void {
    this.#records.set(KeyedRecords.#key(record.user_id, record.id), cloneData(record));
  }

  delete(userId: string, id: string): boolean {
    return this.#records.delete(KeyedRecords.#key(userId, id));
  }

  /** Every user's records (copies). */
  all(): R[] {
    return [...this.#records.values()].map((r) => cloneData(r));
  }

  /** The user's records (copies). */
  ofUser(userId: string): R[] {
    return [...this.#records.values()].filter((r) => r.user_id === userId).map((r) => cloneData(r));
  }

  update<E>(userId: string, id: string, mutate: (current: R) => Result<R, E>): ResultAsync<R | null, E | StoreFailure> {
    const current = this.get(userId, id);
    if (!current) return okAsync(null);
    const next = mutate(current);
    if (next.isErr()) return errAsync(next.error);
    if (next.value.id !== id || next.value.user_id !== userId) {
      throw new Error('A store update may not change the id or the owner of a record.');
    }
    this.put(next.value);
    return okAsync(cloneData(next.value));
  }
}
