import { describe, expect, it } from 'vitest';
import { expectOk } from '@acs/core/testing';
import { freshStorage } from './databases.js';

describe('sqlite store calls in turns', () => {
  it('give the event loop a turn while a backlog of durable writes runs, and keep their order', async () => {
    const storage = await freshStorage();
    const finished: number[] = [];
    let turnSeenAfter: number | null = null;
    // Asked for before the writes: it runs at the first turn of the event loop the writes leave.
    setImmediate(() => (turnSeenAfter = finished.length));
    await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        expectOk(storage.events.append('alice', 'c1', [{ kind: 'MessageEvent', source: 'user', timestamp: new Date().toISOString(), payload: { i } }])).then(() =>
          finished.push(i),
        ),
      ),
    );
    // 300 fsynced commits take far more than one 2 ms slice: the turn came in between.
    expect(turnSeenAfter).not.toBeNull();
    expect(turnSeenAfter!).toBeLessThan(300);
    expect(finished).toEqual(Array.from({ length: 300 }, (_, i) => i));
    const events = await expectOk(storage.events.readAfter('alice', 'c1', 0, 1000));
    expect(events.map((e) => (e.payload as { i: number }).i)).toEqual(finished);
  });
});
