import { okAsync, type ResultAsync } from 'neverthrow';
import type { EventStore, NewEvent, StoredEvent, StoreFailure } from '@acs/core';

/** Conversation event logs in memory. Appends are synchronous, so ids are gap-free by construction. */
export class MemoryEventStore implements EventStore {
  readonly #logs = new Map<string, StoredEvent[]>();

  static #key(userId: string, conversationId: string): string {
    return `${userId}\u0000${conversationId}`;
  }

  append(userId: string, conversationId: string, events: readonly NewEvent[]): ResultAsync<StoredEvent[], StoreFailure> {
    const key = MemoryEventStore.#key(userId, conversationId);
    const log = this.#logs.get(key) ?? [];
    const stored = events.map((e, i) => ({ ...structuredClone(e), id: log.length + i + 1, conversation_id: conversationId }));
    this.#logs.set(key, [...log, ...stored]);
    return okAsync(structuredClone(stored));
  }

  readAfter(userId: string, conversationId: string, afterId: number, limit: number): ResultAsync<StoredEvent[], StoreFailure> {
    const log = this.#logs.get(MemoryEventStore.#key(userId, conversationId)) ?? [];
    return okAsync(structuredClone(log.filter((e) => e.id > afterId).slice(0, limit)));
  }

  deleteConversation(userId: string, conversationId: string): ResultAsync<number, StoreFailure> {
    const key = MemoryEventStore.#key(userId, conversationId);
    const count = this.#logs.get(key)?.length ?? 0;
    this.#logs.delete(key);
    return okAsync(count);
  }
}
