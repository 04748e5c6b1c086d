/**
 * Two example servers (two processes) on one PostgreSQL database: an SSE stream opened on one
 * follows a conversation appended to through the other, each event once and in order (the
 * PostgreSQL event notifier wakes the stream; the log is read from the database).
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { marker, scriptedCompletion, sseMessages, startFakeOpenAi } from '@acs/testing';
import { body, call, freshDataDir, startServer, waitFor } from './process.js';
import { scratchDatabase } from './databases.js';

const KEY = 'replicas-test-key-0123456789abcdef';

/** Collects the ids of an SSE stream's messages until stopped. */
function follow(response: Response, ids: number[]): Promise<void> {
  return (async () => {
    for await (const { fields } of sseMessages(response.body!)) if (fields.id) ids.push(Number(fields.id));
  })().catch(() => {}); // aborted at the end of the test
}

describe('two servers on one PostgreSQL', () => {
  it('a stream on one follows appends made through the other', async () => {
    const database = await scratchDatabase('acs_replicas');
    const llm = await startFakeOpenAi();
    llm.script('replicas', (turn) => ({ status: 200, body: scriptedCompletion(turn, { content: `reply ${turn}` }) }));
    try {
      // Replicas share the database, so they share its secret key too.
      const env = {
        SESSION_API_KEY: KEY,
        DATABASE_URL: database.url,
        ACS_SANDBOXES: 'fake',
        ACS_SECRET_KEY: randomBytes(32).toString('hex'),
      };
      // The second starts once the first has migrated the database.
      const a = await startServer({ ...env, DATA_DIR: freshDataDir() });
      const b = await startServer({ ...env, DATA_DIR: freshDataDir() });
      await body(
        call(a.url, '/api/settings', KEY, {
          llm_model: 'openai/scripted',
          llm_api_key: 'sk-replicas',
          llm_base_url: llm.baseUrl,
        }),
      );
      const { conversation_id: id } = await body<{ conversation_id: string }>(
        call(a.url, '/api/conversations', KEY, { initial_user_msg: `${marker('replicas')} hello` }),
      );
      await waitFor('the first answer', async () => {
        const [c] = await body<({ execution_status: string | null } | null)[]>(
          call(a.url, `/api/v1/app-conversations?ids=${id}`, KEY),
        );
        return c?.execution_status === 'finished' ? true : undefined;
      });

      const ids: number[] = [];
      const abort = new AbortController();
      const stream = await fetch(`${b.url}/api/v1/app-conversations/${id}/events/stream`, {
        headers: { 'X-Session-API-Key': KEY },
        signal: abort.signal,
      });
      expect(stream.status).toBe(200);
      const reading = follow(stream, ids);
      try {
        await waitFor('the replay on B', () => (ids.length > 0 ? true : undefined));
        const replayed = ids.length;
        for (let i = 0; i < 10; i++) {
          await body(
            call(a.url, `/api/v1/app-conversations/${id}/send-message`, KEY, {
              role: 'user',
              content: [{ type: 'text', text: `through A ${i}` }],
              run: false,
            }),
          );
        }
        await waitFor('the 10 messages appended through A, on B', () =>
          ids.length >= replayed + 10 ? true : undefined,
        );
        expect(ids).toEqual(Array.from({ length: ids.length }, (_, i) => i + 1));
      } finally {
        abort.abort();
        await reading;
      }
    } finally {
      await llm.close();
      await database.drop();
    }
  });
});
