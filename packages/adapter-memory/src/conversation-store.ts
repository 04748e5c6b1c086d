import { okAsync, type Result, type ResultAsync } from 'neverthrow';
import {
  type Page,
  type PageRequest,
  compareOldestFirst,
  pageInMemory,
  type ConversationFilter,
  type ConversationStore,
  type StoreFailure,
} from '@acs/core/ports';
import type { ConversationRecord, ExecutionStatus } from '@acs/core/schemas';
import { KeyedRecords } from './keyed-records.js';

/** Whether a conversation passes a search filter (the reference semantics SQL adapters reproduce). */
export function matchesConversationFilter(record: ConversationRecord, filter: ConversationFilter): boolean {
  if (!filter.include_sub_conversations && record.parent_conversation_id !== null) return false;
  if (filter.title_contains !== undefined && !record.title.toLowerCase().includes(filter.title_contains.toLowerCase()))
    return false;
  if (filter.created_at_gte !== undefined && record.created_at < filter.created_at_gte) return false;
  if (filter.created_at_lt !== undefined && record.created_at >= filter.created_at_lt) return false;
  if (filter.updated_at_gte !== undefined && record.updated_at < filter.updated_at_gte) return false;
  if (filter.updated_at_lt !== undefined && record.updated_at >= filter.updated_at_lt) return false;
  if (filter.selected_repository !== undefined && record.selected_repository !== filter.selected_repository)
    return false;
  if (filter.trigger !== undefined && record.trigger !== filter.trigger) return false;
  if (filter.sandbox_id !== undefined && record.sandbox_id !== filter.sandbox_id) return false;
  return true;
}

/** Conversations in memory. */
export class MemoryConversationStore implements ConversationStore {
  readonly #records = new KeyedRecords<ConversationRecord>();

  insert(record: ConversationRecord): ResultAsync<'inserted' | 'exists', StoreFailure> {
    if (this.#records.has(record.user_id, record.id)) return okAsync('exists');
    this.#records.put(record);
    return okAsync('inserted');
  }

  get(userId: string, id: string): ResultAsync<ConversationRecord | null, StoreFailure> {
    return okAsync(this.#records.get(userId, id));
  }

  getMany(userId: string, ids: readonly string[]): ResultAsync<(ConversationRecord | null)[], StoreFailure> {
    return okAsync(ids.map((id) => this.#records.get(userId, id)));
  }

  update<E>(
    userId: string,
    id: string,
    mutate: (current: ConversationRecord) => Result<ConversationRecord, E>,
  ): ResultAsync<ConversationRecord | null, E | StoreFailure> {
    return this.#records.update(userId, id, mutate);
  }

  delete(userId: string, id: string): ResultAsync<boolean, StoreFailure> {
    return okAsync(this.#records.delete(userId, id));
  }

  search(
    userId: string,
    filter: ConversationFilter,
    page: PageRequest,
  ): ResultAsync<Page<ConversationRecord>, StoreFailure> {
    return okAsync(
      pageInMemory(
        this.#records.ofUser(userId).filter((r) => matchesConversationFilter(r, filter)),
        page,
      ),
    );
  }

  count(userId: string, filter: ConversationFilter): ResultAsync<number, StoreFailure> {
    return okAsync(this.#records.ofUser(userId).filter((r) => matchesConversationFilter(r, filter)).length);
  }

  listBySandbox(userId: string, sandboxId: string): ResultAsync<ConversationRecord[], StoreFailure> {
    return okAsync(this.#records.ofUser(userId).filter((r) => r.sandbox_id === sandboxId));
  }

  listByExecutionStatus(statuses: readonly ExecutionStatus[]): ResultAsync<ConversationRecord[], StoreFailure> {
    const wanted = new Set<string | null>(statuses);
    return okAsync(
      this.#records
        .all()
        .filter((r) => wanted.has(r.execution_status))
        .sort(compareOldestFirst),
    );
  }

  childrenOf(userId: string, parentIds: readonly string[]): ResultAsync<Map<string, string[]>, StoreFailure> {
    const wanted = new Set(parentIds);
    const children = new Map<string, string[]>();
    for (const record of this.#records.ofUser(userId).sort(compareOldestFirst)) {
      if (record.parent_conversation_id !== null && wanted.has(record.parent_conversation_id)) {
        children.set(record.parent_conversation_id, [
          ...(children.get(record.parent_conversation_id) ?? []),
          record.id,
        ]);
      }
    }
    return okAsync(children);
  }
}
