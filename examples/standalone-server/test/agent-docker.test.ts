/**
 * The agent end to end: the real example server process, Docker sandboxes, the OpenAI adapter,
 * and a scripted chat-completions server (fake-openai-server.ts) standing in for the model.
 * Like docker.test.ts, this needs a Docker engine and the acs-sandbox:bookworm image.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import type { ConversationEvent } from '@acs/core/schemas';
import type { AppConversation } from '@acs/adapter-express';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  scriptedCompletion,
  errorBody,
  marker,
  startFakeOpenAi,
  textOf,
  toolCall,
  type ChatMessage,
  type FakeOpenAi,
} from '@acs/testing';
import { allEvents as allEventsOf, call, freshDataDir, startServer, type Running, body, waitFor } from './process.js';
import { removeContainersOf } from './containers.js';

const docker = new Docker();
const user = `agent-docker-test-${randomBytes(4).toString('hex')}`;
const KEY = `${user}-key-0123456789`;
/** The user's model key: sent to the model server, never shown by the API. */
const LLM_KEY = `sk-scripted-${randomBytes(12).toString('hex')}`;
/** What the model server reports as the cost of each call (as a LiteLLM proxy does). */
const COST_PER_CALL = 0.0015;
const env = (extra: Record<string, string> = {}) => ({
  ACS_API_KEYS: `${user}:${KEY}`,
  SESSION_API_KEY: 'unused-default-key-0123456789',
  ACS_SANDBOXES: 'docker',
  ACS_SANDBOX_NETWORK: 'none',
  ...extra,
});

let llm: FakeOpenAi;

