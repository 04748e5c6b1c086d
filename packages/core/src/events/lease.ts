import type { ResultAsync } from 'neverthrow';
import type { StoreFailure } from '../store-failure.js';

/**
 * Conversation leases: which process runs a conversation's agent loop, when several processes
 * share one store. A lease is held by an owner (one per process) until it expires unless
 * renewed; its epoch grows every time it is granted anew, so a write that carries the epoch it
 * was made under (a `LeaseFence`) can be refused once someone else holds the lease (fencing).
 */

/** A granted lease: the holder acts for this conversation under this epoch. */
export interface ConversationLease {
  readonly user_id: string;
  readonly conversation_id: string;
  readonly epoch: number;
}

/** What an agent's write carries so a store can refuse it when the writer lost the lease. */
export interface LeaseFence {
  readonly epoch: number;
}

/** A fenced write was refused: the lease has changed hands (or was released) since `epoch` was granted. */
export interface LeaseLost {
  readonly type: 'LeaseLost';
  readonly conversationId: string;
  readonly epoch: number;
  readonly message: string;
}

export const leaseLost = (conversationId: string, epoch: number, holder: string): LeaseLost => ({
  type: 'LeaseLost',
  conversationId,
  epoch,
  message: `conversation ${conversationId} is no longer run under lease epoch ${epoch} (${holder}); this write was refused`,
});

/** A lease as a renewal found it: still held, and whether another process asked its holder to stop. */
export interface HeldLease extends ConversationLease {
  readonly stop_requested: boolean;
}

/** A lease someone holds now (not expired). */
export interface LeaseHolder {
  readonly user_id: string;
  readonly conversation_id: string;
  readonly owner: string;
}

/**
 * Keeps conversation leases. Times are the store's own (a database's clock), so owners on
 * machines whose clocks differ agree on expiry. Stores that keep leases also check
 * `LeaseFence`s on event appends (`EventStore.append`) against them, in the same transaction.
 */
export interface ConversationLeaseStore {
  /**
   * Grants the lease to `owner` for `ttlMs` unless another owner holds one that has not
   * expired (then null). A grant after a release, an expiry or to another owner gets the next
   * epoch; clears the wake and stop requests.
   */
  acquire(
    userId: string,
    conversationId: string,
    owner: string,
    ttlMs: number,
  ): ResultAsync<ConversationLease | null, StoreFailure>;
  /** Extends every lease `owner` still holds by `ttlMs` (also ones that expired unclaimed); what it holds. */
  renew(owner: string, ttlMs: number): ResultAsync<HeldLease[], StoreFailure>;
  /**
   * Gives the lease up. `wake` when someone asked for another run meanwhile: the lease is kept
   * (the request cleared) and the holder runs again. `lost` when it was not held any more.
   */
  release(owner: string, lease: ConversationLease): ResultAsync<'released' | 'wake' | 'lost', StoreFailure>;
  /** Asks the holder for another run (`wake`) or to stop (`stop`); `free` when nobody holds the lease now. */
  request(userId: string, conversationId: string, what: 'wake' | 'stop'): ResultAsync<'held' | 'free', StoreFailure>;
  /** Of these conversations, the leases held now (not expired). */
  holders(keys: readonly { user_id: string; conversation_id: string }[]): ResultAsync<LeaseHolder[], StoreFailure>;
  /** Drops a deleted conversation's lease (its epoch history goes with it). */
  forget(userId: string, conversationId: string): ResultAsync<void, StoreFailure>;
}
