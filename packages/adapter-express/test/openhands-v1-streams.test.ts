import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import express from 'express';
import { okAsync } from 'neverthrow';
import { unzipSync } from 'fflate';
import { silentLogger } from '@acs/core/ports';
import type { ConversationEvent } from '@acs/core/schemas';
import { sendBodyStream } from '../src/body-stream.js';
import { trajectoryZip } from '../src/views/trajectory-zip.js';
import type { BodyStreamRouteDefinition } from '../src/route.js';
import {
  arr,
  errorCode,
  KEY_A,
  KEY_B,
  obj,
  startAppConversation,
  startHarness,
  storeSettings,
  type Harness,
  type HarnessOptions,
} from './harness.js';
import { expectOpenHandsShape } from './openhands-shapes.js';

/**
 * The two 1.11 routes whose answer is written as it is made: stream-start (a JSON array of the
 * start task's snapshots) and the download (a zip of the trajectory). Each is read by a client
 * as it comes, and neither holds more than a chunk for a client that does not read.
 */

let harnesses: Harness[] = [];
const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
  await Promise.all(harnesses.map((h) => h.close()));
  harnesses = [];
});

async function harness(options: HarnessOptions = {}): Promise<Harness> {
  const h = await startHarness(options);
  harnesses.push(h);
  await storeSettings(h);
  return h;
}

const decoder = new TextDecoder();

/** A response body read as it comes; `until` reads on until the text so far passes the test (or the body ends). */
function reader(response: Response) {
  const body = response.body!.getReader();
  let text = '';
  let done = false;
  return {
    get text() {
      return text;
    },
    get done() {
      return done;
    },
    async until(test: (text: string) => boolean): Promise<string> {
      while (!done && !test(text)) {
        const chunk = (await body.read()) as { done: boolean; value?: Uint8Array };
        if (chunk.done) done = true;
        else text += decoder.decode(chunk.value, { stream: true });
      }
      return text;
    },
    cancel: () => body.cancel(),
  };
}