beforeAll(async () => {
  llm = await startFakeOpenAi();
  const cost = { 'x-litellm-response-cost': String(COST_PER_CALL) };

  // Writes a script, runs it, finishes; then answers a follow-up in words.
  llm.script('hello', (turn) => {
    const steps = [
      () => ({
        content: 'I will write the script first.',
        tool_calls: [
          toolCall('call_create_1', 'str_replace_editor', {
            command: 'create',
            path: '/workspace/hello.py',
            file_text: 'print("hello from the agent")\n',
          }),
        ],
      }),
      () => ({
        content: null,
        tool_calls: [toolCall('call_run_1', 'execute_bash', { command: 'python3 /workspace/hello.py' })],
      }),
      () => ({
        content: null,
        tool_calls: [toolCall('call_finish_1', 'finish', { message: 'hello.py is written and prints its greeting.' })],
      }),
      () => ({ content: 'It printed "hello from the agent", as the tool output showed.' }),
    ];
    const step = steps[turn];
    return step
      ? { status: 200, body: scriptedCompletion(turn, step()), headers: cost }
      : { status: 400, body: errorBody(`hello has no turn ${turn}`, 'invalid_request_error') };
  });

  // A command that outlives the server; after the restart, finish.
  llm.script('crash', (turn) =>
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
            tool_calls: [toolCall(`call_finish_${turn}`, 'finish', { message: 'Carried on after the restart.' })],
          }),
        },
  );

  // A provider that refuses the key and, like some do, echoes it back in the error.
  llm.script('unauthorized', (_turn, request) => {
    const sent = String(request.headers.authorization ?? '').replace(/^Bearer /, '');
    return {
      status: 401,
      body: errorBody(
        `Incorrect API key provided: ${sent}. You can find your API key in your account.`,
        'invalid_request_error',
        'invalid_api_key',
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

/** Waits for the agent's execution status (the conversation record, as clients poll it). */
const untilExecution = (server: Running, id: string, status: string) =>
  waitFor(`execution_status ${status}`, async () => {
    const c = await conversation(server, id);
    return c.execution_status === status ? c : undefined;
  });

/** Every event, page by page (of 5) through GET …/events. */
const allEvents = (server: Running, id: string) => allEventsOf(server.url, KEY, id, 5);

/** One short word per event, so a wrong order reads at a glance. */
const story = (events: readonly ConversationEvent[]): string[] =>
  events.map((e) => {
    switch (e.kind) {
      case 'message':
        return `message:${e.source}`;
      case 'status':
        return `status:${e.execution_status}`;
      case 'action':
      case 'observation':
        return `${e.kind}:${e.tool_name}`;
      case 'error':
        return `error:${e.code}`;
      case 'llm_call':
        return 'llm_call';
      case 'setup':
        return `setup:${e.step}`;
      case 'confirmation':
        return `confirmation:${e.accept ? 'accept' : 'reject'}`;
      case 'condensation':
        return 'condensation';
    }
  });

const expectIdsFromOne = (events: readonly ConversationEvent[]) =>
  expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));

/** Follows …/events/stream from event 0 with fetch, collecting the events it delivers. */
function followEvents(server: Running, id: string) {
  const abort = new AbortController();
  const events: ConversationEvent[] = [];
  const problems: string[] = [];
  const done = (async () => {
    const response = await fetch(`${server.url}/api/v1/app-conversations/${id}/events/stream?after=0`, {
      headers: { 'X-Session-API-Key': KEY },
      signal: abort.signal,
    });
    if (
      response.status !== 200 ||
      !response.headers.get('content-type')?.startsWith('text/event-stream') ||
      !response.body
    ) {
      problems.push(
        `stream answered ${response.status} ${response.headers.get('content-type')}: ${await response.text()}`,
      );
      return;
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done: ended } = await reader.read();
      if (ended) return;
      buffer += value;
      for (let cut = buffer.indexOf('\n\n'); cut >= 0; cut = buffer.indexOf('\n\n')) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const fields = new Map<string, string>();
        for (const line of frame.split('\n')) {
          if (line.startsWith(':')) continue; // ping
          const colon = line.indexOf(':');
          fields.set(line.slice(0, colon), line.slice(colon + 1).replace(/^ /, ''));
        }
        const data = fields.get('data');
        // A delta (a piece of the answer being written) has no id and is not a stored event.
        if (data === undefined || fields.get('event') === 'delta') continue;
        const event = JSON.parse(data) as ConversationEvent;
        if (fields.get('id') !== String(event.id) || fields.get('event') !== event.kind)
          problems.push(`frame ${JSON.stringify(frame)} does not match its data`);
        events.push(event);
      }
    }
  })().catch((error: unknown) => {
    if (!abort.signal.aborted) problems.push(`stream failed: ${String(error)}`);
  });
  return {
    events,
    problems,
    stop: async () => {
      abort.abort();
      await done;
    },
  };
}

/** The one container of a sandbox, found by its label. */
async function containerOf(sandboxId: string) {
  const found = await docker.listContainers({ all: true, filters: { label: [`io.acs.sandbox-id=${sandboxId}`] } });
  expect(found).toHaveLength(1);
  return docker.getContainer(found[0]!.Id);
}

/** Runs a command in a container (outside the service), returning its stdout and exit code. */
async function execIn(
  container: Docker.Container,
  cmd: string[],
): Promise<{ stdout: string; exitCode: number | null }> {
  const exec = await container.exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  const stdout = new PassThrough();
  let out = '';
  stdout.on('data', (d: Buffer) => (out += d.toString()));
  docker.modem.demuxStream(stream, stdout, new PassThrough().resume());
  await once(stream, 'end');
  return { stdout: out, exitCode: (await exec.inspect()).ExitCode };
}

/** The model key appears nowhere a client or an operator can read it. */
async function expectKeyHidden(server: Running, id: string, key: string) {
  expect(JSON.stringify(await allEvents(server, id))).not.toContain(key);
  expect(JSON.stringify(await conversation(server, id))).not.toContain(key);
  expect(JSON.stringify(await body(call(server.url, '/api/settings', KEY)))).not.toContain(key);
  expect(server.stdout() + server.stderr()).not.toContain(key);
}

