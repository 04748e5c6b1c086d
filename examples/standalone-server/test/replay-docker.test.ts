/**
 * replay_json end to end: the real example server process and Docker sandboxes replay a
 * hand-written OpenHands V0 trajectory; the files it writes end up in the container.
 * Needs a Docker engine and the acs-sandbox:bookworm image (like agent-docker.test.ts).
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import type { ConversationEvent, EventPage } from '@acs/core/schemas';
import type { AppConversation } from '@acs/adapter-express';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scriptedCompletion, marker, startFakeOpenAi, toolCall, type FakeOpenAi } from '@acs/testing';
import { call, startServer, type Running, body } from './process.js';
import { removeContainersOf } from './containers.js';

const docker = new Docker();
const user = `replay-docker-test-${randomBytes(4).toString('hex')}`;
const KEY = `${user}-key-0123456789`;
const env = () => ({
  ACS_API_KEYS: `${user}:${KEY}`,
  SESSION_API_KEY: 'unused-default-key-0123456789',
  ACS_SANDBOXES: 'docker',
  ACS_SANDBOX_NETWORK: 'none',
});

let llm: FakeOpenAi;

beforeAll(async () => {
  llm = await startFakeOpenAi();
  // Takes over after a replay that did not finish: one more command, then finish.
  llm.script('takeover', (turn) => {
    const first = turn <= 1; // the replayed call is one assistant message already
    return {
      status: 200,
      body: scriptedCompletion(
        turn,
        first
          ? {
              content: 'Appending the model’s line.',
              tool_calls: [
                toolCall('call_model_1', 'execute_bash', { command: 'echo "model line" >> /workspace/log.txt' }),
              ],
            }
          : { tool_calls: [toolCall('call_model_2', 'finish', { message: 'Replay continued by the model.' })] },
      ),
    };
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

async function untilExecution(server: Running, id: string, status: string): Promise<AppConversation> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const c = await conversation(server, id);
    if (c.execution_status === status) return c;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for execution_status ${status}; it is ${c.execution_status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function allEvents(server: Running, id: string): Promise<ConversationEvent[]> {
  const page = await body<EventPage>(call(server.url, `/api/v1/app-conversations/${id}/events?after=0&limit=100`, KEY));
  return page.items;
}

const story = (events: readonly ConversationEvent[]) =>
  events.map((e) =>
    e.kind === 'message'
      ? `message:${e.source}`
      : e.kind === 'status'
        ? `status:${e.execution_status}`
        : e.kind === 'action' || e.kind === 'observation'
          ? `${e.kind}:${e.tool_name}`
          : e.kind,
  );

async function readInContainer(sandboxId: string, path: string): Promise<string> {
  const [found] = await docker.listContainers({ all: true, filters: { label: [`io.acs.sandbox-id=${sandboxId}`] } });
  if (!found) throw new Error(`no container for ${sandboxId}`);
  const exec = await docker.getContainer(found.Id).exec({ Cmd: ['cat', path], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  const stdout = new PassThrough();
  let out = '';
  stdout.on('data', (d: Buffer) => (out += d.toString()));
  docker.modem.demuxStream(stream, stdout, new PassThrough().resume());
  await once(stream, 'end');
  return out;
}

/** OpenHands V0 event dicts, written by hand. */
const userMessage = (content: string) => ({
  id: 1,
  timestamp: '2025-01-01T00:00:00',
  source: 'user',
  message: content,
  action: 'message',
  args: { content, image_urls: [], file_urls: [], wait_for_response: false },
});
const act = (action: string, args: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  timestamp: '2025-01-01T00:00:01',
  source: 'agent',
  message: action,
  action,
  args: { thought: '', ...args },
  ...extra,
});
const obs = (observation: string, content: string) => ({
  timestamp: '2025-01-01T00:00:02',
  source: 'environment',
  message: content,
  observation,
  content,
  extras: {},
});

