import type { ResultAsync } from 'neverthrow';
import type { ConversationLease, ConversationLeaseStore, HeldLease, LeaseHolder, StoreFailure } from '@acs/core/ports';
import { run } from './query-helpers.js';
import type { SqlExecutor } from './sql.js';
import type { Tables } from './tables.js';

/**
 * Conversation leases in PostgreSQL: one row per conversation, expiry on the database's clock
 * (so replicas whose clocks differ agree), epochs that only grow. The event store checks fenced
 * appends against these rows in its own transaction (`FOR SHARE`), so a takeover (an UPDATE of
 * the row) and a stale holder's append are ordered.
 */
export class PostgresConversationLeaseStore implements ConversationLeaseStore {
  constructor(
    private readonly db: SqlExecutor,
    private readonly t: Tables,
  ) {}

  acquire(
    userId: string,
    conversationId: string,
    owner: string,
    ttlMs: number,
  ): ResultAsync<ConversationLease | null, StoreFailure> {
    return run('take a conversation lease', async () => {
      const rows = await this.db.query<{ epoch: string }>(
        `INSERT INTO ${this.t.conversationLeases} AS l (user_id, conversation_id, owner, epoch, expires_at)
         VALUES ($1, $2, $3, 1, now() + $4 * interval '1 millisecond')
         ON CONFLICT (user_id, conversation_id) DO UPDATE SET
           epoch = CASE WHEN l.owner = EXCLUDED.owner AND l.expires_at > now() THEN l.epoch ELSE l.epoch + 1 END,
           owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at, wake_requested = false, stop_requested = false
         WHERE l.owner IS NULL OR l.expires_at <= now() OR l.owner = EXCLUDED.owner
         RETURNING epoch`,
        [userId, conversationId, owner, ttlMs],
      );
      const epoch = rows.rows[0]?.epoch;
      return epoch === undefined ? null : { user_id: userId, conversation_id: conversationId, epoch: Number(epoch) };
    });
  }

  renew(owner: string, ttlMs: number): ResultAsync<HeldLease[], StoreFailure> {
    return run('renew conversation leases', async () => {
      const rows = await this.db.query<{
        user_id: string;
        conversation_id: string;
        epoch: string;
        stop_requested: boolean;
      }>(
        `UPDATE ${this.t.conversationLeases} SET expires_at = now() + $2 * interval '1 millisecond'
         WHERE owner = $1 RETURNING user_id, conversation_id, epoch, stop_requested`,
        [owner, ttlMs],
      );
      return rows.rows.map((r) => ({
        user_id: r.user_id,
        conversation_id: r.conversation_id,
        epoch: Number(r.epoch),
        stop_requested: r.stop_requested,
      }));
    });
  }

  release(owner: string, lease: ConversationLease): ResultAsync<'released' | 'wake' | 'lost', StoreFailure> {
    return run('release a conversation lease', () =>
      this.db.transaction(async (tx) => {
        const where = `WHERE user_id = $1 AND conversation_id = $2 AND owner = $3 AND epoch = $4`;
        const params = [lease.user_id, lease.conversation_id, owner, lease.epoch];
        const held = await tx.query<{ wake_requested: boolean }>(
          `SELECT wake_requested FROM ${this.t.conversationLeases} ${where} FOR UPDATE`,
          params,
        );
        const row = held.rows[0];
        if (!row) return 'lost' as const;
        if (row.wake_requested) {
          // Someone asked for another run meanwhile: the holder keeps the lease and runs again.
          await tx.query(`UPDATE ${this.t.conversationLeases} SET wake_requested = false ${where}`, params);
          return 'wake' as const;
        }
        await tx.query(
          `UPDATE ${this.t.conversationLeases} SET owner = NULL, expires_at = NULL, stop_requested = false ${where}`,
          params,
        );
        return 'released' as const;
      }),
    );
  }

  request(userId: string, conversationId: string, what: 'wake' | 'stop'): ResultAsync<'held' | 'free', StoreFailure> {
    return run('signal a conversation lease holder', async () => {
      const column = what === 'wake' ? 'wake_requested' : 'stop_requested';
      const rows = await this.db.query(
        `UPDATE ${this.t.conversationLeases} SET ${column} = true
         WHERE user_id = $1 AND conversation_id = $2 AND owner IS NOT NULL AND expires_at > now() RETURNING epoch`,
        [userId, conversationId],
      );
      return rows.rows.length > 0 ? 'held' : 'free';
    });
  }

  holders(keys: readonly { user_id: string; conversation_id: string }[]): ResultAsync<LeaseHolder[], StoreFailure> {
    return run('read conversation lease holders', async () => {
      if (keys.length === 0) return [];
      const rows = await this.db.query<LeaseHolder>(
        `SELECT l.user_id, l.conversation_id, l.owner FROM ${this.t.conversationLeases} l
         JOIN unnest($1::text[], $2::text[]) AS k(user_id, conversation_id) USING (user_id, conversation_id)
         WHERE l.owner IS NOT NULL AND l.expires_at > now()`,
        [keys.map((k) => k.user_id), keys.map((k) => k.conversation_id)],
      );
      return rows.rows;
    });
  }

  forget(userId: string, conversationId: string): ResultAsync<void, StoreFailure> {
    return run('drop a conversation lease', async () => {
      await this.db.query(`DELETE FROM ${this.t.conversationLeases} WHERE user_id = $1 AND conversation_id = $2`, [
        userId,
        conversationId,
      ]);
    });
  }
}
