import { once } from 'node:events';
import { request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PGlite } from '@electric-sql/pglite';
import express from 'express';
import { afterAll, describe, expect, it } from 'vitest';
import { createAgentConversationService } from '@acs/core';
import { expectOk } from '@acs/core/testing';
import { createMemoryPorts } from '@acs/testing';
import { createAcsRouter } from '@acs/adapter-express';
import { fromPGlite } from '@acs/adapter-postgres';
import { DATABASES, freshStorage } from './databases.js';
import { createAgent } from '@acs/agent';

/**
 * An outside test found POST /api/v1/sandboxes stalling on PGlite (5–12 s and more, no log
 * line, no record) while settings and conversation writes went on, and never on PostgreSQL.
 * PGlite runs SQL on the event loop's thread and its promises settle without giving the event
 * loop a turn, so back-to-back database work kept Node from accepting new connections (one per
 * turn) for as long as it lasted. These tests fail, instead of hanging, when that comes back:
 * the writers stop after DEADLINE_MS of wall time at the latest.
 */
const DEADLINE_MS = 60_000;
const BURST = 50;

const KEYS = {
  'alice-key-0123456789abcdef': 'alice',
  'bob-key-0123456789abcdef-b': 'bob',
  'carol-key-0123456789abcdef': 'carol',
};

/** A POST on a connection of its own (as a client elsewhere would send it); resolves to the status. */
function postOnNewConnection(url: string, key: string, body: unknown): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', agent: false, headers: { 'X-Session-API-Key': key, 'Content-Type': 'application/json' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

for (const db of DATABASES) {
  describe(`mixed load on ${db.name}`, () => {
    it(
      `answers ${BURST} concurrent POST /api/v1/sandboxes while settings and conversation writes keep the database busy`,
      async () => {
        const storage = await freshStorage(db);
        const service = createAgentConversationService(
          { agent: createAgent(), ...createMemoryPorts(), ...storage },
          { pollIntervalMs: 1 },
        );
        const app = express();
        app.use(createAcsRouter(service, { apiKeys: KEYS }));
        const server: Server = app.listen(0, '127.0.0.1');
        await once(server, 'listening');
        const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
        try {
          for (const user of ['bob', 'carol']) {
            await expectOk(service.settings.store(user, { llm_model: 'openai/gpt-4o', llm_api_key: `sk-${user}` }));
          }

          // Bob's settings stores and Carol's conversation creates (each starts a sandbox, a start
          // pipeline and an agent run in the background), back to back, until the burst is answered.
          const stopAt = performance.now() + DEADLINE_MS;
          let burstAnswered = false;
          const busy = () => !burstAnswered && performance.now() < stopAt;
          const writes = { settings: 0, conversations: 0 };
          const settingsWriter = async () => {
            for (let i = 0; busy(); i++) {
              await expectOk(service.settings.store('bob', { language: `l${i}`, llm_api_key: `sk-bob-${i}` }));
              writes.settings++;
            }
          };
          const conversationWriter = async () => {
            for (let i = 0; busy(); i++) {
              await expectOk(service.conversations.create('carol', { initial_user_msg: `hello #${i}` }));
              writes.conversations++;
            }
          };
          const writers = [settingsWriter(), settingsWriter(), conversationWriter(), conversationWriter()];

          const statuses = await Promise.all(
            Array.from({ length: BURST }, () =>
              postOnNewConnection(`${base}/api/v1/sandboxes`, 'alice-key-0123456789abcdef', {}),
            ),
          );
          const inTime = performance.now() < stopAt;
          burstAnswered = true;
          await Promise.all(writers);

          expect(
            inTime,
            `${BURST} concurrent POST /api/v1/sandboxes were not all answered within ${DEADLINE_MS / 1000} s while settings and conversation ` +
              `writes ran on ${db.name} (${writes.settings} settings stores, ${writes.conversations} conversation creates meanwhile): ` +
              `the database's work did not let the event loop accept the new connections`,
          ).toBe(true);
          expect(statuses).toEqual(Array.from({ length: BURST }, () => 200));
          expect(writes.settings).toBeGreaterThan(0);
          expect(writes.conversations).toBeGreaterThan(0);
          const alices = await expectOk(storage.sandboxes.listByStatus('alice', ['STARTING', 'RUNNING']));
          expect(alices).toHaveLength(BURST);
        } finally {
          server.closeAllConnections();
          server.close();
          await service.close();
        }
      },
      2 * DEADLINE_MS,
    );
  });
}

describe('PGlite statements and the event loop', () => {
  let pglite: PGlite | undefined;
  const executor = async () => fromPGlite((pglite ??= await PGlite.create()));
  afterAll(async () => {
    await pglite?.close();
  });

  /** Runs `work` and says how many of its steps had finished when a timer set just before it fired (null: not before it ended). */
  const finishedWhenTimerFired = async (work: (finished: () => void) => Promise<unknown>): Promise<number | null> => {
    let finished = 0;
    let atTimer: number | null = null;
    setTimeout(() => (atTimer = finished), 0);
    await work(() => finished++);
    return atTimer;
  };

  it('gives timers a turn while a backlog of concurrent statements runs', async () => {
    const db = await executor();
    const atTimer = await finishedWhenTimerFired((finished) =>
      Promise.all(Array.from({ length: 2_000 }, () => db.query('SELECT 1').then(finished))),
    );
    expect(
      atTimer,
      'the timer fired only after all 2,000 statements: PGlite kept the event loop to itself',
    ).not.toBeNull();
    expect(atTimer).toBeLessThan(2_000);
  });

  it('gives timers a turn while one caller runs statement after statement', async () => {
    const db = await executor();
    const atTimer = await finishedWhenTimerFired(async (finished) => {
      for (let i = 0; i < 1_000; i++) {
        await db.transaction(async (tx) => tx.query('SELECT $1::int AS i', [i]));
        await db.query('SELECT 1');
        finished();
      }
    });
    expect(atTimer, 'the timer fired only after all 1,000 steps: PGlite kept the event loop to itself').not.toBeNull();
    expect(atTimer).toBeLessThan(1_000);
  });

  it('runs statements in the order they were issued, transactions included', async () => {
    const db = await executor();
    await db.query('CREATE TEMP TABLE issued (n serial PRIMARY KEY, i int NOT NULL)');
    await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        i % 3 === 0
          ? db.transaction(async (tx) => tx.query('INSERT INTO issued (i) VALUES ($1)', [i]))
          : db.query('INSERT INTO issued (i) VALUES ($1)', [i]),
      ),
    );
    const rows = await db.query<{ i: number }>('SELECT i FROM issued ORDER BY n');
    expect(rows.rows.map((r) => r.i)).toEqual(Array.from({ length: 200 }, (_, i) => i));
  });
});
