import type { Result, ResultAsync } from 'neverthrow';
import type { Page, PageRequest } from '../pagination.js';
import type { StoreFailure } from '../store-failure.js';
import type { SandboxLifecycleStatus, SandboxRecord, SandboxSpec } from './schema.js';

/**
 * Keeps sandbox records. Every read and write is scoped to one user: a record of
 * another user behaves exactly like a missing one. `search` never lists DELETED
 * tombstones; `get`/`getMany` return them so the service can explain why an
 * action on a deleted sandbox is refused.
 */
export interface SandboxStore {
  insert(record: SandboxRecord): ResultAsync<void, StoreFailure>;
  get(userId: string, id: string): ResultAsync<SandboxRecord | null, StoreFailure>;
  getMany(userId: string, ids: readonly string[]): ResultAsync<(SandboxRecord | null)[], StoreFailure>;
  /**
   * Whose sandbox this is (null when no live record has the id): the one read that takes no
   * user, for the proxy of a sandbox's exposed URL, which names the sandbox alone (its
   * health check carries no credentials). Every read after it is scoped to that user again.
   */
  ownerOf(id: string): ResultAsync<string | null, StoreFailure>;
  /**
   * Applies `mutate` to the current record atomically (no other update of the same
   * record interleaves). Resolves to null when the record does not exist for this user.
   */
  update<E>(
    userId: string,
    id: string,
    mutate: (current: SandboxRecord) => Result<SandboxRecord, E>,
  ): ResultAsync<SandboxRecord | null, E | StoreFailure>;
  /** Newest first by (created_at, id); DELETED excluded. */
  search(userId: string, page: PageRequest): ResultAsync<Page<SandboxRecord>, StoreFailure>;
  /**
   * Sandboxes in any of these statuses, oldest first: of one user, or of every user
   * when userId is null (for maintenance: idle pause, reconciliation after a restart).
   */
  listByStatus(
    userId: string | null,
    statuses: readonly SandboxLifecycleStatus[],
  ): ResultAsync<SandboxRecord[], StoreFailure>;
  /**
   * Hands one ready pooled sandbox of this spec to a user, atomically: of the RUNNING records
   * owned by POOLED_SANDBOX_OWNER with `sandbox_spec_id` = specId, the oldest not being claimed
   * by someone else becomes the user's (`user_id` = userId, `updated_at` and `last_active_at` =
   * claimedAt, the rest unchanged) and is returned; null when there is none. Two claims, in one
   * process or in several on one database, never get the same record.
   */
  claimPooled(specId: string, userId: string, claimedAt: string): ResultAsync<SandboxRecord | null, StoreFailure>;
}

/** The sandbox specs a server offers. The first one listed is the default. */
export interface SandboxSpecCatalog {
  list(page: PageRequest): ResultAsync<Page<SandboxSpec>, StoreFailure>;
  get(id: string): ResultAsync<SandboxSpec | null, StoreFailure>;
  getDefault(): ResultAsync<SandboxSpec, StoreFailure>;
}
