/**
 * Transient events (issue 36): pieces of an answer being written reach the conversation's live
 * subscriptions, here and in another process through the notifier, and are never stored,
 * searched or replayed.
 */
import { describe, expect, it } from 'vitest';
import { createMemoryPorts } from '@acs/testing';
import { EventLog } from '../src/index.js';
import { MAX_DELTA_TEXT, type EventNotifier, type EventNotifierListener, type TransientEvent } from '../src/ports.js';
import { expectOk } from '../src/testing/index.js';

/** A bus standing in for LISTEN/NOTIFY, telling a publication to every log but the one that sent it. */
function bus() {
  const listeners = new Set<EventNotifierListener>();
  const notifierFor = (): EventNotifier => {
    let mine: EventNotifierListener | null = null;
    return {
      notify: () => {},
      publish: (userId, conversationId, event) =>
        queueMicrotask(() => {
          for (const l of listeners) if (l !== mine) l.transient?.(userId, conversationId, event);
        }),
      listen: (listener) => {
        mine = listener;
        listeners.add(listener);
        return { close: () => listeners.delete(listener) };
      },
    };
  };
  return { notifierFor };
}

const delta = (content: string | null, reasoning: string | null = null): TransientEvent => ({
  kind: 'delta',
  message_id: 'm1',
  attempt: 1,
  content,
  reasoning_content: reasoning,
  timestamp: new Date().toISOString(),
});

describe('transient events of the event log', () => {
  it('reach the live subscriptions of the conversation, in this process and another, and nobody else', async () => {
    const store = createMemoryPorts().events;
    const { notifierFor } = bus();
    const [a, b] = [new EventLog(store, notifierFor()), new EventLog(store, notifierFor())];
    const seen = { a: [] as TransientEvent[], b: [] as TransientEvent[], other: [] as TransientEvent[] };
    await expectOk(
      a.subscribe(
        'alice',
        'c1',
        0,
        () => {},
        undefined,
        (e) => seen.a.push(e),
      ),
    );
    await expectOk(
      b.subscribe(
        'alice',
        'c1',
        0,
        () => {},
        undefined,
        (e) => seen.b.push(e),
      ),
    );
    await expectOk(
      b.subscribe(
        'alice',
        'c2',
        0,
        () => {},
        undefined,
        (e) => seen.other.push(e),
      ),
    );
    await expectOk(
      b.subscribe(
        'bob',
        'c1',
        0,
        () => {},
        undefined,
        (e) => seen.other.push(e),
      ),
    );
    a.publishTransient('alice', 'c1', delta('Hel'));
    a.publishTransient('alice', 'c1', delta('lo', 'thinking'));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(seen.a.map((e) => [e.content, e.reasoning_content])).toEqual([
      ['Hel', null],
      ['lo', 'thinking'],
    ]);
    // Once each in the other process, though its own notifier listener and the log both could tell it.
    expect(seen.b).toEqual(seen.a);
    expect(seen.other).toEqual([]);
  });

  it('are not stored, not searched and not replayed to a later subscription', async () => {
    const store = createMemoryPorts().events;
    const log = new EventLog(store);
    log.publishTransient('alice', 'c1', delta('early'));
    const late: TransientEvent[] = [];
    const events: unknown[] = [];
    await expectOk(
      log.subscribe(
        'alice',
        'c1',
        0,
        (e) => events.push(e),
        undefined,
        (e) => late.push(e),
      ),
    );
    expect(late).toEqual([]);
    expect(events).toEqual([]);
    expect(await expectOk(log.readAll('alice', 'c1'))).toEqual([]);
    expect((await expectOk(log.search('alice', 'c1', { after: 0, kinds: null, limit: 10 }))).items).toEqual([]);
  });

  it('go out in pieces of at most MAX_DELTA_TEXT, reasoning first, a surrogate pair never cut', async () => {
    const log = new EventLog(createMemoryPorts().events);
    const seen: TransientEvent[] = [];
    await expectOk(
      log.subscribe(
        'alice',
        'c1',
        0,
        () => {},
        undefined,
        (e) => seen.push(e),
      ),
    );
    const text = 'a'.repeat(MAX_DELTA_TEXT - 1) + '😀' + 'b'.repeat(MAX_DELTA_TEXT);
    log.publishTransient('alice', 'c1', delta(text, 'r'.repeat(MAX_DELTA_TEXT + 1)));
    expect(seen.every((e) => (e.content ?? '').length <= MAX_DELTA_TEXT)).toBe(true);
    expect(seen.map((e) => e.reasoning_content ?? '').join('')).toBe('r'.repeat(MAX_DELTA_TEXT + 1));
    expect(seen.map((e) => e.content ?? '').join('')).toBe(text);
    expect(seen[2]?.content).toBe('a'.repeat(MAX_DELTA_TEXT - 1));
    expect(seen.findIndex((e) => e.content !== null)).toBe(2);
  });
});
