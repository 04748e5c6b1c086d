import type { ResultAsync } from 'neverthrow';
import { cloneData } from '@acs/core';
import type { EventStore, LeaseFence, LeaseLost, NewEvent, StoredEvent, StoreFailure } from '@acs/core/ports';
import type { Sqlite } from './driver.js';
import { run } from './query-helpers.js';

/**
 * Conversation event logs in SQLite. An append reads the conversation's last id and inserts the
 * batch after it in one write transaction; appends run one at a time, so ids are 1, 2, 3… without
 * gaps. There are no leases on one process's database, so a fence has nothing to be checked
 * against (as with the memory store without leases).
 */
export class SqliteEventStore implements EventStore {
  constructor(private readonly db: Sqlite) {}

  append(
    userId: string,
    conversationId: string,
    events: readonly NewEvent[],
    _fence?: LeaseFence,
  ): ResultAsync<StoredEvent[], StoreFailure | LeaseLost> {
    return run(this.db, 'append events', () => {
      if (events.length === 0) return [];
      return this.db.transaction(() => {
        const last = this.db.get<{ last: number | null }>(
          `SELECT max(id) AS last FROM acs_events WHERE user_id = ? AND conversation_id = ?`,
          userId,
          conversationId,
        );
        const first = Number(last?.last ?? 0) + 1;
        const stored = events.map((e, i): StoredEvent => ({
          ...cloneData(e),
          id: first + i,
          conversation_id: conversationId,
        }));
        for (const event of stored) {
          this.db.run(
            `INSERT INTO acs_events (user_id, conversation_id, id, event) VALUES (?, ?, ?, ?)`,
            userId,
            conversationId,
            event.id,
            JSON.stringify(event),
          );
        }
        return stored;
      });
    });
  }

  readAfter(
    userId: string,
    conversationId: string,
    afterId: number,
    limit: number,
  ): ResultAsync<StoredEvent[], StoreFailure> {
    return run(this.db, 'read events', () =>
      this.db
        .all<{ event: string }>(
          `SELECT event FROM acs_events WHERE user_id = ? AND conversation_id = ? AND id > ? ORDER BY id LIMIT ?`,
          userId,
          conversationId,
          afterId,
          limit,
        )
        .map((r) => JSON.parse(r.event) as StoredEvent),
    );
  }

  deleteConversation(userId: string, conversationId: string): ResultAsync<number, StoreFailure> {
    return run(this.db, 'delete events', () =>
      this.db.run(`DELETE FROM acs_events WHERE user_id = ? AND conversation_id = ?`, userId, conversationId),
    );
  }
}
