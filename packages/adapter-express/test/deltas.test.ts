/**
 * Deltas (pieces of an answer being written) on every live channel, over real HTTP: the V1 SSE
 * stream sends them as `event: delta` without an id, the agent-server socket as the SDK's
 * `StreamingDeltaEvent` (checked by the OpenHands SDK itself); never stored, never replayed, and
 * a client that does not read is left without them rather than held deltas for, or cut off.
 * Deltas are published through the service's own event log, as the agent does.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgent } from '@acs/agent';
import type { EventLog, StreamingDelta } from '@acs/core';
import { deltaGate } from '../src/realtime/deltas.js';
import { items, KEY_A, obj, startAppConversation, startHarness, storeSettings, type Harness } from './harness.js';

const VENV_PYTHON = process.env.ACS_OPENHANDS_PYTHON ?? '/var/cache/acs/openhands-sdk-venv/bin/python';
const DEADLINE_MS = 60_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const harnesses: Harness[] = [];
const cleanups: (() => void)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) cleanup();
  for (const h of harnesses.splice(0)) await h.close();
});

/** A service with the realtime channels, and its event log (taken from the agent's host). */
async function harness(): Promise<{ h: Harness; log: EventLog; id: string }> {
  let log: EventLog | null = null;
  const h = await startHarness({
    realtime: true,
    router: { sseHeartbeatMs: 60_000 },
    storage: {
      agent: (host) => {
        log = host.log;
        // Each piece published as it comes (no joining window), so the test sees them one by one.
        return createAgent({ deltaWindowMs: 0 })(host);
      },
    },
  });
  harnesses.push(h);
  await storeSettings(h);
  // A conversation whose agent waits: no message to act on.
  const task = await startAppConversation(h, {});
  await h.idle();
  if (!log) throw new Error('the agent was never given its host');
  return { h, log, id: task.app_conversation_id as string };
}

/** Stores a user message the agent does not act on (unless `run`); returns its event id. */
async function record(h: Harness, id: string, text: string, run = false): Promise<number> {
  const r = await h.call('POST', `/api/v1/app-conversations/${id}/send-message`, {
    body: { role: 'user', content: [{ type: 'text', text }], run },
  });
  if (r.status !== 200) throw new Error(`send-message: ${r.status} ${r.text}`);
  const page = await h.call('GET', `/api/v1/app-conversations/${id}/events?kind=message&limit=100`);
  const found = items(page.body).filter((e) => e.text === text);
  if (found.length !== 1) throw new Error(`message ${text} not found once: ${page.text}`);
  return found[0]!.id as number;
}

const delta = (
  message_id: string,
  content: string | null,
  reasoning_content: string | null = null,
  attempt = 1,
): StreamingDelta => ({
  kind: 'delta',
  message_id,
  attempt,
  content,
  reasoning_content,
  timestamp: new Date().toISOString(),
});

/** Resolves once `probe` holds, checking every 20 ms; fails naming `what` (and `detail`) after 60 s. */
async function until(what: string, probe: () => boolean, detail: () => string = () => ''): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} ${detail()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface SseFrame {
  /** The `id:` line's value; null when the message has none. */
  id: string | null;
  event: string;
  data: Record<string, unknown>;
  raw: string;
}

/** Parses the complete messages at the start of `buffer`; returns them and what is left. */
function parseSse(buffer: string): { frames: SseFrame[]; rest: string } {
  const frames: SseFrame[] = [];
  let rest = buffer;
  for (let at = rest.indexOf('\n\n'); at >= 0; at = rest.indexOf('\n\n')) {
    const raw = rest.slice(0, at);
    rest = rest.slice(at + 2);
    const fields = new Map<string, string>();
    for (const line of raw.split('\n')) {
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(': ');
      fields.set(line.slice(0, colon), line.slice(colon + 2));
    }
    if (!fields.has('data')) continue;
    frames.push({
      id: fields.get('id') ?? null,
      event: fields.get('event') ?? 'message',
      data: JSON.parse(fields.get('data')!) as Record<string, unknown>,
      raw,
    });
  }
  return { frames, rest };
}

/** An SSE client of a conversation's V1 event stream that keeps every message it reads. */
function openSse(h: Harness, id: string, headers: Record<string, string> = {}): { frames: SseFrame[] } {
  const controller = new AbortController();
  cleanups.push(() => controller.abort());
  const frames: SseFrame[] = [];
  void (async () => {
    const res = await fetch(`${h.baseUrl}/api/v1/app-conversations/${id}/events/stream`, {
      headers: { 'X-Session-API-Key': KEY_A, ...headers },
      signal: controller.signal,
    });
    if (res.status !== 200) throw new Error(`stream: ${res.status} ${await res.text()}`);
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of res.body! as AsyncIterable<Uint8Array>) {
      const parsed = parseSse(buffer + decoder.decode(chunk, { stream: true }));
      frames.push(...parsed.frames);
      buffer = parsed.rest;
    }
  })().catch(() => {});
  return { frames };
}

