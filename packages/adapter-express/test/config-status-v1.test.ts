import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { errorCode, items, obj, startHarness, WRONG_KEY, type Harness } from './harness.js';
import { expectOpenHandsShape } from './openhands-shapes.js';

/** `/api/v1/web-client/config`, `/api/v1/config/*` and the status routes. */

let h: Harness;

const MODELS = [
  'openai/gpt-4o',
  'anthropic/claude-sonnet-4',
  'openai/gpt-4o-mini',
  'openrouter/meta/llama-3',
  'local-model',
  'openai/gpt-4o',
  'deepseek/deepseek-chat',
];

beforeEach(async () => {
  h = await startHarness({ router: { models: () => MODELS } });
});

afterEach(async () => {
  await h.close();
});

async function get(path: string, model: string): Promise<Record<string, unknown>> {
  const r = await h.call('GET', path);
  expect(r.status, `${path}: ${r.text}`).toBe(200);
  expectOpenHandsShape(model, r.body);
  return obj(r.body);
}

describe('GET /api/v1/web-client/config', () => {
  it('is 1.11’s WebClientConfig in OSS mode, open without a key, and agrees with V0’s config', async () => {
    const r = await h.call('GET', '/api/v1/web-client/config', { key: null });
    expect(r.status).toBe(200);
    expectOpenHandsShape('WebClientConfig', r.body);
    const config = obj(r.body);
    expect(config).toMatchObject({
      kind: 'WebClientConfig',
      app_mode: 'oss',
      posthog_client_key: null,
      providers_configured: [],
      acp_providers: [],
      auth_url: null,
    });
    expect(obj(config.feature_flags)).toMatchObject({
      enable_billing: false,
      hide_llm_settings: false,
      allow_user_llm_configuration: true,
      enable_acp: false,
      enable_automations: false,
    });
    const v0 = obj((await h.call('GET', '/api/options/config', { key: null })).body);
    expect(v0.APP_MODE).toBe(config.app_mode);
    expect(v0.PROVIDERS_CONFIGURED).toEqual(config.providers_configured);
  });
});

describe('GET /api/v1/config/models/search and /providers/search', () => {
  it('lists the models offered, split into provider and name, sorted, in pages', async () => {
    const all = await get('/api/v1/config/models/search', 'LLMModelPage');
    expect(all).toEqual({
      items: [
        { provider: 'anthropic', name: 'claude-sonnet-4', verified: true, hidden: false, canonical: null },
        { provider: 'deepseek', name: 'deepseek-chat', verified: true, hidden: false, canonical: null },
        { provider: null, name: 'local-model', verified: true, hidden: false, canonical: null },
        { provider: 'openai', name: 'gpt-4o', verified: true, hidden: false, canonical: null },
        { provider: 'openai', name: 'gpt-4o-mini', verified: true, hidden: false, canonical: null },
        { provider: 'openrouter', name: 'meta/llama-3', verified: true, hidden: false, canonical: null },
      ],
      next_page_id: null,
    });
    const seen: unknown[] = [];
    let page = await get('/api/v1/config/models/search?limit=4', 'LLMModelPage');
    seen.push(...items(page));
    expect(page.next_page_id).toEqual(expect.any(String));
    page = await get(`/api/v1/config/models/search?limit=4&page_id=${page.next_page_id as string}`, 'LLMModelPage');
    seen.push(...items(page));
    expect(page.next_page_id).toBeNull();
    expect(seen).toEqual(all.items);

    expect(items(await get('/api/v1/config/models/search?query=GPT-4O', 'LLMModelPage')).map((m) => m.name)).toEqual([
      'gpt-4o',
      'gpt-4o-mini',
    ]);
    expect(
      items(await get('/api/v1/config/models/search?provider__eq=openai&query=mini', 'LLMModelPage')).map(
        (m) => m.name,
      ),
    ).toEqual(['gpt-4o-mini']);
    expect(items(await get('/api/v1/config/models/search?verified__eq=false', 'LLMModelPage'))).toEqual([]);
    // Its document says what a page id is; one of that form is a place in the list.
    expect(items(await get('/api/v1/config/models/search?page_id=enp6', 'LLMModelPage'))).toEqual([]);
  });

  it('lists the providers of those models', async () => {
    expect(await get('/api/v1/config/providers/search', 'ProviderPage')).toEqual({
      items: ['anthropic', 'deepseek', 'openai', 'openrouter'].map((name) => ({ name, verified: true })),
      next_page_id: null,
    });
    const first = await get('/api/v1/config/providers/search?limit=3', 'ProviderPage');
    expect(items(first).map((p) => p.name)).toEqual(['anthropic', 'deepseek', 'openai']);
    const rest = await get(
      `/api/v1/config/providers/search?limit=3&page_id=${first.next_page_id as string}`,
      'ProviderPage',
    );
    expect(rest).toEqual({ items: [{ name: 'openrouter', verified: true }], next_page_id: null });
    expect(items(await get('/api/v1/config/providers/search?query=OPEN', 'ProviderPage')).map((p) => p.name)).toEqual([
      'openai',
      'openrouter',
    ]);
  });

  it('refuses bad parameters with 422, and needs a key', async () => {
    for (const query of [
      'limit=0',
      'limit=101',
      'limit=x',
      'page_id=not%20an%20id',
      'page_id=Mw%3D%3D',
      'verified__eq=maybe',
    ]) {
      for (const path of ['/api/v1/config/models/search', '/api/v1/config/providers/search']) {
        const r = await h.call('GET', `${path}?${query}`);
        expect(r.status, `${path}?${query}: ${r.text}`).toBe(422);
        expect(errorCode(r.body)).toBe('VALIDATION_FAILED');
      }
    }
    expect((await h.call('GET', '/api/v1/config/models/search', { key: WRONG_KEY })).status).toBe(401);
  });
});

