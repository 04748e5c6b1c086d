/**
 * The bounds of the live channels (SSE, socket.io, the agent-server WebSocket) over real HTTP:
 * connections per user, one message limit whichever way a message comes, a deadline to
 * authenticate, a replay paced by the client, and sign-out closing every channel at once.
 */
import { connect, type Socket as NetSocket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { io, type Socket } from 'socket.io-client';
import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryBrowserSessions } from '@acs/adapter-express';
import {
  createConversation,
  KEY_A,
  KEY_B,
  startHarness,
  storeSettings,
  type Harness,
  type HarnessOptions,
} from './harness.js';

const harnesses: Harness[] = [];
const cleanups: (() => void)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) cleanup();
  for (const h of harnesses.splice(0)) await h.close();
});

async function harness(options: HarnessOptions = {}): Promise<Harness> {
  const h = await startHarness({ realtime: true, ...options });
  harnesses.push(h);
  await storeSettings(h);
  await storeSettings(h, undefined, KEY_B);
  return h;
}

const wsUrl = (h: Harness, id: string, query = '') => `${h.baseUrl.replace('http', 'ws')}/sockets/events/${id}${query}`;

interface WsClient {
  ws: WebSocket;
  frames: Record<string, unknown>[];
  closed: Promise<{ code: number; reason: string }>;
}

function openWs(h: Harness, id: string, options: { headers?: Record<string, string>; query?: string } = {}): WsClient {
  const ws = new WebSocket(wsUrl(h, id, options.query), { headers: options.headers ?? { 'X-Session-API-Key': KEY_A } });
  const frames: Record<string, unknown>[] = [];
  ws.on('message', (data: Buffer) => frames.push(JSON.parse(data.toString('utf8')) as Record<string, unknown>));
  ws.on('error', () => {});
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
  cleanups.push(() => ws.terminate());
  return { ws, frames, closed };
}

function openSocketIo(
  h: Harness,
  id: string,
  headers: Record<string, string> = { 'X-Session-API-Key': KEY_A },
): { socket: Socket; errors: string[]; connected: Promise<boolean> } {
  const socket = io(h.baseUrl, {
    path: '/socket.io',
    transports: ['websocket'],
    reconnection: false,
    query: { conversation_id: id },
    extraHeaders: headers,
  });
  cleanups.push(() => socket.close());
  const errors: string[] = [];
  socket.on('oh_event', (event: { error?: boolean; message?: string }) => {
    if (event.error) errors.push(String(event.message));
  });
  const connected = new Promise<boolean>((resolve) => {
    socket.once('connect', () => resolve(true));
    socket.once('connect_error', (error: Error) => {
      errors.push(error.message);
      resolve(false);
    });
  });
  return { socket, errors, connected };
}

function openSse(
  h: Harness,
  id: string,
  headers: Record<string, string> = { 'X-Session-API-Key': KEY_A },
): { response: Promise<Response>; abort(): void } {
  const controller = new AbortController();
  const response = fetch(`${h.baseUrl}/api/v1/app-conversations/${id}/events/stream`, {
    headers,
    signal: controller.signal,
  });
  cleanups.push(() => controller.abort());
  return { response, abort: () => controller.abort() };
}

/** Resolves once `probe` holds, checking every 20 ms; fails naming `what` after 60 s. */
async function until(what: string, probe: () => boolean): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const wsOpen = (client: WsClient) =>
  new Promise<void>((resolve, reject) => {
    client.ws.once('open', () => resolve());
    client.ws.once('close', (code) => reject(new Error(`closed with ${code} before opening`)));
  });