describe('POST /api/v1/app-conversations/stream-start', () => {
  it('streams the start task as a JSON array while the start goes on; the client reads each snapshot before the start ends', async () => {
    const h = await harness();
    h.ports.runtime.hold();
    const response = await fetch(`${h.baseUrl}/api/v1/app-conversations/stream-start`, {
      method: 'POST',
      headers: { 'X-Session-API-Key': KEY_A, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        initial_message: { content: [{ type: 'text', text: 'hi' }] },
        selected_repository: 'acme/widgets',
      }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const body = reader(response);
    // The sandbox is held in STARTING: the task waits for it, and the client has read that much.
    const early = await body.until((text) => text.includes('WAITING_FOR_SANDBOX'));
    expect(early.startsWith('[\n{')).toBe(true);
    expect(early).not.toContain('READY');
    expect(body.done).toBe(false);

    h.ports.runtime.release();
    const all = await body.until(() => false);
    expect(all.endsWith(']')).toBe(true);
    const tasks = arr(JSON.parse(all));
    for (const task of tasks) expectOpenHandsShape('AppConversationStartTask', task);
    expect(tasks.map((t) => obj(t).status)).toEqual([
      'WORKING',
      'WAITING_FOR_SANDBOX',
      'PREPARING_REPOSITORY',
      'STARTING_CONVERSATION',
      'READY',
    ]);
    expect(new Set(tasks.map((t) => obj(t).id)).size).toBe(1);
    // As OpenHands writes it: `[`, a newline, then snapshots separated by `,` and a newline.
    expect(all).toMatch(/^\[\n\{.*\},\n\{/s);
    const ready = obj(tasks.at(-1));
    await h.idle();
    expect(
      obj(arr((await h.call('GET', `/api/v1/app-conversations?ids=${ready.app_conversation_id as string}`)).body)[0]),
    ).toMatchObject({ conversation_status: 'RUNNING' });
  });

  it('ends with ERROR when the start fails; a refused request is a JSON error and nothing streams', async () => {
    const h = await harness();
    h.ports.runtime.failNext('create', { message: 'no space left on device' });
    const r = await h.call('POST', '/api/v1/app-conversations/stream-start', { body: {} });
    expect(r.status).toBe(200);
    const tasks = arr(JSON.parse(r.text));
    expect(obj(tasks.at(-1))).toMatchObject({
      status: 'ERROR',
      detail: expect.stringContaining('no space left on device') as unknown,
    });

    const bad = await h.call('POST', '/api/v1/app-conversations/stream-start', { body: { agent_type: 'evil' } });
    expect(bad.status).toBe(422);
    expect(errorCode(bad.body)).toBe('VALIDATION_FAILED');
    const noSettings = await h.call('POST', '/api/v1/app-conversations/stream-start', { key: KEY_B, body: {} });
    expect(noSettings.status).toBe(400);
    expect(errorCode(noSettings.body)).toBe('SETTINGS_REQUIRED');
  });

  it('a client that leaves mid-stream leaves nothing behind: the start goes on and ends', async () => {
    const h = await harness();
    h.ports.runtime.hold();
    const controller = new AbortController();
    const response = await fetch(`${h.baseUrl}/api/v1/app-conversations/stream-start`, {
      method: 'POST',
      headers: { 'X-Session-API-Key': KEY_A, 'Content-Type': 'application/json' },
      body: '{}',
      signal: controller.signal,
    });
    const text = await reader(response).until((t) => t.includes('WAITING_FOR_SANDBOX'));
    const taskId = obj(arr(JSON.parse(`${text.split(',\n')[0]!}]`))[0]).id as string;
    controller.abort();
    h.ports.runtime.release();
    await h.idle();
    const [task] = arr((await h.call('GET', `/api/v1/app-conversations/start-tasks?ids=${taskId}`)).body);
    expect(obj(task).status).toBe('READY');
  });
});

/** A conversation of Alice's with `events` user messages of `size` characters each, written straight to the log. */
async function conversationWithLog(h: Harness, events: number, size: number): Promise<string> {
  const task = await startAppConversation(h, {});
  await h.idle();
  const id = task.app_conversation_id as string;
  const text = 'x'.repeat(size);
  for (let i = 0; i < events; i += 500) {
    const batch = Array.from({ length: Math.min(500, events - i) }, () => ({
      kind: 'message',
      source: 'user' as const,
      timestamp: new Date().toISOString(),
      payload: { text, image_urls: [] },
    }));
    expect((await h.ports.events.append('alice', id, batch)).isOk()).toBe(true);
  }
  return id;
}

describe('GET /api/v1/app-conversations/{id}/download', () => {
  it('is the trajectory as 1.11 exports it: meta.json (an AppConversationInfo) and one 1.11 Event per file, named by index and id', async () => {
    const h = await harness();
    h.ports.llm.push({ tool_calls: [{ name: 'think', arguments: { thought: 'plan' } }] }, { content: 'Done.' });
    const task = await startAppConversation(h, {
      initial_message: { content: [{ type: 'text', text: 'go' }], run: true },
    });
    await h.idle();
    const id = task.app_conversation_id as string;
    const response = await fetch(`${h.baseUrl}/api/v1/app-conversations/${id}/download`, {
      headers: { 'X-Session-API-Key': KEY_A },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/zip');
    const dashed = id.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');
    expect(response.headers.get('content-disposition')).toBe(`attachment; filename="conversation_${dashed}.zip"`);
    const files = unzipSync(new Uint8Array(await response.arrayBuffer()));
    const names = Object.keys(files);
    expect(names[0]).toBe('meta.json');
    const meta = JSON.parse(decoder.decode(files['meta.json'])) as Record<string, unknown>;
    expectOpenHandsShape('AppConversationInfo', meta);
    expect(meta).toMatchObject({ id, title: `Conversation ${id.slice(0, 5)}` });
    expect(meta).not.toHaveProperty('session_api_key');
    const eventNames = names.slice(1);
    expect(eventNames.length).toBeGreaterThan(3);
    const page = obj((await h.call('GET', `/api/v1/conversation/${id}/events/search`)).body);
    const frames = arr(page.items).map(obj);
    expect(eventNames).toEqual(frames.map((f, i) => `event_${String(i).padStart(6, '0')}_${f.id as string}.json`));
    for (const [i, name] of eventNames.entries()) {
      const text = decoder.decode(files[name]);
      expect(text.split('\n')[1]).toMatch(/^ {2}"/);
      const event = JSON.parse(text) as unknown;
      expectOpenHandsShape('Event', event);
      expect(event).toEqual(frames[i]);
    }
  });

  it('more events than the limit → 413 EXPORT_TOO_LARGE before anything is sent; past the byte limit the archive ends with a note', async () => {
    const h = await harness({ router: { conversationExport: { maxEvents: 30, maxBytes: 4_000 } } });
    const small = await conversationWithLog(h, 20, 1_000);
    const files = unzipSync(
      new Uint8Array(
        await (
          await fetch(`${h.baseUrl}/api/v1/app-conversations/${small}/download`, {
            headers: { 'X-Session-API-Key': KEY_A },
          })
        ).arrayBuffer(),
      ),
    );
    const names = Object.keys(files);
    expect(names.at(-1)).toBe('TRUNCATED.txt');
    expect(decoder.decode(files['TRUNCATED.txt'])).toMatch(
      /^This export was cut: its events passed 4000 bytes of JSON at event \d+\. It holds the 3 events before that one/,
    );
    expect(names.filter((n) => n.startsWith('event_'))).toHaveLength(3);

    const large = await conversationWithLog(h, 31, 10);
    const refused = await h.call('GET', `/api/v1/app-conversations/${large}/download`);
    expect(refused.status).toBe(413);
    expect(refused.headers.get('content-type')).toMatch(/^application\/json/);
    expect(errorCode(refused.body)).toBe('EXPORT_TOO_LARGE');
    expect(obj(refused.body).detail).toContain('more than 30 events');
  });

  it('an unknown conversation, or Alice’s for Bob → 404; the router refuses bad limits', async () => {
    const h = await harness();
    await storeSettings(h, undefined, KEY_B);
    const task = await startAppConversation(h, {});
    await h.idle();
    for (const [path, key] of [
      [`/api/v1/app-conversations/${'f'.repeat(32)}/download`, KEY_A],
      [`/api/v1/app-conversations/${task.app_conversation_id as string}/download`, KEY_B],
    ] as const) {
      const r = await h.call('GET', path, { key });
      expect(r.status).toBe(404);
      expect(errorCode(r.body)).toBe('CONVERSATION_NOT_FOUND');
    }
    await expect(startHarness({ router: { conversationExport: { maxEvents: 0 } } })).rejects.toThrow(
      'conversationExport.maxEvents must be a positive integer.',
    );
  });

  it('reads the log as the client reads the archive: a client that stops after the first chunk leaves the rest unread, and leaving ends it', async () => {
    const h = await harness();
    const id = await conversationWithLog(h, 1_000, 2_000);
    let reads = 0;
    const readAfter = h.ports.events.readAfter.bind(h.ports.events);
    h.ports.events.readAfter = (...args: Parameters<typeof readAfter>) => {
      reads++;
      return readAfter(...args);
    };
    const response = await fetch(`${h.baseUrl}/api/v1/app-conversations/${id}/download`, {
      headers: { 'X-Session-API-Key': KEY_A },
    });
    const body = response.body!.getReader();
    expect((await body.read()).done).toBe(false);
    await body.cancel();
    await h.idle();
    // 1,000 events are 10 pages; what was read is what went out before the client left (the
    // zip of these events is small, so several pages fit in the sockets' buffers).
    expect(reads).toBeLessThan(11);
    const all = (await h.call('GET', `/api/v1/app-conversations/${id}/download`)).status;
    expect(all).toBe(200);
  });
});

describe('a body written as it is made (sendBodyStream)', () => {
  /** An app with one route whose body is `chunks` (1 MiB each, counted as they are pulled). */
  async function bodyServer(count: number) {
    const state = { pulled: 0, ended: false };
    const chunk = new Uint8Array(1024 * 1024).fill(120);
    const route = {
      operationId: 'test',
      success: { status: 200, contentType: 'application/octet-stream' },
      respond: () =>
        okAsync({
          chunks: (async function* () {
            try {
              for (let i = 0; i < count; i++) {
                state.pulled++;
                yield await Promise.resolve(chunk);
              }
            } finally {
              state.ended = true;
            }
          })(),
        }),
    } as unknown as BodyStreamRouteDefinition;
    const send = sendBodyStream({ logger: silentLogger, onBackendFailure: () => {} });
    const app = express();
    app.get('/body', (req, res, next) => send(route, {} as never, req, res, next));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    closers.push(() => server.closeAllConnections());
    return { state, port: (server.address() as AddressInfo).port };
  }

  it('pulls a chunk only when the client has taken the last: a client that does not read holds the server to a few MiB of a 10 GiB body', async () => {
    const { state, port } = await bodyServer(10 * 1024);
    const socket = connect(port, '127.0.0.1');
    closers.push(() => void socket.destroy());
    socket.pause();
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write('GET /body HTTP/1.1\r\nHost: localhost\r\n\r\n');
    // Wait (up to 60 s) until the server has pulled something and then stopped pulling.
    const deadline = Date.now() + 60_000;
    let last = -1;
    while (Date.now() < deadline && (state.pulled === 0 || state.pulled !== last)) {
      last = state.pulled;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(state.pulled, `pulled ${state.pulled} MiB`).toBeGreaterThan(0);
    // What the kernel's socket buffers and the response's own buffer take, not the body.
    expect(state.pulled, `pulled ${state.pulled} MiB`).toBeLessThan(64);
    expect(state.ended).toBe(false);
    socket.destroy();
    const ended = Date.now() + 60_000;
    while (!state.ended && Date.now() < ended) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(state.ended, 'the body is ended when the client leaves').toBe(true);
  });

  it('a body that fails after its first chunk is cut (the connection closes without its end) and logged once; the server sees no client error', async () => {
    const logged: unknown[] = [];
    const logger = { ...silentLogger, error: (fields: unknown) => void logged.push(fields) };
    const route = {
      operationId: 'failing',
      success: { status: 200, contentType: 'text/plain' },
      respond: () =>
        okAsync({
          chunks: (async function* () {
            yield await Promise.resolve('first ');
            throw new Error('the store went away');
          })(),
        }),
    } as unknown as BodyStreamRouteDefinition;
    const send = sendBodyStream({ logger, onBackendFailure: () => {} });
    const app = express();
    app.get('/body', (req, res, next) => send(route, {} as never, req, res, next));
    const server = app.listen(0, '127.0.0.1');
    const clientErrors: Error[] = [];
    server.on('clientError', (error: Error) => clientErrors.push(error));
    await new Promise((resolve) => server.once('listening', resolve));
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    closers.push(() => server.closeAllConnections());
    const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/body`);
    expect(response.status).toBe(200);
    await expect(response.text()).rejects.toThrow();
    expect(logged).toEqual([expect.objectContaining({ route: 'failing', err: 'the store went away' })]);
    expect(clientErrors).toEqual([]);
  });

  it('the trajectory zip reads one page of events at a time, and only when the next file is wanted', async () => {
    let reads = 0;
    const event = (id: number): ConversationEvent => ({
      id,
      kind: 'message',
      source: 'user',
      timestamp: '2026-01-01T00:00:00.000Z',
      text: `m${id}`,
      image_urls: [],
    });
    const zip = trajectoryZip(
      { id: 'c' },
      (after) => {
        reads++;
        const items = Array.from({ length: Math.max(0, Math.min(100, 250 - after)) }, (_, i) => event(after + i + 1));
        return okAsync({ items, next_after: after + items.length < 250 ? after + items.length : null });
      },
      { maxEvents: 10_000, maxBytes: 1 << 30 },
    );
    expect((await zip.next()).done).toBe(false);
    expect(reads).toBe(0);
    let chunks = 1;
    while (reads === 0) {
      await zip.next();
      chunks++;
    }
    expect(reads).toBe(1);
    await zip.return(undefined);
    expect(reads).toBe(1);
    expect(chunks).toBeGreaterThan(1);
  });
});
