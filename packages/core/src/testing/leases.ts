import { describe, expect, it } from 'vitest';
import type { ConversationLeaseStore } from '../events/lease.js';
import type { EventStore } from '../events/store.js';
import { expectOk, type StoreFactory } from './stores.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const event = (n: number) => ({
  kind: 'message',
  source: 'user' as const,
  timestamp: '2026-01-01T00:00:00.000Z',
  payload: { n },
});

/**
 * Contract of a ConversationLeaseStore, with the event store that checks its fences (both over
 * the same data). Uses real time: leases of 150 ms expire during the tests.
 */
export function describeConversationLeaseStoreContract(
  name: string,
  make: StoreFactory<{ leases: ConversationLeaseStore; events: EventStore }>,
): void {
  describe(`ConversationLeaseStore contract: ${name}`, () => {
    it('grants a lease to one owner at a time; the next grant after an expiry gets the next epoch', async () => {
      const { leases } = await make();
      const first = await expectOk(leases.acquire('alice', 'c1', 'A', 5_000));
      expect(first).toEqual({ user_id: 'alice', conversation_id: 'c1', epoch: 1 });
      expect(await expectOk(leases.acquire('alice', 'c1', 'B', 5_000))).toBeNull();
      // Another user's conversation of the same id is another lease.
      expect(await expectOk(leases.acquire('bob', 'c1', 'B', 5_000))).toMatchObject({ epoch: 1 });
      expect(
        await expectOk(
          leases.holders([
            { user_id: 'alice', conversation_id: 'c1' },
            { user_id: 'alice', conversation_id: 'c2' },
          ]),
        ),
      ).toEqual([{ user_id: 'alice', conversation_id: 'c1', owner: 'A' }]);
      // The holder asking again keeps its epoch (here with a short time left).
      expect(await expectOk(leases.acquire('alice', 'c1', 'A', 150))).toMatchObject({ epoch: 1 });
      await sleep(250);
      expect(await expectOk(leases.holders([{ user_id: 'alice', conversation_id: 'c1' }]))).toEqual([]);
      expect(await expectOk(leases.acquire('alice', 'c1', 'B', 150))).toMatchObject({ epoch: 2 });
    });

    it('renews what the owner holds, and tells an owner what it lost', async () => {
      const { leases } = await make();
      await expectOk(leases.acquire('alice', 'c1', 'A', 150));
      await expectOk(leases.acquire('alice', 'c2', 'A', 150));
      await sleep(250);
      // Expired, but nobody took them: the renewal keeps both.
      expect((await expectOk(leases.renew('A', 5_000))).map((l) => l.conversation_id).sort()).toEqual(['c1', 'c2']);
      expect(await expectOk(leases.acquire('alice', 'c1', 'B', 5_000))).toBeNull();
      // A's last renewal is short and A stops renewing; B takes c1 over; A's renewal no longer lists it.
      await expectOk(leases.renew('A', 150));
      await sleep(250);
      expect(await expectOk(leases.acquire('alice', 'c1', 'B', 150))).toMatchObject({ epoch: 2 });
      expect((await expectOk(leases.renew('A', 150))).map((l) => l.conversation_id)).toEqual(['c2']);
    });

    it('releases, unless a wake was asked for meanwhile; relays stop requests through renewals', async () => {
      const { leases } = await make();
      const lease = (await expectOk(leases.acquire('alice', 'c1', 'A', 5_000)))!;
      expect(await expectOk(leases.request('alice', 'c1', 'wake'))).toBe('held');
      expect(await expectOk(leases.release('A', lease))).toBe('wake');
      expect(await expectOk(leases.holders([{ user_id: 'alice', conversation_id: 'c1' }]))).toHaveLength(1);
      expect(await expectOk(leases.renew('A', 5_000))).toEqual([
        { user_id: 'alice', conversation_id: 'c1', epoch: 1, stop_requested: false },
      ]);
      expect(await expectOk(leases.request('alice', 'c1', 'stop'))).toBe('held');
      expect(await expectOk(leases.renew('A', 5_000))).toEqual([
        { user_id: 'alice', conversation_id: 'c1', epoch: 1, stop_requested: true },
      ]);
      expect(await expectOk(leases.release('A', lease))).toBe('released');
      expect(await expectOk(leases.release('A', lease))).toBe('lost');
      expect(await expectOk(leases.request('alice', 'c1', 'wake'))).toBe('free');
      expect(await expectOk(leases.holders([{ user_id: 'alice', conversation_id: 'c1' }]))).toEqual([]);
      // Taken again after a release: a new epoch, requests cleared.
      expect(await expectOk(leases.acquire('alice', 'c1', 'B', 5_000))).toMatchObject({ epoch: 2 });
      expect(await expectOk(leases.renew('B', 5_000))).toEqual([
        { user_id: 'alice', conversation_id: 'c1', epoch: 2, stop_requested: false },
      ]);
      expect(await expectOk(leases.release('A', lease))).toBe('lost');
    });

    it('refuses a fenced append of a stale holder, whole, and takes the holder’s and unfenced ones', async () => {
      const { leases, events } = await make();
      const old = (await expectOk(leases.acquire('alice', 'c1', 'A', 100)))!;
      expect((await expectOk(events.append('alice', 'c1', [event(1)], { epoch: old.epoch }))).map((e) => e.id)).toEqual(
        [1],
      );
      await sleep(200);
      // Expired but not taken over: the holder's append still lands.
      expect((await expectOk(events.append('alice', 'c1', [event(2)], { epoch: old.epoch }))).map((e) => e.id)).toEqual(
        [2],
      );
      const taken = (await expectOk(leases.acquire('alice', 'c1', 'B', 5_000)))!;
      const refused = await events.append('alice', 'c1', [event(3), event(4)], { epoch: old.epoch });
      expect(refused.isErr() && refused.error).toMatchObject({ type: 'LeaseLost', conversationId: 'c1', epoch: 1 });
      expect(
        (await expectOk(events.append('alice', 'c1', [event(3)], { epoch: taken.epoch }))).map((e) => e.id),
      ).toEqual([3]);
      // A user's message carries no fence.
      expect((await expectOk(events.append('alice', 'c1', [event(4)]))).map((e) => e.id)).toEqual([4]);
      // Released: nobody's fence holds.
      await expectOk(leases.release('B', taken));
      expect((await events.append('alice', 'c1', [event(5)], { epoch: taken.epoch })).isErr()).toBe(true);
      expect((await expectOk(events.readAfter('alice', 'c1', 0, 10))).map((e) => e.payload['n'])).toEqual([1, 2, 3, 4]);
    });

    it('lets exactly one of many concurrent owners take a free lease', async () => {
      const { leases } = await make();
      const grants = await Promise.all(
        Array.from({ length: 8 }, (_, i) => expectOk(leases.acquire('alice', 'c1', `owner-${i}`, 5_000))),
      );
      expect(grants.filter((g) => g !== null)).toHaveLength(1);
      await expectOk(leases.forget('alice', 'c1'));
      expect(await expectOk(leases.holders([{ user_id: 'alice', conversation_id: 'c1' }]))).toEqual([]);
    });
  });
}
