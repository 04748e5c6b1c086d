/**
 * No input from the network ends the process: malformed upgrades and WebSocket frames thrown at
 * the example server (a real process), each followed by a check that it still answers /alive.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import WebSocket from 'ws';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { closedPort } from '@acs/testing';
import { body, call, startServer, type Running } from './process.js';

const KEY = 'hostile-input-key-0123456789abcd';

let server: Running;
let port: number;
let conversationId: string;

beforeAll(async () => {
  server = await startServer(
    { SESSION_API_KEY: KEY, ACS_STORAGE: 'memory', ACS_SANDBOXES: 'fake' },
    { lifetime: 'file' },
  );
  port = Number(new URL(server.url).port);
  // A model on a closed loopback port: nothing here runs the agent, and nothing may leave the machine.
  await body(
    call(server.url, '/api/settings', KEY, {
      llm_model: 'openai/none',
      llm_api_key: 'sk-none',
      llm_base_url: `http://127.0.0.1:${await closedPort()}/v1`,
    }),
  );
  ({ conversation_id: conversationId } = await body<{ conversation_id: string }>(
    call(server.url, '/api/conversations', KEY, {}),
  ));
});

/** Fails with the server's output unless it is still running and answers /alive. */
async function expectAlive(after: string): Promise<void> {
  const output = () => `\n--- stderr ---\n${server.stderr()}\n--- stdout (tail) ---\n${server.stdout().slice(-4000)}`;
  let status: number | string;
  try {
    status = (await fetch(`${server.url}/alive`)).status;
  } catch (error) {
    status = error instanceof Error ? error.message : String(error);
  }
  expect(server.child.exitCode ?? server.child.signalCode, `the server exited after ${after}${output()}`).toBeNull();
  expect(status, `/alive after ${after}${output()}`).toBe(200);
}

/** Sends raw bytes on a new TCP connection; resolves with what came back when the server closed it (or after `waitMs`). */
function raw(request: string | Buffer, options: { waitMs?: number; then?: Buffer } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = Buffer.alloc(0);
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(received.toString('latin1'));
    };
    const timer = setTimeout(finish, options.waitMs ?? 3_000);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (!received.includes('\r\n\r\n')) return;
      // After the handshake, the bad frame; without one, the answer is all the test needs.
      if (options.then && received.toString('latin1').startsWith('HTTP/1.1 101')) {
        const frame = options.then;
        delete options.then;
        socket.write(frame);
      } else if (!options.then) finish();
    });
    socket.on('close', finish);
    socket.on('error', (error) => (received.length > 0 ? finish() : reject(error)));
    socket.write(request);
  });
}

const upgrade = (path: string, extra = '') =>
  `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n${extra}\r\n`;

/** A client frame: FIN + opcode, masked unless told otherwise, with a 16- or 64-bit length when needed. */
function frame(opcode: number, payload: Buffer, options: { masked?: boolean; announcedLength?: number } = {}): Buffer {
  const masked = options.masked ?? true;
  const length = options.announcedLength ?? payload.length;
  const head: number[] = [0x80 | opcode];
  const maskBit = masked ? 0x80 : 0;
  if (length < 126) head.push(maskBit | length);
  else if (length < 65_536) head.push(maskBit | 126, length >> 8, length & 0xff);
  else {
    const big = Buffer.alloc(8);
    big.writeBigUInt64BE(BigInt(length));
    head.push(maskBit | 127, ...big);
  }
  if (!masked) return Buffer.concat([Buffer.from(head), payload]);
  const mask = randomBytes(4);
  const body = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!));
  return Buffer.concat([Buffer.from(head), mask, body]);
}

describe('malformed upgrades', () => {
  it.each([
    ['a path that is not valid percent-encoding', upgrade('/sockets/events/%E0%A4%A')],
    ['the path //', upgrade('//')],
    ['a path with no leading slash', upgrade('sockets/events/x')],
    ['an absolute-form URL', upgrade(`http://127.0.0.1:${port}/sockets/events/x`)],
    ['an Upgrade that is not websocket', upgrade('/sockets/events/x').replace('Upgrade: websocket', 'Upgrade: h2c')],
    ['an Upgrade with no key', upgrade('/sockets/events/x').replace(/Sec-WebSocket-Key: .*\r\n/, '')],
    ['an upgrade to a path nobody serves', upgrade('/api/settings')],
    [
      'an upgrade to socket.io with a malformed query',
      upgrade('/socket.io/?EIO=4&transport=websocket&conversation_id=%E0%A4%A'),
    ],
  ])('%s is answered or closed, and the server lives', async (what, request) => {
    const answer = await raw(request, { waitMs: 10_000 });
    // Not left hanging: an HTTP answer (or a plain close) came well before the deadline.
    expect(answer === '' || /^HTTP\/1\.1 \d{3}/.test(answer), `${what}: ${answer.slice(0, 200)}`).toBe(true);
    await expectAlive(what);
  });
});