describe('replay_json on the example server, in Docker', () => {
  it('replays a trajectory without any settings: the files are in the container, no model was called', async () => {
    const server = await startServer(env());
    const trajectory = [
      userMessage('Write a greeting script and run it'),
      act('write', { path: '/workspace/greet.py', content: 'print("hello")\n' }),
      obs('write', ''),
      act('edit', {
        path: '/workspace/greet.py',
        command: 'str_replace',
        old_str: 'hello',
        new_str: 'hello from the replay',
        content: '',
        impl_source: 'oh_aci',
      }),
      act(
        'run',
        {
          command: 'python3 /workspace/greet.py > /workspace/out.txt && cat /workspace/out.txt',
          is_input: false,
          blocking: false,
        },
        { timeout: 60 },
      ),
      obs('run', 'hello\n'),
      act('read', { path: '/workspace/out.txt', start: 0, end: -1 }),
      act('finish', { final_thought: 'The script greets.', outputs: {} }),
    ];
    const created = await body<{ conversation_id: string }>(
      call(server.url, '/api/conversations', KEY, { replay_json: JSON.stringify(trajectory) }),
    );
    const done = await untilExecution(server, created.conversation_id, 'finished');
    const events = await allEvents(server, created.conversation_id);
    expect(story(events)).toEqual([
      'message:user',
      'status:running',
      'action:str_replace_editor',
      'observation:str_replace_editor',
      'action:str_replace_editor',
      'observation:str_replace_editor',
      'action:execute_bash',
      'observation:execute_bash',
      'action:str_replace_editor',
      'observation:str_replace_editor',
      'action:finish',
      'observation:finish',
      'status:finished',
    ]);
    const observations = events.filter((e) => e.kind === 'observation');
    expect(
      observations.every((o) => o.kind === 'observation' && !o.is_error),
      JSON.stringify(observations),
    ).toBe(true);
    expect(observations[2]).toMatchObject({
      exit_code: 0,
      content: expect.stringContaining('hello from the replay') as string,
    });
    expect(await readInContainer(done.sandbox_id, '/workspace/greet.py')).toBe('print("hello from the replay")\n');
    expect(await readInContainer(done.sandbox_id, '/workspace/out.txt')).toBe('hello from the replay\n');
    expect(events.some((e) => e.kind === 'llm_call')).toBe(false);
  });

  it('refuses a malformed trajectory with 422 and the reason', async () => {
    const server = await startServer(env());
    const r = await call(server.url, '/api/conversations', KEY, {
      replay_json: JSON.stringify([userMessage('go'), act('browse', { url: 'https://example.com' })]),
    });
    expect(r.status).toBe(422);
    const error = (await r.json()) as { code: string; message: string; issues: { path: string }[] };
    expect(error.code).toBe('VALIDATION_FAILED');
    expect(error.message).toContain('"browse" cannot be replayed');
    expect(error.issues[0]!.path).toBe('replay_json[1].action');
  });

  it('hands over to the model when the trajectory does not finish', async () => {
    const server = await startServer(env());
    await body(
      call(server.url, '/api/settings', KEY, {
        llm_model: 'openai/scripted-model',
        llm_api_key: 'sk-scripted-replay-0000',
        llm_base_url: llm.baseUrl,
      }),
    );
    const trajectory = [
      userMessage(`${marker('takeover')} Log two lines`),
      act('run', { command: 'echo "replayed line" > /workspace/log.txt' }),
    ];
    const created = await body<{ conversation_id: string }>(
      call(server.url, '/api/conversations', KEY, { replay_json: JSON.stringify(trajectory) }),
    );
    const done = await untilExecution(server, created.conversation_id, 'finished');
    expect(await readInContainer(done.sandbox_id, '/workspace/log.txt')).toBe('replayed line\nmodel line\n');
    const events = await allEvents(server, created.conversation_id);
    expect(story(events)).toEqual([
      'message:user',
      'status:running',
      'action:execute_bash',
      'observation:execute_bash',
      'llm_call',
      'action:execute_bash',
      'observation:execute_bash',
      'llm_call',
      'action:finish',
      'observation:finish',
      'status:finished',
    ]);
    expect(llm.requestsFor('takeover')).toHaveLength(2);
  });
});
