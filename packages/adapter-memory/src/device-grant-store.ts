import { okAsync, type ResultAsync } from 'neverthrow';
import type {
  DeviceGrant,
  DeviceGrantInsertOutcome,
  DeviceGrantKey,
  DeviceGrantLimits,
  DeviceGrantStore,
  StoreFailure,
} from '@acs/core/ports';

/** Device sign-ins in memory (one process: replicas need a shared store, e.g. PostgreSQL). */
export class MemoryDeviceGrantStore implements DeviceGrantStore {
  readonly #byDeviceCode = new Map<string, DeviceGrant>();
  readonly #failures = new Map<string, { opened: number; count: number }>();

  insert(grant: DeviceGrant, limits: DeviceGrantLimits): ResultAsync<DeviceGrantInsertOutcome, StoreFailure> {
    for (const [hash, stored] of this.#byDeviceCode)
      if (stored.expires_at < limits.dropExpiredBefore) this.#byDeviceCode.delete(hash);
    const stored = [...this.#byDeviceCode.values()];
    const live = stored.filter((g) => g.expires_at > limits.now);
    if (
      grant.client !== null &&
      limits.maxLivePerClient !== undefined &&
      live.filter((g) => g.client === grant.client).length >= limits.maxLivePerClient
    )
      return okAsync('client_full');
    if (live.length >= limits.maxLive) return okAsync('full');
    if (stored.some((g) => g.user_code === grant.user_code)) return okAsync('user_code_taken');
    this.#byDeviceCode.set(grant.device_code_hash, { ...grant });
    return okAsync('inserted');
  }

  update(
    key: DeviceGrantKey,
    change: (current: DeviceGrant | null) => DeviceGrant | null,
  ): ResultAsync<DeviceGrant | null, StoreFailure> {
    const current =
      'device_code_hash' in key
        ? this.#byDeviceCode.get(key.device_code_hash)
        : [...this.#byDeviceCode.values()].find((g) => g.user_code === key.user_code);
    const given = current ? { ...current } : null;
    const next = change(given);
    if (next === given) return okAsync(given ? { ...given } : null);
    if (current) this.#byDeviceCode.delete(current.device_code_hash);
    if (next) {
      if (current && (next.device_code_hash !== current.device_code_hash || next.user_code !== current.user_code)) {
        throw new Error('A device grant update may not change its codes.');
      }
      if (!current) throw new Error('A device grant update may not create a grant; insert it.');
      this.#byDeviceCode.set(next.device_code_hash, { ...next });
    }
    return okAsync(next ? { ...next } : null);
  }

  recordFailure(userId: string, now: string, windowMs: number): ResultAsync<number, StoreFailure> {
    const at = Date.parse(now);
    this.#sweep(at, windowMs);
    const open = this.#open(userId, at, windowMs);
    const next = open ? { opened: open.opened, count: open.count + 1 } : { opened: at, count: 1 };
    this.#failures.set(userId, next);
    return okAsync(next.count);
  }

  failures(userId: string, now: string, windowMs: number): ResultAsync<number, StoreFailure> {
    return okAsync(this.#open(userId, Date.parse(now), windowMs)?.count ?? 0);
  }

  #open(userId: string, at: number, windowMs: number) {
    const window = this.#failures.get(userId);
    return window && at - window.opened < windowMs ? window : null;
  }

  /** Closed windows go, so the counters stay as many as the users who failed lately. */
  #sweep(at: number, windowMs: number): void {
    if (this.#failures.size < 1_000) return;
    for (const [userId, window] of this.#failures) if (at - window.opened >= windowMs) this.#failures.delete(userId);
  }
}
