import type { McpConnection, McpServerTarget } from '@acs/core/ports';
import { afterEach, describe, expect, it } from 'vitest';
import { createMcpConnector } from '../src/index.js';
import { closedPort } from '@acs/testing';
import { sleeps, startShttpServer, startSilentServer, startSseServer, type TestHttpServer } from './servers.js';

const KEY = 'sk-test-super-secret-key-123';
const connector = createMcpConnector({ clientName: 'adapter-mcp-tests' });
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

function track<T extends TestHttpServer | { stop: () => Promise<void> }>(server: T): T {
  cleanups.push(() => server.stop());
  return server;
}

async function connect(
  target: McpServerTarget,
  timeoutMs = 60_000,
  signal = new AbortController().signal,
): Promise<McpConnection> {
  const connection = (await connector.connect(target, { signal, timeoutMs })).match(
    (ok) => ok,
    (failure) => {
      throw new Error(`connect failed: ${failure.type}: ${failure.message}`);
    },
  );
  cleanups.push(() => connection.close());
  return connection;
}

const never = () => new AbortController().signal;
const callOptions = (timeoutMs = 60_000) => ({ signal: never(), timeoutMs });

describe.each([
  { transport: 'shttp' as const, start: startShttpServer },
  { transport: 'sse' as const, start: startSseServer },
])('$transport', ({ transport, start }) => {
  it('connects, lists the tools with their schemas and annotations, and calls them', async () => {
    const server = track(await start());
    const connection = await connect({ transport, url: server.url, api_key: null }, 60_000, never());

    const names = connection.tools.map((t) => t.name).sort();
    expect(names).toEqual(['add', 'echo', 'fail', 'lookup', 'media', 'sleep', 'structured']);
    const echo = connection.tools.find((t) => t.name === 'echo');
    expect(echo).toMatchObject({
      description: 'Echoes the text',
      input_schema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      annotations: {},
    });
    expect(connection.tools.find((t) => t.name === 'lookup')?.annotations).toEqual({
      read_only: true,
      open_world: false,
    });

    expect((await connection.call('echo', { text: 'hello' }, callOptions()))._unsafeUnwrap()).toEqual({
      content: 'hello',
      is_error: false,
    });
    expect((await connection.call('add', { a: 2, b: 40 }, callOptions()))._unsafeUnwrap()).toEqual({
      content: '42',
      is_error: false,
    });
    expect((await connection.call('fail', {}, callOptions()))._unsafeUnwrap()).toEqual({
      content: 'it failed on purpose',
      is_error: true,
    });
    expect((await connection.call('media', {}, callOptions()))._unsafeUnwrap().content).toBe(
      'here it is\n[image: image/png, 4 bytes]\n[resource: file:///tmp/report.txt]\n[resource: file:///tmp/notes.txt]\nthe notes',
    );
    expect((await connection.call('structured', {}, callOptions()))._unsafeUnwrap()).toEqual({
      content: '{"answer":42}',
      is_error: false,
    });
    // Bad arguments: the SDK server reports them as a failed call.
    expect((await connection.call('add', { a: 'x' }, callOptions()))._unsafeUnwrap().is_error).toBe(true);

    await connection.close();
    await connection.close();
    const after = await connection.call('echo', { text: 'x' }, callOptions());
    expect(after._unsafeUnwrapErr().type).toBe('closed');
  });

  it('sends the api_key as a bearer token on every request', async () => {
    const server = track(await start({ token: KEY }));
    const connection = await connect({ transport, url: server.url, api_key: KEY }, 60_000, never());
    expect((await connection.call('echo', { text: 'with key' }, callOptions()))._unsafeUnwrap().content).toBe(
      'with key',
    );
    expect(server.requests.length).toBeGreaterThanOrEqual(3);
    expect(server.requests.every((r) => r.authorization === `Bearer ${KEY}`)).toBe(true);
    // The GET event stream (opened after the handshake for shttp) carries it too.
    await expect.poll(() => server.requests.some((r) => r.method === 'GET'), { timeout: 60_000 }).toBe(true);
    expect(server.requests.some((r) => r.method === 'POST')).toBe(true);
    expect(server.requests.every((r) => r.authorization === `Bearer ${KEY}`)).toBe(true);
  });

  it('fails as unreachable with the status, never the key, when the key is wrong or missing', async () => {
    const server = track(await start({ token: 'the-right-key' }));
    const wrong = await connector.connect(
      { transport, url: server.url, api_key: KEY },
      { signal: never(), timeoutMs: 60_000 },
    );
    const failure = wrong._unsafeUnwrapErr();
    expect(failure.type).toBe('unreachable');
    expect(failure.message).toContain('401');
    expect(failure.message).not.toContain(KEY);
    // The server echoed the header back; it must have been redacted, not just absent.
    expect(server.requests.some((r) => r.authorization === `Bearer ${KEY}`)).toBe(true);

    const missing = await connector.connect(
      { transport, url: server.url, api_key: null },
      { signal: never(), timeoutMs: 60_000 },
    );
    expect(missing._unsafeUnwrapErr()).toMatchObject({ type: 'unreachable' });
    expect(missing._unsafeUnwrapErr().message).toContain('401');
  });

  it('times out a slow call and cancels an aborted one', async () => {
    const server = track(await start());
    const connection = await connect({ transport, url: server.url, api_key: null }, 60_000, never());
    // The server sleeps 100 s: the call comes back while the server is still asleep, by our own timer.
    const before = { ...sleeps };
    const slow = await connection.call('sleep', { ms: 100_000 }, callOptions(300));
    expect(slow._unsafeUnwrapErr().type).toBe('timeout');
    expect(slow._unsafeUnwrapErr().message).toContain('300 ms');
    expect(sleeps).toEqual({ started: before.started + 1, finished: before.finished });

    const abort = new AbortController();
    setTimeout(() => abort.abort(), 100);
    const aborted = await connection.call('sleep', { ms: 100_000 }, { signal: abort.signal, timeoutMs: 100_000 });
    expect(aborted._unsafeUnwrapErr().type).toBe('cancelled');
    expect(sleeps.finished).toBe(before.finished);

    // The connection is still usable afterwards.
    expect((await connection.call('echo', { text: 'still here' }, callOptions()))._unsafeUnwrap().content).toBe(
      'still here',
    );
  });

  it('fails a call quickly once the server is gone, and reports the connection lost', async () => {
    const server = track(await start());
    const connection = await connect({ transport, url: server.url, api_key: null }, 60_000, never());
    const lost: string[] = [];
    connection.onLost((reason) => lost.push(reason));
    await server.stop();

    // Not 'timeout': it failed on the missing server, long before its own 100 s limit.
    const result = await connection.call('echo', { text: 'anyone?' }, callOptions(100_000));
    expect(['closed', 'unreachable']).toContain(result._unsafeUnwrapErr().type);
    await expect.poll(() => lost.length, { timeout: 60_000 }).toBe(1);
    const again = await connection.call('echo', { text: 'anyone?' }, callOptions(100_000));
    expect(again._unsafeUnwrapErr().type).toBe('closed');
    expect(lost).toHaveLength(1);
  });
});

