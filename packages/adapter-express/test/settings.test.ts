import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { StoredSettings } from '@acs/core/schemas';
import { arr, errorCode, KEY_B, obj, startHarness, type Harness } from './harness.js';

/** Every secret value used in this file contains this marker; afterEach checks it never leaves the server. */
const MARK = 'SECRET-';

const SETTINGS_FIELDS = [
  'language',
  'agent',
  'max_iterations',
  'security_analyzer',
  'confirmation_mode',
  'llm_model',
  'llm_api_key',
  'llm_base_url',
  'llm_stream',
  'remote_runtime_resource_factor',
  'secrets_store',
  'enable_default_condenser',
  'condenser_max_size',
  'enable_sound_notifications',
  'enable_proactive_conversation_starters',
  'enable_solvability_analysis',
  'user_consents_to_analytics',
  'sandbox_base_container_image',
  'sandbox_runtime_container_image',
  'mcp_config',
  'search_api_key',
  'sandbox_api_key',
  'max_budget_per_task',
  'email',
  'email_verified',
  'git_user_name',
  'git_user_email',
];

const DEFAULT_VIEW = {
  language: null,
  agent: null,
  max_iterations: null,
  security_analyzer: null,
  confirmation_mode: null,
  llm_model: null,
  llm_api_key: null,
  llm_base_url: null,
  llm_stream: true,
  remote_runtime_resource_factor: null,
  secrets_store: { provider_tokens: {}, custom_secrets: {} },
  enable_default_condenser: true,
  condenser_max_size: null,
  enable_sound_notifications: false,
  enable_proactive_conversation_starters: true,
  enable_solvability_analysis: true,
  user_consents_to_analytics: null,
  sandbox_base_container_image: null,
  sandbox_runtime_container_image: null,
  mcp_config: { sse_servers: [], stdio_servers: [], shttp_servers: [] },
  search_api_key: null,
  sandbox_api_key: null,
  max_budget_per_task: null,
  email: null,
  email_verified: null,
  git_user_name: null,
  git_user_email: null,
  llm_api_key_set: false,
  provider_tokens_set: {},
  search_api_key_set: false,
};

let h: Harness;

beforeEach(async () => {
  // An operator who lets users raise their sandbox limits and name any image: the merge rules are what is tested here
  // (the operator's caps are, below).
  h = await startHarness({
    service: { userSettingLimits: { maxResourceFactor: 64 }, sandboxImages: { allowed: null } },
  });
});

afterEach(async () => {
  await h.close();
  // Secret values never leave the server: not in any response body, not in any log line.
  for (const text of h.responses) expect(text).not.toContain(MARK);
  for (const line of h.logger.lines) expect(line).not.toContain(MARK);
});

async function store(body: unknown, key?: string): Promise<void> {
  const r = await h.call('POST', '/api/settings', { body, ...(key ? { key } : {}) });
  expect(r.status, r.text).toBe(200);
  expect(r.body).toEqual({ message: 'Settings stored' });
}

async function load(key?: string): Promise<Record<string, unknown>> {
  const r = await h.call('GET', '/api/settings', key ? { key } : {});
  expect(r.status, r.text).toBe(200);
  return obj(r.body);
}

async function stored(user = 'alice'): Promise<StoredSettings> {
  const s = (await h.service.settings.loadWithSecrets(user))._unsafeUnwrap();
  if (!s) throw new Error('nothing stored');
  return s;
}

/** Expects 422 VALIDATION_FAILED with an issue whose path starts with `path`; returns the issue paths. */
async function rejected(body: unknown, path: string): Promise<string[]> {
  const r = await h.call('POST', '/api/settings', { body });
  expect(r.status, `${JSON.stringify(body).slice(0, 200)} → ${r.text}`).toBe(422);
  expect(errorCode(r.body)).toBe('VALIDATION_FAILED');
  const paths = arr(obj(r.body).issues).map((i) => obj(i).path as string);
  expect(
    paths.some((p) => p === path || p.startsWith(`${path}.`)),
    `issues ${JSON.stringify(paths)} should name ${path}`,
  ).toBe(true);
  return paths;
}

