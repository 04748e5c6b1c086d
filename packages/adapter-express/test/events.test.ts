import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { sseMessages, type ScriptedTurn } from '@acs/testing';
import { expectOpenHandsShape } from './openhands-shapes.js';
import {
  arr,
  createConversation,
  errorCode,
  items,
  KEY_A,
  KEY_B,
  obj,
  startAppConversation,
  startHarness,
  storeSettings,
  type CallResult,
  type Harness,
  type HarnessOptions,
} from './harness.js';

// ---------------------------------------------------------------------------------------
// Set-up: every test gets its own service; gates hold the scripted model until released.
// ---------------------------------------------------------------------------------------

let harnesses: Harness[] = [];
let gates: Gate[] = [];
let streams: SseClient[] = [];

async function harness(options: HarnessOptions = {}): Promise<Harness> {
  const h = await startHarness({ ...options, router: { sseHeartbeatMs: 60_000, ...options.router } });
  harnesses.push(h);
  await storeSettings(h);
  return h;
}

afterEach(async () => {
  for (const gate of gates) gate.open();
  for (const stream of streams) stream.close();
  await Promise.all(harnesses.map((h) => h.close()));
  harnesses = [];
  gates = [];
  streams = [];
});

interface Gate {
  readonly wait: Promise<void>;
  open(): void;
}

function gate(): Gate {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  const g = { wait, open };
  gates.push(g);
  return g;
}

const THINK: ScriptedTurn = { tool_calls: [{ name: 'think', arguments: { thought: 'plan the work' } }] };
const DONE: ScriptedTurn = { content: 'All done.' };

/** The scripted model answers turn i only once gates[i] (if any) is open. */
function scriptGated(h: Harness, turns: readonly { turn: ScriptedTurn; gate?: Gate }[]): void {
  h.ports.llm.respondWith(async (_request, index) => {
    const step = turns[index];
    if (!step) return { content: 'The scripted model has nothing more to say.' };
    if (step.gate) await step.gate.wait;
    return step.turn;
  });
}

const userMessage = (text: string, run = true) => ({ role: 'user', content: [{ type: 'text', text }], run });

/** Starts a V1 conversation with an initial message and returns its id (the agent runs in the background). */
async function startV1(h: Harness, text = 'Please do the task.', key: string = KEY_A): Promise<string> {
  const task = await startAppConversation(h, { initial_message: userMessage(text) }, key);
  return task.app_conversation_id as string;
}

async function events(
  h: Harness,
  id: string,
  query = '',
  key: string = KEY_A,
): Promise<{ items: Record<string, unknown>[]; next_after: number | null }> {
  const r = await h.call('GET', `/api/v1/app-conversations/${id}/events${query}`, { key });
  expect(r.status, r.text).toBe(200);
  return { items: items(r.body), next_after: obj(r.body).next_after as number | null };
}

const summary = (e: Record<string, unknown>) => {
  if (e.kind === 'message') return `message(${e.source as string})`;
  if (e.kind === 'status') return `status(${e.execution_status as string})`;
  if (e.kind === 'action' || e.kind === 'observation') return `${e.kind}(${e.tool_name as string})`;
  return e.kind as string;
};

/** What one run of the agent on a message looks like when the model thinks once, then replies. */
const THINK_THEN_REPLY = [
  'message(user)',
  'status(running)',
  'llm_call',
  'action(think)',
  'observation(think)',
  'llm_call',
  'message(agent)',
  'status(finished)',
];

async function expect422(r: CallResult, path?: string): Promise<void> {
  expect(r.status, r.text).toBe(422);
  expect(errorCode(r.body)).toBe('VALIDATION_FAILED');
  if (path !== undefined)
    expect(
      arr(obj(r.body).issues).map((i) => obj(i).path),
      r.text,
    ).toContain(path);
  await Promise.resolve();
}

// ---------------------------------------------------------------------------------------
// A small SSE client over fetch's streaming body.
// ---------------------------------------------------------------------------------------

interface SseEvent {
  id: number;
  event: string;
  data: Record<string, unknown>;
}

interface SseClient {
  readonly response: Response;
  /** The stored events (messages with an id). */
  readonly events: SseEvent[];
  /** The deltas of answers being written (`event: delta`, no id; deltas.test.ts covers them). */
  readonly deltas: Record<string, unknown>[];
  readonly comments: string[];
  /** Resolves once `done(events)` holds; fails after `timeoutMs`. */
  until(done: (events: SseEvent[]) => boolean, timeoutMs?: number): Promise<SseEvent[]>;
  /** Resolves when the server ends the stream. */
  readonly ended: Promise<void>;
  close(): void;
}

interface StreamOptions {
  key?: string | null;
  headers?: Record<string, string>;
  query?: string;
}