describe('connection failures', () => {
  it('fails as unreachable at once when nothing listens', async () => {
    const port = await closedPort();
    for (const transport of ['shttp', 'sse'] as const) {
      // Not 'timeout': refused at once, long before the 100 s limit.
      const result = await connector.connect(
        { transport, url: `http://127.0.0.1:${port}/mcp`, api_key: KEY },
        { signal: never(), timeoutMs: 100_000 },
      );
      expect(result._unsafeUnwrapErr().type).toBe('unreachable');
      expect(result._unsafeUnwrapErr().message).toMatch(/connection refused/);
      expect(result._unsafeUnwrapErr().message).not.toContain(KEY);
    }
  });

  it('times out when the server accepts the connection but never answers', async () => {
    const silent = track(await startSilentServer());
    for (const transport of ['shttp', 'sse'] as const) {
      const started = Date.now();
      const result = await connector.connect(
        { transport, url: silent.url, api_key: null },
        { signal: never(), timeoutMs: 400 },
      );
      expect(result._unsafeUnwrapErr().type).toBe('timeout');
      expect(result._unsafeUnwrapErr().message).toContain('400 ms');
      // The silent server never answers: only our own timer can end this, and not before it is due.
      expect(Date.now() - started).toBeGreaterThanOrEqual(380);
    }
  });

  it('is cancelled by the signal, before or during the attempt', async () => {
    const silent = track(await startSilentServer());
    const before = await connector.connect(
      { transport: 'shttp', url: silent.url, api_key: null },
      { signal: AbortSignal.abort(), timeoutMs: 5_000 },
    );
    expect(before._unsafeUnwrapErr().type).toBe('cancelled');

    const abort = new AbortController();
    setTimeout(() => abort.abort(), 100);
    // Not 'timeout': the signal ended it, long before the 100 s limit.
    const during = await connector.connect(
      { transport: 'sse', url: silent.url, api_key: null },
      { signal: abort.signal, timeoutMs: 100_000 },
    );
    expect(during._unsafeUnwrapErr().type).toBe('cancelled');
  });

  it('rejects a url that is not http(s)', async () => {
    const result = await connector.connect(
      { transport: 'shttp', url: 'not a url', api_key: KEY },
      { signal: never(), timeoutMs: 1_000 },
    );
    expect(result._unsafeUnwrapErr().type).toBe('unreachable');
  });

  it('fails as unreachable with the status on an HTTP error page, key redacted', async () => {
    const { createServer } = await import('node:http');
    const http = createServer((req, res) =>
      res.writeHead(502, { 'content-type': 'text/plain' }).end(`bad gateway for ${req.headers.authorization ?? ''}`),
    );
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => http.close(() => resolve())));
    const address = http.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    for (const transport of ['shttp', 'sse'] as const) {
      const result = await connector.connect(
        { transport, url: `http://127.0.0.1:${port}/mcp`, api_key: KEY },
        { signal: never(), timeoutMs: 60_000 },
      );
      const failure = result._unsafeUnwrapErr();
      expect(failure.type).toBe('unreachable');
      expect(failure.message).toContain('502');
      expect(failure.message).not.toContain(KEY);
    }
  });
});
