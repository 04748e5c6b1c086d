import type { ResultAsync } from 'neverthrow';
import type { LeaseFence, LeaseLost } from './lease.js';
import type { StoreFailure } from '../store-failure.js';

export type EventSource = 'agent' | 'user' | 'environment';

/** An event to append to a conversation's log. */
export interface NewEvent {
  kind: string;
  source: EventSource;
  /** ISO-8601 UTC. */
  timestamp: string;
  payload: Record<string, unknown>;
}

/** An event as stored: ids are 1, 2, 3, … per conversation, without gaps. */
export interface StoredEvent extends NewEvent {
  id: number;
  conversation_id: string;
}

/**
 * The append-only event log of conversations, scoped per user like the other stores.
 * `append` gives the events the next ids of that conversation, gap-free and unique
 * even under concurrent appends; the batch lands whole or not at all.
 *
 * With a `fence` (an agent's append, made under a conversation lease), a store that keeps
 * leases (`ConversationLeaseStore`) refuses the batch with `LeaseLost` unless the lease is still
 * held under that epoch, checked in the same transaction as the insert. A store without leases
 * (one process) ignores fences.
 */
export interface EventStore {
  append(
    userId: string,
    conversationId: string,
    events: readonly NewEvent[],
    fence?: LeaseFence,
  ): ResultAsync<StoredEvent[], StoreFailure | LeaseLost>;
  /** Events with id > afterId, oldest first, at most `limit`. */
  readAfter(
    userId: string,
    conversationId: string,
    afterId: number,
    limit: number,
  ): ResultAsync<StoredEvent[], StoreFailure>;
  /** Removes a conversation's whole log; resolves to how many events were removed. */
  deleteConversation(userId: string, conversationId: string): ResultAsync<number, StoreFailure>;
}
