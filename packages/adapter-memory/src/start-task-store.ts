import { okAsync, type Result, type ResultAsync } from 'neverthrow';
import {
  type Page,
  type PageRequest,
  pageInMemory,
  type StartTaskFilter,
  type StartTaskStore,
  type StoreFailure,
} from '@acs/core/ports';
import type { StartTaskRecord } from '@acs/core/schemas';
import { KeyedRecords } from './keyed-records.js';

const matches = (task: StartTaskRecord, filter: StartTaskFilter) =>
  (filter.app_conversation_id === undefined || task.app_conversation_id === filter.app_conversation_id) &&
  (filter.created_at_gte === undefined || task.created_at >= filter.created_at_gte);

/** Conversation start tasks in memory. */
export class MemoryStartTaskStore implements StartTaskStore {
  readonly #records = new KeyedRecords<StartTaskRecord>();

  insert(record: StartTaskRecord): ResultAsync<void, StoreFailure> {
    this.#records.put(record);
    return okAsync(undefined);
  }

  get(userId: string, id: string): ResultAsync<StartTaskRecord | null, StoreFailure> {
    return okAsync(this.#records.get(userId, id));
  }

  getMany(userId: string, ids: readonly string[]): ResultAsync<(StartTaskRecord | null)[], StoreFailure> {
    return okAsync(ids.map((id) => this.#records.get(userId, id)));
  }

  update<E>(
    userId: string,
    id: string,
    mutate: (current: StartTaskRecord) => Result<StartTaskRecord, E>,
  ): ResultAsync<StartTaskRecord | null, E | StoreFailure> {
    return this.#records.update(userId, id, mutate);
  }

  search(
    userId: string,
    filter: StartTaskFilter,
    page: PageRequest,
    order: 'newest_first' | 'oldest_first',
  ): ResultAsync<Page<StartTaskRecord>, StoreFailure> {
    return okAsync(
      pageInMemory(
        this.#records.ofUser(userId).filter((t) => matches(t, filter)),
        page,
        order,
      ),
    );
  }

  count(userId: string, filter: StartTaskFilter): ResultAsync<number, StoreFailure> {
    return okAsync(this.#records.ofUser(userId).filter((t) => matches(t, filter)).length);
  }

  deleteByConversation(userId: string, conversationId: string): ResultAsync<number, StoreFailure> {
    let deleted = 0;
    for (const task of this.#records.ofUser(userId)) {
      if (task.app_conversation_id === conversationId && this.#records.delete(userId, task.id)) deleted++;
    }
    return okAsync(deleted);
  }
}
