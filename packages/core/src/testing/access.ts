import { describe, expect, it } from 'vitest';
import type { ApiKeyStore, DeviceGrant, DeviceGrantStore, StoredApiKey } from '../access/store.js';
import { expectOk, type StoreFactory } from './stores.js';

let counter = 0;
const hex = (n: number) => n.toString(16).padStart(32, '0');

function apiKeyFixture(userId: string, overrides: Partial<StoredApiKey> = {}): StoredApiKey {
  counter++;
  return {
    id: hex(counter),
    user_id: userId,
    name: `key ${counter}`,
    key_hash: `${'a'.repeat(32)}${hex(counter)}`,
    created_at: new Date(Date.UTC(2026, 0, 1, 0, 0, counter)).toISOString(),
    last_used_at: null,
    expires_at: null,
    ...overrides,
  };
}

/** Contract every ApiKeyStore must meet: keys per user, found by hash, bounded, gone when revoked. */
export function describeApiKeyStoreContract(name: string, make: StoreFactory<ApiKeyStore>): void {
  describe(`ApiKeyStore contract: ${name}`, () => {
    it('keeps what it was given, lists a user’s keys oldest first, and finds a key by its hash', async () => {
      const store = await make();
      const second = apiKeyFixture('alice', { created_at: '2026-01-02T00:00:00.000Z', name: 'laptop' });
      const first = apiKeyFixture('alice', {
        created_at: '2026-01-01T00:00:00.000Z',
        last_used_at: '2026-01-01T10:00:00.000Z',
      });
      expect(await expectOk(store.insert(second, 10))).toBe('inserted');
      expect(await expectOk(store.insert(first, 10))).toBe('inserted');
      expect(await expectOk(store.list('alice'))).toEqual([first, second]);
      expect(await expectOk(store.findByHash(second.key_hash))).toEqual(second);
      expect(await expectOk(store.findByHash('f'.repeat(64)))).toBeNull();
    });

    it('shows one user’s keys to that user only, and lets only that user revoke them', async () => {
      const store = await make();
      const alices = apiKeyFixture('alice');
      await expectOk(store.insert(alices, 10));
      expect(await expectOk(store.list('bob'))).toEqual([]);
      expect(await expectOk(store.delete('bob', alices.id))).toBe(false);
      expect(await expectOk(store.findByHash(alices.key_hash))).toEqual(alices);
      expect(await expectOk(store.delete('alice', alices.id))).toBe(true);
      expect(await expectOk(store.findByHash(alices.key_hash))).toBeNull();
      expect(await expectOk(store.list('alice'))).toEqual([]);
      expect(await expectOk(store.delete('alice', alices.id))).toBe(false);
    });

    it('refuses a key past the user’s limit, also when many are added at once, and counts each user alone', async () => {
      const store = await make();
      const outcomes = await Promise.all(
        Array.from({ length: 8 }, () => expectOk(store.insert(apiKeyFixture('alice'), 3))),
      );
      expect(outcomes.filter((o) => o === 'inserted')).toHaveLength(3);
      expect(outcomes.filter((o) => o === 'limit_reached')).toHaveLength(5);
      expect(await expectOk(store.list('alice'))).toHaveLength(3);
      expect(await expectOk(store.insert(apiKeyFixture('bob'), 3))).toBe('inserted');
      // A revoked key makes room again.
      const [oldest] = await expectOk(store.list('alice'));
      await expectOk(store.delete('alice', oldest!.id));
      expect(await expectOk(store.insert(apiKeyFixture('alice'), 3))).toBe('inserted');
    });

    it('keeps when a key expires, and drops a user’s expired keys when that user adds one', async () => {
      const store = await make();
      const at = (day: number) => new Date(Date.UTC(2026, 1, day)).toISOString();
      const expired = apiKeyFixture('alice', { created_at: at(1), expires_at: at(2) });
      const expiresLater = apiKeyFixture('alice', { created_at: at(1), expires_at: at(20) });
      const bobsExpired = apiKeyFixture('bob', { created_at: at(1), expires_at: at(2) });
      for (const key of [expired, expiresLater, bobsExpired])
        expect(await expectOk(store.insert(key, 3))).toBe('inserted');
      expect(await expectOk(store.findByHash(expiresLater.key_hash))).toEqual(expiresLater);
      expect(await expectOk(store.list('alice'))).toEqual([expired, expiresLater]);
      // At the limit while both still open things; on day 10 the expired one is dropped (only it, only Alice's).
      expect(await expectOk(store.insert(apiKeyFixture('alice', { created_at: at(1) }), 2))).toBe('limit_reached');
      const added = apiKeyFixture('alice', { created_at: at(10) });
      expect(await expectOk(store.insert(added, 2))).toBe('inserted');
      expect((await expectOk(store.list('alice'))).map((k) => k.id)).toEqual([expiresLater.id, added.id]);
      expect(await expectOk(store.findByHash(expired.key_hash))).toBeNull();
      expect(await expectOk(store.findByHash(bobsExpired.key_hash))).toEqual(bobsExpired);
    });

    it('notes a key’s last use without going back in time, and never brings a revoked key back', async () => {
      const store = await make();
      const key = apiKeyFixture('alice');
      await expectOk(store.insert(key, 10));
      await expectOk(store.recordUse(key.id, '2026-02-01T00:00:00.000Z'));
      expect((await expectOk(store.findByHash(key.key_hash)))?.last_used_at).toBe('2026-02-01T00:00:00.000Z');
      await expectOk(store.recordUse(key.id, '2026-01-15T00:00:00.000Z'));
      expect((await expectOk(store.findByHash(key.key_hash)))?.last_used_at).toBe('2026-02-01T00:00:00.000Z');
      await expectOk(store.delete('alice', key.id));
      await expectOk(store.recordUse(key.id, '2026-03-01T00:00:00.000Z'));
      expect(await expectOk(store.findByHash(key.key_hash))).toBeNull();
    });
  });
}