describe('connections per user', () => {
  it('counts every channel against one limit, refuses the next with a reason on each, and frees a place when one closes', async () => {
    const h = await harness({ router: { liveChannels: { maxPerUser: 3 } } });
    const id = await createConversation(h);
    const first = openWs(h, id);
    await wsOpen(first);
    const sio = openSocketIo(h, id);
    expect(await sio.connected).toBe(true);
    const sse = openSse(h, id);
    expect((await sse.response).status).toBe(200);

    // The fourth, whatever its channel, is refused saying why.
    const ws4 = openWs(h, id);
    expect(await ws4.closed).toEqual({
      code: 4029,
      reason: expect.stringContaining('too many live connections') as unknown,
    });
    const sio4 = openSocketIo(h, id);
    expect(await sio4.connected).toBe(false);
    expect(sio4.errors.join()).toContain('too many live connections');
    const sse4 = await openSse(h, id).response;
    expect(sse4.status).toBe(429);
    expect(await sse4.json()).toMatchObject({
      code: 'TOO_MANY_CONNECTIONS',
      message: expect.stringContaining('at most 3') as unknown,
    });

    // Another user is not affected.
    const bobs = await createConversation(h, {}, KEY_B);
    const bob = openWs(h, bobs, { headers: { 'X-Session-API-Key': KEY_B } });
    await wsOpen(bob);

    // One closes: there is room again (as soon as the server has seen the close).
    first.ws.close();
    await first.closed;
    for (let attempt = 0; ; attempt++) {
      const again = openWs(h, id);
      const outcome = await Promise.race([wsOpen(again).then(() => 'open'), again.closed.then((c) => c.code)]);
      if (outcome === 'open') break;
      expect(outcome).toBe(4029);
      expect(attempt, 'no room after a connection closed').toBeLessThan(50);
      await new Promise((r) => setTimeout(r, 20));
    }
  });

  it('closes a socket.io connection that never joins the namespace at the deadline', async () => {
    const h = await harness({ router: { liveChannels: { authDeadlineMs: 300 } } });
    // An engine.io connection that opens and never sends socket.io's CONNECT packet.
    const engine = new WebSocket(`${h.baseUrl.replace('http', 'ws')}/socket.io/?EIO=4&transport=websocket`);
    engine.on('error', () => {});
    cleanups.push(() => engine.terminate());
    const engineClosed = new Promise<number>((resolve) => engine.on('close', (code) => resolve(code)));
    const startedAt = Date.now();
    await engineClosed;
    // The deadline is 300 ms; socket.io's own default would hold it 45 s, ours 10 s.
    expect(Date.now() - startedAt).toBeLessThan(5_000);
  });
});

describe('one message limit', () => {
  const limit = 64 * 1024;
  const text = (bytes: number) => 'x'.repeat(bytes);

  it('refuses a message over the body limit on REST (413), the WebSocket (close 1009) and socket.io (disconnect), and takes one under it on each', async () => {
    const h = await harness({ router: { bodyLimit: limit } });
    const id = await createConversation(h);
    const eventsNow = async () =>
      (
        await h.service.conversations.searchEvents('alice', id, { after: 0, kinds: ['message'], limit: 100 })
      )._unsafeUnwrap().items.length;
    const before = await eventsNow();

    const rest = await h.call('POST', `/api/conversations/${id}/message`, { body: { message: text(limit) } });
    expect(rest.status).toBe(413);

    const big = openWs(h, id);
    await wsOpen(big);
    big.ws.send(JSON.stringify({ role: 'user', content: [{ type: 'text', text: text(limit) }] }));
    expect((await big.closed).code).toBe(1009);

    const sio = openSocketIo(h, id);
    expect(await sio.connected).toBe(true);
    const disconnected = new Promise<string>((resolve) => sio.socket.once('disconnect', (reason) => resolve(reason)));
    sio.socket.emit('oh_user_action', { action: 'message', args: { content: text(limit) } });
    expect(await disconnected).toBe('transport close');
    expect(await eventsNow()).toBe(before);

    // Under the limit, each way works.
    const small = openWs(h, id);
    await wsOpen(small);
    small.ws.send(JSON.stringify({ role: 'user', content: [{ type: 'text', text: text(limit / 2) }] }));
    const sio2 = openSocketIo(h, id);
    expect(await sio2.connected).toBe(true);
    sio2.socket.emit('oh_user_action', { action: 'message', args: { content: text(limit / 2) } });
    await expect.poll(eventsNow, { timeout: 60_000 }).toBe(before + 2);
  });
});

