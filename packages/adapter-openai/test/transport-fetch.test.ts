import type { LlmRequest } from '@acs/core/ports';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOpenAiLlmClient } from '../src/index.js';
import { nodeHttpFetch } from '../src/node-http-fetch.js';
import { completion, startFakeOpenAi, type FakeOpenAi } from '@acs/testing';

/** How requests leave the adapter: node:http by default (issue 27: a fraction of the global fetch's CPU per call), or a fetch the host gives. */

let fake: FakeOpenAi;
beforeAll(async () => {
  fake = await startFakeOpenAi();
});
afterAll(async () => {
  await fake.close();
});

const call = (): LlmRequest => ({ credentials: { model: 'gpt-4o', api_key: 'sk-test', base_url: fake.baseUrl }, messages: [{ role: 'user', content: 'Hi' }], tools: [] });

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

  it('answers as a fetch does: status, headers, the body, and no body for a 204', async () => {
    fake.script([{ status: 200, body: { ok: true }, headers: { 'x-litellm-response-cost': '0.5' } }, { status: 204, body: '' }]);
    const answer = await nodeHttpFetch(`${fake.baseUrl}/chat/completions`, { method: 'POST', body: JSON.stringify({ messages: [] }), headers: { 'content-type': 'application/json' } });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('x-litellm-response-cost')).toBe('0.5');
    expect(await answer.json()).toEqual({ ok: true });
    const empty = await nodeHttpFetch(`${fake.baseUrl}/chat/completions`, { method: 'POST', body: new TextEncoder().encode('{}') });
    expect(empty.status).toBe(204);
    expect(await empty.text()).toBe('');
  });

  it('rejects as a fetch does: an AbortError when aborted, a TypeError with the cause when the server is not there', async () => {
    fake.script(() => 'hang');
    const controller = new AbortController();
    const pending = nodeHttpFetch(`${fake.baseUrl}/chat/completions`, { method: 'POST', body: '{}', signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    await expect(nodeHttpFetch('http://127.0.0.1:1/v1/chat/completions', { method: 'POST', body: '{}' })).rejects.toMatchObject({ name: 'TypeError', message: 'fetch failed', cause: { code: 'ECONNREFUSED' } });
  });
});
