import type { ResultAsync } from 'neverthrow';
import type {
  DeviceGrant,
  DeviceGrantInsertOutcome,
  DeviceGrantKey,
  DeviceGrantLimits,
  DeviceGrantStore,
  StoreFailure,
} from '@acs/core/ports';
import { run } from './query-helpers.js';
import type { SqlExecutor } from './sql.js';
import type { Tables } from './tables.js';

/**
 * Device sign-ins in PostgreSQL, so every replica on the database answers every poll and every
 * approval. Additions take a transaction-scoped advisory lock: the limit of waiting sign-ins
 * holds across replicas. A change locks its row (FOR UPDATE), so two polls or a poll and an
 * approval apply one after the other and a code is used once.
 */
export class PostgresDeviceGrantStore implements DeviceGrantStore {
  constructor(
    private readonly db: SqlExecutor,
    private readonly t: Tables,
  ) {}

  insert(grant: DeviceGrant, limits: DeviceGrantLimits): ResultAsync<DeviceGrantInsertOutcome, StoreFailure> {
    return run('start a device sign-in', () =>
      this.db.transaction(async (tx): Promise<DeviceGrantInsertOutcome> => {
        await tx.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [`acs.device_grants:${this.t.schema ?? ''}`]);
        await tx.query(`DELETE FROM ${this.t.deviceGrants} WHERE expires_at < $1::timestamptz`, [
          limits.dropExpiredBefore,
        ]);
        if (grant.client !== null && limits.maxLivePerClient !== undefined) {
          const fromClient = await tx.query<{ n: string }>(
            `SELECT count(*) AS n FROM ${this.t.deviceGrants} WHERE client = $1 AND expires_at > $2::timestamptz`,
            [grant.client, limits.now],
          );
          if (Number(fromClient.rows[0]?.n ?? 0) >= limits.maxLivePerClient) return 'client_full';
        }
        const live = await tx.query<{ n: string }>(
          `SELECT count(*) AS n FROM ${this.t.deviceGrants} WHERE expires_at > $1::timestamptz`,
          [limits.now],
        );
        if (Number(live.rows[0]?.n ?? 0) >= limits.maxLive) return 'full';
        const inserted = await tx.query(
          `INSERT INTO ${this.t.deviceGrants} (device_code_hash, user_code, expires_at, client, record) VALUES ($1, $2, $3, $4, $5::jsonb)
           ON CONFLICT DO NOTHING RETURNING device_code_hash`,
          [grant.device_code_hash, grant.user_code, grant.expires_at, grant.client, JSON.stringify(grant)],
        );
        return inserted.rows.length > 0 ? 'inserted' : 'user_code_taken';
      }),
    );
  }

  update(
    key: DeviceGrantKey,
    change: (current: DeviceGrant | null) => DeviceGrant | null,
  ): ResultAsync<DeviceGrant | null, StoreFailure> {
    const [column, value] =
      'device_code_hash' in key ? ['device_code_hash', key.device_code_hash] : ['user_code', key.user_code];
    return run('answer a device sign-in', () =>
      this.db.transaction(async (tx) => {
        const rows = await tx.query<{ record: DeviceGrant }>(
          `SELECT record FROM ${this.t.deviceGrants} WHERE ${column} = $1 FOR UPDATE`,
          [value],
        );
        const current = rows.rows[0]?.record ?? null;
        const next = change(current);
        if (next === current) return current;
        if (!current) throw new Error('A device grant update may not create a grant; insert it.');
        if (!next) {
          await tx.query(`DELETE FROM ${this.t.deviceGrants} WHERE device_code_hash = $1`, [current.device_code_hash]);
          return null;
        }
        if (next.device_code_hash !== current.device_code_hash || next.user_code !== current.user_code)
          throw new Error('A device grant update may not change its codes.');
        await tx.query(
          `UPDATE ${this.t.deviceGrants} SET expires_at = $2, record = $3::jsonb WHERE device_code_hash = $1`,
          [next.device_code_hash, next.expires_at, JSON.stringify(next)],
        );
        return next;
      }),
    );
  }

  recordFailure(userId: string, now: string, windowMs: number): ResultAsync<number, StoreFailure> {
    return run('count a failed user code', async () => {
      const rows = await this.db.query<{ failures: number }>(
        `INSERT INTO ${this.t.deviceCodeFailures} AS f (user_id, opened_at, failures) VALUES ($1, $2::timestamptz, 1)
         ON CONFLICT (user_id) DO UPDATE SET
           failures = CASE WHEN f.opened_at > $2::timestamptz - $3 * interval '1 millisecond' THEN f.failures + 1 ELSE 1 END,
           opened_at = CASE WHEN f.opened_at > $2::timestamptz - $3 * interval '1 millisecond' THEN f.opened_at ELSE EXCLUDED.opened_at END
         RETURNING failures`,
        [userId, now, windowMs],
      );
      return Number(rows.rows[0]?.failures ?? 1);
    });
  }

  failures(userId: string, now: string, windowMs: number): ResultAsync<number, StoreFailure> {
    return run('read failed user codes', async () => {
      const rows = await this.db.query<{ failures: number }>(
        `SELECT failures FROM ${this.t.deviceCodeFailures} WHERE user_id = $1 AND opened_at > $2::timestamptz - $3 * interval '1 millisecond'`,
        [userId, now, windowMs],
      );
      return Number(rows.rows[0]?.failures ?? 0);
    });
  }
}