const deltasOf = (frames: readonly SseFrame[]) => frames.filter((f) => f.event === 'delta').map((f) => f.data);
const hasId = (frames: readonly SseFrame[], id: number) => frames.some((f) => f.id === String(id));

/**
 * Publishes a marker delta (message `tag`, text `tag`) until the client has one: it then follows
 * the log live (a delta reaches only a subscription past its replay), and hears every delta after.
 */
async function goLive(log: EventLog, id: string, tag: string, seen: (tag: string) => boolean): Promise<void> {
  await until(`the client to follow live (${tag})`, () => {
    if (seen(tag)) return true;
    log.publishTransient('alice', id, delta(tag, tag));
    return false;
  });
}

describe('the V1 event stream (SSE)', () => {
  it('sends deltas live as `event: delta` without an id; a resume and a later stream get stored events only', async () => {
    const { h, log, id } = await harness();
    await record(h, id, 'first');
    const first = openSse(h, id);
    const seenBy = (stream: { frames: SseFrame[] }) => (tag: string) =>
      deltasOf(stream.frames).some((d) => d.message_id === tag);
    await goLive(log, id, 'live-1', seenBy(first));
    const probe = await record(h, id, 'probe');
    await until('the probe', () => hasId(first.frames, probe));

    const written = [delta('m1', 'Hel'), delta('m1', 'lo', 'thinking'), delta('m1', null, '…more')];
    for (const d of written) log.publishTransient('alice', id, d);
    const final = await record(h, id, 'Hello');
    await until('the final event', () => hasId(first.frames, final));

    // The deltas came between the probe and the final event, in order, each without an id line.
    const after = first.frames.slice(first.frames.findIndex((f) => f.id === String(probe)) + 1);
    expect(after.map((f) => f.event)).toEqual(['delta', 'delta', 'delta', 'message']);
    expect(deltasOf(after)).toEqual(written);
    for (const frame of after.slice(0, 3)) {
      expect(frame.id).toBeNull();
      expect(frame.raw).toBe(`event: delta\ndata: ${JSON.stringify(frame.data)}`);
    }

    // A resume from the last id before the deltas: the stored events after it, and no delta.
    const resumed = openSse(h, id, { 'Last-Event-ID': String(probe) });
    await until('the resumed stream to reach the final event', () => hasId(resumed.frames, final));
    expect(resumed.frames.map((f) => f.id)).toEqual([String(final)]);

    // A stream that opens later: every stored event, none of the earlier deltas; then only the deltas from now on.
    const late = openSse(h, id);
    await goLive(log, id, 'live-2', seenBy(late));
    expect(late.frames.filter((f) => f.id === null).every((f) => f.data.message_id === 'live-2')).toBe(true);
    const all = await h.call('GET', `/api/v1/app-conversations/${id}/events?limit=100`);
    expect(late.frames.map((f) => f.id).filter((x) => x !== null)).toEqual(items(all.body).map((e) => String(e.id)));
    const next = delta('m2', 'Next answer');
    log.publishTransient('alice', id, next);
    const answers = (stream: { frames: SseFrame[] }) =>
      deltasOf(stream.frames).filter((d) => !String(d.message_id).startsWith('live-'));
    await until('the later stream to get the new delta', () => answers(late).length === 1);
    await until('the first stream to get it too', () => answers(first).length === 4);
    expect(answers(late)).toEqual([next]);

    // Never stored: not in the event search, in either form.
    const stored = await h.call('GET', `/api/v1/app-conversations/${id}/events?limit=100`);
    expect(items(stored.body).map((e) => e.kind)).not.toContain('delta');
    expect(stored.text).not.toContain('Next answer');
    const sdk = await h.call('GET', `/api/v1/conversation/${id}/events/search?limit=100`);
    expect(sdk.status).toBe(200);
    expect(items(sdk.body).map((e) => e.kind)).not.toContain('StreamingDeltaEvent');
    expect(sdk.text).not.toContain('Next answer');
  });

  it("carries the agent's own deltas as the model streams, ahead of the stored answer that holds the whole text", async () => {
    const { h, log, id } = await harness();
    // The model answers once the stream follows live.
    let release!: () => void;
    const live = new Promise<void>((resolve) => (release = resolve));
    h.ports.llm.respondWith(async () => {
      await live;
      return { content: 'All done, as asked.', reasoning_content: 'Easy.' };
    });
    const stream = openSse(h, id);
    await goLive(log, id, 'live-1', (tag) => deltasOf(stream.frames).some((d) => d.message_id === tag));
    await record(h, id, 'Please answer.', true);
    release();
    const answer = (f: SseFrame) => f.event === 'message' && f.data.source === 'agent';
    await until('the stored answer', () => stream.frames.some(answer));

    const at = stream.frames.findIndex(answer);
    const pieces = deltasOf(stream.frames.slice(0, at)).filter((d) => d.message_id !== 'live-1');
    expect(pieces.length).toBeGreaterThan(2);
    expect(new Set(pieces.map((d) => `${String(d.message_id)}/${String(d.attempt)}`)).size).toBe(1);
    const text = (key: 'content' | 'reasoning_content') => pieces.map((d) => (d[key] as string | null) ?? '').join('');
    expect(text('reasoning_content')).toBe('Easy.');
    expect(text('content')).toBe('All done, as asked.');
    expect(stream.frames[at]!.data.text).toBe('All done, as asked.');
    expect(deltasOf(stream.frames.slice(at + 1)).filter((d) => d.message_id !== 'live-1')).toEqual([]);
  });

  it('leaves deltas out for a client that does not read, holding at most a little for it, and does not cut it off', async () => {
    const { h, log, id } = await harness();
    const port = Number(new URL(h.baseUrl).port);
    const socket = connect(port, '127.0.0.1');
    cleanups.push(() => socket.destroy());
    socket.on('error', () => {});
    let received = 0;
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length;
      text += chunk.toString('latin1');
    });
    socket.write(
      `GET /api/v1/app-conversations/${id}/events/stream HTTP/1.1\r\nHost: x\r\nX-Session-API-Key: ${KEY_A}\r\n\r\n`,
    );
    await goLive(log, id, 'live-1', (tag) => text.includes(`"message_id":"${tag}"`));
    socket.pause();
    const readBefore = received;

    // What may be in flight at most besides what the server holds: both kernel buffers at their
    // largest, and what the paused client socket reads ahead.
    const kernelMax = (file: string) => Number(readFileSync(file, 'utf8').trim().split(/\s+/)[2]);
    const inFlight = kernelMax('/proc/sys/net/ipv4/tcp_wmem') + kernelMax('/proc/sys/net/ipv4/tcp_rmem') + 1024 * 1024;
    // More than twice that in deltas, each of its own answer (so each is judged by the room left).
    const piece = 'x'.repeat(2048);
    const count = Math.ceil((2 * inFlight) / piece.length);
    for (let i = 0; i < count; i++) {
      log.publishTransient('alice', id, delta(`answer-${i}`, piece));
      // Let the server write out between batches, as it would between a model's chunks.
      if (i % 200 === 0) await new Promise((r) => setImmediate(r));
    }
    const final = await record(h, id, 'after the flood');
    expect(h.logger.lines.filter((l) => l.includes('event stream dropped'))).toEqual([]);

    // Reading again, it gets the stored event after what it was sent of the deltas.
    socket.resume();
    await until('the stored event after the flood', () => text.includes(`id: ${final}\n`));
    const deltaFrames = text.split('event: delta\n').length - 1;
    expect(deltaFrames).toBeGreaterThan(0);
    expect(deltaFrames).toBeLessThan(count);
    // What reached it of the deltas fits in flight plus the little the server may hold (64 KiB and one delta).
    expect(received - readBefore).toBeLessThan(inFlight + 64 * 1024 + 8 * 1024 + 4096);
    expect(count * piece.length).toBeGreaterThan(2 * (received - readBefore) - 1);

    // Still connected and caught up: the next answer's deltas reach it.
    log.publishTransient('alice', id, delta('tail', 'the tail'));
    await until('the delta after catching up', () => text.includes('"content":"the tail"'));
    expect(socket.destroyed).toBe(false);
  });
});

