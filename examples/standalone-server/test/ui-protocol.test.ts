/**
 * The OpenHands web UI's protocols, spoken by their official clients against the example
 * server (a real process, fake sandboxes, a scripted OpenAI-compatible model): the V0
 * socket.io channel, the V1 agent-server event socket, the conversation key, browser sign-in.
 */
import { io, type Socket } from 'socket.io-client';
import WebSocket from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { scriptedCompletion, marker, startFakeOpenAi, toolCall, type FakeOpenAi } from '@acs/testing';
import { body, call, startServer, waitFor, type Running } from './process.js';

const KEY_A = 'ui-protocol-alice-key-0123456789';
const KEY_B = 'ui-protocol-bob-key-0123456789ab';

let llm: FakeOpenAi;
let server: Running;
const sockets: { close(): void }[] = [];

type V0 = Record<string, unknown> & {
  id: number;
  source: string;
  action?: string;
  observation?: string;
  args?: Record<string, unknown>;
  extras?: Record<string, unknown>;
  cause?: number | null;
};
type V1 = Record<string, unknown> & { id: string; kind: string };

beforeAll(async () => {
  llm = await startFakeOpenAi();
  llm.script('basic', (turn) => {
    if (turn === 0)
      return {
        status: 200,
        body: scriptedCompletion(turn, {
          content: 'Let me run it.',
          tool_calls: [toolCall('call_run', 'execute_bash', { command: 'echo hi' })],
        }),
      };
    if (turn === 1)
      return {
        status: 200,
        body: scriptedCompletion(turn, {
          content: null,
          tool_calls: [toolCall('call_finish', 'finish', { message: 'done first' })],
        }),
      };
    return { status: 200, body: scriptedCompletion(turn, { content: `answer ${turn}` }) };
  });
  llm.script('slow', (turn) =>
    turn === 0
      ? {
          status: 200,
          body: scriptedCompletion(turn, {
            content: null,
            tool_calls: [toolCall('call_think', 'think', { thought: 'slowly' })],
          }),
          delayMs: 600_000,
        }
      : { status: 200, body: scriptedCompletion(turn, { content: 'after the pause' }) },
  );
  llm.script('confirm', (turn) =>
    turn === 0
      ? {
          status: 200,
          body: scriptedCompletion(turn, {
            content: null,
            tool_calls: [toolCall('call_risky', 'execute_bash', { command: 'echo accepted' })],
          }),
        }
      : turn === 1
        ? {
            status: 200,
            body: scriptedCompletion(turn, {
              content: null,
              tool_calls: [toolCall('call_again', 'execute_bash', { command: 'echo rejected' })],
            }),
          }
        : { status: 200, body: scriptedCompletion(turn, { content: `answer ${turn}` }) },
  );
  server = await startServer(
    {
      SESSION_API_KEY: KEY_A,
      ACS_API_KEYS: `bob:${KEY_B}`,
      ACS_STORAGE: 'memory',
      ACS_SANDBOXES: 'fake',
      ACS_MAX_RUNNING_SANDBOXES: '100',
    },
    { lifetime: 'file' },
  );
  for (const key of [KEY_A, KEY_B]) {
    await body(
      call(server.url, '/api/settings', key, {
        llm_model: 'openai/scripted-model',
        llm_api_key: 'sk-protocol',
        llm_base_url: llm.baseUrl,
      }),
    );
  }
});

afterEach(() => {
  for (const s of sockets.splice(0)) s.close();
});

afterAll(async () => {
  await llm.close();
});

interface V0Client {
  socket: Socket;
  events: V0[];
  errors: string[];
  until(done: (events: V0[]) => boolean, what: string): Promise<V0[]>;
}

