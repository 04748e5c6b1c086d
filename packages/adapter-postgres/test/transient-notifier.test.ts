/**
 * Transient events (pieces of an answer being written) across replicas on one PostgreSQL: two
 * notifiers on the same database, each feeding an `EventLog` over the same event store. A
 * subscriber on one replica sees the other's deltas in order and once; each NOTIFY payload
 * stays under PostgreSQL's 8000 bytes whatever the text; what any client NOTIFYs by hand on the
 * channel is never trusted.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { EventLog, type StreamingDelta, type TransientEvent } from '@acs/core';
import { expectOk } from '@acs/core/testing';
import { createPostgresEventNotifier, type PostgresEventNotifier } from '@acs/adapter-postgres';
import { decodeTransient, encodeTransient, fitDelta, PAYLOAD_LIMIT } from '../src/transient-payload.js';
import { DATABASE_URL, freshStorage, postgresDatabase } from './databases.js';

const cleanup: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const step of cleanup.reverse()) await step();
});

const until = async (what: string, ok: () => boolean, timeoutMs = 60_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};
const nextTurn = () => new Promise((r) => setImmediate(r));

const delta = (content: string | null, more: Partial<StreamingDelta> = {}): StreamingDelta => ({
  kind: 'delta',
  message_id: 'm1',
  attempt: 0,
  content,
  reasoning_content: null,
  timestamp: new Date().toISOString(),
  ...more,
});

const joined = (events: TransientEvent[], field: 'content' | 'reasoning_content' = 'content') =>
  events.map((e) => e[field] ?? '').join('');

/** Whether a piece starts or ends inside a surrogate pair (a pair cut in two). */
const cutsPair = (text: string) =>
  /^[\udc00-\udfff]/.test(text) || (/[\ud800-\udbff]$/.test(text) && !/[\ud800-\udbff][\udc00-\udfff]$/.test(text));

/** A client of our own on the channel: sees every NOTIFY as it is on the wire, and sends by hand. */
interface Wire {
  client: pg.Client;
  payloads: string[];
}

async function wire(channel: string): Promise<Wire> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  client.on('error', () => {});
  await client.connect();
  await client.query(`LISTEN ${channel}`);
  const payloads: string[] = [];
  client.on('notification', (message) => payloads.push(message.payload ?? ''));
  cleanup.push(() => client.end());
  return { client, payloads };
}

async function twoReplicas() {
  const storage = await freshStorage(postgresDatabase);
  const channel = `acs_t_${randomBytes(4).toString('hex')}`;
  const [na, nb] = (await Promise.all(
    [0, 1].map(() => createPostgresEventNotifier({ connectionString: DATABASE_URL, channel, reconnectDelayMs: 100 })),
  )) as [PostgresEventNotifier, PostgresEventNotifier];
  const a = new EventLog(storage.events, na);
  const b = new EventLog(storage.events, nb);
  cleanup.push(async () => {
    a.close();
    b.close();
    await na.close();
    await nb.close();
  });
  return { storage, channel, na, nb, a, b, wire: await wire(channel) };
}

/** A live subscription's transient events, past its replay. */
async function follow(log: EventLog, conversationId: string): Promise<TransientEvent[]> {
  const seen: TransientEvent[] = [];
  await expectOk(
    log.subscribe(
      'alice',
      conversationId,
      0,
      () => {},
      undefined,
      (e) => seen.push(e),
    ),
  );
  return seen;
}

/** 2048 UTF-16 units of what JSON escapes most: quotes, backslashes, newlines, control characters, and emoji. */
function escapeHeavy(): string {
  const tokens = ['"', '😀', '\n', '\u0001', '\\', 'é', '\u001f', '🧪'];
  let text = '';
  for (let i = 0; text.length + 2 <= 2048; i++) text += tokens[i % tokens.length];
  return text.padEnd(2048, '"');
}

describe('transient payloads', () => {
  it('cuts a delta into payloads under 8000 bytes, in order, never inside a surrogate pair', () => {
    const alphabet = ['a', '"', '\\', '\n', '\u0000', '\u001f', 'é', '€', '😀', '\ud800', '\udfff', '\u2028'];
    for (let round = 0; round < 50; round++) {
      const text = (n: number) => Array.from({ length: n }, () => alphabet[(Math.random() * 12) | 0]).join('');
      const event = delta(text(round * 100), { reasoning_content: text(2048), message_id: 'x'.repeat(round * 50) });
      const pieces = fitDelta('origin', 'alice', 'c1', event);
      for (const { event: piece, bytes } of pieces) {
        const payload = encodeTransient('origin', Number.MAX_SAFE_INTEGER, 'alice', 'c1', piece);
        expect(Buffer.byteLength(payload)).toBe(bytes);
        expect(bytes).toBeLessThanOrEqual(PAYLOAD_LIMIT);
        expect(decodeTransient(JSON.parse(payload))?.event).toEqual(piece);
      }
      for (const field of ['content', 'reasoning_content'] as const) {
        const whole = event[field]!;
        expect(
          joined(
            pieces.map((p) => p.event),
            field,
          ),
        ).toBe(whole);
        // No cut between the two halves of a pair (the text also has lone surrogates, kept as they are).
        let at = 0;
        for (const { event: piece } of pieces) {
          at += piece[field]?.length ?? 0;
          expect(/[\ud800-\udbff][\udc00-\udfff]/.test(whole.slice(at - 1, at + 1)), `a cut at ${at}`).toBe(false);
        }
      }
    }
  });

  it('drops a delta whose ids alone leave no room for text', () => {
    expect(fitDelta('origin', 'alice', 'c1', delta('text', { message_id: 'x'.repeat(8_000) }))).toEqual([]);
  });
});