const NOW = '2026-01-01T12:00:00.000Z';
const later = (ms: number) => new Date(Date.parse(NOW) + ms).toISOString();

function grantFixture(overrides: Partial<DeviceGrant> = {}): DeviceGrant {
  counter++;
  return {
    device_code_hash: `${'d'.repeat(32)}${hex(counter)}`,
    user_code: `BCDF${'GHJKLMNPQRSTVWXZ'[counter % 16]}${'GHJKLMNPQRSTVWXZ'[(counter >> 4) % 16]}${'GHJKLMNPQRSTVWXZ'[(counter >> 8) % 16]}${'GHJKLMNPQRSTVWXZ'[(counter >> 12) % 16]}`,
    client_name: 'OpenHands CLI',
    status: 'pending',
    user_id: null,
    created_at: NOW,
    expires_at: later(600_000),
    interval_seconds: 5,
    last_polled_at: null,
    client: null,
    ...overrides,
  };
}

const limits = (maxLive = 100) => ({ now: NOW, maxLive, dropExpiredBefore: later(-600_000) });

/** Contract every DeviceGrantStore must meet: atomic changes by either code, bounded size, per-user failure counts. */
export function describeDeviceGrantStoreContract(name: string, make: StoreFactory<DeviceGrantStore>): void {
  describe(`DeviceGrantStore contract: ${name}`, () => {
    it('finds a grant by its device code and by its user code; leaving it as it is writes nothing', async () => {
      const store = await make();
      const grant = grantFixture();
      expect(await expectOk(store.insert(grant, limits()))).toBe('inserted');
      expect(await expectOk(store.update({ device_code_hash: grant.device_code_hash }, (g) => g))).toEqual(grant);
      expect(await expectOk(store.update({ user_code: grant.user_code }, (g) => g))).toEqual(grant);
      expect(await expectOk(store.update({ user_code: 'ZZZZZZZZ' }, (g) => g))).toBeNull();
      expect(await expectOk(store.update({ device_code_hash: 'nope' }, (g) => g))).toBeNull();
    });

    it('applies a change, and deletes a grant when the change says null', async () => {
      const store = await make();
      const grant = grantFixture();
      await expectOk(store.insert(grant, limits()));
      const approved = { ...grant, status: 'approved' as const, user_id: 'alice' };
      const seen: (DeviceGrant | null)[] = [];
      expect(await expectOk(store.update({ user_code: grant.user_code }, (g) => (seen.push(g), approved)))).toEqual(
        approved,
      );
      expect(seen).toEqual([grant]);
      expect(await expectOk(store.update({ device_code_hash: grant.device_code_hash }, (g) => g))).toEqual(approved);
      expect(await expectOk(store.update({ device_code_hash: grant.device_code_hash }, () => null))).toBeNull();
      expect(await expectOk(store.update({ user_code: grant.user_code }, (g) => g))).toBeNull();
    });

    it('applies concurrent changes of one grant one after the other', async () => {
      const store = await make();
      const grant = grantFixture({ interval_seconds: 1 });
      await expectOk(store.insert(grant, limits()));
      await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          expectOk(
            store.update(
              i % 2 ? { user_code: grant.user_code } : { device_code_hash: grant.device_code_hash },
              (g) => g && { ...g, interval_seconds: g.interval_seconds + 1 },
            ),
          ),
        ),
      );
      expect((await expectOk(store.update({ user_code: grant.user_code }, (g) => g)))?.interval_seconds).toBe(11);
    });

    it('refuses a second grant with a user code that is taken', async () => {
      const store = await make();
      const grant = grantFixture();
      await expectOk(store.insert(grant, limits()));
      expect(await expectOk(store.insert(grantFixture({ user_code: grant.user_code }), limits()))).toBe(
        'user_code_taken',
      );
    });

    it('holds at most maxLive grants not yet expired, also when many are added at once', async () => {
      const store = await make();
      const outcomes = await Promise.all(
        Array.from({ length: 8 }, () => expectOk(store.insert(grantFixture(), limits(3)))),
      );
      expect(outcomes.filter((o) => o === 'inserted')).toHaveLength(3);
      expect(outcomes.filter((o) => o === 'full')).toHaveLength(5);
      // Grants that have expired do not count.
      const expiredAt = later(1_000);
      const store2 = await make();
      for (let i = 0; i < 3; i++) await expectOk(store2.insert(grantFixture({ expires_at: expiredAt }), limits(3)));
      expect(await expectOk(store2.insert(grantFixture(), { ...limits(3), now: later(2_000) }))).toBe('inserted');
    });

    it('holds at most maxLivePerClient grants of one client, also when many are added at once, so others still get in', async () => {
      const store = await make();
      const perClient = { ...limits(5), maxLivePerClient: 2 };
      const outcomes = await Promise.all(
        Array.from({ length: 6 }, () => expectOk(store.insert(grantFixture({ client: 'client-a' }), perClient))),
      );
      expect(outcomes.filter((o) => o === 'inserted')).toHaveLength(2);
      expect(outcomes.filter((o) => o === 'client_full')).toHaveLength(4);
      // Another client, and grants without a client, are counted apart (but still against maxLive).
      expect(await expectOk(store.insert(grantFixture({ client: 'client-b' }), perClient))).toBe('inserted');
      expect(await expectOk(store.insert(grantFixture(), perClient))).toBe('inserted');
      expect(await expectOk(store.insert(grantFixture(), perClient))).toBe('inserted');
      expect(await expectOk(store.insert(grantFixture({ client: 'client-c' }), perClient))).toBe('full');
      // A client's expired grants do not count; without maxLivePerClient there is no cap per client.
      const store2 = await make();
      const expiredAt = later(1_000);
      for (let i = 0; i < 2; i++)
        await expectOk(store2.insert(grantFixture({ client: 'client-a', expires_at: expiredAt }), perClient));
      const after = { ...perClient, now: later(2_000) };
      expect(await expectOk(store2.insert(grantFixture({ client: 'client-a' }), after))).toBe('inserted');
      expect(await expectOk(store2.insert(grantFixture({ client: 'client-a' }), after))).toBe('inserted');
      expect(await expectOk(store2.insert(grantFixture({ client: 'client-a' }), after))).toBe('client_full');
      expect(
        await expectOk(store2.insert(grantFixture({ client: 'client-a' }), { ...limits(5), now: later(2_000) })),
      ).toBe('inserted');
      // The client is kept with the grant.
      const kept = grantFixture({ client: 'client-d' });
      await expectOk(store2.insert(kept, after));
      expect(await expectOk(store2.update({ user_code: kept.user_code }, (g) => g))).toEqual(kept);
    });

    it('drops grants that expired before dropExpiredBefore when adding one', async () => {
      const store = await make();
      const old = grantFixture({ expires_at: later(-700_000) });
      const recent = grantFixture({ expires_at: later(-1_000) });
      await expectOk(store.insert(old, { ...limits(), dropExpiredBefore: later(-800_000) }));
      await expectOk(store.insert(recent, { ...limits(), dropExpiredBefore: later(-800_000) }));
      await expectOk(store.insert(grantFixture(), limits()));
      expect(await expectOk(store.update({ user_code: old.user_code }, (g) => g))).toBeNull();
      expect(await expectOk(store.update({ user_code: recent.user_code }, (g) => g))).toEqual(recent);
    });

    it('counts a user’s failed user codes in a window that closes', async () => {
      const store = await make();
      const window = 60_000;
      expect(await expectOk(store.failures('alice', NOW, window))).toBe(0);
      expect(await expectOk(store.recordFailure('alice', NOW, window))).toBe(1);
      expect(await expectOk(store.recordFailure('alice', later(10_000), window))).toBe(2);
      expect(await expectOk(store.failures('alice', later(59_000), window))).toBe(2);
      expect(await expectOk(store.failures('bob', later(1_000), window))).toBe(0);
      // The window opened at the first failure: after it closes the count starts again.
      expect(await expectOk(store.failures('alice', later(60_000), window))).toBe(0);
      expect(await expectOk(store.recordFailure('alice', later(61_000), window))).toBe(1);
      expect(await expectOk(store.failures('alice', later(100_000), window))).toBe(1);
    });
  });
}