describe('bad WebSocket frames on the agent-server socket', () => {
  const path = () => `/sockets/events/${conversationId}`;

  it.each([
    ['an unmasked frame', () => frame(0x1, Buffer.from('{"role":"user"}'), { masked: false })],
    ['a text frame of invalid UTF-8', () => frame(0x1, Buffer.from([0xff, 0xfe, 0xfd]))],
    ['a header announcing 8 GiB', () => frame(0x1, Buffer.alloc(0), { announcedLength: 8 * 1024 ** 3 })],
    ['a reserved opcode', () => frame(0x3, Buffer.from('x'))],
    ['a fragmented control frame', () => Buffer.from([0x09, 0x80, 0, 0, 0, 0])],
  ])('%s before any key is checked closes that connection, and the server lives', async (what, bad) => {
    const answer = await raw(upgrade(path()), { then: bad(), waitMs: 10_000 });
    expect(answer).toMatch(/^HTTP\/1\.1 101/);
    await expectAlive(what);
  });

  it('an authenticated message over the size limit is refused with close 1009, and the server lives', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}${path()}`, { headers: { 'X-Session-API-Key': KEY } });
    const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
    ws.on('error', () => {});
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    ws.send(JSON.stringify({ role: 'user', content: [{ type: 'text', text: 'x'.repeat(5 * 1024 * 1024) }] }));
    expect(await closed).toBe(1009);
    await expectAlive('a 5 MiB message');
  });
});

/** Starts counting the process's peak resident memory from now (the kernel resets VmHWM to VmRSS). */
function resetPeak(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

/** The server process's resident memory now and at its peak, in MiB (from /proc). */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

describe('live channels hold bounded memory', () => {
  const sockets: Socket[] = [];
  afterEach(() => {
    for (const socket of sockets.splice(0)) socket.destroy();
  });

  /** How each channel is opened on a raw socket whose reading then stops: the request, and what to send after the handshake. */
  const channels = {
    'agent-server WebSocket': (id: string) => ({
      request: upgrade(`/sockets/events/${id}?resend_all=true`, `X-Session-API-Key: ${KEY}\r\n`),
    }),
    'socket.io': (id: string) => ({
      request: upgrade(`/socket.io/?EIO=4&transport=websocket&conversation_id=${id}`, `X-Session-API-Key: ${KEY}\r\n`),
      // socket.io's CONNECT to the default namespace, once engine.io has said it is open.
      then: frame(0x1, Buffer.from('40')),
    }),
    'SSE event stream': (id: string) => ({
      request: `GET /api/v1/app-conversations/${id}/events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Session-API-Key: ${KEY}\r\n\r\n`,
    }),
  };

  it.each(Object.keys(channels))(
    '30 %s connections that replay 20 MiB of history and never read hold little of it',
    async (channel) => {
      const pid = server.child.pid!;
      const { conversation_id: id } = await body<{ conversation_id: string }>(
        call(server.url, '/api/conversations', KEY, {}),
      );
      // 20 messages of nearly 1 MiB (the body limit), recorded without running the agent.
      const text = 'z'.repeat(1000 * 1000);
      for (let i = 0; i < 20; i++) {
        await body(
          call(server.url, `/api/v1/app-conversations/${id}/send-message`, KEY, {
            role: 'user',
            content: [{ type: 'text', text }],
            run: false,
          }),
        );
      }
      resetPeak(pid);
      const before = memoryOf(pid);
      const open: { request: string; then?: Buffer } = channels[channel as keyof typeof channels](id);
      for (let i = 0; i < 30; i++) {
        const socket = connect(port, '127.0.0.1');
        sockets.push(socket);
        socket.on('error', () => {});
        socket.write(open.request);
        // Reads the first answer (and sends what follows it), then nothing more.
        socket.once('data', () => {
          if (open.then) socket.write(open.then);
          socket.pause();
        });
      }
      // Long enough for every replay to fill what its client does not read, far shorter than the stall deadline.
      await new Promise((r) => setTimeout(r, 5_000));
      const after = memoryOf(pid);
      console.log(
        `${channel}: server RSS before ${before.rss.toFixed(0)} MiB, after 30 stalled replays ${after.rss.toFixed(0)} MiB (peak ${after.peak.toFixed(0)})`,
      );
      // Each connection holds about one event in flight (here 1 MB, 2 MB as a V0 event) and what its
      // socket buffers; before the replay was paced, 30 such connections held the whole history each (+788 MiB on the WebSocket).
      expect(after.peak - before.rss, 'peak RSS growth in MiB').toBeLessThan(160);
      for (const socket of sockets.splice(0)) socket.destroy();
      await expectAlive(`30 stalled ${channel} replays`);
    },
  );
});
