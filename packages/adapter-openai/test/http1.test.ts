import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { LlmRequest } from '@acs/core/ports';
import { afterEach, describe, expect, it } from 'vitest';
import { createOpenAiLlmClient } from '../src/index.js';
import { createHttp1Transport } from '../src/http1.js';
import type { Post } from '../src/transport.js';

/**
 * The adapter's own HTTP/1.1 client against servers that answer byte for byte as a test says:
 * connection reuse, servers that close, answers that are not HTTP or never end, content codings,
 * header fields that must not be sent, TLS.
 */

interface RawServer {
  port: number;
  /** Connections accepted so far. */
  connections: number;
  /** Every request's head, in arrival order. */
  heads: string[];
}

/** Servers a test started, and how to end each: its connections first, then its listener. */
const servers: { close(callback: () => void): unknown; closeAllConnections?: () => void }[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections?.();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

/**
 * A TCP server that reads each request (head and Content-Length body) and lets `answer` write to
 * the socket: the request's index on its connection, and over all connections.
 */
async function rawServer(answer: (socket: Socket, onConnection: number, overall: number) => void): Promise<RawServer> {
  const state: RawServer = { port: 0, connections: 0, heads: [] };
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    state.connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buffered = Buffer.alloc(0);
    let onConnection = 0;
    socket.on('data', (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buffered.toString('latin1', 0, end);
        const length = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        buffered = buffered.subarray(end + 4 + length);
        state.heads.push(head);
        answer(socket, onConnection++, state.heads.length - 1);
      }
    });
  });
  servers.push({
    close: (callback) => server.close(callback),
    closeAllConnections: () => sockets.forEach((s) => s.destroy()),
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.address() as AddressInfo).port;
  return state;
}

const json = (body: unknown, extra = '') => {
  const text = JSON.stringify(body);
  return `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n${extra}\r\n${text}`;
};

const post = (url: string, overrides: Partial<Post> = {}): Post => ({
  url,
  headers: { 'Content-Type': 'application/json', Authorization: 'Bearer sk-test' },
  body: JSON.stringify({ messages: [{ role: 'user', content: 'é and 日本' }] }),
  signal: undefined,
  timeoutMs: 60_000,
  ...overrides,
});

