import type { LlmRequest } from '@acs/core/ports';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOpenAiLlmClient } from '../src/index.js';
import { completion, startFakeOpenAi, type FakeOpenAi } from '@acs/testing';

let fake: FakeOpenAi;
beforeAll(async () => {
  fake = await startFakeOpenAi();
  fake.script(() => ({ status: 200, body: completion() }));
});
afterAll(async () => {
  await fake.close();
});

const call = (key: string | null, base_url = fake.baseUrl): LlmRequest => ({
  credentials: { model: 'gpt-4o', api_key: key, base_url },
  messages: [{ role: 'user', content: 'Hi' }],
  tools: [],
});

describe('the HTTP transport', () => {
  it('sends each call with its own key, whatever was called before, to the same endpoint with or without a trailing slash', async () => {
    const llm = createOpenAiLlmClient();
    const keys = ['key-a', 'key-b', 'key-a', 'key-c'];
    for (const key of keys) expect((await llm.complete(call(key))).isOk()).toBe(true);
    expect((await llm.complete(call('key-d', `${fake.root}/v1/`))).isOk()).toBe(true);
    const seen = fake.requests.slice(-5);
    expect(seen.map((r) => r.headers.authorization)).toEqual([...keys, 'key-d'].map((key) => `Bearer ${key}`));
    expect(seen.map((r) => r.path)).toEqual(Array(5).fill('/v1/chat/completions'));
    expect(seen.map((r) => r.headers['content-type'])).toEqual(Array(5).fill('application/json'));
  });

  it('sends the configured extra headers, but never lets them replace the key', async () => {
    const llm = createOpenAiLlmClient({
      headers: { 'HTTP-Referer': 'https://acs.example', 'X-Title': 'ACS', Authorization: 'Bearer someone-else' },
    });
    await llm.complete(call('key-h'));
    const seen = fake.requests.at(-1);
    expect(seen?.headers['http-referer']).toBe('https://acs.example');
    expect(seen?.headers['x-title']).toBe('ACS');
    expect(seen?.headers.authorization).toBe('Bearer key-h');
  });

  it('calls in parallel keep their answers apart', async () => {
    const llm = createOpenAiLlmClient();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => llm.complete(call(`key-${i}`))));
    expect(results.every((r) => r.isOk())).toBe(true);
  });
});
