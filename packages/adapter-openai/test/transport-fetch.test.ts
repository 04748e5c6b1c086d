import { createServer, type AddressInfo } from 'node:net';
import type { LlmRequest } from '@acs/core/ports';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyError, createOpenAiLlmClient } from '../src/index.js';
import { createDefaultTransport } from '../src/default-transport.js';
import { fetchTransport, type Post, type Transport } from '../src/transport.js';
import { completion, startFakeOpenAi, type FakeOpenAi } from '@acs/testing';

/** How requests leave the adapter: undici's fetch by default (proxy-aware, kept connections), or a fetch the host gives. */

let fake: FakeOpenAi;
beforeAll(async () => {
  fake = await startFakeOpenAi();
});
afterAll(async () => {
  await fake.close();
});

/** A loopback port nothing listens on (fetch refuses port 1 outright, before connecting). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const call = (): LlmRequest => ({
  credentials: { model: 'gpt-4o', api_key: 'sk-test', base_url: fake.baseUrl },
  messages: [{ role: 'user', content: 'Hi' }],
  tools: [],
});

describe('the transport', () => {
  it('sends through a fetch the host gives, when it gives one', async () => {
    fake.script([{ status: 200, body: completion({ content: 'through the host' }) }]);
    let calls = 0;
    const hostFetch = (input: string | URL | Request, init?: RequestInit) => {
      calls++;
      return globalThis.fetch(input, init);
    };
    const answer = await createOpenAiLlmClient({ fetch: hostFetch, maxRetries: 0 }).complete(call());
    expect(answer._unsafeUnwrap().content).toBe('through the host');
    expect(calls).toBe(1);
  });

  const post = (overrides: Partial<Post> = {}): Post => ({
    url: `${fake.baseUrl}/chat/completions`,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [] }),
    signal: undefined,
    timeoutMs: 10_000,
    ...overrides,
  });
  const transports: [string, Transport][] = [
    ['the default client (undici)', createDefaultTransport()],
    ['a fetch the host gives', fetchTransport((input, init) => globalThis.fetch(input, init))],
  ];

  describe.each(transports)('over %s', (_, send) => {
    it('answers with the status, the headers by name in any case, and the whole body', async () => {
      const big = 'x'.repeat(200_000);
      fake.script([
        { status: 200, body: { ok: true, big }, headers: { 'x-litellm-response-cost': '0.5' } },
        { status: 204, body: '' },
      ]);
      const answer = await send(post());
      expect(answer).toMatchObject({ outcome: 'answered', status: 200 });
      if (answer.outcome !== 'answered') return;
      expect(answer.header('X-LiteLLM-Response-Cost')).toBe('0.5');
      expect(answer.header('retry-after')).toBeNull();
      expect(JSON.parse(answer.text)).toEqual({ ok: true, big });
      expect(await send(post())).toMatchObject({ outcome: 'answered', status: 204, text: '' });
    });

    it('sends nothing for a header a line break would split, and says which header without its value', async () => {
      const before = fake.requests.length;
      const answer = await send(post({ headers: { Authorization: 'Bearer sk-one\r\nX-Injected: yes' } }));
      expect(answer).toEqual({
        outcome: 'unsendable',
        detail: 'the header Authorization holds a character HTTP does not allow in a value (a line break, say)',
      });
      expect(fake.requests.length).toBe(before);
    });

    it('says cancelled when the signal aborts, timed out when the limit passes, and failed while connecting with the cause', async () => {
      fake.script(() => 'hang');
      const controller = new AbortController();
      const pending = send(post({ signal: controller.signal }));
      setTimeout(() => controller.abort(), 50);
      expect(await pending).toEqual({ outcome: 'cancelled' });
      expect(await send(post({ signal: AbortSignal.abort() }))).toEqual({ outcome: 'cancelled' });
      expect(await send(post({ timeoutMs: 50 }))).toEqual({ outcome: 'timed_out' });
      const refused = await send(post({ url: `http://127.0.0.1:${await closedPort()}/v1/chat/completions` }));
      expect(refused).toMatchObject({ outcome: 'failed', stage: 'connecting' });
      // A fetch says it in its TypeError's cause, undici's request in the error itself: the classification reads both.
      const error = (refused as { error: Error & { code?: string; cause?: { code?: string } } }).error;
      expect(error.code ?? error.cause?.code).toBe('ECONNREFUSED');
      expect(classifyError(error, 'connecting')).toMatchObject({ code: 'unreachable', retry: true });
      expect(classifyError(error, 'connecting').detail).toContain('ECONNREFUSED');
    });
  });
});
