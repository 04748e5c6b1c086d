/**
 * The default client (Node's own HTTP client, its proxy support on) as an operator runs it (issue 36):
 * through a real forward proxy (`proxy`, the one undici is tested against) when HTTP_PROXY or
 * HTTPS_PROXY says so and not for NO_PROXY's hosts; over TLS with a private CA from
 * NODE_EXTRA_CA_CERTS; never sending a POST again by itself on a connection the server closed;
 * and never keeping a process alive with a connection kept for reuse.
 */
import { createServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { LlmRequest } from '@acs/core/ports';
import { completion } from '@acs/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { gzipSync } from 'node:zlib';
import { createOpenAiLlmClient } from '../src/index.js';
import { createDefaultTransport } from '../src/default-transport.js';
import * as fixtures from './network-fixtures.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

const portOf = fixtures.portOf;
const listen = (server: Server) => fixtures.listen(server, cleanups);
const forwardProxy = () => fixtures.forwardProxy(cleanups);
const withEnv = fixtures.withEnv;

/** A chat-completions server answering one completion; counts the requests it got. */
async function modelServer(): Promise<{ url: string; requests: () => number }> {
  let requests = 0;
  const server = await listen(
    createServer((req, res) => {
      requests++;
      req.resume();
      req.on('end', () => res.setHeader('content-type', 'application/json').end(JSON.stringify(completion())));
    }),
  );
  return { url: `http://127.0.0.1:${portOf(server)}/v1`, requests: () => requests };
}

const call = (baseUrl: string): LlmRequest => ({
  credentials: { model: 'gpt-4o', api_key: 'sk-test', base_url: baseUrl },
  messages: [{ role: 'user', content: 'Hi' }],
  tools: [],
});

describe('the operator’s proxy', () => {
  it('carries calls when HTTP_PROXY says so, and not calls to a NO_PROXY host', async () => {
    const model = await modelServer();
    const proxy = await forwardProxy();
    // A client with a bound of its own makes its own transport, which reads the variables as it is made.
    await withEnv({ HTTP_PROXY: proxy.url, NO_PROXY: '' }, async () => {
      const llm = createOpenAiLlmClient({ maxRetries: 0, maxResponseBytes: 1024 * 1024 });
      expect((await llm.complete(call(model.url))).isOk()).toBe(true);
    });
    expect(proxy.seen).toEqual([`POST ${model.url}/chat/completions`]);
    await withEnv({ HTTP_PROXY: proxy.url, NO_PROXY: '127.0.0.1' }, async () => {
      const llm = createOpenAiLlmClient({ maxRetries: 0, maxResponseBytes: 1024 * 1024 });
      expect((await llm.complete(call(model.url))).isOk()).toBe(true);
    });
    expect(proxy.seen).toHaveLength(1);
    expect(model.requests()).toBe(2);
  });
});

describe('TLS', () => {
  it(
    'trusts a private CA from NODE_EXTRA_CA_CERTS, through HTTPS_PROXY’s CONNECT, and refuses the server without it',
    { timeout: 120_000 },
    async () => {
      const ca = fixtures.privateCa();
      const https = createHttpsServer({ key: ca.key, cert: ca.cert }, (req, res) => {
        req.resume();
        req.on('end', () =>
          res.setHeader('content-type', 'application/json').end(JSON.stringify(completion({ content: 'over TLS' }))),
        );
      });
      await listen(https);
      const proxy = await forwardProxy();
      const baseUrl = `https://localhost:${portOf(https)}/v1`;
      const trusting = await runClient(baseUrl, { NODE_EXTRA_CA_CERTS: ca.caFile, HTTPS_PROXY: proxy.url });
      expect(trusting).toMatchObject({ ok: true, content: 'over TLS' });
      expect(proxy.seen).toEqual([`CONNECT localhost:${portOf(https as unknown as Server)}`]);
      const doubting = await runClient(baseUrl, {});
      expect(doubting).toMatchObject({ ok: false, type: 'unreachable' });
      expect(String((doubting as { message: string }).message)).toMatch(/certificate/i);
    },
  );
});

describe('a compressed answer', () => {
  it('is read decoded when a server compresses unasked, and fails past the bound once decoded', async () => {
    const small = gzipSync(JSON.stringify(completion({ content: 'squeezed' })));
    const bomb = gzipSync(Buffer.alloc(8 * 1024 * 1024, 0x20));
    const server = await listen(
      createServer((req, res) => {
        req.resume();
        req.on('end', () =>
          res
            .setHeader('content-type', 'application/json')
            .setHeader('content-encoding', 'gzip')
            .end(req.url?.includes('bomb') ? bomb : small),
        );
      }),
    );
    const base = `http://127.0.0.1:${portOf(server)}`;
    const llm = createOpenAiLlmClient({ maxRetries: 0 });
    expect((await llm.complete(call(`${base}/v1`)))._unsafeUnwrap().content).toBe('squeezed');
    const send = createDefaultTransport({ maxResponseBytes: 1024 * 1024 });
    const exploded = await send({ url: `${base}/bomb`, headers: {}, body: '{}', signal: undefined, timeoutMs: 60_000 });
    expect(bomb.length).toBeLessThan(64 * 1024);
    expect(exploded).toMatchObject({ outcome: 'failed', stage: 'reading' });
  });
});

describe('connections', () => {
  it('does not send a POST again by itself on a kept connection the server closed; the retry is the adapter’s, counted', async () => {
    let requests = 0;
    const server = await listen(
      createServer((req, res) => {
        requests++;
        req.resume();
        // The first answer keeps the connection; the second request on it finds it dropped.
        if (requests === 1)
          req.on('end', () => res.setHeader('content-type', 'application/json').end(JSON.stringify(completion())));
        else req.socket.destroy();
      }),
    );
    const llm = createOpenAiLlmClient({ maxRetries: 0, maxResponseBytes: 1024 * 1024 });
    const base = `http://127.0.0.1:${portOf(server)}/v1`;
    expect((await llm.complete(call(base))).isOk()).toBe(true);
    const failed = await llm.complete(call(base));
    expect(failed._unsafeUnwrapErr()).toMatchObject({ type: 'unreachable', attempts: 1 });
    expect(requests).toBe(2);
  });

  it(
    'lets a process end at once while a connection is kept for reuse with a long keep-alive',
    { timeout: 120_000 },
    async () => {
      const server = await listen(
        createServer((req, res) => {
          req.resume();
          req.on('end', () =>
            res
              .setHeader('content-type', 'application/json')
              .setHeader('keep-alive', 'timeout=600')
              .end(JSON.stringify(completion({ content: 'kept' }))),
          );
        }),
      );
      const started = Date.now();
      const result = await runClient(`http://127.0.0.1:${portOf(server)}/v1`, {});
      expect(result).toMatchObject({ ok: true, content: 'kept' });
      // runClient fails at its 60 s deadline when the child does not end on its own.
      expect(Date.now() - started).toBeLessThan(60_000);
    },
  );
});

/** One call with the default client in a child Node with `env` (read at its start, as NODE_EXTRA_CA_CERTS must be); its answer as JSON. */
function runClient(baseUrl: string, env: Record<string, string>): Promise<unknown> {
  const script = `
    import { createOpenAiLlmClient } from ${fixtures.SOURCE_ENTRY};
    const r = await createOpenAiLlmClient({ maxRetries: 0 }).complete({
      credentials: { model: 'gpt-4o', api_key: 'sk-test', base_url: ${JSON.stringify(baseUrl)} },
      messages: [{ role: 'user', content: 'Hi' }], tools: [],
    });
    console.log(JSON.stringify(r.isOk() ? { ok: true, content: r.value.content } : { ok: false, type: r.error.type, message: r.error.message }));
  `;
  return fixtures.runChild(script, env);
}