describe('Load Settings', () => {
  it('is 404 SETTINGS_NOT_FOUND before anything is stored', async () => {
    const r = await h.call('GET', '/api/settings');
    expect(r.status).toBe(404);
    expect(errorCode(r.body)).toBe('SETTINGS_NOT_FOUND');
  });

  it('after an empty store, returns all 27 fields and the three _set fields with their defaults', async () => {
    await store({});
    const view = await load();
    expect(Object.keys(view).sort()).toEqual(
      [...SETTINGS_FIELDS, 'llm_api_key_set', 'provider_tokens_set', 'search_api_key_set'].sort(),
    );
    expect(view).toEqual(DEFAULT_VIEW);
  });

  it('returns every stored field, with secrets null and the _set flags true', async () => {
    const full = {
      language: 'de',
      agent: 'CodeActAgent',
      max_iterations: 250,
      security_analyzer: 'llm',
      confirmation_mode: true,
      llm_model: 'anthropic/claude-sonnet-4',
      llm_api_key: `${MARK}llm`,
      llm_base_url: 'https://llm.example.com/v1',
      llm_stream: false,
      remote_runtime_resource_factor: 2,
      secrets_store: {
        provider_tokens: { github: { token: `${MARK}gh`, host: 'github.example.com', user_id: 'u1' } },
        custom_secrets: { MY_TOKEN: { secret: `${MARK}custom`, description: 'for tests' } },
      },
      enable_default_condenser: false,
      condenser_max_size: 80,
      enable_sound_notifications: true,
      enable_proactive_conversation_starters: false,
      enable_solvability_analysis: false,
      user_consents_to_analytics: true,
      sandbox_base_container_image: 'base:1',
      sandbox_runtime_container_image: 'runtime:1',
      mcp_config: {
        sse_servers: [{ url: 'https://sse.example.com/sse', api_key: `${MARK}mcp` }],
        stdio_servers: [],
        shttp_servers: [],
      },
      search_api_key: `${MARK}search`,
      sandbox_api_key: `${MARK}sandbox`,
      max_budget_per_task: 12.5,
      email: 'alice@example.com',
      email_verified: true,
      git_user_name: 'Alice',
      git_user_email: 'alice@example.com',
    };
    await store(full);
    expect(await load()).toEqual({
      ...full,
      llm_api_key: null,
      search_api_key: null,
      sandbox_api_key: null,
      secrets_store: {
        provider_tokens: { github: { host: 'github.example.com', user_id: 'u1' } },
        custom_secrets: { MY_TOKEN: { description: 'for tests' } },
      },
      mcp_config: {
        sse_servers: [{ url: 'https://sse.example.com/sse', api_key: null }],
        stdio_servers: [],
        shttp_servers: [],
      },
      llm_api_key_set: true,
      provider_tokens_set: { github: 'github.example.com' },
      search_api_key_set: true,
    });
    const secrets = await stored();
    expect(secrets.llm_api_key).toBe(`${MARK}llm`);
    expect(secrets.search_api_key).toBe(`${MARK}search`);
    expect(secrets.sandbox_api_key).toBe(`${MARK}sandbox`);
    expect(secrets.secrets_store.provider_tokens.github?.token).toBe(`${MARK}gh`);
    expect(secrets.secrets_store.custom_secrets.MY_TOKEN?.secret).toBe(`${MARK}custom`);
    expect(secrets.mcp_config.sse_servers[0]?.api_key).toBe(`${MARK}mcp`);
  });

  it('posting back exactly what Load Settings returned changes nothing, secrets included', async () => {
    await store({
      llm_model: 'm',
      llm_api_key: `${MARK}k`,
      search_api_key: `${MARK}s`,
      sandbox_api_key: `${MARK}sb`,
      secrets_store: {
        provider_tokens: { gitlab: { token: `${MARK}gl`, host: null } },
        custom_secrets: { A: { secret: `${MARK}a`, description: null } },
      },
      mcp_config: { shttp_servers: [{ url: 'https://mcp.example.com', api_key: `${MARK}m`, timeout: 30 }] },
    });
    const before = await stored();
    const view = await load();
    await store(view);
    expect(await stored()).toEqual(before);
    expect(await load()).toEqual(view);
  });
});