/** A WebSocket handshake on a raw TCP socket whose reading the test controls. */
async function rawWebSocket(h: Harness, path: string): Promise<{ socket: NetSocket; received(): number }> {
  const socket = connect(Number(new URL(h.baseUrl).port), '127.0.0.1');
  cleanups.push(() => socket.destroy());
  let received = 0;
  let head = '';
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (!head.includes('\r\n\r\n')) {
        head += chunk.toString('latin1');
        if (head.includes('\r\n\r\n')) resolve();
      }
    });
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nX-Session-API-Key: ${KEY_A}\r\n\r\n`,
    );
  });
  expect(head).toMatch(/^HTTP\/1\.1 101/);
  return { socket, received: () => received };
}

describe('a replay paced by the client', () => {
  it('reads the log only as fast as a client takes it, sends all of it once the client reads, and gives up on one that reads nothing', async () => {
    const h = await harness({ router: { liveChannels: { stallMs: 1_500 } } });
    const id = await createConversation(h);
    // 48 messages of 512 KiB: 24 MiB of history.
    const chunk = 'y'.repeat(512 * 1024);
    for (let i = 0; i < 48; i++)
      expect(
        (await h.call('POST', `/api/conversations/${id}/message`, { body: { message: `${i} ${chunk}` } })).status,
      ).toBe(200);
    let read = 0;
    const search = h.service.conversations.searchEvents.bind(h.service.conversations);
    h.service.conversations.searchEvents = (userId, conversationId, query) =>
      search(userId, conversationId, query).map((page) => {
        read = Math.max(read, page.items.at(-1)?.id ?? 0);
        return page;
      });
    const total = (await search('alice', id, { after: 0, kinds: null, limit: 1000 }))._unsafeUnwrap().items.at(-1)!.id;

    // A client that stops reading right after the handshake: the replay stops with it.
    // A client that stops reading right after the handshake: the replay stops with it.
    const stalled = await rawWebSocket(h, `/sockets/events/${id}?resend_all=true`);
    stalled.socket.pause();
    await new Promise((r) => setTimeout(r, 800));
    expect(read).toBeLessThan(total);
    // Past the stall deadline the server has dropped it: reading again gets what was sent, then the end.
    await new Promise((r) => setTimeout(r, 2_000));
    const ended = new Promise<void>((resolve) => stalled.socket.once('close', () => resolve()));
    stalled.socket.resume();
    await Promise.race([
      ended,
      new Promise((_, reject) =>
        setTimeout(
          () => reject(new Error(`still open after the stall deadline (${stalled.received()} bytes read)`)),
          30_000,
        ),
      ),
    ]);
    expect(stalled.received()).toBeLessThan(24 * 1024 * 1024);

    // A client that reads gets every message, in order, once.
    const reader = openWs(h, id, { query: '?resend_all=true' });
    const fromUser = () => reader.frames.filter((f) => f.kind === 'MessageEvent' && f.source === 'user');
    await until('the whole history', () => fromUser().length >= 48);
    const texts = fromUser()
      .map((f) => JSON.stringify(f).match(/"text":"(\d+) /)?.[1])
      .filter(Boolean);
    expect(texts).toEqual(Array.from({ length: 48 }, (_, i) => String(i)));
  });
});

describe('sign-out', () => {
  async function signIn(h: Harness): Promise<string> {
    const response = await fetch(`${h.baseUrl}/conversations/x?key=${KEY_A}`, {
      redirect: 'manual',
      headers: { 'Sec-Fetch-Site': 'none' },
    });
    expect(response.status).toBe(303);
    return (response.headers.get('set-cookie') ?? '').split(';')[0]!;
  }

  it('closes the WebSocket, socket.io and SSE connections of the session at once, and they can send nothing more', async () => {
    // The periodic re-check is far away: only sign-out itself can close them while the test waits.
    const h = await harness({ router: { liveChannels: { recheckMs: 3_600_000 } } });
    const id = await createConversation(h);
    const cookie = await signIn(h);
    const origin = h.baseUrl;
    const ws = openWs(h, id, { headers: { cookie, origin } });
    await wsOpen(ws);
    const sio = openSocketIo(h, id, { cookie, origin });
    expect(await sio.connected).toBe(true);
    const sioGone = new Promise<void>((resolve) => sio.socket.once('disconnect', () => resolve()));
    const sse = await openSse(h, id, { cookie }).response;
    expect(sse.status).toBe(200);
    const sseEnded = (async () => {
      const reader = sse.body!.getReader();
      while (!(await reader.read()).done);
    })();
    // An API-key connection of the same user stays.
    const other = openWs(h, id);
    await wsOpen(other);

    const out = await h.call('POST', '/api/sign-out', { key: null, body: {}, headers: { cookie, origin } });
    expect(out.status).toBe(200);
    expect((await ws.closed).code).toBe(4001);
    await sioGone;
    await sseEnded;
    expect(sio.errors.join()).toContain('signed out');
    expect(other.ws.readyState).toBe(WebSocket.OPEN);
  });

  it('closes the channels of a session the store ended elsewhere within the re-check interval', async () => {
    const sessions = new MemoryBrowserSessions();
    const h = await harness({ router: { browserSessions: sessions, liveChannels: { recheckMs: 100 } } });
    const id = await createConversation(h);
    const cookie = await signIn(h);
    const ws = openWs(h, id, { headers: { cookie, origin: h.baseUrl } });
    await wsOpen(ws);
    await sessions.end(decodeURIComponent(cookie.split('=')[1]!));
    expect((await ws.closed).code).toBe(4001);
  });
});