describe('the HTTP/1.1 transport', () => {
  it('sends one well-formed request, and carries the next calls to the same origin on the same connection', async () => {
    const server = await rawServer((socket, _, overall) => socket.write(json({ n: overall })));
    const send = createHttp1Transport();
    const url = `http://127.0.0.1:${server.port}/v1/chat/completions?api-version=1`;
    for (let n = 0; n < 3; n++)
      expect(await send(post(url))).toMatchObject({ outcome: 'answered', text: `{"n":${n}}` });
    expect(server.connections).toBe(1);
    const lines = server.heads[0]!.split('\r\n');
    expect(lines[0]).toBe('POST /v1/chat/completions?api-version=1 HTTP/1.1');
    expect(lines).toEqual(
      expect.arrayContaining([
        `Host: 127.0.0.1:${server.port}`,
        'Authorization: Bearer sk-test',
        `Content-Length: ${Buffer.byteLength(post(url).body)}`,
      ]),
    );
    // Calls at once each get a connection of their own, and their own answer.
    const many = await Promise.all(Array.from({ length: 5 }, () => send(post(url))));
    expect(new Set(many.map((m) => (m.outcome === 'answered' ? m.text : m.outcome))).size).toBe(5);
  });

  it('opens a new connection after an answer that says close, or that runs to the end of the connection', async () => {
    const server = await rawServer((socket, _, overall) => {
      if (overall === 0) socket.write(json({ n: 0 }, 'Connection: close\r\n'));
      else socket.end('HTTP/1.0 200 OK\r\n\r\n{"n":1}');
    });
    const send = createHttp1Transport();
    const url = `http://127.0.0.1:${server.port}/v1/chat/completions`;
    expect(await send(post(url))).toMatchObject({ outcome: 'answered', text: '{"n":0}' });
    expect(await send(post(url))).toMatchObject({ outcome: 'answered', status: 200, text: '{"n":1}' });
    expect(await send(post(url))).toMatchObject({ outcome: 'answered', text: '{"n":1}' });
    expect(server.connections).toBe(3);
  });

  it('sends again, on a new connection, when a reused connection was closed by the server before it answered', async () => {
    // The server takes the second request on a connection, and closes it without a word.
    const server = await rawServer((socket, onConnection, overall) => {
      if (onConnection === 1) socket.destroy();
      else socket.write(json({ n: overall }));
    });
    const send = createHttp1Transport();
    const url = `http://127.0.0.1:${server.port}/v1/chat/completions`;
    expect(await send(post(url))).toMatchObject({ outcome: 'answered', text: '{"n":0}' });
    expect(await send(post(url))).toMatchObject({ outcome: 'answered', text: '{"n":2}' });
    expect(server.heads).toHaveLength(3);
    expect(server.connections).toBe(2);
  });

  it('does not send again when a new connection closes before the answer, nor when the answer was cut short', async () => {
    const server = await rawServer((socket, _, overall) => {
      if (overall === 0) socket.destroy();
      else socket.end('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"half');
    });
    const send = createHttp1Transport();
    const url = `http://127.0.0.1:${server.port}/v1/chat/completions`;
    expect(await send(post(url))).toMatchObject({ outcome: 'failed', stage: 'connecting' });
    expect(await send(post(url))).toMatchObject({
      outcome: 'failed',
      stage: 'reading',
      error: { code: 'ECONNRESET', message: expect.stringContaining('dropped while reading') as unknown },
    });
    expect(server.heads).toHaveLength(2);
  });

  it('does not keep a connection the server closes while it is idle', async () => {
    const server = await rawServer((socket, _, overall) => {
      socket.write(json({ n: overall }));
      setTimeout(() => socket.end(), 20);
    });
    const send = createHttp1Transport();
    const url = `http://127.0.0.1:${server.port}/v1/chat/completions`;
    expect(await send(post(url))).toMatchObject({ outcome: 'answered' });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await send(post(url))).toMatchObject({ outcome: 'answered', text: '{"n":1}' });
    // The closed one was dropped from the pool when its end arrived, so the second call went out once.
    expect(server.heads).toHaveLength(2);
    expect(server.connections).toBe(2);
  });

  it('fails the call, and keeps the process whole, when the answer is not HTTP or is larger than allowed', async () => {
    const server = await rawServer((socket, _, overall) => {
      if (overall === 0) socket.write('SSH-2.0-OpenSSH_9.2\r\n\r\n');
      else {
        // A body that never ends.
        socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n');
        const chunk = `4000\r\n${'x'.repeat(0x4000)}\r\n`;
        const pump = () => {
          while (!socket.destroyed && socket.write(chunk));
          if (!socket.destroyed) socket.once('drain', pump);
        };
        pump();
      }
    });
    const send = createHttp1Transport({ maxResponseBytes: 1024 * 1024 });
    const url = `http://127.0.0.1:${server.port}/v1/chat/completions`;
    expect(await send(post(url))).toMatchObject({
      outcome: 'failed',
      stage: 'reading',
      error: { name: 'HttpAnswerError', message: expect.stringContaining('status line') as unknown },
    });
    expect(await send(post(url))).toMatchObject({
      outcome: 'failed',
      error: { name: 'HttpAnswerError', message: "the answer's body is larger than 1048576 bytes" },
    });
    // Through the client: a failure that says what was wrong, and is not retried.
    const llm = createOpenAiLlmClient({ maxRetries: 3, initialBackoffMs: 1 });
    const answer = await llm.complete(request(`http://127.0.0.1:${server.port}/v1`));
    expect(answer._unsafeUnwrapErr()).toMatchObject({ type: 'provider_error', retryable: false, attempts: 1 });
  });

  it('undoes a content coding the server used unasked, within the limit', async () => {
    const body = JSON.stringify({ big: 'y'.repeat(100_000) });
    const zipped = gzipSync(body);
    const server = await rawServer((socket) => {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: ${zipped.length}\r\n\r\n`);
      socket.write(zipped);
    });
    const url = `http://127.0.0.1:${server.port}/v1/chat/completions`;
    expect(await createHttp1Transport()(post(url))).toMatchObject({ outcome: 'answered', text: body });
    // A small gzip that opens up past the limit is refused, not unpacked.
    expect(await createHttp1Transport({ maxResponseBytes: 50_000 })(post(url))).toMatchObject({
      outcome: 'failed',
      error: {
        name: 'HttpAnswerError',
        message: expect.stringContaining('does not decode within 50000 bytes') as unknown,
      },
    });
  });

  it('sends nothing when a header field would not go out as given, and says which without its value', async () => {
    const server = await rawServer((socket) => socket.write(json({})));
    const send = createHttp1Transport();
    const url = `http://127.0.0.1:${server.port}/v1/chat/completions`;
    const smuggled = await send(
      post(url, { headers: { Authorization: 'Bearer sk-a\r\nX-Injected: 1', 'Content-Type': 'application/json' } }),
    );
    expect(smuggled).toEqual({
      outcome: 'unsendable',
      detail: 'the header Authorization holds a character HTTP does not allow in a value (a line break, say)',
    });
    expect(await send(post(url, { headers: { 'Bad Name': 'x' } }))).toMatchObject({ outcome: 'unsendable' });
    expect(server.connections).toBe(0);
    // Through the client: a bad request, not retried, the key nowhere in it.
    const llm = createOpenAiLlmClient({ maxRetries: 3 });
    const answer = await llm.complete(request(`http://127.0.0.1:${server.port}/v1`, 'sk-secret\nX-Evil: 1'));
    const error = answer._unsafeUnwrapErr();
    expect(error).toMatchObject({ type: 'bad_request', attempts: 1 });
    expect(JSON.stringify(error)).not.toContain('sk-secret');
    // Fields the client writes itself are its own; latin1 in a value goes out as latin1.
    await send(post(url, { headers: { Host: 'elsewhere', 'content-length': '1', 'X-Title': 'Café' } }));
    const head = server.heads.at(-1)!;
    expect(head).toContain(`Host: 127.0.0.1:${server.port}`);
    expect(head).not.toContain('elsewhere');
    expect(head.match(/content-length/gi)).toHaveLength(1);
    expect(head).toContain('X-Title: Café');
  });

  it('reaches IPv6 loopback by its literal', async () => {
    const server = createServer((socket) => {
      socket.once('data', () => socket.end(json({ v6: true }, 'Connection: close\r\n')));
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '::1', resolve));
    const { port } = server.address() as AddressInfo;
    expect(await createHttp1Transport()(post(`http://[::1]:${port}/v1/chat/completions`))).toMatchObject({
      outcome: 'answered',
      text: '{"v6":true}',
    });
  });

  it('speaks TLS, trusting a certificate it is given and refusing one it does not know', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'acs-http1-tls-'));
    execFileSync(
      'openssl',
      [
        ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost'],
        ...['-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'],
        ...['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')],
      ],
      { stdio: 'pipe' },
    );
    const cert = readFileSync(join(dir, 'cert.pem'));
    const server = createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert }, (req, res) => {
      req.resume();
      req.on('end', () => res.end(JSON.stringify({ tls: (req.socket as { encrypted?: boolean }).encrypted })));
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const trusting = createHttp1Transport({ ca: cert });
    for (const host of ['127.0.0.1', 'localhost'])
      expect(await trusting(post(`https://${host}:${port}/v1/chat/completions`))).toMatchObject({
        outcome: 'answered',
        text: '{"tls":true}',
      });
    const refused = await createHttp1Transport()(post(`https://127.0.0.1:${port}/v1/chat/completions`));
    expect(refused).toMatchObject({ outcome: 'failed', stage: 'connecting' });
    expect(JSON.stringify((refused as { error: Error }).error.cause)).toMatch(/SELF_SIGNED/);
  });

  it('lets the process end while its connections are idle', async () => {
    const server = await rawServer((socket) => socket.write(json({ ok: true })));
    // A child process that makes one call and then has nothing left to do.
    const script = [
      `import { createHttp1Transport } from ${JSON.stringify(new URL('../src/http1.ts', import.meta.url).href)};`,
      `const answer = await createHttp1Transport({ idleTimeoutMs: 600_000 })({ url: 'http://127.0.0.1:${server.port}/v1/chat/completions', headers: {}, body: '{}', signal: undefined, timeoutMs: 60_000 });`,
      `console.log(answer.outcome);`,
    ].join('\n');
    // Ten minutes of keep-alive: only the process's own end can come first.
    const child = spawn(
      process.execPath,
      // The client imports @acs/core (its byte accumulator): from its sources, as the tests do.
      ['--conditions=@acs/source', '--import', 'tsx', '--input-type=module', '-e', script],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => {
      const deadline = setTimeout(() => child.kill('SIGKILL'), 60_000);
      child.on('exit', (exitCode) => {
        clearTimeout(deadline);
        resolve(exitCode);
      });
    });
    // Had the idle connection kept it alive, it would have been killed at the deadline (code null).
    expect({ code, output: output.trim() }).toEqual({ code: 0, output: 'answered' });
    expect(server.connections).toBe(1);
  });
});

function request(baseUrl: string, key = 'sk-test'): LlmRequest {
  return {
    credentials: { model: 'gpt-4o', api_key: key, base_url: baseUrl },
    messages: [{ role: 'user', content: 'Hi' }],
    tools: [],
  };
}
