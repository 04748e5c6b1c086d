/**
 * Two example servers (two processes) on one PostgreSQL database, sandboxes on the machine's
 * Docker engine: the pieces of an answer being written reach the SSE streams on both, the one on
 * the server that runs the conversation and the one on the other (the PostgreSQL notifier carries
 * them in NOTIFY payloads), in order, before the stored answer, and none of them is stored.
 */
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { describe, expect, it } from 'vitest';
import { marker, scriptedCompletion, sseMessages, startFakeOpenAi } from '@acs/testing';
import { removeContainersOf } from './containers.js';
import { allEvents, body, call, freshDataDir, startServer, waitFor } from './process.js';
import { scratchDatabase } from './databases.js';

const KEY = 'replicas-deltas-key-0123456789abcdef';
const USER = `replicas-deltas-${randomBytes(3).toString('hex')}`;

/** What one SSE stream saw: stored events' ids and kinds, and the deltas' text, in order. */
interface Seen {
  ids: number[];
  kinds: string[];
  deltas: string[];
  /** Index in `kinds` before which each delta came (how many stored events preceded it). */
  deltaAt: number[];
}

function watch(response: Response, seen: Seen): Promise<void> {
  return (async () => {
    for await (const { fields } of sseMessages(response.body!)) {
      if (fields.event === 'delta' && fields.data) {
        seen.deltas.push((JSON.parse(fields.data) as { content: string | null }).content ?? '');
        seen.deltaAt.push(seen.kinds.length);
      } else if (fields.id && fields.data) {
        seen.ids.push(Number(fields.id));
        seen.kinds.push((JSON.parse(fields.data) as { kind: string; source?: string }).kind);
      }
    }
  })().catch(() => {}); // aborted at the end of the test
}

describe('deltas across two servers on one PostgreSQL', () => {
  it('the pieces of an answer being written reach the streams on both servers, and are never stored', async () => {
    const database = await scratchDatabase('acs_replicas');
    const ANSWER = 'Streams on both replicas see this answer as it is written, piece by piece, before it is stored.';
    const llm = await startFakeOpenAi();
    // The answer starts 10 s after the model is asked (both streams follow by then), in pieces 30 ms apart.
    const START_MS = 10_000;
    llm.script('replicas-deltas', (turn) => ({
      status: 200,
      body: scriptedCompletion(turn, { content: ANSWER }),
      delayMs: START_MS,
      streamPieceDelayMs: 30,
    }));
    const aborts: AbortController[] = [];
    const readings: Promise<void>[] = [];
    try {
      // Docker sandboxes: both servers see the conversation's container (a fake runtime's
      // sandboxes would be one process's, and the other would stop the conversation as lost).
      const env = {
        SESSION_API_KEY: 'replicas-deltas-unused-key-0123456789',
        ACS_API_KEYS: `${USER}:${KEY}`,
        DATABASE_URL: database.url,
        ACS_SANDBOXES: 'docker',
        ACS_SANDBOX_NETWORK: 'none',
        ACS_SANDBOX_POOL: 'none',
        ACS_SANDBOX_MEMORY_MB: '256',
        ACS_SANDBOX_IDLE_MINUTES: '0',
        ACS_SECRET_KEY: randomBytes(32).toString('hex'),
      };
      const a = await startServer({ ...env, DATA_DIR: freshDataDir() });
      const b = await startServer({ ...env, DATA_DIR: freshDataDir() });
      await body(
        call(a.url, '/api/settings', KEY, {
          llm_model: 'openai/scripted',
          llm_api_key: 'sk-replicas',
          llm_base_url: llm.baseUrl,
        }),
      );
      // A runs the conversation (its sandbox is A's, in process): B's stream hears its deltas
      // only through PostgreSQL.
      const { conversation_id: id } = await body<{ conversation_id: string }>(
        call(a.url, '/api/conversations', KEY, { initial_user_msg: `${marker('replicas-deltas')} hello` }),
      );
      const seen: Seen[] = [a, b].map(() => ({ ids: [], kinds: [], deltas: [], deltaAt: [] }));
      for (const [i, server] of [a, b].entries()) {
        const abort = new AbortController();
        aborts.push(abort);
        const response = await fetch(`${server.url}/api/v1/app-conversations/${id}/events/stream`, {
          headers: { 'X-Session-API-Key': KEY },
          signal: abort.signal,
        });
        expect(response.status).toBe(200);
        readings.push(watch(response, seen[i]!));
      }
      await waitFor('the model asked, and both streams past their replay', () =>
        llm.requests.length > 0 && seen.every((s) => s.ids.length >= 2) ? true : undefined,
      );
      // The replay ends before the live follow starts: a moment for the subscriptions to be on.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const asked = llm.requests[0]!.at;
      expect(
        Date.now() - asked,
        `the streams were not following within ${START_MS} ms of the model being asked (a very busy machine): the test cannot tell`,
      ).toBeLessThan(START_MS);
      await waitFor('the answer on both streams', () =>
        seen.every((s) => s.kinds.filter((k) => k === 'message').length >= 2) ? true : undefined,
      );
      for (const s of seen) {
        // Every piece, in order, before the stored answer that holds the whole text.
        expect(s.deltas.join('')).toBe(ANSWER);
        expect(s.deltas.length).toBeGreaterThan(3);
        expect(Math.max(...s.deltaAt)).toBeLessThanOrEqual(s.kinds.lastIndexOf('message'));
        expect(s.ids).toEqual(Array.from({ length: s.ids.length }, (_, i) => i + 1));
      }
      // Nothing of them is stored: the answer is one message holding the whole text.
      const stored = await allEvents(b.url, KEY, id);
      expect(stored.map((e) => e.kind)).not.toContain('delta');
      expect(stored.filter((e) => e.kind === 'message').at(-1)).toMatchObject({ source: 'agent', text: ANSWER });
    } finally {
      for (const abort of aborts) abort.abort();
      await Promise.all(readings);
      await llm.close();
      await database.drop();
      await removeContainersOf(new Docker(), USER).catch(() => {});
    }
  });
});