describe('the agent-server socket (/sockets/events/{id})', () => {
  const wsUrl = (h: Harness, id: string, query = '') =>
    `${h.baseUrl.replace('http', 'ws')}/sockets/events/${id}${query}`;

  function openWs(h: Harness, id: string): { ws: WebSocket; frames: Record<string, unknown>[] } {
    const ws = new WebSocket(wsUrl(h, id, '?resend_all=true'), { headers: { 'X-Session-API-Key': KEY_A } });
    const frames: Record<string, unknown>[] = [];
    ws.on('message', (data: Buffer) => frames.push(JSON.parse(data.toString('utf8')) as Record<string, unknown>));
    ws.on('error', () => {});
    cleanups.push(() => ws.terminate());
    return { ws, frames };
  }

  const messageText = (frame: Record<string, unknown>) =>
    frame.kind === 'MessageEvent'
      ? (obj(frame.llm_message).content as { text?: string }[]).map((p) => p.text ?? '').join('')
      : null;

  const isDelta = (f: Record<string, unknown>) => f.kind === 'StreamingDeltaEvent';
  const seenIn = (frames: Record<string, unknown>[]) => (tag: string) =>
    frames.some((f) => isDelta(f) && f.content === tag);

  it("sends each delta as the agent-server's StreamingDeltaEvent, live only", async () => {
    const { h, log, id } = await harness();
    await record(h, id, 'first');
    const first = openWs(h, id);
    await goLive(log, id, 'live-1', seenIn(first.frames));

    const written = [delta('m1', 'Hi', null), delta('m1', null, 'pondering'), delta('m1', '', null)];
    for (const d of written) log.publishTransient('alice', id, d);
    const answers = (frames: Record<string, unknown>[]) =>
      frames.filter((f) => isDelta(f) && !String(f.content).startsWith('live-'));
    await until('three deltas', () => answers(first.frames).length === 3);
    const frames = answers(first.frames);
    frames.forEach((frame, i) => {
      expect(Object.keys(frame).sort()).toEqual(['content', 'id', 'kind', 'reasoning_content', 'source', 'timestamp']);
      expect(frame).toMatchObject({
        kind: 'StreamingDeltaEvent',
        source: 'agent',
        timestamp: written[i]!.timestamp,
        content: written[i]!.content,
        reasoning_content: written[i]!.reasoning_content,
      });
      expect(frame.id).toMatch(UUID);
    });
    expect(new Set(frames.map((f) => f.id)).size).toBe(3);

    // A socket that opens later replays stored events only.
    const late = openWs(h, id);
    await goLive(log, id, 'live-2', seenIn(late.frames));
    expect(late.frames.filter(isDelta).every((f) => f.content === 'live-2')).toBe(true);
    expect(late.frames.filter((f) => f.kind === 'MessageEvent').map(messageText)).toEqual(['first']);
  });

  it('is read by the OpenHands SDK as StreamingDeltaEvents (its own websocket client and event model)', async () => {
    if (!existsSync(VENV_PYTHON))
      throw new Error(
        `${VENV_PYTHON} is missing: make the OpenHands SDK venv with scripts/python-venv.sh openhands-sdk`,
      );
    const { h, log, id } = await harness();
    const conversation = await h.call('GET', `/api/v1/app-conversations?ids=${id}`);
    const key = obj((conversation.body as unknown[])[0]).session_api_key as string;
    const sdk = startSdkClient(wsUrl(h, id, `?session_api_key=${encodeURIComponent(key)}`));
    cleanups.push(() => sdk.child.kill('SIGKILL'));
    await until('the SDK client to connect', () => sdk.lines.some((l) => l.type === 'connected'), sdk.output);
    await goLive(log, id, 'live-1', (tag) => sdk.lines.some((l) => l.content === tag));
    log.publishTransient('alice', id, delta('m1', 'Hello', null));
    log.publishTransient('alice', id, delta('m1', null, 'because'));
    const answers = () => sdk.lines.filter((l) => l.kind === 'StreamingDeltaEvent' && l.content !== 'live-1');
    await until('two deltas in the SDK', () => answers().length === 2, sdk.output);
    expect(answers()).toEqual([
      { kind: 'StreamingDeltaEvent', type: 'StreamingDeltaEvent', content: 'Hello', reasoning_content: null },
      { kind: 'StreamingDeltaEvent', type: 'StreamingDeltaEvent', content: null, reasoning_content: 'because' },
    ]);
  });
});