/** Deletes the conversation through the API; its container goes with it. */
async function deleteConversation(server: Running, id: string, sandboxId: string) {
  expect(await body(call(server.url, `/api/conversations/${id}`, KEY, undefined, 'DELETE'))).toBe(true);
  await waitFor('the container to be removed', async () =>
    (await docker.listContainers({ all: true, filters: { label: [`io.acs.sandbox-id=${sandboxId}`] } })).length === 0
      ? true
      : undefined,
  );
}

async function startConversation(server: Running, script: string, task: string, llmKey = LLM_KEY): Promise<string> {
  await body(
    call(server.url, '/api/settings', KEY, {
      llm_model: 'openai/scripted-model',
      llm_api_key: llmKey,
      llm_base_url: llm.baseUrl,
    }),
  );
  const created = await body<{ conversation_id: string }>(
    call(server.url, '/api/conversations', KEY, { initial_user_msg: `${marker(script)} ${task}` }),
  );
  return created.conversation_id;
}

const lastMessage = (messages: ChatMessage[] | undefined): ChatMessage => {
  const last = messages?.[messages.length - 1];
  if (!last) throw new Error('the request has no messages');
  return last;
};

describe('the agent on the example server, in Docker, with a scripted model', () => {
  it('edits and runs a file in its container, tells the story in events and on the stream, and answers a follow-up', async () => {
    const server = await startServer(env());
    const id = await startConversation(server, 'hello', 'Write /workspace/hello.py that greets, and run it.');
    const stream = followEvents(server, id);

    const done = await untilExecution(server, id, 'finished');
    const events = await allEvents(server, id);
    expect(story(events)).toEqual([
      'message:user',
      'status:running',
      'llm_call',
      'action:str_replace_editor',
      'observation:str_replace_editor',
      'llm_call',
      'action:execute_bash',
      'observation:execute_bash',
      'llm_call',
      'action:finish',
      'observation:finish',
      'status:finished',
    ]);
    expectIdsFromOne(events);
    const [, , firstCall, create, created, , run, ran, , finish, finished] = events;
    expect(firstCall).toMatchObject({
      kind: 'llm_call',
      model: 'scripted-model',
      prompt_tokens: 100,
      completion_tokens: 10,
      cost_usd: COST_PER_CALL,
      attempts: 1,
    });
    expect(create).toMatchObject({
      tool_call_id: 'call_create_1',
      thought: 'I will write the script first.',
      arguments: { command: 'create', path: '/workspace/hello.py' },
    });
    expect(created).toMatchObject({ tool_call_id: 'call_create_1', is_error: false });
    expect(run).toMatchObject({ tool_call_id: 'call_run_1', arguments: { command: 'python3 /workspace/hello.py' } });
    expect(ran).toMatchObject({ tool_call_id: 'call_run_1', is_error: false, exit_code: 0 });
    expect(ran?.kind === 'observation' && ran.content).toContain('hello from the agent');
    expect(finish).toMatchObject({
      tool_call_id: 'call_finish_1',
      arguments: { message: 'hello.py is written and prints its greeting.' },
    });
    expect(finished).toMatchObject({ tool_call_id: 'call_finish_1', is_error: false });

    expect(done).toMatchObject({
      conversation_status: 'RUNNING',
      execution_status: 'finished',
      // The service rounds the sum to micro-dollars.
      metrics: {
        accumulated_cost: 0.0045,
        accumulated_cost_known: true,
        accumulated_token_usage: { prompt_tokens: 100 + 101 + 102, completion_tokens: 30 },
      },
    });
    const sandboxId = done.sandbox_id;
    if (!sandboxId) throw new Error('the conversation has no sandbox');

    // The file is really in the container, and runs there.
    const container = await containerOf(sandboxId);
    expect(await execIn(container, ['cat', '/workspace/hello.py'])).toEqual({
      stdout: 'print("hello from the agent")\n',
      exitCode: 0,
    });
    expect(await execIn(container, ['python3', '/workspace/hello.py'])).toEqual({
      stdout: 'hello from the agent\n',
      exitCode: 0,
    });

    // What the model was sent: the key, the tools, and each tool's result in the next request.
    const requests = llm.requestsFor('hello');
    expect(requests).toHaveLength(3);
    for (const r of requests) {
      expect(r.headers.authorization).toBe(`Bearer ${LLM_KEY}`);
      expect(r.body.model).toBe('scripted-model');
      expect(r.body.tools?.map((t) => t.function.name).sort()).toEqual([
        'execute_bash',
        'finish',
        'str_replace_editor',
        'think',
      ]);
    }
    expect(requests[0]!.body.messages?.map((m) => m.role)).toEqual(['system', 'user']);
    const createResult = lastMessage(requests[1]!.body.messages);
    expect(createResult).toMatchObject({ role: 'tool', tool_call_id: 'call_create_1' });
    expect(textOf(createResult.content)).toContain('/workspace/hello.py');
    const runResult = lastMessage(requests[2]!.body.messages);
    expect(runResult).toMatchObject({ role: 'tool', tool_call_id: 'call_run_1' });
    expect(textOf(runResult.content)).toContain('hello from the agent');
    expect(textOf(runResult.content)).toContain('exit code 0');

    // A follow-up after it finished: the model answers in words.
    const sent = await body<{ success: boolean; sandbox_status: string }>(
      call(server.url, `/api/v1/app-conversations/${id}/send-message`, KEY, {
        role: 'user',
        content: [{ type: 'text', text: 'What did it print?' }],
        run: true,
      }),
    );
    expect(sent).toMatchObject({ success: true, sandbox_status: 'RUNNING' });
    const all = await waitFor('the answer to the follow-up', async () => {
      const now = await allEvents(server, id);
      return now.some((e) => e.id > events.length + 1 && e.kind === 'status' && e.execution_status !== 'running')
        ? now
        : undefined;
    });
    expect(all[events.length]).toMatchObject({
      id: events.length + 1,
      kind: 'message',
      source: 'user',
      text: 'What did it print?',
    });
    expect(story(all.slice(events.length))).toEqual([
      'message:user',
      'status:running',
      'llm_call',
      'message:agent',
      'status:finished',
    ]);
    expectIdsFromOne(all);
    expect(all[all.length - 2]).toMatchObject({
      kind: 'message',
      source: 'agent',
      text: 'It printed "hello from the agent", as the tool output showed.',
    });
    const fourth = llm.requestsFor('hello')[3];
    expect(fourth?.turn).toBe(3);
    expect(textOf(lastMessage(fourth?.body.messages).content)).toBe('What did it print?');
    expect(await conversation(server, id)).toMatchObject({
      execution_status: 'finished',
      conversation_status: 'RUNNING',
      sandbox_id: sandboxId,
      metrics: {
        accumulated_cost: 0.006,
        accumulated_cost_known: true,
        accumulated_token_usage: { prompt_tokens: 100 + 101 + 102 + 103, completion_tokens: 40 },
      },
    });

    // The stream, opened when the conversation started, delivered exactly what the pages hold.
    await waitFor('the stream to catch up', () => (stream.events.length >= all.length ? true : undefined));
    await stream.stop();
    expect(stream.problems).toEqual([]);
    expect(stream.events).toEqual(all);

    await expectKeyHidden(server, id, LLM_KEY);
    await deleteConversation(server, id, sandboxId);
  });

  it('closes the call a SIGKILL cut short and carries on in the same container after the restart', async () => {
    const dataDir = freshDataDir();
    const restartEnv = env({ DATA_DIR: dataDir, ACS_SECRET_KEY: randomBytes(32).toString('base64') });
    const first = await startServer(restartEnv);
    const id = await startConversation(first, 'crash', 'Wait for five minutes.');
    const action = await waitFor('the sleep action', async () =>
      (await allEvents(first, id)).find((e) => e.kind === 'action'),
    );
    expect(action).toMatchObject({
      tool_name: 'execute_bash',
      tool_call_id: 'call_sleep_1',
      arguments: { command: 'sleep 300', timeout: 600 },
    });
    const before = await conversation(first, id);
    const sandboxId = before.sandbox_id;
    if (!sandboxId) throw new Error('the conversation has no sandbox');
    const container = await containerOf(sandboxId);
    // The command really runs in the container when the server dies.
    await waitFor('sleep 300 to run in the container', async () =>
      (await execIn(container, ['pgrep', '-f', 'sleep 300'])).exitCode === 0 ? true : undefined,
    );
    const startedAt = (await container.inspect()).State.StartedAt;

    first.child.kill('SIGKILL');
    await first.exited;
    const killedAt = Date.now();
    expect(llm.requestsFor('crash')).toHaveLength(1);

    const second = await startServer(restartEnv);
    const done = await untilExecution(second, id, 'finished');
    const events = await allEvents(second, id);
    expect(story(events)).toEqual([
      'message:user',
      'status:running',
      'llm_call',
      'action:execute_bash',
      'observation:execute_bash',
      'error:restart_interrupted',
      'llm_call',
      'action:finish',
      'observation:finish',
      'status:finished',
    ]);
    expectIdsFromOne(events);
    const interrupted = events[4];
    expect(interrupted).toMatchObject({
      tool_call_id: 'call_sleep_1',
      is_error: true,
      exit_code: null,
      details: { interrupted: true },
    });
    expect(interrupted?.kind === 'observation' && interrupted.content).toMatch(/restarted/);
    expect(events[5]).toMatchObject({ kind: 'error', code: 'restart_interrupted', fatal: false });

    // Same sandbox, same container, never restarted.
    expect(done).toMatchObject({ sandbox_id: sandboxId, conversation_status: 'RUNNING', execution_status: 'finished' });
    const after = await containerOf(sandboxId);
    expect(after.id).toBe(container.id);
    expect((await after.inspect()).State.StartedAt).toBe(startedAt);

    // The model was asked again only after the restart, and told the call was interrupted.
    const requests = llm.requestsFor('crash');
    expect(requests).toHaveLength(2);
    expect(requests[1]!.at).toBeGreaterThanOrEqual(killedAt);
    const result = lastMessage(requests[1]!.body.messages);
    expect(result).toMatchObject({ role: 'tool', tool_call_id: 'call_sleep_1' });
    expect(textOf(result.content)).toMatch(/restarted/);

    await expectKeyHidden(second, id, LLM_KEY);
    await deleteConversation(second, id, sandboxId);
  });

  it('stops with llm_auth_failed when the model server refuses the key, without showing the key', async () => {
    const revoked = `sk-revoked-${randomBytes(12).toString('hex')}`;
    // Nothing here needs to outlive the process: memory storage starts faster than PGlite.
    const server = await startServer(env({ ACS_STORAGE: 'memory' }));
    const id = await startConversation(server, 'unauthorized', 'Say hello.', revoked);
    const failed = await untilExecution(server, id, 'error');
    const events = await allEvents(server, id);
    expect(story(events)).toEqual(['message:user', 'status:running', 'error:llm_auth_failed', 'status:error']);
    expectIdsFromOne(events);
    expect(events[2]).toMatchObject({ kind: 'error', fatal: true });
    // The provider's words are kept, with the key it echoed cut out.
    expect(events[2]?.kind === 'error' && events[2].message).toMatch(
      /HTTP 401.*Incorrect API key provided: \[REDACTED\]\./,
    );

    // Sent once (a 401 is not retried), with the key; shown nowhere, though the provider echoed it.
    const requests = llm.requestsFor('unauthorized');
    expect(requests).toHaveLength(1);
    expect(requests[0]!.headers.authorization).toBe(`Bearer ${revoked}`);
    await expectKeyHidden(server, id, revoked);
    if (!failed.sandbox_id) throw new Error('the conversation has no sandbox');
    await deleteConversation(server, id, failed.sandbox_id);
  });
});
