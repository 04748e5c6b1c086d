import { spawn } from 'node:child_process';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { LlmRequest } from '@acs/core/ports';
import { afterEach, describe, expect, it } from 'vitest';
import { createOpenAiLlmClient } from '../src/index.js';
import { createHttp1Transport } from '../src/http1.js';
import { HttpAnswerError, ResponseParser } from '../src/http1-parser.js';
import { fetchTransport, type Exchange, type Post, type Transport } from '../src/transport.js';

/**
 * Model answers cost memory in proportion to their bytes, whatever the framing (issue 35): a
 * body of millions of one-byte chunks is gathered into one buffer, by the own HTTP/1.1 client and
 * by a host's fetch alike, and an answer past the bound fails without being read further.
 */

/** A loopback server that answers every request 200, chunked, with `chunks` one-byte chunks of `x`; counts what it served. */
interface FloodServer {
  url: string;
  connections: number;
}

const servers: Server[] = [];
const sockets = new Set<Socket>();
afterEach(async () => {
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  for (const server of servers.splice(0)) await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function floodServer(chunks: number): Promise<FloodServer> {
  const flood = Buffer.from('1\r\nx\r\n'.repeat(chunks), 'latin1');
  const state: FloodServer = { url: '', connections: 0 };
  const server = createServer((socket) => {
    state.connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.once('data', () => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
      socket.write(flood);
      socket.end('0\r\n\r\n');
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions`;
  return state;
}

const post = (url: string): Post => ({ url, headers: {}, body: '{}', signal: undefined, timeoutMs: 60_000 });

const transports: [string, (maxResponseBytes: number) => Transport][] = [
  ['the HTTP/1.1 client', (maxResponseBytes) => createHttp1Transport({ maxResponseBytes })],
  [
    'a fetch the host gives',
    (maxResponseBytes) => fetchTransport((input, init) => globalThis.fetch(input, init), { maxResponseBytes }),
  ],
];

describe.each(transports)('over %s, an answer in one-byte chunks', (_, transport) => {
  it('is read whole within the bound', async () => {
    const server = await floodServer(100_000);
    const exchange = await transport(1024 * 1024)(post(server.url));
    expect(exchange).toMatchObject({ outcome: 'answered', status: 200 });
    expect((exchange as Extract<Exchange, { outcome: 'answered' }>).text).toBe('x'.repeat(100_000));
  });

  it('fails past the bound, counted in bytes, without reading the rest', async () => {
    const server = await floodServer(300_000);
    const exchange = await transport(100_000)(post(server.url));
    expect(exchange).toMatchObject({ outcome: 'failed', stage: 'reading' });
    expect(String((exchange as { error: unknown }).error)).toMatch(/larger than 100000 bytes/);
  });
});

describe('the response parser', () => {
  it('refuses a chunked body one byte past its bound, fed a byte at a time', () => {
    const parser = new ResponseParser({ maxHeadBytes: 1024, maxBodyBytes: 1000 });
    const wire = Buffer.from(
      `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${'1\r\nx\r\n'.repeat(1001)}`,
      'latin1',
    );
    const feed = () => {
      for (let at = 0; at < wire.length; at++) parser.push(wire.subarray(at, at + 1));
    };
    expect(feed).toThrow(HttpAnswerError);
    expect(feed).toThrow(/larger than 1000 bytes/);
  });

  it(
    'holds a body of 4 million one-byte chunks in memory proportional to its bytes',
    { timeout: 120_000 },
    async () => {
      // In a child with the collector exposed, so what is held is measured, not what is garbage.
      const script = `
        import { ResponseParser } from ${JSON.stringify(new URL('../src/http1-parser.ts', import.meta.url).href)};
        const wire = Buffer.from('HTTP/1.1 200 OK\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n' + '1\\r\\nx\\r\\n'.repeat(4_000_000) + '0\\r\\n\\r\\n', 'latin1');
        const held = () => { gc(); const m = process.memoryUsage(); return m.heapUsed + m.arrayBuffers; };
        const before = held();
        const parser = new ResponseParser({ maxHeadBytes: 65536, maxBodyBytes: 32 * 1024 * 1024 });
        let whole = false;
        for (let at = 0; at < wire.length; at += 65536) whole = parser.push(wire.subarray(at, at + 65536));
        const after = held();
        console.log(JSON.stringify({ whole, body: parser.body().length, heldMiB: (after - before) / 1048576 }));
      `;
      const result = await runChild(script);
      expect(result).toMatchObject({ whole: true, body: 4_000_000 });
      // 4 MB of body in a buffer of 4 MiB; a view per chunk held about 400 MiB.
      expect((result as { heldMiB: number }).heldMiB).toBeLessThan(32);
    },
  );
});

describe('the client', () => {
  it('fails a call whose answer is past its maxResponseBytes, as an answer that is not a completion', async () => {
    const server = await floodServer(50_000);
    const request: LlmRequest = {
      credentials: { model: 'gpt-4o', api_key: 'sk-test', base_url: server.url.replace('/chat/completions', '') },
      messages: [{ role: 'user', content: 'Hi' }],
      tools: [],
    };
    const failed = await createOpenAiLlmClient({ maxResponseBytes: 10_000, maxRetries: 0 }).complete(request);
    expect(failed._unsafeUnwrapErr()).toMatchObject({ type: 'provider_error', attempts: 1 });
    expect(failed._unsafeUnwrapErr().message).toMatch(/larger than 10000 bytes/);
  });
});

/** Runs an ES module in a child Node (sources through tsx, the collector exposed); its last line of output as JSON. Ended by the test, however it goes. */
async function runChild(script: string): Promise<unknown> {
  const child = spawn(
    process.execPath,
    ['--conditions=@acs/source', '--import', 'tsx', '--expose-gc', '--input-type=module', '-e', script],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  try {
    const code = await new Promise<number | null>((resolve) => {
      const deadline = setTimeout(() => child.kill('SIGKILL'), 90_000);
      child.on('exit', (exitCode) => {
        clearTimeout(deadline);
        resolve(exitCode);
      });
    });
    if (code !== 0) throw new Error(`the child exited with ${code}:\n${output}`);
    return JSON.parse(output.trim().split('\n').at(-1)!) as unknown;
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

describe('the response parser, fed in every split', () => {
  it('reads chunk-size lines split anywhere, with and without extensions, the same', () => {
    const wire = Buffer.from(
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n' +
        '1\r\na\r\n' +
        '000A;ext=1\r\n0123456789\r\n' +
        'f\r\nabcdefghijklmno\r\n' +
        '3\r\nxyz\r\n' +
        '0\r\nTrailer: yes\r\n\r\n',
      'latin1',
    );
    for (let step = 1; step <= 9; step++) {
      const parser = new ResponseParser({ maxHeadBytes: 1024, maxBodyBytes: 1024 });
      let whole = false;
      for (let at = 0; at < wire.length; at += step) whole = parser.push(wire.subarray(at, at + step));
      expect({ step, whole, body: parser.body().toString('latin1') }).toEqual({
        step,
        whole: true,
        body: 'a0123456789abcdefghijklmnoxyz',
      });
    }
  });
});
