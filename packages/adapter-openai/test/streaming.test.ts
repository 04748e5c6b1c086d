/**
 * Streamed calls (issue 36): with `onDelta` the adapter asks for `stream: true`, hands each piece
 * of text and reasoning on as it arrives, and ends with exactly the answer a whole call gives.
 * Against real node:http servers on loopback that write Server-Sent Events, over both transports
 * (Node's own client, and a fetch the host gives).
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createGzip } from 'node:zlib';
import type { LlmDelta, LlmRequest, LlmResponse } from '@acs/core/ports';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createOpenAiLlmClient, type OpenAiLlmClientOptions } from '../src/index.js';
import { exchangeLimits } from '../src/transport.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

/** One request as the server got it, and the means to answer it. */
interface Call {
  body: Record<string, unknown>;
  req: IncomingMessage;
  res: ServerResponse;
  /** 0 for the first request. */
  n: number;
  /** Resolves when the connection of this request is closed (by either side). */
  closed: Promise<void>;
}

interface ModelServer {
  base: string;
  bodies: Record<string, unknown>[];
}

/** A chat-completions server on loopback whose every request `handle` answers. */
async function modelServer(handle: (call: Call) => void | Promise<void>): Promise<ModelServer> {
  const bodies: Record<string, unknown>[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (piece: string) => (text += piece));
    req.on('end', () => {
      const body = JSON.parse(text) as Record<string, unknown>;
      bodies.push(body);
      const closed = new Promise<void>((resolve) => req.socket.once('close', () => resolve()));
      void Promise.resolve(handle({ body, req, res, n: bodies.length - 1, closed })).catch(() => res.destroy());
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, bodies };
}

const HEAD = { id: 'chatcmpl-s1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-2024-08-06' };
const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
  ...HEAD,
  choices: [{ index: 0, delta, finish_reason: finish }],
});
const USAGE = {
  prompt_tokens: 2000,
  completion_tokens: 500,
  total_tokens: 2500,
  prompt_tokens_details: { cached_tokens: 1000 },
};
const usageChunk = { ...HEAD, choices: [], usage: USAGE };
const event = (data: unknown) => `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;

/** The whole answer the chunks below add up to, as a server that does not stream sends it. */
function whole(message: Record<string, unknown>, finish: string): Record<string, unknown> {
  return {
    id: HEAD.id,
    object: 'chat.completion',
    created: 1,
    model: HEAD.model,
    choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }],
    usage: USAGE,
  };
}

const TEXT_CHUNKS = [
  chunk({ role: 'assistant', content: '' }),
  chunk({ reasoning_content: 'The user greets; ' }),
  chunk({ reasoning_content: 'answer kindly.' }),
  chunk({ content: 'Hello' }),
  chunk({ content: ', wor' }),
  chunk({ content: 'ld — ✓' }),
  chunk({}, 'stop'),
  usageChunk,
];
const TEXT_WHOLE = whole({ content: 'Hello, world — ✓', reasoning_content: 'The user greets; answer kindly.' }, 'stop');

const TOOL_CHUNKS = [
  chunk({ role: 'assistant', content: 'Let me look.' }),
  chunk({
    tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'execute_bash', arguments: '{"comm' } }],
  }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: 'and": "ls' } }] }),
  chunk({
    tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'think', arguments: '{"thought"' } }],
  }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: ' -la"}' } }] }),
  chunk({ tool_calls: [{ index: 1, function: { arguments: ': "ok"}' } }] }),
  chunk({}, 'tool_calls'),
  usageChunk,
];
const TOOL_WHOLE = whole(
  {
    content: 'Let me look.',
    tool_calls: [
      { id: 'call_a', type: 'function', function: { name: 'execute_bash', arguments: '{"command": "ls -la"}' } },
      { id: 'call_b', type: 'function', function: { name: 'think', arguments: '{"thought": "ok"}' } },
    ],
  },
  'tool_calls',
);

const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };

/** Writes `chunks` as events; after the first `gateAfter`, waits for `gate` (the client has seen a delta). */
async function stream(res: ServerResponse, chunks: readonly unknown[], gate?: Promise<unknown>, gateAfter = 2) {
  res.writeHead(200, SSE_HEADERS);
  for (const [n, data] of chunks.entries()) {
    if (n === gateAfter && gate) await gate;
    res.write(event(data));
  }
  res.end(event('[DONE]'));
}

const request = (base: string, extra: Partial<LlmRequest> = {}): LlmRequest => ({
  credentials: { model: 'gpt-4o', api_key: 'sk-test', base_url: base },
  messages: [{ role: 'user', content: 'Hi' }],
  tools: [],
  ...extra,
});

/** A promise and its resolver: the server waits on it until the client has seen what the test waits for. */
function signal<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Everything of a response but its wall time. */
const timeless = (response: LlmResponse) => ({ ...response, latency_ms: 0 });

const FAST: OpenAiLlmClientOptions = { maxRetries: 2, initialBackoffMs: 10, maxBackoffMs: 50, timeoutMs: 60_000 };
const transports: [string, OpenAiLlmClientOptions][] = [
  ['Node’s own client', FAST],
  ['a fetch the host gives', { ...FAST, fetch: (input, init) => globalThis.fetch(input, init) }],
];

describe.each(transports)('over %s', (_, options) => {
  it('streams text and reasoning in pieces as they come, and ends with the answer a whole call gives', async () => {
    const firstDelta = signal();
    const server = await modelServer(({ body, res }) =>
      body['stream']
        ? stream(res, TEXT_CHUNKS, firstDelta.promise, 3)
        : void res.setHeader('content-type', 'application/json').end(JSON.stringify(TEXT_WHOLE)),
    );
    const llm = createOpenAiLlmClient(options);
    const deltas: LlmDelta[] = [];
    const streamed = await llm.complete(
      request(server.base, {
        onDelta: (delta) => {
          deltas.push(delta);
          firstDelta.resolve();
        },
      }),
    );
    const plain = await llm.complete(request(server.base));
    // The server held the rest of the stream until the client had its first piece.
    expect(deltas).toEqual([
      { content: null, reasoning_content: 'The user greets; ', attempt: 1 },
      { content: null, reasoning_content: 'answer kindly.', attempt: 1 },
      { content: 'Hello', reasoning_content: null, attempt: 1 },
      { content: ', wor', reasoning_content: null, attempt: 1 },
      { content: 'ld — ✓', reasoning_content: null, attempt: 1 },
    ]);
    expect(server.bodies[0]).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(server.bodies[1]).not.toHaveProperty('stream');
    expect(timeless(streamed._unsafeUnwrap())).toEqual(timeless(plain._unsafeUnwrap()));
    expect(streamed._unsafeUnwrap()).toMatchObject({
      content: 'Hello, world — ✓',
      reasoning_content: 'The user greets; answer kindly.',
      finish_reason: 'stop',
      usage: { prompt_tokens: 2000, completion_tokens: 500, cached_prompt_tokens: 1000 },
      attempts: 1,
    });
    // gpt-4o: 1000 × $2.50 + 1000 cached × $1.25 + 500 × $10, per 1M tokens
    expect(streamed._unsafeUnwrap().usage.cost_usd).toBeCloseTo(0.00875, 10);
  });

  it('assembles two tool calls whose arguments come in pieces across chunks, interleaved', async () => {
    const server = await modelServer(({ body, res }) =>
      body['stream']
        ? stream(res, TOOL_CHUNKS)
        : void res.setHeader('content-type', 'application/json').end(JSON.stringify(TOOL_WHOLE)),
    );
    const llm = createOpenAiLlmClient(options);
    const deltas: LlmDelta[] = [];
    const streamed = (await llm.complete(request(server.base, { onDelta: (d) => deltas.push(d) })))._unsafeUnwrap();
    const plain = (await llm.complete(request(server.base)))._unsafeUnwrap();
    expect(streamed.tool_calls).toEqual([
      { id: 'call_a', name: 'execute_bash', arguments: '{"command": "ls -la"}' },
      { id: 'call_b', name: 'think', arguments: '{"thought": "ok"}' },
    ]);
    expect(streamed.finish_reason).toBe('tool_calls');
    expect(timeless(streamed)).toEqual(timeless(plain));
    expect(deltas).toEqual([{ content: 'Let me look.', reasoning_content: null, attempt: 1 }]);
  });

  it('takes the cost from x-litellm-response-cost and reasoning from delta.reasoning', async () => {
    const server = await modelServer(({ res }) => {
      res.setHeader('x-litellm-response-cost', '0.0123');
      return stream(res, [chunk({ reasoning: 'hmm' }), chunk({ content: 'ok' }, 'stop'), usageChunk]);
    });
    const response = (
      await createOpenAiLlmClient(options).complete(request(server.base, { onDelta: () => undefined }))
    )._unsafeUnwrap();
    expect(response).toMatchObject({ content: 'ok', reasoning_content: 'hmm' });
    expect(response.usage.cost_usd).toBe(0.0123);
  });

  it('sends a call again at once without stream_options when the server refuses them, and remembers', async () => {
    const server = await modelServer(({ body, res }) => {
      if (body['stream_options'] !== undefined) {
        // vLLM's words for a field its pydantic model forbids.
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            object: 'error',
            message:
              "[{'type': 'extra_forbidden', 'loc': ('body', 'stream_options'), 'msg': 'Extra inputs are not permitted'}]",
            type: 'BadRequestError',
            code: 400,
          }),
        );
        return;
      }
      return stream(res, [chunk({ content: 'no usage here' }, 'stop')]);
    });
    // No retries: had the refusal counted as a failed attempt, there would be no second request.
    const llm = createOpenAiLlmClient({ ...options, maxRetries: 0 });
    const first = (await llm.complete(request(server.base, { onDelta: () => undefined })))._unsafeUnwrap();
    expect(first).toMatchObject({ content: 'no usage here', attempts: 1 });
    expect(server.bodies.map((b) => 'stream_options' in b)).toEqual([true, false]);
    const second = (await llm.complete(request(server.base, { onDelta: () => undefined })))._unsafeUnwrap();
    expect(second.content).toBe('no usage here');
    expect(server.bodies.map((b) => 'stream_options' in b)).toEqual([true, false, false]);
  });

  it('reads a server that ignores stream and answers JSON, and tells onDelta the whole text once', async () => {
    const server = await modelServer(({ res }) => {
      res.setHeader('content-type', 'application/json').end(JSON.stringify(TEXT_WHOLE));
    });
    const deltas: LlmDelta[] = [];
    const response = (
      await createOpenAiLlmClient(options).complete(request(server.base, { onDelta: (d) => deltas.push(d) }))
    )._unsafeUnwrap();
    expect(response.content).toBe('Hello, world — ✓');
    expect(deltas).toEqual([
      { content: 'Hello, world — ✓', reasoning_content: 'The user greets; answer kindly.', attempt: 1 },
    ]);
  });

  it.each([
    ['ends cleanly before [DONE] and any finish_reason', (res: ServerResponse) => res.end()],
    ['loses its connection', (res: ServerResponse) => res.socket?.destroy()],
  ])('retries a stream that %s, the next attempt’s deltas saying so', async (_, drop) => {
    const server = await modelServer(({ res, n }) => {
      if (n > 0) return stream(res, TEXT_CHUNKS);
      res.writeHead(200, SSE_HEADERS);
      // Two pieces, handed to the kernel before the stream breaks (so they reach the client first).
      res.write(event(TEXT_CHUNKS[3]) + event(TEXT_CHUNKS[4]), () => drop(res));
    });
    const deltas: LlmDelta[] = [];
    const response = (
      await createOpenAiLlmClient(options).complete(request(server.base, { onDelta: (d) => deltas.push(d) }))
    )._unsafeUnwrap();
    expect(response).toMatchObject({ content: 'Hello, world — ✓', attempts: 2 });
    expect(deltas.filter((d) => d.content !== null).map((d) => [d.attempt, d.content])).toEqual([
      [1, 'Hello'],
      [1, ', wor'],
      [2, 'Hello'],
      [2, ', wor'],
      [2, 'ld — ✓'],
    ]);
  });

  it('ends a stream at once when the call is cancelled: cancelled, and the server sees the connection close', async () => {
    let serverSawClose: Promise<void> | undefined;
    const server = await modelServer(({ res, closed }) => {
      serverSawClose = closed;
      res.writeHead(200, SSE_HEADERS);
      res.write(event(chunk({ content: 'and then…' })));
      // …nothing more: the stream stays open until the client goes.
    });
    const controller = new AbortController();
    const result = await createOpenAiLlmClient(options).complete(
      request(server.base, { signal: controller.signal, onDelta: () => controller.abort() }),
    );
    expect(result._unsafeUnwrapErr()).toMatchObject({ type: 'cancelled', attempts: 1 });
    await serverSawClose;
  });

  it('keeps going when onDelta throws', async () => {
    const server = await modelServer(({ res }) => stream(res, TEXT_CHUNKS));
    const response = await createOpenAiLlmClient(options).complete(
      request(server.base, {
        onDelta: () => {
          throw new Error('a listener that breaks');
        },
      }),
    );
    expect(response._unsafeUnwrap().content).toBe('Hello, world — ✓');
  });

  it('classifies an error sent inside the stream as an error answer: by the status it names, else by its words', async () => {
    const server = await modelServer(({ res, n }) => {
      if (n === 0) return stream(res, [chunk({ content: 'par' }), { error: { message: 'Overloaded', code: 502 } }]);
      if (n === 1) return stream(res, TEXT_CHUNKS);
      return stream(res, [{ error: { message: 'litellm.ContentPolicyViolationError: no.' } }]);
    });
    const llm = createOpenAiLlmClient(options);
    const retried = await llm.complete(request(server.base, { onDelta: () => undefined }));
    expect(retried._unsafeUnwrap()).toMatchObject({ content: 'Hello, world — ✓', attempts: 2 });
    const refused = await llm.complete(request(server.base, { onDelta: () => undefined }));
    expect(refused._unsafeUnwrapErr()).toMatchObject({ type: 'content_refused', attempts: 1 });
  });

  it('fails a stream that falls silent past timeoutMs as a timeout', async () => {
    const server = await modelServer(({ res }) => {
      res.writeHead(200, SSE_HEADERS);
      res.write(event(chunk({ content: 'and then…' })));
    });
    const result = await createOpenAiLlmClient({ ...options, timeoutMs: 300, maxRetries: 0 }).complete(
      request(server.base, { onDelta: () => undefined }),
    );
    expect(result._unsafeUnwrapErr()).toMatchObject({ type: 'timeout' });
    expect(result._unsafeUnwrapErr().message).toMatch(/stalled: nothing came for 300 ms/);
  });

  it('fails an event larger than maxEventBytes without reading the rest, and a stream past maxResponseBytes', async () => {
    const written: number[] = [];
    const server = await modelServer(async ({ res, n, closed }) => {
      res.writeHead(200, SSE_HEADERS);
      let bytes = 0;
      let gone = false;
      void closed.then(() => (gone = true));
      const endless = n === 0 ? 'x'.repeat(64 * 1024) : event(chunk({ content: 'x' }));
      if (n === 0) res.write('data: ');
      // Up to 256 MiB, as fast as the client reads: the client must stop long before.
      while (!gone && bytes < 256 * 1024 * 1024) {
        bytes += endless.length;
        if (!res.write(endless)) await Promise.race([once(res, 'drain'), closed]);
      }
      written.push(bytes);
      res.end();
    });
    const llm = createOpenAiLlmClient({
      ...options,
      maxRetries: 0,
      maxEventBytes: 1024 * 1024,
      maxResponseBytes: 4 * 1024 * 1024,
    });
    const big = await llm.complete(request(server.base, { onDelta: () => undefined }));
    expect(big._unsafeUnwrapErr().message).toMatch(/an event of the answer's stream is larger than 1048576 bytes/);
    const long = await llm.complete(request(server.base, { onDelta: () => undefined }));
    expect(long._unsafeUnwrapErr().message).toMatch(/the answer's stream is larger than 4194304 bytes/);
    await vi.waitFor(() => expect(written).toHaveLength(2), { timeout: 60_000 });
    // What the server got written before the client closed: the bound and what the sockets buffer, not 256 MiB.
    for (const bytes of written) expect(bytes).toBeLessThan(64 * 1024 * 1024);
  });

  it('reads a gzip-compressed stream as it comes', async () => {
    const firstDelta = signal();
    const server = await modelServer(async ({ res }) => {
      res.writeHead(200, { ...SSE_HEADERS, 'content-encoding': 'gzip' });
      const gzip = createGzip();
      gzip.pipe(res);
      for (const [n, data] of TEXT_CHUNKS.entries()) {
        if (n === 4) await firstDelta.promise;
        gzip.write(event(data));
        // Each event is flushed through the compressor, as a streaming server must.
        await new Promise<void>((resolve) => gzip.flush(() => resolve()));
      }
      gzip.end(event('[DONE]'));
    });
    const deltas: LlmDelta[] = [];
    const response = await createOpenAiLlmClient(options).complete(
      request(server.base, {
        onDelta: (d) => {
          deltas.push(d);
          if (d.content) firstDelta.resolve();
        },
      }),
    );
    expect(response._unsafeUnwrap()).toMatchObject({ content: 'Hello, world — ✓', attempts: 1 });
    expect(deltas.map((d) => d.content ?? d.reasoning_content)).toEqual([
      'The user greets; ',
      'answer kindly.',
      'Hello',
      ', wor',
      'ld — ✓',
    ]);
  });
});

describe('the limits of a streamed exchange', () => {
  it('cuts a silence past the idle limit, which restarts on each piece, and the whole exchange past its own', () => {
    vi.useFakeTimers();
    try {
      const limits = exchangeLimits({
        url: 'http://127.0.0.1/',
        headers: {},
        body: '',
        signal: undefined,
        timeoutMs: 10_000,
        events: { onEvent: () => undefined, maxEventBytes: 1024, idleTimeoutMs: 1_000 },
      });
      for (let n = 0; n < 8; n++) {
        vi.advanceTimersByTime(900);
        limits.touch();
      }
      expect(limits.stopped()).toBeNull();
      vi.advanceTimersByTime(1_000);
      expect(limits.stopped()).toEqual({ outcome: 'timed_out', idle: true });
      limits.clear();

      const whole = exchangeLimits({
        url: 'http://127.0.0.1/',
        headers: {},
        body: '',
        signal: undefined,
        timeoutMs: 3_000,
        events: { onEvent: () => undefined, maxEventBytes: 1024, idleTimeoutMs: 1_000 },
      });
      for (let n = 0; n < 4; n++) {
        vi.advanceTimersByTime(900);
        whole.touch();
      }
      expect(whole.stopped()).toEqual({ outcome: 'timed_out' });
      expect(whole.signal.aborted).toBe(true);
      whole.clear();
    } finally {
      vi.useRealTimers();
    }
  });
});
