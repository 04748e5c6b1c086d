/**
 * A WebSocket that has not authenticated costs a few KiB and a few seconds, no more (issue 35):
 * on the agent-server event socket (`/sockets/events/{id}`) it may send one authentication frame
 * (`{"type":"auth","session_api_key":…}`, as the OpenHands SDK 1.58 does) of at most a few KiB,
 * anything else closes it, nothing more is read from it, and one address holds only a few such
 * connections at once. Over real HTTP through the Express adapter.
 */
import { connect, type Socket as NetSocket } from 'node:net';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { createConversation, KEY_A, obj, startHarness, storeSettings, type Harness } from './harness.js';

const harnesses: Harness[] = [];
const cleanups: (() => void)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) cleanup();
  for (const h of harnesses.splice(0)) await h.close();
});

async function harness(liveChannels: Record<string, number> = {}): Promise<Harness> {
  const h = await startHarness({ realtime: true, router: { liveChannels } });
  harnesses.push(h);
  await storeSettings(h);
  return h;
}

interface Client {
  ws: WebSocket;
  frames: Record<string, unknown>[];
  opened: Promise<'open' | number>;
  closed: Promise<{ code: number; reason: string }>;
}

/** A socket opened with no key at all (the SDK 1.58 way). */
function keyless(h: Harness, id: string, headers: Record<string, string> = {}): Client {
  const ws = new WebSocket(`${h.baseUrl.replace('http', 'ws')}/sockets/events/${id}?resend_all=true`, { headers });
  cleanups.push(() => ws.terminate());
  const frames: Record<string, unknown>[] = [];
  ws.on('message', (data: Buffer) => frames.push(JSON.parse(data.toString('utf8')) as Record<string, unknown>));
  ws.on('error', () => {});
  const opened = new Promise<'open' | number>((resolve) => {
    ws.once('open', () => resolve('open'));
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
  return { ws, frames, opened, closed };
}

async function conversationWithKey(h: Harness): Promise<{ id: string; key: string }> {
  const id = await createConversation(h);
  const key = obj((await h.call('GET', `/api/v1/app-conversations/${id}`)).body).session_api_key as string;
  return { id, key };
}

/** The handshake on a raw TCP socket, then `frames` written as masked client frames; resolves when the server ends the connection. */
async function rawClient(h: Harness, path: string): Promise<{ socket: NetSocket; ended: Promise<void> }> {
  const socket = connect(Number(new URL(h.baseUrl).port), '127.0.0.1');
  cleanups.push(() => socket.destroy());
  socket.on('error', () => {});
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  let head = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      if (/^HTTP\/1\.1 101/.test(head)) resolve();
      else reject(new Error(`handshake refused: ${head.split('\r\n')[0]}`));
    };
    socket.on('data', onData);
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n\r\n`,
    );
  });
  return { socket, ended };
}

/** The header of a masked client text frame of `length` payload bytes (payload all zeros, so the mask leaves it as the key). */
function frameHeader(length: number): Buffer {
  const mask = Buffer.alloc(4);
  if (length < 126) return Buffer.concat([Buffer.from([0x81, 0x80 | length]), mask]);
  if (length < 65536) {
    const head = Buffer.from([0x81, 0x80 | 126, 0, 0]);
    head.writeUInt16BE(length, 2);
    return Buffer.concat([head, mask]);
  }
  const head = Buffer.alloc(10);
  head[0] = 0x81;
  head[1] = 0x80 | 127;
  head.writeBigUInt64BE(BigInt(length), 2);
  return Buffer.concat([head, mask]);
}

describe('the event socket opened without a key', () => {
  it('authenticates with a first frame holding the conversation key, then carries the conversation as with the key in the URL', async () => {
    const h = await harness();
    const { id, key } = await conversationWithKey(h);
    const client = keyless(h, id);
    expect(await client.opened).toBe('open');
    client.ws.send(JSON.stringify({ type: 'auth', session_api_key: key }));
    await expect.poll(() => client.frames.length, { timeout: 60_000 }).toBeGreaterThan(0);
    // A second authentication frame is passed over, not answered as a message that is not one.
    client.ws.send(JSON.stringify({ type: 'auth', session_api_key: key }));
    client.ws.send(JSON.stringify({ role: 'user', content: [{ type: 'text', text: 'hello there' }] }));
    await expect
      .poll(() => client.frames.some((f) => JSON.stringify(f).includes('hello there')), { timeout: 60_000 })
      .toBe(true);
    expect(client.frames.filter((f) => f.kind === 'ConversationErrorEvent')).toEqual([]);
  });

  it('closes with 4001 on a first frame that is not an authentication frame, or holds a key that is not one', async () => {
    const h = await harness();
    const { id } = await conversationWithKey(h);
    const talker = keyless(h, id);
    expect(await talker.opened).toBe('open');
    talker.ws.send(JSON.stringify({ role: 'user', content: [{ type: 'text', text: 'let me in' }] }));
    expect((await talker.closed).code).toBe(4001);

    const wrong = keyless(h, id);
    expect(await wrong.opened).toBe('open');
    wrong.ws.send(JSON.stringify({ type: 'auth', session_api_key: 'acsc_not-a-key' }));
    expect((await wrong.closed).code).toBe(4001);
    expect(wrong.frames).toEqual([]);
  });

  it('closes a socket that sends nothing within the authentication frame deadline', async () => {
    const h = await harness({ authFrameMs: 200 });
    const { id } = await conversationWithKey(h);
    const silent = keyless(h, id);
    expect(await silent.opened).toBe('open');
    expect((await silent.closed).code).toBe(4001);
  });

  it('reads nothing more from a socket past the authentication frame’s bound, also while it is being closed', async () => {
    const h = await harness({ maxAuthFrameBytes: 1024 });
    const { id } = await conversationWithKey(h);
    const raw = await rawClient(h, `/sockets/events/${id}`);
    // Frames just under the message limit, 64 MiB in all, far more than the kernel's buffers on
    // loopback hold: a server that went on reading them (or held them while it closes the
    // socket, as one that answers a refusal with a close frame and waits for the client's) takes
    // all of them; this one drops the connection after a few KiB.
    const payload = Buffer.alloc(1024 * 1024 - 1);
    let written = 0;
    while (!raw.socket.destroyed && written < 64 * 1024 * 1024) {
      const flushed = raw.socket.write(Buffer.concat([frameHeader(payload.length), payload]));
      written += payload.length;
      if (!flushed) await Promise.race([new Promise((r) => raw.socket.once('drain', r)), raw.ended]);
    }
    await raw.ended;
    expect(written).toBeLessThan(64 * 1024 * 1024);
  });

  it('keeps a client address to a few unauthenticated sockets at once, and takes another once one authenticates', async () => {
    const h = await harness({ maxUnauthenticatedPerAddress: 3, authFrameMs: 60_000 });
    const { id, key } = await conversationWithKey(h);
    const waiting = [keyless(h, id), keyless(h, id), keyless(h, id)];
    for (const client of waiting) expect(await client.opened).toBe('open');
    expect(await keyless(h, id).opened).toBe(429);
    // A socket with its key in the URL is authenticated at once and counts only among its user's.
    const keyed = new WebSocket(`${h.baseUrl.replace('http', 'ws')}/sockets/events/${id}?session_api_key=${key}`);
    cleanups.push(() => keyed.terminate());
    keyed.on('error', () => {});
    await new Promise<void>((resolve, reject) => {
      keyed.once('open', () => resolve());
      keyed.once('unexpected-response', (_req, res) => reject(new Error(`refused with ${res.statusCode}`)));
    });
    waiting[0]!.ws.send(JSON.stringify({ type: 'auth', session_api_key: key }));
    await expect.poll(() => waiting[0]!.frames.length, { timeout: 60_000 }).toBeGreaterThan(0);
    expect(await keyless(h, id).opened).toBe('open');
  });

  it('still answers an API key in a header at once, with no frame needed', async () => {
    const h = await harness();
    const { id } = await conversationWithKey(h);
    const client = keyless(h, id, { 'X-Session-API-Key': KEY_A });
    expect(await client.opened).toBe('open');
    await expect.poll(() => client.frames.length, { timeout: 60_000 }).toBeGreaterThan(0);
  });
});