/** Connects as the SDK's RemoteConversation does (websockets, `Event.model_validate` of each frame) and prints each as JSON. */
const SDK_CLIENT = `
import asyncio, json, sys
import websockets
from openhands.sdk.event import Event, StreamingDeltaEvent

async def main(url):
    async with websockets.connect(url) as ws:
        print(json.dumps({'type': 'connected'}), flush=True)
        async for message in ws:
            kind = json.loads(message).get('kind')
            try:
                event = Event.model_validate(json.loads(message))
            except Exception as error:
                print(json.dumps({'kind': kind, 'type': 'invalid', 'error': str(error)[:200]}), flush=True)
                continue
            line = {'kind': kind, 'type': type(event).__name__}
            if isinstance(event, StreamingDeltaEvent):
                line.update(content=event.content, reasoning_content=event.reasoning_content)
            print(json.dumps(line), flush=True)

asyncio.run(main(sys.argv[1]))
`;

function startSdkClient(url: string): { child: ChildProcess; lines: Record<string, unknown>[]; output: () => string } {
  const child = spawn(VENV_PYTHON, ['-c', SDK_CLIENT, url], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      PYTHONUNBUFFERED: '1',
      OPENHANDS_SUPPRESS_BANNER: '1',
      // No network here: LiteLLM (imported by the SDK) is told to use its bundled cost map.
      LITELLM_LOCAL_MODEL_COST_MAP: 'True',
    },
  });
  const lines: Record<string, unknown>[] = [];
  let output = '';
  let pending = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
    pending += chunk.toString('utf8');
    for (let at = pending.indexOf('\n'); at >= 0; at = pending.indexOf('\n')) {
      const line = pending.slice(0, at).trim();
      pending = pending.slice(at + 1);
      if (line.startsWith('{')) lines.push(JSON.parse(line) as Record<string, unknown>);
    }
  });
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  return { child, lines, output: () => `; the SDK client's output:\n${output}` };
}

describe('deltaGate', () => {
  it('sends while there is room; once one is left out, the rest of that answer is too, and the next answer starts afresh', () => {
    let room = true;
    const mayGo = deltaGate(() => room);
    expect(mayGo(delta('a', '1'))).toBe(true);
    room = false;
    expect(mayGo(delta('a', '2'))).toBe(false);
    room = true;
    // The client has room again, but a piece of answer a is missing: the rest of a is left out.
    expect(mayGo(delta('a', '3'))).toBe(false);
    // A new attempt of the same answer starts afresh, as does the next answer.
    expect(mayGo(delta('a', 'x', null, 2))).toBe(true);
    expect(mayGo(delta('b', '1'))).toBe(true);
  });
});
