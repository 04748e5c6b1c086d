import type { LlmRequest } from '@acs/core/ports';
import type * as OpenAiModule from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createOpenAiLlmClient } from '../src/index.js';
import { completion, startFakeOpenAi, type FakeOpenAi } from '@acs/testing';

// Count the SDK clients the adapter constructs.
const sdk = vi.hoisted(() => ({ constructed: 0 }));
vi.mock('openai', async (importOriginal) => {
  const actual = await importOriginal<typeof OpenAiModule>();
  class CountingOpenAI extends actual.OpenAI {
    constructor(...args: ConstructorParameters<typeof actual.OpenAI>) {
      super(...args);
      sdk.constructed += 1;
    }
  }
  return { ...actual, default: CountingOpenAI, OpenAI: CountingOpenAI };
});

let fake: FakeOpenAi;
beforeAll(async () => {
  fake = await startFakeOpenAi();
  fake.script([{ status: 200, body: completion() }]);
});
afterAll(async () => {
  await fake.close();
});

const call = (key: string | null, base_url = fake.baseUrl): LlmRequest => ({
  credentials: { model: 'gpt-4o', api_key: key, base_url },
  messages: [{ role: 'user', content: 'Hi' }],
  tools: [],
});

describe('SDK client cache', () => {
  it('reuses one SDK client per base URL and key', async () => {
    const llm = createOpenAiLlmClient();
    const before = sdk.constructed;
    for (const key of ['key-a', 'key-a', 'key-b', 'key-a', null, null]) {
      expect((await llm.complete(call(key))).isOk()).toBe(true);
    }
    expect((await llm.complete(call('key-a', `${fake.root}/v1/`))).isOk()).toBe(true); // same URL, trailing slash
    expect((await llm.complete(call('key-a', fake.root.replace('127.0.0.1', 'localhost') + '/v1'))).isOk()).toBe(true);
    expect(sdk.constructed - before).toBe(4); // key-a, key-b, no key, localhost
  });

  it('drops the least recently used client beyond maxCachedClients', async () => {
    const llm = createOpenAiLlmClient({ maxCachedClients: 2 });
    const before = sdk.constructed;
    for (const key of ['k1', 'k2', 'k1', 'k3', 'k1', 'k2']) await llm.complete(call(key));
    // k1, k2 built; k1 hit; k3 built (drops k2); k1 hit; k2 rebuilt (drops k3)
    expect(sdk.constructed - before).toBe(4);
  });

  it('sends the configured extra headers', async () => {
    const llm = createOpenAiLlmClient({ headers: { 'HTTP-Referer': 'https://acs.example', 'X-Title': 'ACS' } });
    await llm.complete(call('key-h'));
    const seen = fake.requests.at(-1);
    expect(seen?.headers['http-referer']).toBe('https://acs.example');
    expect(seen?.headers['x-title']).toBe('ACS');
  });
});
