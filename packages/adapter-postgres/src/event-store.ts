import type { ResultAsync } from 'neverthrow';
import { errAsync, okAsync } from 'neverthrow';
import {
  leaseLost,
  type EventStore,
  type LeaseFence,
  type LeaseLost,
  type NewEvent,
  type StoredEvent,
  type StoreFailure,
} from '@acs/core/ports';
import { run } from './query-helpers.js';
import type { SqlExecutor } from './sql.js';
import type { Tables } from './tables.js';

/**
 * Appends of up to this many events put each event in a parameter of its own; parsing a jsonb[]
 * parameter and unnesting it cost as much again as the insert on PGlite (issue 27).
 */
const FEW_EVENTS = 8;

/**
 * Conversation event logs in PostgreSQL. Ids come from a per-conversation counter row
 * bumped in the same transaction as the insert: the row lock orders concurrent appends
 * and a rolled-back append gives its ids back, so ids stay gap-free and unique. A fenced
 * append first reads the conversation's lease row FOR SHARE, in the same transaction: a
 * takeover (which updates the row) waits for it, or it sees the new epoch and is refused.
 */
export class PostgresEventStore implements EventStore {
  private readonly appendFew: string[] = [];
  private readonly appendManySql: string;

  constructor(
    private readonly db: SqlExecutor,
    private readonly t: Tables,
  ) {
    this.appendManySql = `WITH counter AS (
         INSERT INTO ${t.eventCounters} AS c (user_id, conversation_id, last_id) VALUES ($1, $2, $3)
         ON CONFLICT (user_id, conversation_id) DO UPDATE SET last_id = c.last_id + EXCLUDED.last_id RETURNING last_id
       )
       INSERT INTO ${t.events} (user_id, conversation_id, id, event)
       SELECT $1, $2, (counter.last_id - $3 + u.ord)::integer,
              u.event || jsonb_build_object('id', (counter.last_id - $3 + u.ord)::integer, 'conversation_id', $2::text)
       FROM counter, unnest($4::jsonb[]) WITH ORDINALITY AS u(event, ord)
       RETURNING id`;
  }

  /** The append of `n` ≤ FEW_EVENTS events, each its own parameter ($3…): a VALUES list instead of a jsonb[] to unnest. */
  private appendFewSql(n: number): string {
    const known = this.appendFew[n];
    if (known) return known;
    const rows = Array.from({ length: n }, (_, i) => `(${i + 1}, $${i + 3}::jsonb)`).join(', ');
    const sql = `WITH counter AS (
         INSERT INTO ${this.t.eventCounters} AS c (user_id, conversation_id, last_id) VALUES ($1, $2, ${n})
         ON CONFLICT (user_id, conversation_id) DO UPDATE SET last_id = c.last_id + ${n} RETURNING last_id
       )
       INSERT INTO ${this.t.events} (user_id, conversation_id, id, event)
       SELECT $1, $2, counter.last_id - ${n} + u.ord,
              u.event || jsonb_build_object('id', counter.last_id - ${n} + u.ord, 'conversation_id', $2::text)
       FROM counter, (VALUES ${rows}) AS u(ord, event)
       RETURNING id`;
    this.appendFew[n] = sql;
    return sql;
  }

  append(
    userId: string,
    conversationId: string,
    events: readonly NewEvent[],
    fence?: LeaseFence,
  ): ResultAsync<StoredEvent[], StoreFailure | LeaseLost> {
    return run('append events', async (): Promise<StoredEvent[] | LeaseLost> => {
      if (events.length === 0) return [];
      if (!fence) {
        // One statement, so one round trip (and on PGlite one call into it) instead of a
        // transaction's four: the counter's row lock and the rollback of a failed insert are the
        // statement's own. The agent appends twice per step, one event each time (issue 27): that
        // case has a statement of its own, as unnesting a jsonb[] doubles its cost on PGlite.
        const inserted =
          events.length <= FEW_EVENTS
            ? await this.db.query<{ id: number }>(this.appendFewSql(events.length), [
                userId,
                conversationId,
                ...events.map((e) => JSON.stringify(e)),
              ])
            : await this.db.query<{ id: number }>(this.appendManySql, [
                userId,
                conversationId,
                events.length,
                events.map((e) => JSON.stringify(e)),
              ]);
        const first = Math.min(...inserted.rows.map((r) => Number(r.id)));
        return events.map((e, i): StoredEvent => ({ ...e, id: first + i, conversation_id: conversationId }));
      }
      return this.db.transaction(async (tx) => {
        if (fence) {
          const lease = await tx.query<{ owner: string | null; epoch: string }>(
            `SELECT owner, epoch FROM ${this.t.conversationLeases} WHERE user_id = $1 AND conversation_id = $2 FOR SHARE`,
            [userId, conversationId],
          );
          const row = lease.rows[0];
          if (!row || row.owner === null || Number(row.epoch) !== fence.epoch) {
            return leaseLost(conversationId, fence.epoch, row?.owner ? `now epoch ${row.epoch}` : 'nobody holds it');
          }
        }
        const counter = await tx.query<{ last_id: number }>(
          `INSERT INTO ${this.t.eventCounters} AS c (user_id, conversation_id, last_id) VALUES ($1, $2, $3)
           ON CONFLICT (user_id, conversation_id) DO UPDATE SET last_id = c.last_id + EXCLUDED.last_id RETURNING last_id`,
          [userId, conversationId, events.length],
        );
        const first = Number(counter.rows[0]?.last_id) - events.length + 1;
        const stored = events.map((e, i): StoredEvent => ({ ...e, id: first + i, conversation_id: conversationId }));
        await tx.query(
          `INSERT INTO ${this.t.events} (user_id, conversation_id, id, event)
           SELECT $1, $2, u.id, u.event FROM unnest($3::int[], $4::jsonb[]) AS u(id, event)`,
          [userId, conversationId, stored.map((e) => e.id), stored.map((e) => JSON.stringify(e))],
        );
        return stored;
      });
    }).andThen((result) =>
      Array.isArray(result) ? okAsync<StoredEvent[], LeaseLost>(result) : errAsync<StoredEvent[], LeaseLost>(result),
    );
  }

  readAfter(
    userId: string,
    conversationId: string,
    afterId: number,
    limit: number,
  ): ResultAsync<StoredEvent[], StoreFailure> {
    return run('read events', async () => {
      const rows = await this.db.query<{ event: StoredEvent }>(
        `SELECT event FROM ${this.t.events} WHERE user_id = $1 AND conversation_id = $2 AND id > $3 ORDER BY id LIMIT $4`,
        [userId, conversationId, afterId, limit],
      );
      return rows.rows.map((r) => r.event);
    });
  }

  deleteConversation(userId: string, conversationId: string): ResultAsync<number, StoreFailure> {
    return run('delete events', () =>
      this.db.transaction(async (tx) => {
        const deleted = await tx.query(
          `DELETE FROM ${this.t.events} WHERE user_id = $1 AND conversation_id = $2 RETURNING id`,
          [userId, conversationId],
        );
        await tx.query(`DELETE FROM ${this.t.eventCounters} WHERE user_id = $1 AND conversation_id = $2`, [
          userId,
          conversationId,
        ]);
        return deleted.rows.length;
      }),
    );
  }
}
