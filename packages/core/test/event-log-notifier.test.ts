/**
 * The event log across processes: two EventLogs on one store (as two replicas on one
 * database) with a notifier between them. A subscription on one follows appends made through
 * the other, each event once and in order; a lost notification is made good by the next one,
 * and a resync (the notifier reconnected) catches a subscription up with nothing told.
 */
import { describe, expect, it } from 'vitest';
import { createMemoryPorts } from '@acs/testing';
import { EventLog } from '../src/index.js';
import type { EventNotifier, EventNotifierListener } from '../src/ports.js';
import type { ConversationEvent, ConversationEventDraft } from '../src/schemas.js';
import { expectOk } from '../src/testing/index.js';

/** An in-memory bus standing in for LISTEN/NOTIFY; `drop` loses what is sent while it is set. */
function bus() {
  const listeners = new Set<EventNotifierListener>();
  const state = { drop: false, sent: 0 };
  const notifier: EventNotifier = {
    notify: (userId, conversationId, lastId) => {
      state.sent++;
      if (state.drop) return;
      queueMicrotask(() => {
        for (const l of listeners) l.appended(userId, conversationId, lastId);
      });
    },
    listen: (listener) => {
      listeners.add(listener);
      return { close: () => listeners.delete(listener) };
    },
  };
  return { notifier, state, resync: () => listeners.forEach((l) => l.resync()) };
}

const message = (text: string): ConversationEventDraft => ({
  kind: 'message',
  source: 'user',
  timestamp: new Date().toISOString(),
  text,
  image_urls: [],
});
const until = async (what: string, ok: () => boolean) => {
  const deadline = Date.now() + 60_000;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('EventLog with a notifier', () => {
  it('delivers appends made through another log on the same store, each once, in order', async () => {
    const store = createMemoryPorts().events;
    const { notifier } = bus();
    const [a, b] = [new EventLog(store, notifier), new EventLog(store, notifier)];
    await expectOk(a.append('alice', 'c1', [message('before')]));
    const seen: ConversationEvent[] = [];
    const subscription = await expectOk(b.subscribe('alice', 'c1', 0, (e) => seen.push(e)));
    for (let i = 0; i < 20; i++) await expectOk(a.append('alice', 'c1', [message(`from a ${i}`)]));
    await expectOk(b.append('alice', 'c1', [message('from b')]));
    await until('all 22 events on b', () => seen.length === 22);
    expect(seen.map((e) => e.id)).toEqual(Array.from({ length: 22 }, (_, i) => i + 1));
    expect(subscription.lastId).toBe(22);
    // Another conversation's appends are not this subscription's.
    await expectOk(a.append('alice', 'c2', [message('elsewhere')]));
    await new Promise((r) => setTimeout(r, 20));
    expect(seen).toHaveLength(22);
    subscription.close();
    a.close();
    b.close();
  });

  it('makes a lost notification good with the next one, and catches up on a resync with nothing told', async () => {
    const store = createMemoryPorts().events;
    const { notifier, state, resync } = bus();
    const [a, b] = [new EventLog(store, notifier), new EventLog(store, notifier)];
    const seen: number[] = [];
    await expectOk(b.subscribe('alice', 'c1', 0, (e) => seen.push(e.id)));
    state.drop = true;
    await expectOk(a.append('alice', 'c1', [message('lost 1'), message('lost 2')]));
    await new Promise((r) => setTimeout(r, 20));
    expect(seen).toEqual([]);
    state.drop = false;
    await expectOk(a.append('alice', 'c1', [message('told')]));
    await until('the gap filled', () => seen.length === 3);
    expect(seen).toEqual([1, 2, 3]);

    state.drop = true;
    await expectOk(a.append('alice', 'c1', [message('lost 3')]));
    state.drop = false;
    resync();
    await until('the resync', () => seen.length === 4);
    expect(seen).toEqual([1, 2, 3, 4]);
    a.close();
    b.close();
  });

  it('stops listening when closed', async () => {
    const store = createMemoryPorts().events;
    const { notifier } = bus();
    const [a, b] = [new EventLog(store, notifier), new EventLog(store, notifier)];
    const seen: number[] = [];
    await expectOk(b.subscribe('alice', 'c1', 0, (e) => seen.push(e.id)));
    b.close();
    await expectOk(a.append('alice', 'c1', [message('after close')]));
    await new Promise((r) => setTimeout(r, 20));
    expect(seen).toEqual([]);
    a.close();
  });
});
