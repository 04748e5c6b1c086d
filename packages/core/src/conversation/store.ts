import type { Result, ResultAsync } from 'neverthrow';
import type { Page, PageRequest } from '../pagination.js';
import type { StoreFailure } from '../store-failure.js';
import type { ExecutionStatus } from '../events/schema.js';
import type { ConversationRecord, StartTaskRecord } from './schema.js';

/** Filters of the conversation search. Timestamps are ISO-8601 UTC; bounds are [gte, lt). */
export interface ConversationFilter {
  /** Case-insensitive substring of the title. */
  title_contains?: string;
  created_at_gte?: string;
  created_at_lt?: string;
  updated_at_gte?: string;
  updated_at_lt?: string;
  /** Default false: only conversations without a parent. */
  include_sub_conversations?: boolean;
  selected_repository?: string;
  trigger?: string;
  /** Only conversations in this sandbox. */
  sandbox_id?: string;
}

/**
 * Keeps conversations. Records are keyed by (user, id): every method is scoped to
 * one user, and a record of another user behaves exactly like a missing one.
 */
export interface ConversationStore {
  /** `exists` when this user already has a conversation with that id; nothing is written then. */
  insert(record: ConversationRecord): ResultAsync<'inserted' | 'exists', StoreFailure>;
  get(userId: string, id: string): ResultAsync<ConversationRecord | null, StoreFailure>;
  getMany(userId: string, ids: readonly string[]): ResultAsync<(ConversationRecord | null)[], StoreFailure>;
  /** Atomic read-modify-write of one record; null when it does not exist for this user. */
  update<E>(
    userId: string,
    id: string,
    mutate: (current: ConversationRecord) => Result<ConversationRecord, E>,
  ): ResultAsync<ConversationRecord | null, E | StoreFailure>;
  /** True when something was deleted. */
  delete(userId: string, id: string): ResultAsync<boolean, StoreFailure>;
  /** Newest first by (created_at, id). */
  search(
    userId: string,
    filter: ConversationFilter,
    page: PageRequest,
  ): ResultAsync<Page<ConversationRecord>, StoreFailure>;
  count(userId: string, filter: ConversationFilter): ResultAsync<number, StoreFailure>;
  /** Conversations running in a sandbox (to stop them when it is lost). */
  listBySandbox(userId: string, sandboxId: string): ResultAsync<ConversationRecord[], StoreFailure>;
  /** Conversations of every user whose agent is in one of these states (to resume them after a restart). */
  listByExecutionStatus(statuses: readonly ExecutionStatus[]): ResultAsync<ConversationRecord[], StoreFailure>;
  /** Ids of the direct children of each parent, in creation order. */
  childrenOf(userId: string, parentIds: readonly string[]): ResultAsync<Map<string, string[]>, StoreFailure>;
}

export interface StartTaskFilter {
  /** Tasks that started this conversation. */
  app_conversation_id?: string;
  created_at_gte?: string;
}

/** Keeps conversation start tasks, scoped per user like ConversationStore. */
export interface StartTaskStore {
  insert(record: StartTaskRecord): ResultAsync<void, StoreFailure>;
  get(userId: string, id: string): ResultAsync<StartTaskRecord | null, StoreFailure>;
  getMany(userId: string, ids: readonly string[]): ResultAsync<(StartTaskRecord | null)[], StoreFailure>;
  update<E>(
    userId: string,
    id: string,
    mutate: (current: StartTaskRecord) => Result<StartTaskRecord, E>,
  ): ResultAsync<StartTaskRecord | null, E | StoreFailure>;
  search(
    userId: string,
    filter: StartTaskFilter,
    page: PageRequest,
    order: 'newest_first' | 'oldest_first',
  ): ResultAsync<Page<StartTaskRecord>, StoreFailure>;
  count(userId: string, filter: StartTaskFilter): ResultAsync<number, StoreFailure>;
  deleteByConversation(userId: string, conversationId: string): ResultAsync<number, StoreFailure>;
}
