/**
 * Resources follow use (issue 27) on the example server, with Docker sandboxes and a scripted
 * OpenAI-compatible model (`startFakeOpenAi` from @acs/testing): five quick conversations finish
 * at the default limit of 5; the sixth runs all the same, its room made by pausing the container
 * of the least recently used one (an engine pause: `State.Paused`), which a new message to its
 * conversation brings back with its workspace as it was. A second server pauses a finished
 * conversation's container on its own after ACS_SANDBOX_FINISHED_IDLE_MINUTES.
 * Like docker.test.ts, this needs a Docker engine and the acs-sandbox:bookworm image.
 */
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppConversation } from '@acs/adapter-express';
import { marker, scriptedCompletion, startFakeOpenAi, toolCall, type FakeOpenAi } from '@acs/testing';
import { allEvents, body, call, startServer, waitFor, type Running } from './process.js';
import { removeContainersOf } from './containers.js';

const docker = new Docker();
const user = `resting-docker-test-${randomBytes(4).toString('hex')}`;
const KEY = `${user}-key-0123456789`;
const env = (extra: Record<string, string> = {}) => ({
  ACS_API_KEYS: `${user}:${KEY}`,
  SESSION_API_KEY: 'unused-default-key-0123456789',
  ACS_SANDBOXES: 'docker',
  ACS_STORAGE: 'memory',
  ACS_SANDBOX_NETWORK: 'none',
  ...extra,
});

let llm: FakeOpenAi;

beforeAll(async () => {
  llm = await startFakeOpenAi();
  // Leaves a note in the workspace and finishes; asked again, reads the note back and answers.
  llm.script('note', (turn) => {
    const steps = [
      () => ({
        content: null,
        tool_calls: [
          toolCall(`call_write_${turn}`, 'execute_bash', {
            command: 'echo "kept across the pause" > /workspace/note.txt',
          }),
        ],
      }),
      () => ({ content: 'The note is written.' }),
      () => ({
        content: null,
        tool_calls: [toolCall(`call_read_${turn}`, 'execute_bash', { command: 'cat /workspace/note.txt' })],
      }),
      () => ({ content: 'The note is still there.' }),
    ];
    const step = steps[turn] ?? (() => ({ content: 'Nothing more to do.' }));
    return { status: 200, body: scriptedCompletion(turn, step()) };
  });
});

afterAll(async () => {
  await llm.close();
  await removeContainersOf(docker, user);
});

async function conversation(server: Running, id: string): Promise<AppConversation> {
  const [found] = await body<(AppConversation | null)[]>(call(server.url, `/api/v1/app-conversations?ids=${id}`, KEY));
  if (!found) throw new Error(`conversation ${id} not found`);
  return found;
}

/** Waits until the agent has finished after at least `calls` model calls of the conversation. */
const untilFinished = (server: Running, id: string, calls: number) =>
  waitFor(`conversation ${id} to finish after ${calls} model calls`, async () => {
    const c = await conversation(server, id);
    return c.execution_status === 'finished' && modelCallsOf(c) >= calls ? c : undefined;
  });

/** Model calls made for a conversation so far: its usage counts 100 + turn prompt tokens per call (scriptedCompletion). */
function modelCallsOf(c: AppConversation): number {
  const prompt = c.metrics?.accumulated_token_usage?.prompt_tokens ?? 0;
  let calls = 0;
  for (let total = 0; total < prompt; calls++) total += 100 + calls;
  return calls;
}

async function startNoteConversation(server: Running, n: number): Promise<string> {
  const created = await body<{ conversation_id: string }>(
    call(server.url, '/api/conversations', KEY, {
      initial_user_msg: `${marker('note')} Task ${n}: leave a note in the workspace.`,
    }),
  );
  return created.conversation_id;
}

const containerState = async (sandboxId: string) =>
  (await docker.getContainer(`acs-sandbox-${sandboxId}`).inspect()).State;

