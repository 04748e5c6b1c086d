/**
 * Two replicas on one PostgreSQL (two services, two storages on the same schema, two
 * notifiers): a live subscription on one follows a conversation appended to by the other,
 * each event once and in order, also across the loss of its listening connection.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import { expectOk } from '@acs/core/testing';
import { createAgent } from '@acs/agent';
import { createMemoryPorts } from '@acs/testing';
import { createPostgresEventNotifier, createPostgresStorage, type PostgresEventNotifier } from '@acs/adapter-postgres';
import { DATABASE_URL, freshStorage, postgresDatabase, testCipher } from './databases.js';

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

async function replicas(
  channel: string,
): Promise<{ a: AgentConversationService; b: AgentConversationService; notifiers: PostgresEventNotifier[] }> {
  const first = await freshStorage(postgresDatabase);
  const second = await createPostgresStorage({
    db: await postgresDatabase.executor(),
    cipher: testCipher(),
    schema: first.schema,
  });
  const notifiers = await Promise.all(
    [0, 1].map(() => createPostgresEventNotifier({ connectionString: DATABASE_URL, channel, reconnectDelayMs: 100 })),
  );
  const [a, b] = [first, second].map((storage, i) =>
    createAgentConversationService({
      ...createMemoryPorts(),
      ...storage,
      eventNotifier: notifiers[i]!,
      agent: createAgent(),
    }),
  );
  cleanup.push(async () => {
    await a!.close();
    await b!.close();
    for (const n of notifiers) await n.close();
  });
  return { a: a!, b: b!, notifiers };
}

describe('replicas on one PostgreSQL', () => {
  it('a stream on one replica follows appends made on another, each event once, in order', async () => {
    const { a, b } = await replicas(`acs_t_${randomBytes(4).toString('hex')}`);
    await expectOk(a.settings.store('alice', { llm_model: 'openai/scripted', llm_api_key: 'sk-x' }));
    const { conversation_id: id } = await expectOk(a.conversations.create('alice', { initial_user_msg: 'hello' }));
    await a.idle();
    const seen: number[] = [];
    const arrived = new Map<number, number>();
    await expectOk(
      b.conversations.subscribeEvents('alice', id, 0, (e) => {
        seen.push(e.id);
        arrived.set(e.id, performance.now());
      }),
    );
    const before = seen.length;
    const sentAt = new Map<number, number>();
    for (let i = 0; i < 50; i++) {
      const started = performance.now();
      const event = await expectOk(
        a.conversations.sendMessage('alice', id, {
          role: 'user',
          content: [{ type: 'text', text: `message ${i}` }],
          run: false,
        }),
      );
      sentAt.set(event.id, started);
    }
    await until('the 50 messages on the other replica', () => seen.length === before + 50);
    expect(seen).toEqual(Array.from({ length: seen.length }, (_, i) => i + 1));
    const latencies = [...sentAt].map(([eventId, t]) => arrived.get(eventId)! - t).sort((x, y) => x - y);
    console.info(
      `cross-replica delivery over LISTEN/NOTIFY: p50 ${latencies[24]!.toFixed(1)} ms, max ${latencies[49]!.toFixed(1)} ms (50 appends, this machine)`,
    );
  });

  it('loses nothing when the listening connection drops: after reconnecting, the stream catches up', async () => {
    const channel = `acs_t_${randomBytes(4).toString('hex')}`;
    const { a, b } = await replicas(channel);
    await expectOk(a.settings.store('alice', { llm_model: 'openai/scripted', llm_api_key: 'sk-x' }));
    const { conversation_id: id } = await expectOk(a.conversations.create('alice', { initial_user_msg: 'hello' }));
    await a.idle();
    const seen: number[] = [];
    await expectOk(b.conversations.subscribeEvents('alice', id, 0, (e) => seen.push(e.id)));
    const start = seen.length;
    // Cut both replicas' listening connections; append while they are gone.
    const cut = await postgresDatabase.raw<{ cut: boolean }>(
      `SELECT pg_terminate_backend(pid) AS cut FROM pg_stat_activity WHERE application_name = $1`,
      [`acs-events ${channel}`],
    );
    expect(cut.length).toBe(2);
    await expectOk(
      a.conversations.sendMessage('alice', id, {
        role: 'user',
        content: [{ type: 'text', text: 'while cut' }],
        run: false,
      }),
    );
    await until('the event appended during the cut', () => seen.length === start + 1);
    await expectOk(
      a.conversations.sendMessage('alice', id, {
        role: 'user',
        content: [{ type: 'text', text: 'after' }],
        run: false,
      }),
    );
    await until('the next one', () => seen.length === start + 2);
    expect(seen).toEqual(Array.from({ length: seen.length }, (_, i) => i + 1));
  });

  it('refuses a channel that is not an identifier, and a database that does not answer, at once', async () => {
    await expect(createPostgresEventNotifier({ connectionString: DATABASE_URL, channel: 'Bad; DROP' })).rejects.toThrow(
      /lower-case identifier/,
    );
    await expect(
      createPostgresEventNotifier({ connectionString: 'postgres://nobody:none@127.0.0.1:1/none' }),
    ).rejects.toThrow();
  });
});