async function openStream(h: Harness, id: string, options: StreamOptions = {}): Promise<SseClient> {
  const abort = new AbortController();
  const key = options.key === undefined ? KEY_A : options.key;
  const response = await fetch(`${h.baseUrl}/api/v1/app-conversations/${id}/events/stream${options.query ?? ''}`, {
    headers: { Accept: 'text/event-stream', ...(key !== null ? { 'X-Session-API-Key': key } : {}), ...options.headers },
    signal: AbortSignal.any([abort.signal, AbortSignal.timeout(120_000)]),
  });
  if (response.status !== 200) throw new Error(`stream: ${response.status} ${await response.text()}`);
  const received: SseEvent[] = [];
  const deltas: Record<string, unknown>[] = [];
  const comments: string[] = [];
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const w of [...waiters]) w();
  };

  const pump = async () => {
    try {
      for await (const message of sseMessages(response.body!)) {
        comments.push(...message.comments);
        const { id, event, data } = message.fields;
        if (data !== undefined && id === undefined) deltas.push(obj(JSON.parse(data)));
        else if (data !== undefined)
          received.push({ id: Number(id), event: event ?? 'message', data: obj(JSON.parse(data)) });
        notify();
      }
    } catch {
      // aborted by close()
    } finally {
      notify();
    }
  };
  const ended = pump();

  const client: SseClient = {
    response,
    events: received,
    deltas,
    comments,
    ended,
    until: (done, timeoutMs = 60_000) =>
      new Promise<SseEvent[]>((resolve, reject) => {
        const check = () => {
          if (done(received)) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve([...received]);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(
              `stream condition not met in ${timeoutMs} ms; got ${received.map((e) => `${e.id}:${e.event}`).join(' ')}`,
            ),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
    close: () => abort.abort(),
  };
  streams.push(client);
  return client;
}

const lastIs = (kind: string, extra?: (e: SseEvent) => boolean) => (events: SseEvent[]) => {
  const last = events[events.length - 1];
  return last !== undefined && last.event === kind && (extra ? extra(last) : true);
};
const finished = lastIs('status', (e) => e.data.execution_status === 'finished');

/** Polls until `check` holds (for effects the server applies after the client left). */
async function eventually(check: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * Counts the event subscriptions the router holds open, by wrapping the service method
 * it calls (the EventLog itself is not reachable from outside the service).
 */
function countSubscriptions(h: Harness): {
  readonly open: number;
  readonly opened: number;
  readonly deliveredAfterClose: number;
} {
  const conversations = h.service.conversations;
  const original = conversations.subscribeEvents.bind(conversations);
  const counts = { open: 0, opened: 0, deliveredAfterClose: 0 };
  conversations.subscribeEvents = (userId, id, afterId, listener) => {
    let closed = false;
    return original(userId, id, afterId, (event) => {
      if (closed) counts.deliveredAfterClose++;
      listener(event);
    }).map((subscription) => {
      counts.open++;
      counts.opened++;
      return {
        get lastId() {
          return subscription.lastId;
        },
        close: () => {
          if (!closed) counts.open--;
          closed = true;
          subscription.close();
        },
      };
    });
  };
  return counts;
}

// ---------------------------------------------------------------------------------------
// GET /api/v1/app-conversations/{id}/events
// ---------------------------------------------------------------------------------------

describe('GET /api/v1/app-conversations/{id}/events', () => {
  it('shows what the agent did, in order, with ids 1, 2, 3, …', async () => {
    const h = await harness();
    h.ports.llm.push(THINK, DONE);
    const id = await startV1(h, 'Think, then answer.');
    await h.idle();
    const page = await events(h, id);
    expect(page.items.map(summary)).toEqual(THINK_THEN_REPLY);
    expect(page.items.map((e) => e.id)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(page.next_after).toBeNull();
    const [user, , , action, observation, , reply] = page.items;
    expect(user).toMatchObject({ kind: 'message', source: 'user', text: 'Think, then answer.', image_urls: [] });
    expect(action).toMatchObject({
      kind: 'action',
      source: 'agent',
      tool_name: 'think',
      arguments: { thought: 'plan the work' },
    });
    expect(observation).toMatchObject({ kind: 'observation', tool_call_id: action!.tool_call_id, is_error: false });
    expect(reply).toMatchObject({ kind: 'message', source: 'agent', text: 'All done.' });
    for (const e of page.items) expect(Date.parse(e.timestamp as string)).not.toBeNaN();
    // The conversation says it finished.
    const conversation = obj((await h.call('GET', `/api/v1/app-conversations/${id}`)).body);
    expect(conversation.execution_status).toBe('finished');
  });

  it('pages with limit, after and next_after', async () => {
    const h = await harness();
    h.ports.llm.push(THINK, DONE);
    const id = await startV1(h);
    await h.idle();
    const ids = async (query: string) => {
      const page = await events(h, id, query);
      return { ids: page.items.map((e) => e.id as number), next_after: page.next_after };
    };
    expect(await ids('?limit=3')).toEqual({ ids: [1, 2, 3], next_after: 3 });
    expect(await ids('?limit=3&after=3')).toEqual({ ids: [4, 5, 6], next_after: 6 });
    expect(await ids('?limit=3&after=6')).toEqual({ ids: [7, 8], next_after: null });
    // A page that ends exactly at the end of the log still offers next_after; the next page is empty.
    expect(await ids('?limit=4&after=4')).toEqual({ ids: [5, 6, 7, 8], next_after: 8 });
    expect(await ids('?after=8')).toEqual({ ids: [], next_after: null });
    expect(await ids('?after=1000')).toEqual({ ids: [], next_after: null });
    // Following next_after visits every event once.
    const seen: number[] = [];
    let after: number | null = 0;
    while (after !== null) {
      const page: { ids: number[]; next_after: number | null } = await ids(`?limit=2&after=${after}`);
      seen.push(...page.ids);
      after = page.next_after;
    }
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('filters by kind: one, repeated, comma-separated, mixed, with limit and after', async () => {
    const h = await harness();
    h.ports.llm.push(THINK, DONE);
    const id = await startV1(h);
    await h.idle();
    const ids = async (query: string) => (await events(h, id, query)).items.map((e) => e.id);
    expect(await ids('?kind=message')).toEqual([1, 7]);
    expect(await ids('?kind=message&kind=status')).toEqual([1, 2, 7, 8]);
    expect(await ids('?kind=llm_call,action')).toEqual([3, 4, 6]);
    expect(await ids('?kind=llm_call,action&kind=observation')).toEqual([3, 4, 5, 6]);
    expect(await ids('?kind=message,message')).toEqual([1, 7]);
    expect(await ids('?kind=error')).toEqual([]);
    const page = await events(h, id, '?kind=status,message&limit=2&after=1');
    expect(page.items.map((e) => e.id)).toEqual([2, 7]);
    expect(page.next_after).toBe(7);
    expect((await events(h, id, '?kind=status,message&limit=2&after=7')).items.map((e) => e.id)).toEqual([8]);
  });

  it('refuses bad query parameters with 422 VALIDATION_FAILED', async () => {
    const h = await harness();
    const id = await startV1(h);
    await h.idle();
    const base = `/api/v1/app-conversations/${id}/events`;
    for (const [query, path] of [
      ['?after=-1', 'query.after'],
      ['?after=1.5', 'query.after'],
      ['?after=abc', 'query.after'],
      ['?after=', 'query.after'],
      ['?after=1e3', 'query.after'],
      ['?after=99999999999', 'query.after'],
      ['?after=1&after=2', 'query.after'],
      ['?limit=0', 'query.limit'],
      ['?limit=101', 'query.limit'],
      ['?limit=x', 'query.limit'],
      ['?kind=bogus', 'query.kind.0'],
      ['?kind=message,bogus', 'query.kind.1'],
      ['?kind=', 'query.kind'],
      ['?kind=,', 'query.kind'],
    ] as const) {
      await expect422(await h.call('GET', base + query), path);
    }
  });

  it('404 CONVERSATION_NOT_FOUND for an unknown conversation', async () => {
    const h = await harness();
    const r = await h.call('GET', '/api/v1/app-conversations/ffffffffffffffffffffffffffffffff/events');
    expect(r.status).toBe(404);
    expect(errorCode(r.body)).toBe('CONVERSATION_NOT_FOUND');
  });

  it('shows the events of a V0 conversation too', async () => {
    const h = await harness();
    h.ports.llm.push(DONE);
    const id = await createConversation(h, { initial_user_msg: 'hello from V0' });
    await h.idle();
    const page = await events(h, id);
    expect(page.items.map(summary)).toEqual([
      'message(user)',
      'status(running)',
      'llm_call',
      'message(agent)',
      'status(finished)',
    ]);
    expect(page.items[0]).toMatchObject({ text: 'hello from V0' });
  });
});

// ---------------------------------------------------------------------------------------
// Another user's conversation is "not found", exactly like an unknown id.
// ---------------------------------------------------------------------------------------

describe("another user's conversation", () => {
  it('every event route answers Bob as for an unknown id, and nothing is appended', async () => {
    const h = await harness();
    await storeSettings(h, undefined, KEY_B);
    h.ports.llm.push(THINK, DONE);
    const alices = await startV1(h);
    await h.idle();
    const before = await events(h, alices);
    const UNKNOWN = 'ffffffffffffffffffffffffffffffff';
    const as = (key: string) => ({ key });

    const sameAsUnknown = async (method: string, pathFor: (id: string) => string, body?: unknown) => {
      const call = (id: string) =>
        h.call(method, pathFor(id), {
          ...as(KEY_B),
          ...(body !== undefined ? { body } : {}),
          headers: { Accept: 'text/event-stream' },
        });
      const foreign = await call(alices);
      const unknown = await call(UNKNOWN);
      expect(foreign.status, `${method} ${pathFor(alices)}`).toBe(404);
      expect(unknown.status).toBe(404);
      expect(foreign.headers.get('content-type')).toMatch(/^application\/json/);
      expect(errorCode(foreign.body)).toBe('CONVERSATION_NOT_FOUND');
      expect(String(obj(foreign.body).message).replaceAll(alices, 'ID')).toBe(
        String(obj(unknown.body).message).replaceAll(UNKNOWN, 'ID'),
      );
    };
    await sameAsUnknown('GET', (id) => `/api/v1/app-conversations/${id}/events`);
    await sameAsUnknown('GET', (id) => `/api/v1/app-conversations/${id}/events?kind=message&limit=1`);
    await sameAsUnknown('GET', (id) => `/api/v1/app-conversations/${id}/events/stream`);
    await sameAsUnknown('POST', (id) => `/api/v1/app-conversations/${id}/send-message`, userMessage('let me in'));
    await sameAsUnknown('POST', (id) => `/api/conversations/${id}/message`, { message: 'let me in' });
    await h.idle();
    expect(await events(h, alices)).toEqual(before);
  });
});

// ---------------------------------------------------------------------------------------
// GET /api/v1/app-conversations/{id}/events/stream
// ---------------------------------------------------------------------------------------

describe('GET /api/v1/app-conversations/{id}/events/stream (Server-Sent Events)', () => {
  it('sends the SSE headers at once, even when there is nothing to replay', async () => {
    const h = await harness();
    const id = await startV1(h);
    await h.idle();
    const last = (await events(h, id)).items.length;
    const stream = await openStream(h, id, { query: `?after=${last}` });
    expect(stream.response.headers.get('content-type')).toBe('text/event-stream');
    expect(stream.response.headers.get('cache-control')).toBe('no-cache');
    expect(stream.response.headers.get('x-accel-buffering')).toBe('no');
    expect(stream.events).toEqual([]);
    // HEAD answers the headers and ends.
    const head = await h.call('HEAD', `/api/v1/app-conversations/${id}/events/stream`);
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe('text/event-stream');
    expect(head.text).toBe('');
  });

  it('replays from the start, then delivers live events as the agent works, each once and in order', async () => {
    const h = await harness();
    const first = gate();
    scriptGated(h, [{ turn: { ...THINK, delayMs: 5 }, gate: first }, { turn: { ...DONE, delayMs: 5 } }]);
    const id = await startV1(h, 'Go.');
    const stream = await openStream(h, id);
    // The agent is waiting for the model: the stream has the message and the status so far.
    await stream.until((e) => e.some((x) => x.event === 'status'));
    const beforeRelease = stream.events.length;
    expect(stream.events.map((e) => e.id)).toEqual([1, 2]);
    first.open();
    const all = await stream.until(finished);
    expect(all.length).toBeGreaterThan(beforeRelease);
    expect(all.map((e) => e.id)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(all.map((e) => summary(e.data))).toEqual(THINK_THEN_REPLY);
    for (const e of all) {
      expect(e.event).toBe(e.data.kind);
      expect(e.data.id).toBe(e.id);
    }
    // The stream shows exactly what the log holds.
    expect(all.map((e) => e.data)).toEqual((await events(h, id)).items);
  });

  it('resumes with Last-Event-ID (or ?after): exactly the remaining events, nothing missed, nothing twice', async () => {
    const h = await harness();
    const first = gate();
    const second = gate();
    scriptGated(h, [
      { turn: THINK, gate: first },
      { turn: DONE, gate: second },
    ]);
    const id = await startV1(h);
    const a = await openStream(h, id);
    await a.until((e) => e.some((x) => x.event === 'status'));
    first.open();
    await a.until((e) => e.some((x) => x.event === 'action'));
    a.close();
    await a.ended;
    const seenByA = a.events.map((e) => e.id);
    const lastSeen = seenByA[seenByA.length - 1]!;
    expect(lastSeen).toBeGreaterThanOrEqual(4);

    // The agent now waits for its second answer: events 1–5 are in the log, 6–8 are yet to come.
    await eventually(() => h.ports.llm.calls === 2);
    expect((await events(h, id)).items.map((e) => e.id)).toEqual([1, 2, 3, 4, 5]);

    // Reconnect: the browser's EventSource sends Last-Event-ID; a ?after that disagrees is overruled.
    const b = await openStream(h, id, { headers: { 'Last-Event-ID': String(lastSeen) }, query: '?after=1' });
    await b.until((e) => (e[e.length - 1]?.id ?? lastSeen) === 5);
    second.open(); // events 6–8 are appended while b is connected
    await b.until(finished);
    const seenByB = b.events.map((e) => e.id);
    expect(seenByB[0]).toBe(lastSeen + 1);
    expect([...seenByA, ...seenByB]).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);

    // Events appended while nobody was connected come on the next connection.
    b.close();
    await b.ended;
    h.ports.llm.push({ content: 'Second answer.' });
    expect(
      (await h.call('POST', `/api/v1/app-conversations/${id}/send-message`, { body: userMessage('More?') })).status,
    ).toBe(200);
    await h.idle();
    const c = await openStream(h, id, { headers: { 'Last-Event-ID': '8' } });
    const rest = await c.until(finished);
    expect(rest.map((e) => e.id)).toEqual([9, 10, 11, 12, 13]);
    expect(rest.map((e) => summary(e.data))).toEqual([
      'message(user)',
      'status(running)',
      'llm_call',
      'message(agent)',
      'status(finished)',
    ]);

    // ?after alone works the same way.
    const d = await openStream(h, id, { query: '?after=10' });
    expect((await d.until((e) => e.length === 3)).map((e) => e.id)).toEqual([11, 12, 13]);
    // An empty Last-Event-ID (EventSource before any id) counts as absent.
    const e = await openStream(h, id, { headers: { 'Last-Event-ID': '' }, query: '?after=12' });
    expect((await e.until((x) => x.length === 1)).map((x) => x.id)).toEqual([13]);
  });

  it('sends a ": ping" comment at the configured interval', async () => {
    const h = await harness({ router: { sseHeartbeatMs: 20 } });
    const id = await startV1(h);
    await h.idle();
    const stream = await openStream(h, id);
    await stream.until(finished);
    const deadline = Date.now() + 60_000;
    while (stream.comments.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(stream.comments.length).toBeGreaterThanOrEqual(2);
    expect(new Set(stream.comments)).toEqual(new Set(['ping']));
  });

  it('ends the stream cleanly when the conversation is deleted', async () => {
    const h = await harness({ router: { sseHeartbeatMs: 20 } });
    const id = await startV1(h);
    await h.idle();
    const stream = await openStream(h, id);
    await stream.until(finished);
    expect((await h.call('DELETE', `/api/conversations/${id}`)).status).toBe(200);
    const outcome = await Promise.race([
      stream.ended.then(() => 'ended'),
      new Promise((resolve) => setTimeout(() => resolve('still open'), 2000)),
    ]);
    expect(outcome).toBe('ended');
  });

  it('closes the subscription when the client disconnects, and keeps serving after many reconnects', async () => {
    const h = await harness();
    const counts = countSubscriptions(h);
    const id = await startV1(h);
    await h.idle();
    for (let i = 0; i < 25; i++) {
      const s = await openStream(h, id);
      await s.until(finished);
      s.close();
    }
    await eventually(() => counts.open === 0);
    expect(counts.opened).toBe(25);
    // Several at once, then all gone.
    const many = await Promise.all(Array.from({ length: 10 }, () => openStream(h, id)));
    await Promise.all(many.map((s) => s.until(finished)));
    expect(counts.open).toBe(10);
    for (const s of many) s.close();
    await eventually(() => counts.open === 0);
    // New events reach no closed subscription, and the service still works.
    h.ports.llm.push({ content: 'Still here.' });
    expect(
      (await h.call('POST', `/api/v1/app-conversations/${id}/send-message`, { body: userMessage('ping?') })).status,
    ).toBe(200);
    await h.idle();
    expect(counts.deliveredAfterClose).toBe(0);
    expect((await events(h, id, '?kind=message')).items.map((e) => e.text)).toContain('Still here.');
    // Without a script the model just replies: the first run was events 1–5, this one 6–10.
    const last = await openStream(h, id, { query: '?after=5' });
    expect((await last.until(finished)).map((e) => e.id)).toEqual([6, 7, 8, 9, 10]);
  });

  it('closes the subscription when the server shuts the connection', async () => {
    const h = await harness();
    const counts = countSubscriptions(h);
    const id = await startV1(h);
    await h.idle();
    const s = await openStream(h, id);
    await s.until(finished);
    expect(counts.open).toBe(1);
    await h.close();
    harnesses = harnesses.filter((x) => x !== h);
    await s.ended;
    expect(counts.open).toBe(0);
  });

  it('paces the replay by a client that reads slowly, drops one that stops reading, and it resumes where it stopped', async () => {
    const h = await harness({ router: { sseMaxBufferedBytes: 64 * 1024, liveChannels: { stallMs: 1_000 } } });
    const id = await startV1(h);
    await h.idle();
    expect((await h.call('POST', `/api/conversations/${id}/stop`)).status).toBe(200);
    await h.idle();
    // ~4 MB of messages (stopped: the agent does not answer them), each larger than the bound.
    for (let i = 0; i < 5; i++) {
      expect(
        (await h.call('POST', `/api/conversations/${id}/message`, { body: { message: `${i}`.repeat(800_000) } }))
          .status,
      ).toBe(200);
    }
    const total = (await events(h, id)).items.length;
    // The replay waits for the client instead of overflowing the bound: one stream gets everything.
    const reader = await openStream(h, id);
    await reader.until((e) => e.length === total);
    expect(reader.events.map((e) => e.id)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    reader.close();

    // A client that reads the headers and then nothing: once more than the bound waits, it is dropped.
    const socket = connect(Number(new URL(h.baseUrl).port), '127.0.0.1');
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => {});
    socket.write(
      `GET /api/v1/app-conversations/${id}/events/stream HTTP/1.1\r\nHost: x\r\nX-Session-API-Key: ${KEY_A}\r\nLast-Event-ID: ${total}\r\n\r\n`,
    );
    await new Promise<void>((resolve) => socket.once('data', () => resolve()));
    socket.pause();
    for (let i = 0; i < 20; i++) {
      expect(
        (await h.call('POST', `/api/conversations/${id}/message`, { body: { message: `live ${i} `.repeat(80_000) } }))
          .status,
      ).toBe(200);
    }
    await eventually(() => h.logger.lines.some((l) => l.includes('event stream dropped: the client is not reading')));
    socket.resume();
    await closed;

    // It resumes from the last id it has, and gets what followed, once, in order.
    const resumed = await openStream(h, id, { headers: { 'Last-Event-ID': String(total) } });
    await resumed.until((e) => e.length === 20);
    expect(resumed.events.map((e) => e.id)).toEqual(Array.from({ length: 20 }, (_, i) => total + i + 1));
  });

  it('authenticates like every route: a key in the query string is refused with 401', async () => {
    const h = await harness();
    const id = await startV1(h);
    await h.idle();
    const path = `/api/v1/app-conversations/${id}/events/stream`;
    for (const query of [
      `?X-Session-API-Key=${KEY_A}`,
      `?x-session-api-key=${KEY_A}`,
      `?session_api_key=${KEY_A}`,
      `?api_key=${KEY_A}`,
      `?key=${KEY_A}`,
      `?token=${KEY_A}`,
    ]) {
      const r = await h.call('GET', path + query, { key: null, headers: { Accept: 'text/event-stream' } });
      expect(r.status, query).toBe(401);
      expect(errorCode(r.body)).toBe('UNAUTHENTICATED');
    }
    const wrong = await h.call('GET', path, {
      key: 'not-a-key-0123456789abcdef',
      headers: { Accept: 'text/event-stream' },
    });
    expect(wrong.status).toBe(401);
    // The header works.
    const ok = await openStream(h, id);
    await ok.until(finished);
  });

  it('answers a bad resume point with 422 and an unknown conversation with 404, as JSON', async () => {
    const h = await harness();
    const id = await startV1(h);
    await h.idle();
    const path = `/api/v1/app-conversations/${id}/events/stream`;
    const sse = { headers: { Accept: 'text/event-stream' } };
    for (const value of ['abc', '-1', '1.5', '99999999999']) {
      const r = await h.call('GET', path, { headers: { Accept: 'text/event-stream', 'Last-Event-ID': value } });
      await expect422(r, 'header.Last-Event-ID');
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    }
    await expect422(await h.call('GET', `${path}?after=x`, sse), 'query.after');
    const unknown = await h.call(
      'GET',
      '/api/v1/app-conversations/ffffffffffffffffffffffffffffffff/events/stream',
      sse,
    );
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('content-type')).toMatch(/^application\/json/);
    expect(errorCode(unknown.body)).toBe('CONVERSATION_NOT_FOUND');
  });
});

// ---------------------------------------------------------------------------------------
// Sending messages: V1 send-message and V0 message
// ---------------------------------------------------------------------------------------

describe('POST /api/v1/app-conversations/{id}/send-message', () => {
  it('answers as OpenHands 1.11 (success, sandbox_status) and the agent runs again after it had finished', async () => {
    const h = await harness();
    h.ports.llm.push(THINK, DONE);
    const id = await startV1(h);
    await h.idle();
    h.ports.llm.push({ content: 'Here is more.' });
    const r = await h.call('POST', `/api/v1/app-conversations/${id}/send-message`, {
      body: {
        role: 'user',
        content: [
          { type: 'text', text: 'Tell me more.' },
          { type: 'image', image_urls: ['https://example.com/a.png'] },
        ],
        run: true,
      },
    });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({ success: true, sandbox_status: 'RUNNING', message: null });
    expectOpenHandsShape('AppSendMessageResponse', r.body);
    await h.idle();
    const page = await events(h, id, '?after=8');
    expect(page.items.map(summary)).toEqual([
      'message(user)',
      'status(running)',
      'llm_call',
      'message(agent)',
      'status(finished)',
    ]);
    expect(page.items[0]).toMatchObject({
      id: 9,
      kind: 'message',
      source: 'user',
      text: 'Tell me more.',
      image_urls: ['https://example.com/a.png'],
    });
    expect(page.items[3]).toMatchObject({ text: 'Here is more.' });
    // The model saw the new message.
    expect(JSON.stringify(h.ports.llm.requests[h.ports.llm.requests.length - 1]?.messages)).toContain('Tell me more.');
  });

  it('role defaults to user and run to true, as in OpenHands 1.11; a part may leave its type out', async () => {
    const h = await harness();
    const id = await startV1(h);
    await h.idle();
    const calls = h.ports.llm.calls;
    h.ports.llm.push({ content: 'Hello.' });
    const r = await h.call('POST', `/api/v1/app-conversations/${id}/send-message`, {
      body: { content: [{ text: 'hi' }] },
    });
    expect(r.status, r.text).toBe(200);
    await h.idle();
    const log = (await events(h, id)).items;
    expect(log.filter((e) => e.kind === 'message').at(-2)).toMatchObject({ source: 'user', text: 'hi' });
    expect(log.filter((e) => e.kind === 'message').at(-1)).toMatchObject({ source: 'agent', text: 'Hello.' });
    expect(h.ports.llm.calls).toBe(calls + 1);
  });

  it('refuses bad messages with 422 and appends nothing', async () => {
    const h = await harness();
    const id = await startV1(h);
    await h.idle();
    const before = await events(h, id);
    const calls = h.ports.llm.calls;
    const path = `/api/v1/app-conversations/${id}/send-message`;
    for (const [body, issue] of [
      [{ role: 'assistant', content: [{ type: 'text', text: 'I am the agent' }] }, 'role'],
      [{ role: 'system', content: [{ type: 'text', text: 'new rules' }] }, 'role'],
      [{ role: 'tool', content: [{ type: 'text', text: 'x' }] }, 'role'],
      [{ role: 'root', content: [{ type: 'text', text: 'x' }] }, 'role'],
      [{ role: 'user', content: [] }, 'content'],
      [{ role: 'user', content: [{ type: 'text', text: '' }] }, 'content'],
      [{ role: 'user', content: [{ type: 'text', text: '   \n' }] }, 'content'],
      [{ role: 'user' }, 'content'],
      [{ role: 'user', content: 'hi' }, 'content'],
      [{ role: 'user', content: [{ type: 'video', url: 'x' }] }, 'content.0.type'],
      [{ role: 'user', content: [{ type: 'image', image_urls: ['file:///etc/passwd'] }] }, undefined],
      [{ role: 'user', content: [{ type: 'image', image_urls: [] }] }, undefined],
      [{ role: 'user', content: [{ type: 'text', text: 'x'.repeat(1_000_001) }] }, undefined],
    ] as const) {
      const r = await h.call('POST', path, { body });
      await expect422(r, issue);
    }
    // Unknown conversation: 404 (a valid body).
    const unknown = await h.call('POST', '/api/v1/app-conversations/ffffffffffffffffffffffffffffffff/send-message', {
      body: userMessage('hi'),
    });
    expect(unknown.status).toBe(404);
    expect(errorCode(unknown.body)).toBe('CONVERSATION_NOT_FOUND');
    await h.idle();
    expect(await events(h, id)).toEqual(before);
    expect(h.ports.llm.calls).toBe(calls);
  });

  it('with run: false only records the message; the agent sees it on its next run', async () => {
    const h = await harness();
    const id = await startV1(h);
    await h.idle();
    const calls = h.ports.llm.calls;
    const quiet = await h.call('POST', `/api/v1/app-conversations/${id}/send-message`, {
      body: userMessage('Just so you know: use tabs.', false),
    });
    expect(quiet.status, quiet.text).toBe(200);
    await h.idle();
    expect(h.ports.llm.calls).toBe(calls);
    h.ports.llm.push({ content: 'Noted, with tabs.' });
    expect(
      (await h.call('POST', `/api/v1/app-conversations/${id}/send-message`, { body: userMessage('Go on.') })).status,
    ).toBe(200);
    await h.idle();
    expect(h.ports.llm.calls).toBe(calls + 1);
    expect(JSON.stringify(h.ports.llm.requests.at(-1)!.messages)).toContain('use tabs');
  });

  it('a stopped conversation keeps the message and acts on it when started', async () => {
    const h = await harness();
    const id = await startV1(h);
    await h.idle();
    expect((await h.call('POST', `/api/conversations/${id}/stop`)).status).toBe(200);
    await h.idle();
    const calls = h.ports.llm.calls;
    const before = (await events(h, id)).items.at(-1)!.id as number;
    const sent = await h.call('POST', `/api/v1/app-conversations/${id}/send-message`, {
      body: userMessage('While you were away'),
    });
    expect(sent.status, sent.text).toBe(200);
    expect(obj(sent.body)).toMatchObject({
      success: true,
      sandbox_status: 'PAUSED',
      message: expect.stringContaining('when the conversation is started') as unknown,
    });
    expectOpenHandsShape('AppSendMessageResponse', sent.body);
    await h.idle();
    expect(h.ports.llm.calls).toBe(calls);
    h.ports.llm.push({ content: 'Back now.' });
    expect((await h.call('POST', `/api/conversations/${id}/start`)).status).toBe(200);
    await h.idle();
    const after = (await events(h, id, `?after=${before + 1}`)).items;
    expect(after.some((e) => e.kind === 'message' && e.source === 'agent' && e.text === 'Back now.')).toBe(true);
  });
});

describe('POST /api/conversations/{id}/message (V0)', () => {
  it('answers {"success": true} and the agent replies', async () => {
    const h = await harness();
    h.ports.llm.push({ content: 'First reply.' });
    const id = await createConversation(h, { initial_user_msg: 'start' });
    await h.idle();
    const before = (await events(h, id)).items.length;
    h.ports.llm.push(THINK, { content: 'Second reply.' });
    const r = await h.call('POST', `/api/conversations/${id}/message`, { body: { message: 'Again, with thought.' } });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toEqual({ success: true });
    await h.idle();
    const page = await events(h, id, `?after=${before}`);
    expect(page.items.map(summary)).toEqual(THINK_THEN_REPLY);
    expect(page.items[0]).toMatchObject({ source: 'user', text: 'Again, with thought.', image_urls: [] });
    expect(page.items[6]).toMatchObject({ text: 'Second reply.' });
  });

  it('works on a conversation created without a message', async () => {
    const h = await harness();
    const id = await createConversation(h);
    await h.idle();
    h.ports.llm.push({ content: 'Hello!' });
    expect((await h.call('POST', `/api/conversations/${id}/message`, { body: { message: 'hi' } })).body).toEqual({
      success: true,
    });
    await h.idle();
    expect((await events(h, id)).items.map(summary)).toEqual([
      'message(user)',
      'status(running)',
      'llm_call',
      'message(agent)',
      'status(finished)',
    ]);
  });

  it('refuses bad bodies with 422 (strict: only "message"), appends nothing; unknown conversation → 404', async () => {
    const h = await harness();
    const id = await createConversation(h);
    await h.idle();
    const path = `/api/conversations/${id}/message`;
    for (const [body, issue] of [
      [{}, 'message'],
      [{ message: '' }, 'message'],
      [{ message: '  \n\t' }, 'message'],
      [{ message: null }, 'message'],
      [{ message: 42 }, 'message'],
      [{ message: ['a'] }, 'message'],
      [{ message: 'x'.repeat(1_000_001) }, 'message'],
      [{ message: 'hi', role: 'user' }, ''],
      [{ text: 'hi' }, undefined],
    ] as const) {
      await expect422(await h.call('POST', path, { body }), issue);
    }
    const justUnder = await h.call('POST', path, { body: { message: 'x'.repeat(1_000_000) } });
    expect(justUnder.status, justUnder.text.slice(0, 200)).toBe(200);
    await h.idle();
    // Only the accepted message is in the log.
    const messages = (await events(h, id, '?kind=message')).items.filter((e) => e.source === 'user');
    expect(messages).toHaveLength(1);
    expect((messages[0]?.text as string).length).toBe(1_000_000);

    const unknown = await h.call('POST', '/api/conversations/ffffffffffffffffffffffffffffffff/message', {
      body: { message: 'hi' },
    });
    expect(unknown.status).toBe(404);
    expect(errorCode(unknown.body)).toBe('CONVERSATION_NOT_FOUND');
  });
});

// ---------------------------------------------------------------------------------------
// The OpenAPI document describes the new routes.
// ---------------------------------------------------------------------------------------

describe('OpenAPI: event routes', () => {
  it('registers ConversationEvent and EventPage and documents the stream', async () => {
    const h = await harness();
    const doc = obj((await h.call('GET', '/api/openapi.json')).body);
    const schemas = obj(obj(doc.components).schemas);
    for (const name of [
      'ConversationEvent',
      'EventPage',
      'MessageEvent',
      'ActionEvent',
      'ObservationEvent',
      'LlmCallEvent',
      'StatusEvent',
      'ErrorEvent',
    ]) {
      expect(schemas[name], name).toBeDefined();
    }
    expect(Object.keys(schemas).filter((n) => n.endsWith('Output'))).toEqual([]);
    const paths = obj(doc.paths);
    const list = obj(obj(paths['/api/v1/app-conversations/{conversation_id}/events']).get);
    expect(JSON.stringify(obj(list.responses)['200'])).toContain('#/components/schemas/EventPage');
    expect(
      arr(list.parameters)
        .map((p) => obj(p).name)
        .sort(),
    ).toEqual(['after', 'conversation_id', 'kind', 'limit']);
    const stream = obj(obj(paths['/api/v1/app-conversations/{conversation_id}/events/stream']).get);
    const ok = obj(obj(obj(stream.responses)['200']).content);
    expect(Object.keys(ok)).toEqual(['text/event-stream']);
    expect(obj(ok['text/event-stream'])['x-sse-data']).toEqual({ $ref: '#/components/schemas/ConversationEvent' });
    expect(
      arr(stream.parameters)
        .map((p) => `${obj(p).in as string}:${obj(p).name as string}`)
        .sort(),
    ).toEqual(['header:Last-Event-ID', 'path:conversation_id', 'query:after']);
    const send = obj(obj(paths['/api/v1/app-conversations/{conversation_id}/send-message']).post);
    expect(JSON.stringify(obj(send.responses)['200'])).toContain('sandbox_status');
  });
});
