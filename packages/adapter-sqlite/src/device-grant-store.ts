import type { ResultAsync } from 'neverthrow';
import type {
  DeviceGrant,
  DeviceGrantInsertOutcome,
  DeviceGrantKey,
  DeviceGrantLimits,
  DeviceGrantStore,
  StoreFailure,
} from '@acs/core/ports';
import type { Sqlite } from './driver.js';
import { instant, run } from './query-helpers.js';

/** `now - windowMs` as an instant. */
const windowStart = (now: string, windowMs: number) => instant(new Date(Date.parse(now) - windowMs).toISOString());

/**
 * Device sign-ins in SQLite. An addition (with its clean-up and the limit of waiting sign-ins)
 * and a change of one grant each run in one write transaction, so a code is used once.
 */
export class SqliteDeviceGrantStore implements DeviceGrantStore {
  constructor(private readonly db: Sqlite) {}

  insert(grant: DeviceGrant, limits: DeviceGrantLimits): ResultAsync<DeviceGrantInsertOutcome, StoreFailure> {
    return run(this.db, 'start a device sign-in', () =>
      this.db.transaction((): DeviceGrantInsertOutcome => {
        this.db.run(`DELETE FROM acs_device_grants WHERE expires_at < ?`, instant(limits.dropExpiredBefore));
        if (grant.client !== null && limits.maxLivePerClient !== undefined) {
          const fromClient = this.db.get<{ n: number }>(
            `SELECT count(*) AS n FROM acs_device_grants WHERE client = ? AND expires_at > ?`,
            grant.client,
            instant(limits.now),
          );
          if (Number(fromClient?.n ?? 0) >= limits.maxLivePerClient) return 'client_full';
        }
        const live = this.db.get<{ n: number }>(
          `SELECT count(*) AS n FROM acs_device_grants WHERE expires_at > ?`,
          instant(limits.now),
        );
        if (Number(live?.n ?? 0) >= limits.maxLive) return 'full';
        const inserted = this.db.run(
          `INSERT INTO acs_device_grants (device_code_hash, user_code, expires_at, client, record) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
          grant.device_code_hash,
          grant.user_code,
          instant(grant.expires_at),
          grant.client,
          JSON.stringify(grant),
        );
        return inserted > 0 ? 'inserted' : 'user_code_taken';
      }),
    );
  }

  update(
    key: DeviceGrantKey,
    change: (current: DeviceGrant | null) => DeviceGrant | null,
  ): ResultAsync<DeviceGrant | null, StoreFailure> {
    const [column, value] =
      'device_code_hash' in key ? ['device_code_hash', key.device_code_hash] : ['user_code', key.user_code];
    return run(this.db, 'answer a device sign-in', () =>
      this.db.transaction(() => {
        const row = this.db.get<{ record: string }>(`SELECT record FROM acs_device_grants WHERE ${column} = ?`, value);
        const current = row ? (JSON.parse(row.record) as DeviceGrant) : null;
        const next = change(current);
        if (next === current) return current;
        if (!current) throw new Error('A device grant update may not create a grant; insert it.');
        if (!next) {
          this.db.run(`DELETE FROM acs_device_grants WHERE device_code_hash = ?`, current.device_code_hash);
          return null;
        }
        if (next.device_code_hash !== current.device_code_hash || next.user_code !== current.user_code)
          throw new Error('A device grant update may not change its codes.');
        this.db.run(
          `UPDATE acs_device_grants SET expires_at = ?, record = ? WHERE device_code_hash = ?`,
          instant(next.expires_at),
          JSON.stringify(next),
          next.device_code_hash,
        );
        return structuredClone(next);
      }),
    );
  }

  recordFailure(userId: string, now: string, windowMs: number): ResultAsync<number, StoreFailure> {
    return run(this.db, 'count a failed user code', () => {
      const row = this.db.get<{ failures: number }>(
        `INSERT INTO acs_device_code_failures AS f (user_id, opened_at, failures) VALUES (?1, ?2, 1)
         ON CONFLICT (user_id) DO UPDATE SET
           failures = CASE WHEN f.opened_at > ?3 THEN f.failures + 1 ELSE 1 END,
           opened_at = CASE WHEN f.opened_at > ?3 THEN f.opened_at ELSE excluded.opened_at END
         RETURNING failures`,
        userId,
        instant(now),
        windowStart(now, windowMs),
      );
      return Number(row?.failures ?? 1);
    });
  }

  failures(userId: string, now: string, windowMs: number): ResultAsync<number, StoreFailure> {
    return run(this.db, 'read failed user codes', () => {
      const row = this.db.get<{ failures: number }>(
        `SELECT failures FROM acs_device_code_failures WHERE user_id = ? AND opened_at > ?`,
        userId,
        windowStart(now, windowMs),
      );
      return Number(row?.failures ?? 0);
    });
  }
}