describe('Store Settings merge rules', () => {
  /** Fields written as sent, null stored as null. */
  const nullable: [string, unknown, unknown][] = [
    ['language', 'en', 'de'],
    ['agent', 'CodeActAgent', 'BrowsingAgent'],
    ['max_iterations', 50, 100],
    ['security_analyzer', 'llm', 'rules'],
    ['condenser_max_size', 50, 200],
    ['confirmation_mode', true, false],
    ['remote_runtime_resource_factor', 2, 4],
    ['user_consents_to_analytics', true, false],
    ['sandbox_base_container_image', 'img:1', 'img:2'],
    ['sandbox_runtime_container_image', 'rt:1', 'rt:2'],
    ['max_budget_per_task', 1.5, 10],
    ['email', 'a@example.com', 'b@example.com'],
    ['email_verified', true, false],
    ['git_user_name', 'Alice', 'Al'],
    ['git_user_email', 'a@example.com', 'al@example.com'],
  ];

  it.each(nullable)('%s: absent keeps, present writes, null stores null', async (field, first, second) => {
    await store({ [field]: first, language: field === 'language' ? first : 'xx' });
    expect((await load())[field]).toEqual(first);
    await store({ agent: field === 'agent' ? first : 'other' }); // field absent
    expect((await load())[field]).toEqual(first);
    await store({ [field]: second });
    expect((await load())[field]).toEqual(second);
    await store({ [field]: null });
    expect((await load())[field]).toBeNull();
    await store({ [field]: first });
    expect((await load())[field]).toEqual(first);
  });

  const booleans: [string, boolean][] = [
    ['enable_default_condenser', true],
    ['enable_sound_notifications', false],
    ['enable_proactive_conversation_starters', true],
    ['enable_solvability_analysis', true],
    ['llm_stream', true],
  ];

  it.each(booleans)(
    '%s: default %s, absent keeps, present writes, null is 422 naming the field and changes nothing',
    async (field, byDefault) => {
      await store({});
      expect((await load())[field]).toBe(byDefault);
      await store({ [field]: !byDefault });
      expect((await load())[field]).toBe(!byDefault);
      await store({ language: 'en' });
      expect((await load())[field]).toBe(!byDefault);
      await rejected({ [field]: null, language: 'fr' }, field);
      const view = await load();
      expect(view[field]).toBe(!byDefault);
      expect(view.language).toBe('en'); // a refused body writes nothing at all
      await rejected({ [field]: 'true' }, field);
      await rejected({ [field]: 1 }, field);
      await store({ [field]: byDefault });
      expect((await load())[field]).toBe(byDefault);
    },
  );

  it.each([
    ['llm_model', 'openai/gpt-4o', 'anthropic/claude-sonnet-4'],
    ['llm_base_url', 'https://a.example.com/v1', 'http://b.example.com:8080'],
  ])('%s: absent keeps, null keeps, present writes, "" clears', async (field, first, second) => {
    await store({ [field]: first });
    expect((await load())[field]).toBe(first);
    await store({ language: 'en' });
    expect((await load())[field]).toBe(first);
    await store({ [field]: null });
    expect((await load())[field]).toBe(first);
    await store({ [field]: second });
    expect((await load())[field]).toBe(second);
    await store({ [field]: '' });
    expect((await load())[field]).toBeNull();
    await store({ [field]: null });
    expect((await load())[field]).toBeNull();
  });

  it('llm_base_url must be an http(s) URL', async () => {
    for (const bad of ['ftp://x.example.com', 'not a url', 'javascript:alert(1)', 'http://']) {
      await rejected({ llm_base_url: bad }, 'llm_base_url');
    }
  });

  it.each([
    ['llm_api_key', 'llm_api_key_set'],
    ['search_api_key', 'search_api_key_set'],
    ['sandbox_api_key', null],
  ] as const)('%s: write-only; absent keeps, null keeps, present writes, "" clears', async (field, flag) => {
    const check = async (value: string | null) => {
      const view = await load();
      expect(view[field]).toBeNull();
      if (flag) expect(view[flag]).toBe(value !== null);
      expect((await stored())[field]).toBe(value);
    };
    await store({ [field]: `${MARK}one` });
    await check(`${MARK}one`);
    await store({ language: 'en' });
    await check(`${MARK}one`);
    await store({ [field]: null });
    await check(`${MARK}one`);
    await store({ [field]: `${MARK}two` });
    await check(`${MARK}two`);
    await store({ [field]: '' });
    await check(null);
    await store({ [field]: null });
    await check(null);
  });

  it('a whitespace-only key does not count as set', async () => {
    await store({ llm_api_key: '   ', search_api_key: '\t' });
    const view = await load();
    expect(view.llm_api_key_set).toBe(false);
    expect(view.search_api_key_set).toBe(false);
  });

  it('rejects wrong types with 422 VALIDATION_FAILED naming each field', async () => {
    const paths = await rejected(
      { max_iterations: 1.5, language: 42, llm_api_key: 123, email_verified: 'yes' },
      'max_iterations',
    );
    expect(paths).toEqual(expect.arrayContaining(['max_iterations', 'language', 'llm_api_key', 'email_verified']));
    await rejected({ max_iterations: '10' }, 'max_iterations');
    await rejected({ max_budget_per_task: 'cheap' }, 'max_budget_per_task');
    await rejected({ secrets_store: [] }, 'secrets_store');
    await rejected({ mcp_config: 'none' }, 'mcp_config');
    // Nothing was stored by any of these.
    expect((await h.call('GET', '/api/settings')).status).toBe(404);
  });

  it('ignores unknown keys, such as the _set fields clients echo back', async () => {
    await store({
      language: 'en',
      llm_api_key_set: true,
      search_api_key_set: true,
      provider_tokens_set: { github: 'github.com' },
      some_future_field: { nested: [1, 2, 3] },
    });
    const view = await load();
    expect(view.language).toBe('en');
    expect(view.llm_api_key_set).toBe(false);
    expect(view.search_api_key_set).toBe(false);
    expect(view.provider_tokens_set).toEqual({});
    expect(view).not.toHaveProperty('some_future_field');
  });

  it('concurrent stores merge one after the other: no update is lost', async () => {
    const names = Array.from({ length: 20 }, (_, i) => `NAME_${i}`);
    const results = await Promise.all(
      names.map((name, i) =>
        h.call('POST', '/api/settings', {
          body: { secrets_store: { custom_secrets: { [name]: { secret: `${MARK}${i}` } } } },
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(names.map(() => 200));
    expect(Object.keys(obj((await load()).secrets_store).custom_secrets as object).sort()).toEqual([...names].sort());
  });

  it('settings of one user do not touch another user', async () => {
    await store({ language: 'en', llm_api_key: `${MARK}a` });
    await store({ language: 'fr' }, KEY_B);
    expect((await load()).language).toBe('en');
    expect((await load()).llm_api_key_set).toBe(true);
    expect((await load(KEY_B)).language).toBe('fr');
    expect((await load(KEY_B)).llm_api_key_set).toBe(false);
  });
});

describe('secrets_store', () => {
  const tokenOf = async (provider: 'github' | 'gitlab' | 'bitbucket' | 'enterprise_sso') =>
    (await stored()).secrets_store.provider_tokens[provider] ?? null;

  it('provider tokens merge per provider, and provider_tokens_set maps each provider to its host or null', async () => {
    await store({
      secrets_store: {
        provider_tokens: {
          github: { token: `${MARK}gh1`, host: null },
          gitlab: { token: `${MARK}gl1`, host: 'gitlab.example.com' },
        },
      },
    });
    let view = await load();
    expect(view.provider_tokens_set).toEqual({ github: null, gitlab: 'gitlab.example.com' });
    expect(obj(view.secrets_store).provider_tokens).toEqual({
      github: { host: null, user_id: null },
      gitlab: { host: 'gitlab.example.com', user_id: null },
    });

    // Another provider: the first two stay.
    await store({ secrets_store: { provider_tokens: { bitbucket: { token: `${MARK}bb`, host: 'bitbucket.org' } } } });
    expect((await load()).provider_tokens_set).toEqual({
      github: null,
      gitlab: 'gitlab.example.com',
      bitbucket: 'bitbucket.org',
    });

    // Token null keeps it, the host is updated.
    await store({ secrets_store: { provider_tokens: { github: { token: null, host: 'ghe.example.com' } } } });
    expect(await tokenOf('github')).toEqual({ token: `${MARK}gh1`, host: 'ghe.example.com', user_id: null });

    // Token absent keeps it too.
    await store({ secrets_store: { provider_tokens: { github: { host: null } } } });
    expect(await tokenOf('github')).toEqual({ token: `${MARK}gh1`, host: null, user_id: null });

    // A new token replaces it.
    await store({ secrets_store: { provider_tokens: { github: { token: `${MARK}gh2` } } } });
    expect((await tokenOf('github'))?.token).toBe(`${MARK}gh2`);

    // An entry set to null removes the provider.
    await store({ secrets_store: { provider_tokens: { gitlab: null } } });
    expect(await tokenOf('gitlab')).toBeNull();
    view = await load();
    expect(view.provider_tokens_set).toEqual({ github: null, bitbucket: 'bitbucket.org' });

    // "" clears the token; with no user id nothing is left of the entry.
    await store({ secrets_store: { provider_tokens: { github: { token: '' } } } });
    expect(await tokenOf('github')).toBeNull();
    expect((await load()).provider_tokens_set).toEqual({ bitbucket: 'bitbucket.org' });

    // Absent secrets_store, or an empty one, keeps everything.
    await store({ language: 'en' });
    await store({ secrets_store: {} });
    await store({ secrets_store: { provider_tokens: {} } });
    expect(await tokenOf('bitbucket')).toEqual({ token: `${MARK}bb`, host: 'bitbucket.org', user_id: null });
  });

  it('a provider with only a user id counts as set; enterprise_sso is a provider', async () => {
    await store({
      secrets_store: {
        provider_tokens: {
          enterprise_sso: { token: `${MARK}sso`, host: 'sso.example.com' },
          gitlab: { user_id: 'u-7' },
        },
      },
    });
    expect((await load()).provider_tokens_set).toEqual({ enterprise_sso: 'sso.example.com', gitlab: null });
    expect(obj(obj((await load()).secrets_store).provider_tokens).gitlab).toEqual({ host: null, user_id: 'u-7' });
  });

  it('an unknown provider is 422 and stores nothing', async () => {
    await store({ secrets_store: { provider_tokens: { github: { token: `${MARK}gh` } } } });
    await rejected(
      { secrets_store: { provider_tokens: { sourceforge: { token: `${MARK}x` } } } },
      'secrets_store.provider_tokens',
    );
    await rejected(
      { secrets_store: { provider_tokens: { GitHub: { token: `${MARK}x` } } } },
      'secrets_store.provider_tokens',
    );
    await rejected(
      { secrets_store: { provider_tokens: { github: { token: 42 } } } },
      'secrets_store.provider_tokens.github',
    );
    expect((await stored()).secrets_store.provider_tokens).toEqual({
      github: { token: `${MARK}gh`, host: null, user_id: null },
    });
  });

  it('custom secrets merge per name; null removes; secret null or absent keeps; "" removes', async () => {
    const secrets = async () => (await stored()).secrets_store.custom_secrets;
    await store({ secrets_store: { custom_secrets: { MY_TOKEN: { secret: `${MARK}c1`, description: 'first' } } } });
    expect(obj((await load()).secrets_store).custom_secrets).toEqual({ MY_TOKEN: { description: 'first' } });

    await store({ secrets_store: { custom_secrets: { _OTHER2: { secret: `${MARK}c2` } } } });
    expect(await secrets()).toEqual({
      MY_TOKEN: { secret: `${MARK}c1`, description: 'first' },
      _OTHER2: { secret: `${MARK}c2`, description: null },
    });

    await store({ secrets_store: { custom_secrets: { MY_TOKEN: { secret: null, description: 'renamed' } } } });
    expect((await secrets()).MY_TOKEN).toEqual({ secret: `${MARK}c1`, description: 'renamed' });

    await store({ secrets_store: { custom_secrets: { MY_TOKEN: { description: null } } } });
    expect((await secrets()).MY_TOKEN).toEqual({ secret: `${MARK}c1`, description: null });

    await store({ secrets_store: { custom_secrets: { MY_TOKEN: { secret: `${MARK}c3` } } } });
    expect((await secrets()).MY_TOKEN?.secret).toBe(`${MARK}c3`);

    await store({ secrets_store: { custom_secrets: { _OTHER2: null } } });
    expect(Object.keys(await secrets())).toEqual(['MY_TOKEN']);

    await store({ secrets_store: { custom_secrets: { MY_TOKEN: { secret: '' } } } });
    expect(await secrets()).toEqual({});
    expect(obj((await load()).secrets_store).custom_secrets).toEqual({});
  });

  it('a custom secret name must be a valid environment variable name', async () => {
    for (const name of ['1ABC', 'has space', 'has-dash', 'dot.ted', '', 'ÄRGER']) {
      await rejected(
        { secrets_store: { custom_secrets: { [name]: { secret: `${MARK}x` } } } },
        'secrets_store.custom_secrets',
      );
    }
    expect((await h.call('GET', '/api/settings')).status).toBe(404);
  });
});

describe('mcp_config', () => {
  it('normalises bare URLs, shell-splits args, parses "K=V,K2=V2" env and defaults the shttp timeout', async () => {
    await store({
      mcp_config: {
        sse_servers: ['https://sse.example.com/sse', { url: '  wss://ws.example.com/mcp  ', api_key: `${MARK}sse` }],
        stdio_servers: [
          {
            name: 'fs-server_1',
            command: 'npx',
            args: `-y "@scope/server fs" --root '/tmp/a b'`,
            env: 'A=1, B_2=two=2',
          },
          { name: 'plain', command: 'uvx', args: ['mcp-server-fetch'], env: { TOKEN_NAME: 'x', N: 5, FLAG: true } },
          { name: 'bare', command: '/usr/bin/mcp' },
        ],
        shttp_servers: [
          'http://h1.example.com/mcp',
          { url: 'https://h2.example.com/mcp', timeout: 3600 },
          { url: 'https://h3.example.com', timeout: 1 },
        ],
      },
    });
    expect((await load()).mcp_config).toEqual({
      sse_servers: [
        { url: 'https://sse.example.com/sse', api_key: null },
        { url: 'wss://ws.example.com/mcp', api_key: null },
      ],
      stdio_servers: [
        {
          name: 'fs-server_1',
          command: 'npx',
          args: ['-y', '@scope/server fs', '--root', '/tmp/a b'],
          env: { A: '1', B_2: 'two=2' },
        },
        { name: 'plain', command: 'uvx', args: ['mcp-server-fetch'], env: { TOKEN_NAME: 'x', N: '5', FLAG: 'true' } },
        { name: 'bare', command: '/usr/bin/mcp', args: [], env: {} },
      ],
      shttp_servers: [
        { url: 'http://h1.example.com/mcp', api_key: null, timeout: 60 },
        { url: 'https://h2.example.com/mcp', api_key: null, timeout: 3600 },
        { url: 'https://h3.example.com', api_key: null, timeout: 1 },
      ],
    });
  });

  it.each([
    ['sse url with ftp scheme', { sse_servers: ['ftp://files.example.com'] }, 'mcp_config.sse_servers.0'],
    ['sse url with file scheme', { sse_servers: [{ url: 'file:///etc/passwd' }] }, 'mcp_config.sse_servers.0'],
    ['sse url without host', { sse_servers: [{ url: 'http://' }] }, 'mcp_config.sse_servers.0'],
    ['sse url that is not a URL', { sse_servers: ['just text'] }, 'mcp_config.sse_servers.0'],
    ['shttp url with javascript scheme', { shttp_servers: ['javascript:alert(1)'] }, 'mcp_config.shttp_servers.0'],
    [
      'stdio name with a space',
      { stdio_servers: [{ name: 'my server', command: 'npx' }] },
      'mcp_config.stdio_servers.0',
    ],
    ['stdio name with a dot', { stdio_servers: [{ name: 'my.server', command: 'npx' }] }, 'mcp_config.stdio_servers.0'],
    ['stdio without a name', { stdio_servers: [{ command: 'npx' }] }, 'mcp_config.stdio_servers.0'],
    [
      'stdio command with spaces',
      { stdio_servers: [{ name: 'a', command: 'npx -y server' }] },
      'mcp_config.stdio_servers.0',
    ],
    ['stdio without a command', { stdio_servers: [{ name: 'a' }] }, 'mcp_config.stdio_servers.0'],
    [
      'stdio args with an unterminated quote',
      { stdio_servers: [{ name: 'a', command: 'x', args: '"oops' }] },
      'mcp_config.stdio_servers.0',
    ],
    [
      'stdio env pair without =',
      { stdio_servers: [{ name: 'a', command: 'x', env: 'NOVALUE' }] },
      'mcp_config.stdio_servers.0',
    ],
    [
      'stdio env with a bad key',
      { stdio_servers: [{ name: 'a', command: 'x', env: { '1BAD': 'v' } }] },
      'mcp_config.stdio_servers.0',
    ],
    [
      'stdio env string with a bad key',
      { stdio_servers: [{ name: 'a', command: 'x', env: 'GOOD=1,BAD-KEY=2' }] },
      'mcp_config.stdio_servers.0',
    ],
    [
      'duplicate stdio names',
      {
        stdio_servers: [
          { name: 'a', command: 'x' },
          { name: 'a', command: 'y' },
        ],
      },
      'mcp_config.stdio_servers.1',
    ],
    [
      'shttp timeout 0',
      { shttp_servers: [{ url: 'https://h.example.com', timeout: 0 }] },
      'mcp_config.shttp_servers.0',
    ],
    [
      'shttp timeout 3601',
      { shttp_servers: [{ url: 'https://h.example.com', timeout: 3601 }] },
      'mcp_config.shttp_servers.0',
    ],
    [
      'shttp timeout negative',
      { shttp_servers: [{ url: 'https://h.example.com', timeout: -5 }] },
      'mcp_config.shttp_servers.0',
    ],
    [
      'shttp timeout fractional',
      { shttp_servers: [{ url: 'https://h.example.com', timeout: 1.5 }] },
      'mcp_config.shttp_servers.0',
    ],
    ['unknown key in mcp_config', { sse_servers: [], extra: true }, 'mcp_config'],
    [
      'unknown key in a server',
      { sse_servers: [{ url: 'https://a.example.com', headers: {} }] },
      'mcp_config.sse_servers.0',
    ],
  ])('%s → 422', async (_label, mcp, path) => {
    await rejected({ mcp_config: mcp }, path);
    expect((await h.call('GET', '/api/settings')).status).toBe(404);
  });

  it('is replaced whole; an api_key sent as null keeps the stored key of the server with the same URL', async () => {
    const keyOf = async (kind: 'sse_servers' | 'shttp_servers', url: string) =>
      (await stored()).mcp_config[kind].find((s) => s.url === url)?.api_key;
    await store({
      mcp_config: {
        sse_servers: [
          { url: 'https://a.example.com/sse', api_key: `${MARK}a` },
          { url: 'https://b.example.com/sse', api_key: `${MARK}b` },
        ],
        shttp_servers: [{ url: 'https://c.example.com/mcp', api_key: `${MARK}c` }],
      },
    });
    // Resend what Load Settings shows (api_key null): the keys stay.
    const view = obj((await load()).mcp_config);
    await store({ mcp_config: view });
    expect(await keyOf('sse_servers', 'https://a.example.com/sse')).toBe(`${MARK}a`);
    expect(await keyOf('sse_servers', 'https://b.example.com/sse')).toBe(`${MARK}b`);
    expect(await keyOf('shttp_servers', 'https://c.example.com/mcp')).toBe(`${MARK}c`);

    // A null key does not borrow the key of another URL; a dropped server is gone; "" clears; a new key replaces.
    await store({
      mcp_config: {
        sse_servers: [
          { url: 'https://a.example.com/sse', api_key: '' },
          { url: 'https://new.example.com/sse', api_key: null },
        ],
        shttp_servers: [{ url: 'https://c.example.com/mcp', api_key: `${MARK}c2` }],
      },
    });
    const config = (await stored()).mcp_config;
    expect(config.sse_servers).toEqual([
      { url: 'https://a.example.com/sse', api_key: null },
      { url: 'https://new.example.com/sse', api_key: null },
    ]);
    expect(config.shttp_servers).toEqual([{ url: 'https://c.example.com/mcp', api_key: `${MARK}c2`, timeout: 60 }]);

    // Absent mcp_config keeps it; an empty one clears the lists.
    await store({ language: 'en' });
    expect((await stored()).mcp_config.shttp_servers).toHaveLength(1);
    await store({ mcp_config: {} });
    expect((await load()).mcp_config).toEqual({ sse_servers: [], stdio_servers: [], shttp_servers: [] });
  });
});

describe('secrets never leave the server', () => {
  it('not in validation errors that quote the body, nor in conversation or sandbox responses, nor in logs', async () => {
    // A refused body that carries secrets next to the bad field.
    const refused = await h.call('POST', '/api/settings', {
      body: {
        llm_api_key: `${MARK}refused`,
        max_iterations: 'x',
        secrets_store: { custom_secrets: { 'bad name': { secret: `${MARK}refused2` } } },
      },
    });
    expect(refused.status).toBe(422);
    // A secret that is itself invalid (too long) is not echoed either.
    const tooLong = await h.call('POST', '/api/settings', { body: { llm_api_key: `${MARK}${'x'.repeat(20_000)}` } });
    expect(tooLong.status).toBe(422);

    await store({
      llm_model: 'anthropic/claude-sonnet-4',
      llm_api_key: `${MARK}llm`,
      search_api_key: `${MARK}search`,
      sandbox_api_key: `${MARK}sandbox`,
      secrets_store: {
        provider_tokens: { github: { token: `${MARK}gh` } },
        custom_secrets: { CUSTOM: { secret: `${MARK}custom` } },
      },
      mcp_config: { sse_servers: [{ url: 'https://m.example.com', api_key: `${MARK}mcp` }] },
    });
    const created = await h.call('POST', '/api/conversations', {
      body: {
        initial_user_msg: 'hello',
        mcp_config: { shttp_servers: [{ url: 'https://x.example.com', api_key: `${MARK}conv-mcp` }] },
      },
    });
    expect(created.status).toBe(200);
    const task = await h.call('POST', '/api/v1/app-conversations', {
      body: { initial_message: { content: [{ type: 'text', text: 'hi' }] } },
    });
    expect(task.status).toBe(200);
    await h.idle();
    const id = obj(created.body).conversation_id as string;
    for (const path of [
      '/api/settings',
      '/api/conversations',
      `/api/conversations/${id}`,
      '/api/v1/app-conversations/search',
      `/api/v1/app-conversations?ids=${id}`,
      '/api/v1/app-conversations/start-tasks/search',
      '/api/v1/sandboxes/search',
    ]) {
      const r = await h.call('GET', path);
      expect(r.status, path).toBe(200);
    }
    expect(h.responses.length).toBeGreaterThan(10);
    expect(h.logger.lines.length).toBeGreaterThan(10);
    // afterEach scans all of the above for the marker.
  });
});

describe('the operator’s limits on settings', () => {
  it('applies a resource factor, condenser size, iterations and budget at most the caps, and shows what is applied', async () => {
    await h.close();
    h = await startHarness({
      service: { userSettingLimits: { maxCondenserSize: 200, maxIterations: 50, maxBudgetPerTask: 5 } },
    });
    const stored = await h.call('POST', '/api/settings', {
      body: { remote_runtime_resource_factor: 64, condenser_max_size: 100_000, max_iterations: 100_000 },
    });
    expect(stored.status).toBe(200);
    expect(obj((await h.call('GET', '/api/settings')).body)).toMatchObject({
      remote_runtime_resource_factor: 1,
      condenser_max_size: 200,
      max_iterations: 50,
      max_budget_per_task: 5,
    });
    // Below the caps a value is applied as sent.
    await h.call('POST', '/api/settings', { body: { condenser_max_size: 80, max_budget_per_task: 2 } });
    expect(obj((await h.call('GET', '/api/settings')).body)).toMatchObject({
      condenser_max_size: 80,
      max_budget_per_task: 2,
    });
  });

  it('refuses an image the operator does not allow with 400 SANDBOX_IMAGE_NOT_ALLOWED, storing nothing of the body', async () => {
    await h.close();
    h = await startHarness({
      service: { sandboxImages: { allowed: ['ghcr.io/acme/*'], listName: 'ACS_ALLOWED_IMAGES' } },
    });
    const refused = await h.call('POST', '/api/settings', {
      body: { language: 'de', sandbox_base_container_image: 'registry.internal/ops:1' },
    });
    expect(refused.status).toBe(400);
    expect(errorCode(refused.body)).toBe('SANDBOX_IMAGE_NOT_ALLOWED');
    expect(refused.text).toContain('ACS_ALLOWED_IMAGES');
    expect((await h.call('GET', '/api/settings')).status).toBe(404);
    const v1 = await h.call('POST', '/api/v1/settings', { body: { sandbox_base_container_image: 'evil:latest' } });
    expect(v1.status, v1.text).toBe(400);
    for (const allowed of ['ghcr.io/acme/dev:2', 'acs-sandbox:bookworm'])
      expect((await h.call('POST', '/api/settings', { body: { sandbox_base_container_image: allowed } })).status).toBe(
        200,
      );
  });
});
