import { okAsync, type Result, type ResultAsync } from 'neverthrow';
import {
  type Page,
  type PageRequest,
  compareOldestFirst,
  pageInMemory,
  type SandboxStore,
  type StoreFailure,
} from '@acs/core/ports';
import { POOLED_SANDBOX_OWNER, type SandboxLifecycleStatus, type SandboxRecord } from '@acs/core/schemas';
import { KeyedRecords } from './keyed-records.js';
import { cloneData } from '@acs/core';

/** Sandbox records in memory (the fake runtime keeps the sandboxes themselves). */
export class MemorySandboxStore implements SandboxStore {
  readonly #records = new KeyedRecords<SandboxRecord>();

  insert(record: SandboxRecord): ResultAsync<void, StoreFailure> {
    this.#records.put(record);
    return okAsync(undefined);
  }

  get(userId: string, id: string): ResultAsync<SandboxRecord | null, StoreFailure> {
    return okAsync(this.#records.get(userId, id));
  }

  ownerOf(id: string): ResultAsync<string | null, StoreFailure> {
    return okAsync(this.#records.all().find((r) => r.id === id && r.status !== 'DELETED')?.user_id ?? null);
  }

  getMany(userId: string, ids: readonly string[]): ResultAsync<(SandboxRecord | null)[], StoreFailure> {
    return okAsync(ids.map((id) => this.#records.get(userId, id)));
  }

  update<E>(
    userId: string,
    id: string,
    mutate: (current: SandboxRecord) => Result<SandboxRecord, E>,
  ): ResultAsync<SandboxRecord | null, E | StoreFailure> {
    return this.#records.update(userId, id, mutate);
  }

  listByStatus(
    userId: string | null,
    statuses: readonly SandboxLifecycleStatus[],
  ): ResultAsync<SandboxRecord[], StoreFailure> {
    const wanted = new Set(statuses);
    const records = userId === null ? this.#records.all() : this.#records.ofUser(userId);
    return okAsync(records.filter((r) => wanted.has(r.status)).sort(compareOldestFirst));
  }

  claimPooled(specId: string, userId: string, claimedAt: string): ResultAsync<SandboxRecord | null, StoreFailure> {
    // One synchronous read-modify-write: no other claim can interleave.
    const ready = this.#records
      .ofUser(POOLED_SANDBOX_OWNER)
      .filter((r) => r.status === 'RUNNING' && r.sandbox_spec_id === specId)
      .sort(compareOldestFirst)[0];
    if (!ready) return okAsync(null);
    this.#records.delete(POOLED_SANDBOX_OWNER, ready.id);
    const claimed: SandboxRecord = { ...ready, user_id: userId, updated_at: claimedAt, last_active_at: claimedAt };
    this.#records.put(claimed);
    return okAsync(cloneData(claimed));
  }

  search(userId: string, page: PageRequest): ResultAsync<Page<SandboxRecord>, StoreFailure> {
    return okAsync(
      pageInMemory(
        this.#records.ofUser(userId).filter((r) => r.status !== 'DELETED'),
        page,
      ),
    );
  }
}
