import { okAsync, type ResultAsync } from 'neverthrow';
import type { EventStore, NewEvent, StoredEvent, StoreFailure } from '@acs/core/ports';

/** Conversation event logs in memory. Appends are synchronous, so ids are gap-free by construction. */
export class MemoryEventStore implements EventStore {
  readonly #logs = new Map<string, StoredEvent[]>();

  static #key(userId: string, conversationId: string): string {
    return `${userId}\u0000${conversationId}`;
  }

  append(userId: string, conversationId: string, events: readonly NewEvent[]): ResultAsync<StoredEvent[], StoreFailure> {
    const key = MemoryEventStore.#key(userId, conversationId);
    let log = this.#logs.get(key);
    if (!log) this.#logs.set(key, (log = []));
    const stored = events.map((e, i) => ({ ...structuredClone(e), id: log.length + i + 1, conversation_id: conversationId }));
    log.push(...stored);
    return okAsync(structuredClone(stored));
  }

  readAfter(userId: string, conversationId: string, afterId: number, limit: number): ResultAsync<StoredEvent[], StoreFailure> {
    const log = this.#logs.get(MemoryEventStore.#key(userId, conversationId)) ?? [];
    // Ids are 1…n without gaps, so event n sits at index n - 1.
    return okAsync(structuredClone(log.slice(Math.max(0, afterId), Math.max(0, afterId) + limit)));
  }

  deleteConversation(userId: string, conversationId: string): ResultAsync<number, StoreFailure> {
    const key = MemoryEventStore.#key(userId, conversationId);
    const count = this.#logs.get(key)?.length ?? 0;
    this.#logs.delete(key);
    return okAsync(count);
  }
}