describe('transient events across replicas on one PostgreSQL', () => {
  it("a subscriber on B gets A's deltas in order and once; one on A gets them once, not again from its own NOTIFY", async () => {
    const { a, b, wire: seen } = await twoReplicas();
    const onA = await follow(a, 'c1');
    const onB = await follow(b, 'c1');
    const sent = Array.from({ length: 40 }, (_, i) => delta(`piece ${i} `));
    for (const [i, event] of sent.entries()) {
      a.publishTransient('alice', 'c1', event);
      if (i % 2 === 0) await nextTurn(); // some in a turn of their own, some two to a turn
    }
    const expected = sent.map((e) => e.content).join('');
    await until("A's deltas on B", () => joined(onB).length >= expected.length);
    expect(joined(onB)).toBe(expected);
    expect(onB.every((e) => e.message_id === 'm1' && e.attempt === 0 && e.reasoning_content === null)).toBe(true);
    // B answers after it saw all of A's: A's connection gets its own NOTIFYs before B's (commit
    // order), so when B's reaches A, an echo of A's own would have been delivered already.
    const answer = delta('from B', { message_id: 'm2' });
    b.publishTransient('alice', 'c1', answer);
    await until("B's delta on A", () => onA.length > sent.length);
    expect(onA).toEqual([...sent, answer]);
    expect(onB.filter((e) => e.message_id === 'm2')).toEqual([answer]);
    expect(seen.payloads.every((p) => Buffer.byteLength(p) < 8000)).toBe(true);
  });

  it('a delta larger than 8000 bytes as JSON reaches the other replica whole, in payloads that fit', async () => {
    const { a, b, wire: seen } = await twoReplicas();
    const onB = await follow(b, 'c1');
    const text = escapeHeavy();
    const big = delta(text, { reasoning_content: escapeHeavy() });
    expect(text.length).toBe(2048);
    expect(Buffer.byteLength(JSON.stringify(big))).toBeGreaterThan(8000);
    a.publishTransient('alice', 'c1', big);
    // Longer than MAX_DELTA_TEXT too: core cuts it into 2048-unit deltas, each 12 KiB as JSON.
    const longer = delta('\u0001'.repeat(5000), { message_id: 'm2' });
    a.publishTransient('alice', 'c1', longer);
    await until('the texts on B', () => joined(onB).length >= text.length + 5000);
    const first = onB.filter((e) => e.message_id === 'm1');
    expect(joined(first)).toBe(text);
    expect(joined(first, 'reasoning_content')).toBe(big.reasoning_content);
    expect(joined(onB.filter((e) => e.message_id === 'm2'))).toBe(longer.content);
    for (const e of onB)
      for (const part of [e.content, e.reasoning_content]) if (part) expect(cutsPair(part)).toBe(false);
    const transient = seen.payloads.filter((p) => decodeTransient(JSON.parse(p)));
    expect(transient.length).toBeGreaterThan(3);
    expect(Math.max(...transient.map((p) => Buffer.byteLength(p)))).toBeLessThan(8000);
  });

  it('a burst of 1000 deltas arrives in order, joined into few NOTIFYs', async () => {
    const { a, b, wire: seen } = await twoReplicas();
    const onB = await follow(b, 'burst');
    const texts = Array.from({ length: 1000 }, (_, i) => `tok${i} `);
    const started = performance.now();
    for (const t of texts) a.publishTransient('alice', 'burst', delta(t));
    await until('the burst on B', () => joined(onB).length >= texts.join('').length);
    const burstMs = performance.now() - started;
    expect(joined(onB)).toBe(texts.join(''));
    const burstNotifies = seen.payloads.length;

    // The same paced as a model writes, one delta per turn of the event loop.
    const onPaced = await follow(b, 'paced');
    const pacedStart = performance.now();
    for (const t of texts) {
      a.publishTransient('alice', 'paced', delta(t));
      await nextTurn();
    }
    await until('the paced deltas on B', () => joined(onPaced).length >= texts.join('').length);
    const pacedMs = performance.now() - pacedStart;
    expect(joined(onPaced)).toBe(texts.join(''));
    const pacedNotifies = seen.payloads.length - burstNotifies;
    expect(burstNotifies).toBeLessThan(100);
    console.info(
      `1000 deltas across replicas: a burst in ${burstNotifies} NOTIFYs, ${burstMs.toFixed(1)} ms to arrive; ` +
        `one per turn in ${pacedNotifies} NOTIFYs, ${pacedMs.toFixed(1)} ms (this machine)`,
    );
  });

  it('holds a bounded amount per conversation: past it deltas are dropped, the rest arrive in order', async () => {
    const { a, b } = await twoReplicas();
    const onB = await follow(b, 'flood');
    const texts = Array.from({ length: 2000 }, (_, i) => `${i}`.padEnd(1000, '.'));
    for (const t of texts) a.publishTransient('alice', 'flood', delta(t)); // 2 MB in one turn
    await nextTurn(); // what was held is being sent: there is room again
    a.publishTransient('alice', 'flood', delta('after', { message_id: 'm2' }));
    await until('the later delta on B', () => onB.some((e) => e.message_id === 'm2'));
    const got = joined(onB.filter((e) => e.message_id === 'm1'));
    expect(texts.join('').startsWith(got)).toBe(true);
    expect(got.length).toBeGreaterThan(30_000);
    expect(got.length).toBeLessThanOrEqual(64 * 1024);
  });

  it('ignores malformed payloads NOTIFY’d by hand, and a listener that throws stops no other', async () => {
    const { storage, channel, nb, wire: hand } = await twoReplicas();
    nb.listen({
      appended: () => {
        throw new Error('a listener that throws');
      },
      transient: () => {
        throw new Error('a listener that throws');
      },
      resync: () => {},
    });
    const b = new EventLog(storage.events, nb); // told after the one that throws
    cleanup.push(() => Promise.resolve(b.close()));
    const onB = await follow(b, 'c1');
    const e = (event: unknown) => JSON.stringify({ t: 'transient', o: 'x', s: 1, u: 'alice', c: 'c1', e: event });
    const bad = [
      'not json',
      'null',
      '42',
      '"text"',
      '[]',
      '["alice"]',
      '[1, 2, 3]',
      '{}',
      '{"t":"transient"}',
      '{"__proto__":{"t":"transient"},"o":"x","u":"alice","c":"c1"}',
      JSON.stringify({ t: 'transient', o: 1, s: 1, u: 'alice', c: 'c1', e: delta('x') }),
      JSON.stringify({ t: 'transient', o: 'x', s: 1, u: ['alice'], c: 'c1', e: delta('x') }),
      e(null),
      e('delta'),
      e({ ...delta('x'), kind: 'other' }),
      e({ ...delta('x'), message_id: 5 }),
      e({ ...delta('x'), attempt: 1.5 }),
      e({ ...delta('x'), content: 5 }),
      e({ ...delta('x'), reasoning_content: {} }),
      e({ ...delta('x'), timestamp: undefined }),
      '['.repeat(3_500) + ']'.repeat(3_500),
      '["alice","c1",1]', // a well-formed append: its listener throws, the log reads the store
    ];
    for (const payload of bad) await hand.client.query('SELECT pg_notify($1, $2)', [channel, payload]);
    const good = delta('made by hand');
    await hand.client.query('SELECT pg_notify($1, $2)', [channel, encodeTransient('x', 2, 'alice', 'c1', good)]);
    await until('the hand-made delta on B', () => onB.length > 0);
    expect(onB).toEqual([good]);
  });

  it('after the listening connections are lost and found again, deltas flow again', async () => {
    const { channel, na, nb, a, b } = await twoReplicas();
    let resyncs = 0;
    for (const n of [na, nb]) n.listen({ appended: () => {}, resync: () => resyncs++ });
    const onB = await follow(b, 'c1');
    const cut = await postgresDatabase.raw<{ cut: boolean }>(
      `SELECT pg_terminate_backend(pid) AS cut FROM pg_stat_activity WHERE application_name = $1`,
      [`acs-events ${channel}`],
    );
    expect(cut.length).toBe(2);
    // Published as the connection goes: dropped or sent, never kept for later.
    a.publishTransient('alice', 'c1', delta('during the cut ', { message_id: 'm0' }));
    await until('both notifiers back', () => resyncs === 2);
    a.publishTransient('alice', 'c1', delta('after'));
    await until('the delta sent after the cut', () => onB.some((e) => e.content === 'after'));
    expect(onB.filter((e) => e.message_id === 'm1')).toEqual([expect.objectContaining({ content: 'after' })]);
  });
});