/** A socket.io client as the UI makes it (websocket transport, the query it sends). */
function v0Client(
  conversationId: string,
  options: { latest?: number; key?: string | null; cookie?: string },
): V0Client {
  const events: V0[] = [];
  const errors: string[] = [];
  const socket = io(server.url, {
    path: '/socket.io',
    transports: ['websocket'],
    reconnection: false,
    query: {
      conversation_id: conversationId,
      latest_event_id: options.latest ?? -1,
      providers_set: '',
      ...(options.key ? { session_api_key: options.key } : {}),
    },
    ...(options.cookie ? { extraHeaders: { cookie: options.cookie } } : {}),
  });
  sockets.push({ close: () => socket.close() });
  socket.on('oh_event', (event: V0 & { error?: boolean; message?: string }) => {
    if (event.error) errors.push(String(event.message));
    else events.push(event);
  });
  socket.on('connect_error', (error: Error) => errors.push(`connect_error: ${error.message}`));
  return {
    socket,
    events,
    errors,
    until: (done, what) =>
      waitFor(
        what,
        () =>
          done(events)
            ? events
            : errors.length > 0
              ? Promise.reject(new Error(`${what}: ${errors.join('; ')}`))
              : undefined,
        60_000,
      ),
  };
}

/** The agent's state as the last agent_state_changed says. */
const agentState = (events: V0[]) =>
  events.filter((e) => e.observation === 'agent_state_changed').at(-1)?.extras?.agent_state;

async function newV0Conversation(
  script: string,
  text: string,
  key = KEY_A,
): Promise<{ id: string; sessionKey: string }> {
  const { conversation_id } = await body<{ conversation_id: string }>(
    call(server.url, '/api/conversations', key, { initial_user_msg: `${marker(script)} ${text}` }),
  );
  const info = await waitFor('the conversation to run', async () => {
    const c = await body<{ status: string; session_api_key: string | null; url: string | null }>(
      call(server.url, `/api/conversations/${conversation_id}`, key),
    );
    return c.status === 'RUNNING' ? c : undefined;
  });
  expect(info.url).toBe(`/api/conversations/${conversation_id}`);
  expect(info.session_api_key).toMatch(/^acsc_/);
  expect(info.session_api_key).not.toContain(key);
  return { id: conversation_id, sessionKey: info.session_api_key! };
}

async function executionStatus(id: string, key = KEY_A): Promise<string | null> {
  const [c] = await body<({ execution_status: string | null } | null)[]>(
    call(server.url, `/api/v1/app-conversations?ids=${id}`, key),
  );
  return c?.execution_status ?? null;
}

/** Signs a browser in with ?key= and returns its session cookie (`name=value`). */
async function signIn(key: string): Promise<{ cookie: string; setCookie: string; location: string | null }> {
  const response = await fetch(`${server.url}/conversations/abc?key=${encodeURIComponent(key)}&tab=terminal`, {
    redirect: 'manual',
    headers: { 'Sec-Fetch-Site': 'none' },
  });
  expect(response.status).toBe(303);
  const setCookie = response.headers.get('set-cookie') ?? '';
  return { cookie: setCookie.split(';')[0]!, setCookie, location: response.headers.get('location') };
}

