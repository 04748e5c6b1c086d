import { okAsync, type ResultAsync } from 'neverthrow';
import type {
  ConversationLease,
  ConversationLeaseStore,
  HeldLease,
  LeaseFence,
  LeaseHolder,
  LeaseLost,
  StoreFailure,
} from '@acs/core/ports';
import { leaseLost } from '@acs/core/ports';

interface Row {
  user_id: string;
  conversation_id: string;
  owner: string | null;
  epoch: number;
  expires: number;
  wake: boolean;
  stop: boolean;
}

/**
 * Conversation leases in memory: for several services in one process sharing memory stores
 * (tests of takeover and fencing). Memory stores never span processes; `createMemoryStores()`
 * wires this into its event store, which then checks fences against it.
 */
export class MemoryConversationLeaseStore implements ConversationLeaseStore {
  readonly #rows = new Map<string, Row>();
  readonly #now: () => number;

  /** `now`: the store's clock in ms (default Date.now), as a database's clock would be. */
  constructor(options: { now?: () => number } = {}) {
    this.#now = options.now ?? Date.now;
  }

  static #key(userId: string, conversationId: string): string {
    return `${userId}\u0000${conversationId}`;
  }

  #live(row: Row | undefined): row is Row & { owner: string } {
    return row !== undefined && row.owner !== null && row.expires > this.#now();
  }

  acquire(
    userId: string,
    conversationId: string,
    owner: string,
    ttlMs: number,
  ): ResultAsync<ConversationLease | null, StoreFailure> {
    const key = MemoryConversationLeaseStore.#key(userId, conversationId);
    const row = this.#rows.get(key);
    if (this.#live(row) && row.owner !== owner) return okAsync(null);
    const next: Row = {
      user_id: userId,
      conversation_id: conversationId,
      owner,
      epoch: row && this.#live(row) && row.owner === owner ? row.epoch : (row?.epoch ?? 0) + 1,
      expires: this.#now() + ttlMs,
      wake: false,
      stop: false,
    };
    this.#rows.set(key, next);
    return okAsync({ user_id: userId, conversation_id: conversationId, epoch: next.epoch });
  }

  renew(owner: string, ttlMs: number): ResultAsync<HeldLease[], StoreFailure> {
    const held: HeldLease[] = [];
    for (const row of this.#rows.values()) {
      if (row.owner !== owner) continue;
      row.expires = this.#now() + ttlMs;
      held.push({
        user_id: row.user_id,
        conversation_id: row.conversation_id,
        epoch: row.epoch,
        stop_requested: row.stop,
      });
    }
    return okAsync(held);
  }

  release(owner: string, lease: ConversationLease): ResultAsync<'released' | 'wake' | 'lost', StoreFailure> {
    const row = this.#rows.get(MemoryConversationLeaseStore.#key(lease.user_id, lease.conversation_id));
    if (!row || row.owner !== owner || row.epoch !== lease.epoch) return okAsync('lost');
    if (row.wake) {
      row.wake = false;
      return okAsync('wake');
    }
    row.owner = null;
    row.stop = false;
    return okAsync('released');
  }

  request(userId: string, conversationId: string, what: 'wake' | 'stop'): ResultAsync<'held' | 'free', StoreFailure> {
    const row = this.#rows.get(MemoryConversationLeaseStore.#key(userId, conversationId));
    if (!this.#live(row)) return okAsync('free');
    if (what === 'wake') row.wake = true;
    else row.stop = true;
    return okAsync('held');
  }

  holders(keys: readonly { user_id: string; conversation_id: string }[]): ResultAsync<LeaseHolder[], StoreFailure> {
    const found: LeaseHolder[] = [];
    for (const { user_id, conversation_id } of keys) {
      const row = this.#rows.get(MemoryConversationLeaseStore.#key(user_id, conversation_id));
      if (this.#live(row)) found.push({ user_id, conversation_id, owner: row.owner });
    }
    return okAsync(found);
  }

  forget(userId: string, conversationId: string): ResultAsync<void, StoreFailure> {
    this.#rows.delete(MemoryConversationLeaseStore.#key(userId, conversationId));
    return okAsync(undefined);
  }

  /** Null when an append under `fence` may land; else why not. (The event store asks, in the same synchronous step as the append.) */
  refuse(userId: string, conversationId: string, fence: LeaseFence): LeaseLost | null {
    const row = this.#rows.get(MemoryConversationLeaseStore.#key(userId, conversationId));
    if (row?.owner != null && row.epoch === fence.epoch) return null;
    return leaseLost(conversationId, fence.epoch, row?.owner != null ? `now epoch ${row.epoch}` : 'nobody holds it');
  }
}