describe('status routes', () => {
  it('/alive, /health and /ready answer as 1.11’s, without a key; other methods are 405', async () => {
    for (const key of [null, WRONG_KEY]) {
      expect((await h.call('GET', '/alive', { key })).body).toEqual({ status: 'ok' });
      const health = await h.call('GET', '/health', { key });
      expect([health.status, health.body]).toEqual([200, 'OK']);
      const ready = await h.call('GET', '/ready', { key });
      expect([ready.status, ready.body]).toEqual([200, 'OK']);
    }
    for (const path of ['/ready', '/server_info']) {
      const r = await h.call('POST', path, { key: null });
      expect(r.status, path).toBe(405);
      expect(errorCode(r.body)).toBe('METHOD_NOT_ALLOWED');
    }
  });

  it('/server_info reports uptime, idle time and resources in 1.11’s shape, and the sandbox pools', async () => {
    await h.call('GET', '/api/v1/settings/profiles');
    const r = await h.call('GET', '/server_info', { key: null });
    expect(r.status).toBe(200);
    const info = obj(r.body);
    expect(Object.keys(info).sort()).toEqual(['idle_time', 'resources', 'sandbox_pool', 'uptime']);
    expect(info.sandbox_pool).toEqual({});
    const resources = obj(info.resources);
    expect(Object.keys(resources).sort()).toEqual(['cpu_percent', 'disk', 'io', 'memory']);
    expect(Object.keys(obj(resources.memory)).sort()).toEqual(['percent', 'rss', 'vms']);
    expect(Object.keys(obj(resources.disk)).sort()).toEqual(['free', 'percent', 'total', 'used']);
    expect(Object.keys(obj(resources.io)).sort()).toEqual(['read_bytes', 'write_bytes']);
    expect(info.uptime).toBeGreaterThan(0);
    expect(info.idle_time).toBeGreaterThanOrEqual(0);
    expect(info.idle_time as number).toBeLessThanOrEqual(info.uptime as number);
    expect(obj(resources.memory).rss).toBeGreaterThan(0);
    for (const group of ['memory', 'disk', 'io'] as const)
      for (const value of Object.values(obj(resources[group]))) expect(value).toEqual(expect.any(Number));
    expect(resources.cpu_percent).toEqual(expect.any(Number));
  });
});
