/**
 * The first run on a machine with Docker but without the sandbox image: the example server
 * builds it with scripts/build-sandbox-image.sh (progress in its log), and a conversation
 * started meanwhile waits, its start task saying so, then runs its agent in the new image.
 * The image gets a tag of its own (acs-sandbox:e2e-…), so the shared acs-sandbox:bookworm is
 * never touched; the build takes the Dockerfile path from that shared image as its base (a
 * registry cannot be reached here), so it needs the machine's Debian mirror like .ci/run does.
 */
import { randomBytes } from 'node:crypto';
import type { StartTask } from '@acs/core/schemas';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scriptedCompletion, startFakeOpenAi, toolCall, marker, type FakeOpenAi } from '@acs/testing';
import { body, call, startServer, waitFor, waitForOutput } from './process.js';
import { removeContainersOf } from './containers.js';

const docker = new Docker();
const user = `image-build-test-${randomBytes(4).toString('hex')}`;
const KEY = `${user}-key-0123456789`;
const IMAGE = `acs-sandbox:e2e-${randomBytes(4).toString('hex')}`;

let llm: FakeOpenAi;

beforeAll(async () => {
  llm = await startFakeOpenAi();
  llm.script('image', (turn) =>
    turn === 0
      ? {
          status: 200,
          body: scriptedCompletion(turn, {
            content: null,
            tool_calls: [
              toolCall('call_1', 'execute_bash', {
                command: 'cat /etc/debian_version && git --version && python --version',
              }),
            ],
          }),
        }
      : {
          status: 200,
          body: scriptedCompletion(turn, {
            content: null,
            tool_calls: [toolCall('call_2', 'finish', { message: 'The sandbox answers.' })],
          }),
        },
  );
});

afterAll(async () => {
  await llm.close();
  await removeContainersOf(docker, user);
  await docker
    .getImage(IMAGE)
    .remove({ force: true })
    .catch(() => {});
});

describe('the example server on a Docker engine without its sandbox image', () => {
  it(
    'builds the image at start, keeps a conversation started meanwhile waiting (saying so), then runs it',
    { timeout: 900_000 },
    async () => {
      await expect(docker.getImage(IMAGE).inspect()).rejects.toMatchObject({ statusCode: 404 });
      const server = await startServer({
        ACS_API_KEYS: `${user}:${KEY}`,
        SESSION_API_KEY: 'unused-default-key-0123456789',
        ACS_SANDBOXES: 'docker',
        ACS_SANDBOX_NETWORK: 'none',
        ACS_SANDBOX_SPECS: JSON.stringify([{ id: 'e2e', image: IMAGE, working_dir: '/workspace' }]),
        // The build script's own settings: the Dockerfile way, from the image the machine already has.
        ACS_SANDBOX_IMAGE_METHOD: 'dockerfile',
        ACS_SANDBOX_BASE_IMAGE: 'acs-sandbox:bookworm',
      });
      await body(
        call(server.url, '/api/settings', KEY, {
          llm_model: 'openai/scripted-model',
          llm_api_key: 'sk-image-test',
          llm_base_url: llm.baseUrl,
        }),
      );
      const task = await body<StartTask>(
        call(server.url, '/api/v1/app-conversations', KEY, {
          initial_message: { content: [{ type: 'text', text: `${marker('image')} check the sandbox` }], run: true },
        }),
      );

      // While the image is built, the task waits and says why.
      const waiting = await waitFor(
        'the start task to say the image is being built',
        async () => {
          const [t] = await body<(StartTask | null)[]>(
            call(server.url, `/api/v1/app-conversations/start-tasks?ids=${task.id}`, KEY),
          );
          return t?.status === 'WAITING_FOR_SANDBOX' &&
            t.detail?.includes(`waiting for the sandbox image ${IMAGE} to be built: step `)
            ? t
            : undefined;
        },
        300_000,
      );
      expect(waiting.detail).toMatch(/: step \d\/4: /);
      await waitForOutput(server, '"building the sandbox image"', 'a build progress line in the log');

      const ready = await waitFor(
        'the conversation to start once the image is built',
        async () => {
          const [t] = await body<(StartTask | null)[]>(
            call(server.url, `/api/v1/app-conversations/start-tasks?ids=${task.id}`, KEY),
          );
          if (t?.status === 'ERROR') throw new Error(`the start failed: ${t.detail}\n${server.stdout().slice(-4000)}`);
          return t?.status === 'READY' ? t : undefined;
        },
        600_000,
      );
      expect(ready.detail).toBeNull();
      await waitForOutput(server, '"the sandbox image is ready"', 'the image-ready line in the log');
      expect((await docker.getImage(IMAGE).inspect()).Config.Labels).toMatchObject({
        'io.acs.sandbox-image': 'bookworm',
      });

      // The agent ran its command in a container of the new image.
      const observed = await waitFor(
        'the command output',
        async () => {
          const page = await body<{ items: { kind: string; content?: string }[] }>(
            call(server.url, `/api/v1/app-conversations/${ready.app_conversation_id}/events?kind=observation`, KEY),
          );
          return page.items.find((e) => /git version/.test(e.content ?? ''));
        },
        120_000,
      );
      expect(observed.content).toMatch(/^12\.\d+/m);
      // `python` answers, as in OpenHands' images (models reach for it before python3).
      expect(observed.content).toMatch(/^Python 3\.\d+/m);
      const containers = await docker.listContainers({ all: true, filters: { label: [`io.acs.user-id=${user}`] } });
      expect(containers.map((c) => c.Image)).toEqual([IMAGE]);
    },
  );
});