describe('the V0 realtime channel (socket.io)', () => {
  it('replays the log in V0 form with the agent state last, follows live, runs the agent on a message, and resumes after the last id without a gap or a repeat', async () => {
    const { id, sessionKey } = await newV0Conversation('basic', 'say hi');
    await waitFor('the agent to finish', async () => ((await executionStatus(id)) === 'finished' ? true : undefined));

    const first = v0Client(id, { key: sessionKey });
    await first.until((e) => e.some((x) => x.action === 'finish') && agentState(e) === 'finished', 'the replay');
    const replayed = first.events;
    const user = replayed.find((e) => e.action === 'message' && e.source === 'user')!;
    expect(user.args).toMatchObject({
      content: expect.stringContaining('say hi') as unknown,
      image_urls: [],
      file_urls: [],
    });
    const run = replayed.find((e) => e.action === 'run')!;
    expect(run).toMatchObject({ source: 'agent', args: { command: 'echo hi', confirmation_state: 'confirmed' } });
    const output = replayed.find((e) => e.observation === 'run')!;
    expect(output.cause).toBe(run.id);
    expect(output.extras).toMatchObject({ command: 'echo hi', metadata: { exit_code: 127 } });
    expect(replayed.find((e) => e.action === 'finish')?.args).toMatchObject({ final_thought: 'done first' });
    // Numeric ids, in order; the agent state is the last event and carries the last id.
    const ids = replayed.map((e) => e.id);
    expect(ids.every((x) => Number.isInteger(x))).toBe(true);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    expect(replayed.at(-1)).toMatchObject({ observation: 'agent_state_changed', extras: { agent_state: 'finished' } });
    expect(replayed.filter((e) => e.observation === 'agent_state_changed')).toHaveLength(1);

    // A message from the client runs the agent, and its events arrive live.
    const before = first.events.length;
    first.socket.emit('oh_user_action', {
      action: 'message',
      args: { content: 'and now?', image_urls: [], file_urls: [], timestamp: new Date().toISOString() },
    });
    await first.until(
      (e) => e.slice(before).some((x) => x.action === 'message' && x.source === 'agent'),
      'the live answer',
    );
    const live = first.events.slice(before);
    expect(live[0]).toMatchObject({ action: 'message', source: 'user', args: { content: 'and now?' } });
    expect(live.find((e) => e.action === 'message' && e.source === 'agent')?.message).toMatch(/^answer \d+$/);
    await first.until((e) => agentState(e) === 'finished', 'the state after the answer');
    const seenFirst = first.events.map((e) => e.id);
    first.socket.close();

    // Disconnected: another message is answered meanwhile; a reconnect from the last id gets exactly what was missed.
    await body(call(server.url, `/api/conversations/${id}/message`, KEY_A, { message: 'while you were away' }));
    await waitFor('the answer while away', async () =>
      (await executionStatus(id)) === 'finished' && llm.requestsFor('basic').length >= 4 ? true : undefined,
    );
    const lastSeen = Math.max(...seenFirst);
    const second = v0Client(id, { key: sessionKey, latest: lastSeen });
    await second.until((e) => e.some((x) => x.action === 'message' && x.source === 'agent'), 'the missed events');
    const resumed = second.events.map((e) => e.id);
    expect(Math.min(...resumed)).toBe(lastSeen + 1);
    expect(new Set([...seenFirst, ...resumed]).size).toBe(seenFirst.length + resumed.length);
    const all = await body<{ items: { id: number }[] }>(
      call(server.url, `/api/v1/app-conversations/${id}/events?limit=100`, KEY_A),
    );
    // Every event that has a V0 form reached one of the two connections (model calls have none).
    expect(Math.max(...resumed)).toBe(Math.max(...all.items.map((e) => e.id)));
  });

  it('stops the agent on change_agent_state, and confirms and rejects waiting actions', async () => {
    const slow = await newV0Conversation('slow', 'take your time');
    const client = v0Client(slow.id, { key: slow.sessionKey });
    await client.until((e) => agentState(e) === 'running', 'the agent running');
    client.socket.emit('oh_user_action', { action: 'change_agent_state', args: { agent_state: 'stopped' } });
    await client.until((e) => agentState(e) === 'paused', 'the agent paused');
    expect(await executionStatus(slow.id)).toBe('paused');

    await body(call(server.url, '/api/settings', KEY_A, { confirmation_mode: true }));
    try {
      const confirm = await newV0Conversation('confirm', 'be careful');
      const c = v0Client(confirm.id, { key: confirm.sessionKey });
      await c.until((e) => agentState(e) === 'awaiting_user_confirmation', 'the first action waiting');
      expect(c.events.find((e) => e.action === 'run')?.args).toMatchObject({
        command: 'echo accepted',
        confirmation_state: 'awaiting_confirmation',
        security_risk: -1,
      });
      c.socket.emit('oh_user_action', { action: 'change_agent_state', args: { agent_state: 'user_confirmed' } });
      await c.until(
        (e) => e.some((x) => x.observation === 'run' && x.extras?.command === 'echo accepted'),
        'the accepted action to run',
      );
      await c.until(
        (e) => e.filter((x) => x.action === 'run').length === 2 && agentState(e) === 'awaiting_user_confirmation',
        'the second action waiting',
      );
      c.socket.emit('oh_user_action', { action: 'change_agent_state', args: { agent_state: 'user_rejected' } });
      const rejectedRun = c.events.filter((x) => x.action === 'run').at(-1)!;
      const [rejection] = (
        await c.until((e) => e.some((x) => x.observation === 'user_rejected'), 'the rejection')
      ).filter((x) => x.observation === 'user_rejected');
      expect(rejection).toMatchObject({
        cause: rejectedRun.id,
        content: expect.stringContaining('Rejected by the user') as unknown,
      });
      expect(c.events.some((x) => x.observation === 'run' && x.extras?.command === 'echo rejected')).toBe(false);
      await c.until((e) => agentState(e) === 'awaiting_user_input', 'the agent waiting for a message');
      // Nothing waits now: a confirmation is refused with a message, not silently.
      c.socket.emit('oh_user_action', { action: 'change_agent_state', args: { agent_state: 'user_confirmed' } });
      await waitFor('the refusal', () => (c.errors.some((m) => m.includes('No action is waiting')) ? true : undefined));
    } finally {
      await body(call(server.url, '/api/settings', KEY_A, { confirmation_mode: false }));
    }
  });

  it('a conversation whose agent has not run yet (no message) still tells the UI its agent waits for the user, on both channels', async () => {
    // The UI's "New Conversation" button creates one with no message; it keeps showing
    // "Initializing agent…" and refuses input until an agent state arrives.
    const { conversation_id: id } = await body<{ conversation_id: string }>(
      call(server.url, '/api/conversations', KEY_A, {}),
    );
    const info = await waitFor('the conversation to run', async () => {
      const c = await body<{ status: string; session_api_key: string }>(
        call(server.url, `/api/conversations/${id}`, KEY_A),
      );
      return c.status === 'RUNNING' ? c : undefined;
    });
    const v0 = v0Client(id, { key: info.session_api_key });
    const replayed = await v0.until((e) => e.length >= 1, 'the initial agent state');
    expect(replayed).toEqual([
      expect.objectContaining({
        id: 0,
        observation: 'agent_state_changed',
        extras: { agent_state: 'awaiting_user_input', reason: '' },
      }),
    ]);

    const v1 = v1Client(id, { resend_all: 'true', session_api_key: info.session_api_key });
    await v1.until((f) => f.length >= 1, 'the full state');
    expect(v1.frames[0]).toMatchObject({
      kind: 'ConversationStateUpdateEvent',
      key: 'full_state',
      value: { execution_status: 'idle' },
    });

    // Typing then runs the agent, and the reconnect from id 0 repeats nothing.
    v0.socket.emit('oh_user_action', {
      action: 'message',
      args: {
        content: `${marker('basic')} first words`,
        image_urls: [],
        file_urls: [],
        timestamp: new Date().toISOString(),
      },
    });
    await v0.until((e) => agentState(e) === 'finished', 'the agent to finish');
    const again = v0Client(id, { latest: 0, key: info.session_api_key });
    const all = await again.until((e) => agentState(e) === 'finished', 'the replay');
    expect(all.filter((e) => e.observation !== 'agent_state_changed').map((e) => e.id)).toEqual(
      v0.events.filter((e) => e.id > 0 && e.observation !== 'agent_state_changed').map((e) => e.id),
    );
  });

  it('refuses a wrong key, an API key in the URL, a stale session, another user’s cookie and another conversation’s key', async () => {
    const mine = await newV0Conversation('basic', 'mine');
    const other = await newV0Conversation('basic', 'other');
    const refused = async (client: V0Client, what: string) => {
      await waitFor(what, () => (client.errors.length > 0 ? true : undefined));
      expect(client.events).toEqual([]);
      return client.errors.join(' ');
    };
    expect(await refused(v0Client(mine.id, { key: 'acsc_not-a-real-key' }), 'a wrong key')).toMatch(
      /connect_error: Not authenticated/,
    );
    expect(await refused(v0Client(mine.id, { key: KEY_A }), 'an API key in the query')).toMatch(
      /connect_error: Not authenticated/,
    );
    expect(await refused(v0Client(mine.id, { key: other.sessionKey }), "another conversation's key")).toMatch(
      /connect_error: This key opens conversation/,
    );

    const bob = await signIn(KEY_B);
    expect(await refused(v0Client(mine.id, { cookie: bob.cookie }), "bob's cookie on alice's conversation")).toMatch(
      /was not found/,
    );

    const alice = await signIn(KEY_A);
    const withCookie = v0Client(mine.id, { cookie: alice.cookie });
    await withCookie.until((e) => e.length > 0, 'the replay with a session cookie');
    const out = await fetch(`${server.url}/api/sign-out`, {
      method: 'POST',
      headers: { cookie: alice.cookie, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(out.status).toBe(200);
    expect(await refused(v0Client(mine.id, { cookie: alice.cookie }), 'a signed-out session')).toMatch(
      /connect_error: Not authenticated/,
    );
  });
});

interface V1Client {
  ws: WebSocket;
  frames: V1[];
  closed: Promise<{ code: number; reason: string }>;
  until(done: (frames: V1[]) => boolean, what: string): Promise<V1[]>;
}

function v1Client(
  conversationId: string,
  query: Record<string, string>,
  headers: Record<string, string> = {},
): V1Client {
  const ws = new WebSocket(
    `${server.url.replace('http', 'ws')}/sockets/events/${conversationId}?${new URLSearchParams(query).toString()}`,
    { headers },
  );
  sockets.push({ close: () => ws.close() });
  const frames: V1[] = [];
  ws.on('message', (data: Buffer) => frames.push(JSON.parse(data.toString('utf8')) as V1));
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  return {
    ws,
    frames,
    closed,
    until: (done, what) => waitFor(what, () => (done(frames) ? frames : undefined), 60_000),
  };
}

async function newV1Conversation(
  script: string,
  text: string,
): Promise<{ id: string; url: string; sessionKey: string }> {
  const task = await body<{ id: string }>(
    call(server.url, '/api/v1/app-conversations', KEY_A, {
      initial_message: { role: 'user', content: [{ type: 'text', text: `${marker(script)} ${text}` }] },
    }),
  );
  const ready = await waitFor('the start task', async () => {
    const [t] = await body<({ status: string; app_conversation_id: string } | null)[]>(
      call(server.url, `/api/v1/app-conversations/start-tasks?ids=${task.id}`, KEY_A),
    );
    return t?.status === 'READY' ? t : undefined;
  });
  const [c] = await body<{ conversation_url: string; session_api_key: string }[]>(
    call(server.url, `/api/v1/app-conversations?ids=${ready.app_conversation_id}`, KEY_A),
  );
  return { id: ready.app_conversation_id, url: c!.conversation_url, sessionKey: c!.session_api_key };
}

describe('the V1 realtime channel (the agent-server event socket)', () => {
  it('resends the history as agent-server frames (as many as events/count says), follows live, and runs the agent on a Message frame', async () => {
    const { id, url, sessionKey } = await newV1Conversation('basic', 'hello v1');
    expect(url).toBe(`/api/conversations/${id}`);
    await waitFor('the agent to finish', async () => ((await executionStatus(id)) === 'finished' ? true : undefined));
    const count = await body<number>(call(server.url, `/api/v1/events/count?conversation_id__eq=${id}`, sessionKey));
    const client = v1Client(id, { resend_all: 'true', session_api_key: sessionKey });
    await client.until((f) => f.length >= count + 1, 'the history and the full state');
    const history = client.frames.slice(0, count);
    expect(history.every((f) => typeof f.id === 'string' && f.id !== '' && typeof f.timestamp === 'string')).toBe(true);
    expect(history[0]).toMatchObject({ kind: 'MessageEvent', source: 'user', llm_message: { role: 'user' } });
    const action = history.find(
      (f) => f.kind === 'ActionEvent' && (f.action as { kind: string }).kind === 'ExecuteBashAction',
    )!;
    expect(action).toMatchObject({
      source: 'agent',
      tool_name: 'execute_bash',
      tool_call_id: 'call_run',
      action: { command: 'echo hi' },
      security_risk: 'UNKNOWN',
    });
    const observation = history.find(
      (f) => f.kind === 'ObservationEvent' && (f.observation as { kind: string }).kind === 'ExecuteBashObservation',
    )!;
    expect(observation).toMatchObject({
      source: 'environment',
      action_id: action.id,
      observation: { command: 'echo hi', exit_code: 127 },
    });
    expect(
      history.find((f) => f.kind === 'ActionEvent' && (f.action as { kind: string }).kind === 'FinishAction'),
    ).toMatchObject({ action: { message: 'done first' } });
    expect(history.filter((f) => f.kind === 'ConversationStateUpdateEvent').map((f) => f.value)).toContain('finished');
    expect(client.frames[count]).toMatchObject({
      kind: 'ConversationStateUpdateEvent',
      key: 'full_state',
      value: { execution_status: 'finished' },
    });

    client.ws.send(JSON.stringify({ role: 'user', content: [{ type: 'text', text: 'one more thing' }] }));
    await client.until(
      (f) => f.slice(count + 1).some((x) => x.kind === 'MessageEvent' && x.source === 'agent'),
      'the live answer',
    );
    const live = client.frames.slice(count + 1);
    expect(live[0]).toMatchObject({
      kind: 'MessageEvent',
      source: 'user',
      llm_message: { content: [{ type: 'text', text: 'one more thing' }] },
    });

    // Without resend_all: only what happens from now on.
    const fresh = v1Client(id, { session_api_key: sessionKey });
    await fresh.until((f) => f.length === 1, 'the full state only');
    expect(fresh.frames[0]).toMatchObject({ key: 'full_state' });
  });

  it('pauses and resumes the agent with the conversation key, which opens nothing else', async () => {
    const { id, sessionKey } = await newV1Conversation('slow', 'slow v1');
    await waitFor('the agent running', async () => ((await executionStatus(id)) === 'running' ? true : undefined));
    expect(await body(call(server.url, `/api/conversations/${id}/pause`, sessionKey, {}))).toEqual({ success: true });
    expect(await executionStatus(id)).toBe('paused');
    expect(await body(call(server.url, `/api/conversations/${id}/run`, sessionKey, {}))).toEqual({ success: true });
    await waitFor('the agent to go on', async () => ((await executionStatus(id)) !== 'paused' ? true : undefined));

    const other = await newV1Conversation('basic', 'another');
    for (const [method, path] of [
      ['GET', '/api/settings'],
      ['GET', `/api/conversations/${id}`],
      ['POST', `/api/conversations/${other.id}/pause`],
      ['GET', `/api/v1/events/count?conversation_id__eq=${other.id}`],
    ] as const) {
      const r = await call(server.url, path, sessionKey, method === 'POST' ? {} : undefined, method);
      expect(r.status, `${method} ${path}`).toBe(401);
    }
    expect((await call(server.url, `/api/conversations/${id}/pause`, KEY_B, {})).status).toBe(404);
  });

  it('closes with 4001 for a wrong or foreign key and 4004 for a conversation that does not exist', async () => {
    const { id } = await newV1Conversation('basic', 'closing');
    const other = await newV1Conversation('basic', 'other v1');
    expect((await v1Client(id, { session_api_key: 'acsc_wrong' }).closed).code).toBe(4001);
    expect((await v1Client(id, { session_api_key: other.sessionKey }).closed).code).toBe(4001);
    expect((await v1Client(id, { session_api_key: KEY_A }).closed).code).toBe(4001);
    const alice = await signIn(KEY_A);
    expect((await v1Client('0'.repeat(32), {}, { cookie: alice.cookie }).closed).code).toBe(4004);
    const bob = await signIn(KEY_B);
    expect((await v1Client(id, {}, { cookie: bob.cookie }).closed).code).toBe(4004);
  });
});

describe('browser sign-in', () => {
  it('sets an HttpOnly SameSite=Strict session cookie (never the key) and drops the key from the address', async () => {
    const { cookie, setCookie, location } = await signIn(KEY_A);
    expect(location).toBe('/conversations/abc?tab=terminal');
    expect(setCookie).toMatch(/^acs_session=[A-Za-z0-9_-]{40,}; Path=\/; HttpOnly; SameSite=Strict$/);
    expect(setCookie).not.toContain(KEY_A);
    expect((await call(server.url, '/api/settings', null)).status).toBe(401);
    const withCookie = await fetch(`${server.url}/api/settings`, { headers: { cookie } });
    expect(withCookie.status).toBe(200);
    expect((await fetch(`${server.url}/?key=not-a-key-at-all-000000`, { redirect: 'manual' })).status).toBe(401);
  });

  it('guards cookie requests that change state: same origin and JSON only', async () => {
    const { cookie } = await signIn(KEY_A);
    const post = (headers: Record<string, string>, payload: string) =>
      fetch(`${server.url}/api/settings`, { method: 'POST', headers: { cookie, ...headers }, body: payload });
    expect((await post({ 'content-type': 'application/json', origin: server.url }, '{"language":"en"}')).status).toBe(
      200,
    );
    for (const [headers, payload] of [
      [{ 'content-type': 'application/json', origin: 'http://evil.example' }, '{"language":"de"}'],
      [{ 'content-type': 'application/json', 'sec-fetch-site': 'cross-site' }, '{"language":"de"}'],
      [{ 'content-type': 'text/plain' }, '{"language":"de"}'],
      [{ 'content-type': 'application/x-www-form-urlencoded' }, 'language=de'],
    ] as const) {
      const r = await post(headers, payload);
      expect(r.status, JSON.stringify(headers)).toBe(403);
      expect(((await r.json()) as { code: string }).code).toBe('CROSS_SITE_REQUEST');
    }
    expect((await body<{ language: string }>(call(server.url, '/api/settings', KEY_A))).language).toBe('en');
    // The API key in the header is not subject to the guard (it is not ambient, like a cookie).
    expect(
      (
        await fetch(`${server.url}/api/settings`, {
          method: 'POST',
          headers: {
            'x-session-api-key': KEY_A,
            'content-type': 'application/json',
            origin: 'http://elsewhere.example',
          },
          body: '{}',
        })
      ).status,
    ).toBe(200);
  });

  it('sign-out ends the session and clears the cookie', async () => {
    const { cookie } = await signIn(KEY_A);
    const out = await fetch(`${server.url}/api/sign-out`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(out.status).toBe(200);
    expect(out.headers.get('set-cookie')).toMatch(/^acs_session=; Path=\/; HttpOnly; SameSite=Strict; Max-Age=0$/);
    expect((await fetch(`${server.url}/api/settings`, { headers: { cookie } })).status).toBe(401);
  });
});