describe('sandboxes follow use on the example server, in Docker', () => {
  it('the sixth conversation at the limit of 5 runs, the oldest finished container is paused, and a message resumes it with its workspace', async () => {
    const server = await startServer(env({ ACS_SANDBOX_FINISHED_IDLE_MINUTES: '30' }));
    await body(
      call(server.url, '/api/settings', KEY, {
        llm_model: 'openai/scripted-model',
        llm_api_key: 'sk-scripted',
        llm_base_url: llm.baseUrl,
      }),
    );

    const ids: string[] = [];
    const boxes: string[] = [];
    for (let n = 1; n <= 5; n++) {
      const id = await startNoteConversation(server, n);
      const done = await untilFinished(server, id, 2);
      ids.push(id);
      boxes.push(done.sandbox_id);
    }
    for (const box of boxes) expect(await containerState(box)).toMatchObject({ Running: true, Paused: false });
    // A finish counts for making room once it is a few seconds old.
    await new Promise((resolve) => setTimeout(resolve, 6_000));

    const sixth = await startNoteConversation(server, 6);
    const sixthDone = await untilFinished(server, sixth, 2);
    expect(sixthDone).toMatchObject({ conversation_status: 'RUNNING', sandbox_status: 'RUNNING' });
    expect(await containerState(boxes[0]!)).toMatchObject({ Running: true, Paused: true });
    for (const box of boxes.slice(1)) expect(await containerState(box)).toMatchObject({ Paused: false });
    const paused = await body<{ status: string; status_detail: string }>(
      call(server.url, `/api/v1/sandboxes/${boxes[0]}`, KEY),
    );
    expect(paused).toMatchObject({
      status: 'PAUSED',
      status_detail: expect.stringContaining('to make room for another sandbox of yours') as unknown,
    });
    expect((await conversation(server, ids[0]!)).conversation_status).toBe('STOPPED');

    // A new message to the first: its container is unpaused (the next least recently used one
    // is paused to stay within 5), and its agent reads the note it left before the pause.
    const sent = await body<{ sandbox_status: string }>(
      call(server.url, `/api/v1/app-conversations/${ids[0]}/send-message`, KEY, {
        role: 'user',
        content: [{ type: 'text', text: 'Is the note still there?' }],
      }),
    );
    expect(sent.sandbox_status).toBe('RUNNING');
    await untilFinished(server, ids[0]!, 4);
    expect(await containerState(boxes[0]!)).toMatchObject({ Running: true, Paused: false });
    expect(await containerState(boxes[1]!)).toMatchObject({ Paused: true });
    const read = (await allEvents(server.url, KEY, ids[0]!))
      .filter((e) => e.kind === 'observation' && e.tool_name === 'execute_bash')
      .at(-1);
    expect(read).toMatchObject({ kind: 'observation', exit_code: 0 });
    expect(read?.kind === 'observation' && read.content).toContain('kept across the pause');
  });

  it("pauses a finished conversation's container after ACS_SANDBOX_FINISHED_IDLE_MINUTES, and a message resumes it", async () => {
    // 0.05 min = 3 s: the maintenance round runs every 750 ms.
    const server = await startServer(env({ ACS_SANDBOX_FINISHED_IDLE_MINUTES: '0.05' }));
    await body(
      call(server.url, '/api/settings', KEY, {
        llm_model: 'openai/scripted-model',
        llm_api_key: 'sk-scripted',
        llm_base_url: llm.baseUrl,
      }),
    );
    const id = await startNoteConversation(server, 1);
    const box = (await untilFinished(server, id, 2)).sandbox_id;
    const finishedAt = Date.now();
    await waitFor(
      "the finished conversation's container to be paused",
      async () => ((await containerState(box)).Paused ? true : undefined),
      60_000,
    );
    expect(Date.now() - finishedAt).toBeGreaterThanOrEqual(2_000);
    expect(
      (await body<{ status_detail: string }>(call(server.url, `/api/v1/sandboxes/${box}`, KEY))).status_detail,
    ).toMatch(/after its conversations finished/);

    await body(
      call(server.url, `/api/v1/app-conversations/${id}/send-message`, KEY, {
        role: 'user',
        content: [{ type: 'text', text: 'Is the note still there?' }],
      }),
    );
    await untilFinished(server, id, 4);
    const read = (await allEvents(server.url, KEY, id))
      .filter((e) => e.kind === 'observation' && e.tool_name === 'execute_bash')
      .at(-1);
    expect(read?.kind === 'observation' && read.content).toContain('kept across the pause');
  });
});
