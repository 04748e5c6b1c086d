import { describe, expect, it } from 'vitest';
import type { EventStore, NewEvent } from '../events/store.js';
import { at } from './fixtures.js';
import { expectOk, type StoreFactory } from './stores.js';

const event = (n: number, payload: Record<string, unknown> = {}): NewEvent => ({
  kind: n % 2 ? 'ActionEvent' : 'ObservationEvent',
  source: n % 2 ? 'agent' : 'environment',
  timestamp: at(n),
  payload: { n, ...payload },
});

/** Contract every EventStore must meet: gap-free ids per conversation, read-after, isolation. */
export function describeEventStoreContract(name: string, make: StoreFactory<EventStore>): void {
  describe(`EventStore contract: ${name}`, () => {
    it('numbers events 1, 2, 3… per conversation and reads them back unchanged', async () => {
      const store = await make();
      const first = await expectOk(
        store.append('alice', 'c1', [event(1, { text: 'héllo 👋', nested: { a: [1, null, true] } }), event(2)]),
      );
      expect(first.map((e) => e.id)).toEqual([1, 2]);
      const second = await expectOk(store.append('alice', 'c1', [event(3)]));
      expect(second.map((e) => e.id)).toEqual([3]);
      expect((await expectOk(store.append('alice', 'c2', [event(1)])))[0]?.id).toBe(1);
      const all = await expectOk(store.readAfter('alice', 'c1', 0, 100));
      expect(all).toEqual([...first, ...second]);
      expect(all[0]).toMatchObject({
        conversation_id: 'c1',
        kind: 'ActionEvent',
        source: 'agent',
        timestamp: at(1),
        payload: { n: 1, text: 'héllo 👋', nested: { a: [1, null, true] } },
      });
    });

    it('reads after an id, oldest first, up to a limit', async () => {
      const store = await make();
      await expectOk(
        store.append(
          'alice',
          'c1',
          Array.from({ length: 10 }, (_, i) => event(i + 1)),
        ),
      );
      expect((await expectOk(store.readAfter('alice', 'c1', 4, 3))).map((e) => e.id)).toEqual([5, 6, 7]);
      expect(await expectOk(store.readAfter('alice', 'c1', 10, 5))).toEqual([]);
      expect(await expectOk(store.readAfter('alice', 'nope', 0, 5))).toEqual([]);
    });

    it('keeps ids gap-free and unique under concurrent appends', async () => {
      const store = await make();
      const batches = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          expectOk(store.append('alice', 'busy', i % 3 === 0 ? [event(i), event(i)] : [event(i)])),
        ),
      );
      const ids = batches
        .flat()
        .map((e) => e.id)
        .sort((a, b) => a - b);
      expect(ids).toEqual(Array.from({ length: ids.length }, (_, i) => i + 1));
      for (const batch of batches) {
        for (let i = 1; i < batch.length; i++) expect(batch[i]!.id).toBe(batch[i - 1]!.id + 1);
      }
      expect((await expectOk(store.readAfter('alice', 'busy', 0, 1000))).map((e) => e.id)).toEqual(ids);
    });

    it('keeps users apart and deletes one conversation’s log', async () => {
      const store = await make();
      await expectOk(store.append('alice', 'c1', [event(1), event(2)]));
      await expectOk(store.append('bob', 'c1', [event(1)]));
      expect(await expectOk(store.readAfter('bob', 'c1', 0, 10))).toHaveLength(1);
      expect(await expectOk(store.deleteConversation('bob', 'c1'))).toBe(1);
      expect(await expectOk(store.readAfter('alice', 'c1', 0, 10))).toHaveLength(2);
      expect(await expectOk(store.deleteConversation('alice', 'c1'))).toBe(2);
      expect(await expectOk(store.readAfter('alice', 'c1', 0, 10))).toEqual([]);
      expect((await expectOk(store.append('alice', 'c1', [event(9)])))[0]?.id).toBeGreaterThanOrEqual(1);
    });
  });
}
