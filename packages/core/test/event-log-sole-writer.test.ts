/**
 * The event log as the only writer of its store (one process, no notifier, no leases): it knows
 * where each log it has seen ends, so a read from that end (the agent's catch-up before every
 * step) needs no store read (issue 27). Whatever it skips, a read returns what the store holds.
 */
import { describe, expect, it } from 'vitest';
import { ResultAsync } from 'neverthrow';
import { createMemoryPorts } from '@acs/testing';
import { EventLog } from '../src/index.js';
import type { EventStore } from '../src/ports.js';
import type { ConversationEventDraft } from '../src/schemas.js';
import { expectOk } from '../src/testing/index.js';

const message = (text: string): ConversationEventDraft => ({
  kind: 'message',
  source: 'user',
  timestamp: new Date().toISOString(),
  text,
  image_urls: [],
});

/** The store, with its reads counted. */
function countedStore() {
  const store = createMemoryPorts().events;
  const reads = { count: 0 };
  const counted: EventStore = {
    append: (...args) => store.append(...args),
    readAfter: (...args) => {
      reads.count++;
      return store.readAfter(...args);
    },
    deleteConversation: (...args) => store.deleteConversation(...args),
  };
  return { store, counted, reads };
}

describe('EventLog as the sole writer', () => {
  it('reads nothing from the store after the end it appended, and reads again after a new append', async () => {
    const { counted, reads } = countedStore();
    const log = new EventLog(counted, undefined, { soleWriter: true });
    const appended = await expectOk(log.append('u', 'c', [message('one'), message('two')]));
    expect(await expectOk(log.readAll('u', 'c', appended[1]!.id))).toEqual([]);
    expect(reads.count).toBe(0);
    const more = await expectOk(log.append('u', 'c', [message('three')]));
    expect((await expectOk(log.readAll('u', 'c', appended[1]!.id))).map((e) => e.id)).toEqual([more[0]!.id]);
    expect((await expectOk(log.readAll('u', 'c', 0))).map((e) => e.id)).toEqual([1, 2, 3]);
    expect(reads.count).toBe(2);
  });

  it('learns where a log it did not write ends from a read, and forgets a deleted log', async () => {
    const { store, counted, reads } = countedStore();
    await expectOk(
      store.append('u', 'c', [
        {
          kind: 'message',
          source: 'user',
          timestamp: new Date().toISOString(),
          payload: { text: 'written before this process', image_urls: [] },
        },
      ]),
    );
    const log = new EventLog(counted, undefined, { soleWriter: true });
    expect(await expectOk(log.readAll('u', 'c', 0))).toHaveLength(1);
    expect(await expectOk(log.readAll('u', 'c', 1))).toEqual([]);
    expect(reads.count).toBe(1);
    await expectOk(log.deleteConversation('u', 'c'));
    await expectOk(log.append('u', 'c', [message('a new conversation of the same id')]));
    expect(await expectOk(log.readAll('u', 'c', 0))).toHaveLength(1);
  });

  it('does not move the end back when a read that started before an append ends after it', async () => {
    const { store, reads } = countedStore();
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slow: EventStore = {
      append: (...args) => store.append(...args),
      // The read sees the store as it is now, and answers later.
      readAfter: (...args) => {
        reads.count++;
        const now = store.readAfter(...args);
        return new ResultAsync(
          (async () => {
            const result = await now;
            await gate;
            return result;
          })(),
        );
      },
      deleteConversation: (...args) => store.deleteConversation(...args),
    };
    const log = new EventLog(slow, undefined, { soleWriter: true });
    await expectOk(
      store.append('u', 'c', [
        {
          kind: 'message',
          source: 'user',
          timestamp: new Date().toISOString(),
          payload: { text: 'x', image_urls: [] },
        },
      ]),
    );
    const reading = log.readAll('u', 'c', 0);
    await expectOk(log.append('u', 'c', [message('appended while the read was under way')]));
    release();
    expect(await expectOk(reading)).toHaveLength(1);
    // The log ends at 2, not where the slow read saw it end: a read after 1 goes to the store and finds event 2.
    expect((await expectOk(log.readAll('u', 'c', 1))).map((e) => e.id)).toEqual([2]);
  });

  it('always reads the store when another writer may exist (not the sole writer)', async () => {
    const { store, counted, reads } = countedStore();
    const log = new EventLog(counted);
    const appended = await expectOk(log.append('u', 'c', [message('one')]));
    await expectOk(
      store.append('u', 'c', [
        {
          kind: 'message',
          source: 'user',
          timestamp: new Date().toISOString(),
          payload: { text: 'by another process', image_urls: [] },
        },
      ]),
    );
    expect(await expectOk(log.readAll('u', 'c', appended[0]!.id))).toHaveLength(1);
    expect(reads.count).toBe(1);
  });
});
