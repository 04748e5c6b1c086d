import { errAsync, okAsync, type ResultAsync } from 'neverthrow';
import type { EventStore, LeaseFence, LeaseLost, NewEvent, StoredEvent, StoreFailure } from '@acs/core/ports';
import type { MemoryConversationLeaseStore } from './lease-store.js';
import { cloneData } from '@acs/core';

/**
 * Conversation event logs in memory. Appends are synchronous, so ids are gap-free by
 * construction. With a lease store, fenced appends are checked against it.
 */
export class MemoryEventStore implements EventStore {
  readonly #logs = new Map<string, StoredEvent[]>();
  readonly #leases: MemoryConversationLeaseStore | null;

  constructor(options: { leases?: MemoryConversationLeaseStore } = {}) {
    this.#leases = options.leases ?? null;
  }

  static #key(userId: string, conversationId: string): string {
    return `${userId}\u0000${conversationId}`;
  }

  append(
    userId: string,
    conversationId: string,
    events: readonly NewEvent[],
    fence?: LeaseFence,
  ): ResultAsync<StoredEvent[], StoreFailure | LeaseLost> {
    const refused = fence && this.#leases ? this.#leases.refuse(userId, conversationId, fence) : null;
    if (refused) return errAsync(refused);
    const key = MemoryEventStore.#key(userId, conversationId);
    let log = this.#logs.get(key);
    if (!log) this.#logs.set(key, (log = []));
    const stored = events.map((e, i) => ({ ...cloneData(e), id: log.length + i + 1, conversation_id: conversationId }));
    log.push(...stored);
    return okAsync(cloneData(stored));
  }

  readAfter(
    userId: string,
    conversationId: string,
    afterId: number,
    limit: number,
  ): ResultAsync<StoredEvent[], StoreFailure> {
    const log = this.#logs.get(MemoryEventStore.#key(userId, conversationId)) ?? [];
    // Ids are 1…n without gaps, so event n sits at index n - 1.
    return okAsync(cloneData(log.slice(Math.max(0, afterId), Math.max(0, afterId) + limit)));
  }

  deleteConversation(userId: string, conversationId: string): ResultAsync<number, StoreFailure> {
    const key = MemoryEventStore.#key(userId, conversationId);
    const count = this.#logs.get(key)?.length ?? 0;
    this.#logs.delete(key);
    return okAsync(count);
  }
}
