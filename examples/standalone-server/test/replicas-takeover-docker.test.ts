/**
 * Two example servers (two processes) on one PostgreSQL database and one Docker engine: the
 * replica running a conversation is killed with SIGKILL in the middle of a tool call; the other
 * takes the conversation over (its lease expired), closes the call with an "interrupted"
 * observation, and finishes it in the same container. Needs Docker, PostgreSQL and the
 * acs-sandbox:bookworm image.
 */
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { describe, expect, it } from 'vitest';
import { marker, scriptedCompletion, startFakeOpenAi, toolCall } from '@acs/testing';
import { allEvents, body, call, freshDataDir, startServer, waitFor, type Running } from './process.js';
import { scratchDatabase } from './databases.js';
import { removeContainersOf } from './containers.js';

const user = `replicas-${randomBytes(4).toString('hex')}`;
const KEY = `${user}-key-0123456789`;

const events = (server: Running, id: string) => allEvents(server.url, KEY, id);

describe('two servers on one PostgreSQL and one Docker engine', () => {
  it('a replica killed mid-call: the other takes its conversation over and finishes it', async () => {
    const docker = new Docker();
    const database = await scratchDatabase('acs_takeover');
    const llm = await startFakeOpenAi();
    llm.script('takeover', (turn) =>
      turn === 0
        ? {
            status: 200,
            body: scriptedCompletion(turn, {
              content: null,
              tool_calls: [toolCall('call_sleep_1', 'execute_bash', { command: 'sleep 300', timeout: 600 })],
            }),
          }
        : {
            status: 200,
            body: scriptedCompletion(turn, {
              content: null,
              tool_calls: [toolCall(`call_finish_${turn}`, 'finish', { message: 'Carried on elsewhere.' })],
            }),
          },
    );
    try {
      const env = {
        ACS_API_KEYS: `${user}:${KEY}`,
        SESSION_API_KEY: 'unused-default-key-0123456789',
        DATABASE_URL: database.url,
        ACS_SANDBOXES: 'docker',
        ACS_SANDBOX_NETWORK: 'none',
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
      const { conversation_id: id } = await body<{ conversation_id: string }>(
        call(a.url, '/api/conversations', KEY, { initial_user_msg: `${marker('takeover')} wait` }),
      );
      await waitFor('the sleep action, run by A', async () =>
        (await events(a, id)).some((e) => e.kind === 'action') ? true : undefined,
      );
      const [record] = await body<({ sandbox_id: string } | null)[]>(
        call(a.url, `/api/v1/app-conversations?ids=${id}`, KEY),
      );
      const container = docker.getContainer(`acs-sandbox-${record!.sandbox_id}`);
      const startedAt = (await container.inspect()).State.StartedAt;

      a.child.kill('SIGKILL');
      await a.exited;
      const killedAt = Date.now();
      await waitFor('B to take the conversation over and finish it', async () => {
        const [c] = await body<({ execution_status: string | null } | null)[]>(
          call(b.url, `/api/v1/app-conversations?ids=${id}`, KEY),
        );
        return c?.execution_status === 'finished' ? true : undefined;
      });
      const log = await events(b, id);
      expect(log.map((e) => e.id)).toEqual(log.map((_, i) => i + 1));
      const observations = log.filter((e) => e.kind === 'observation');
      expect(observations.map((e) => e.kind === 'observation' && [e.tool_call_id, e.is_error])).toEqual([
        ['call_sleep_1', true],
        ['call_finish_1', false],
      ]);
      expect(log.filter((e) => e.kind === 'error').map((e) => e.kind === 'error' && e.code)).toEqual([
        'restart_interrupted',
      ]);
      const requests = llm.requestsFor('takeover');
      expect(requests).toHaveLength(2);
      console.log(`takeover: B asked the model ${requests[1]!.at - killedAt} ms after A was killed`);
      // The same container, never restarted.
      expect((await container.inspect()).State.StartedAt).toBe(startedAt);
      await body(call(b.url, `/api/v1/sandboxes/${record!.sandbox_id}`, KEY, undefined, 'DELETE'));
    } finally {
      await llm.close();
      await removeContainersOf(docker, user);
      await database.drop();
    }
  });
});
