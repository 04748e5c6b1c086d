import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { arr, errorCode, KEY_A, KEY_B, obj, startHarness, type CallResult, type Harness } from './harness.js';
import { expectOpenHandsShape } from './openhands-shapes.js';

/**
 * `GET/POST /api/v1/settings` and the settings forms: OpenHands 1.11's shapes over the one
 * settings record V0's `/api/settings` reads and writes.
 */

let h: Harness;

beforeEach(async () => {
  h = await startHarness();
});

afterEach(async () => {
  await h.close();
});

const LLM_KEY = 'sk-v1-secret-llm-key-0123456789';
const SEARCH_KEY = 'tvly-v1-secret-search-key';
const MCP_KEY = 'mcp-v1-secret-bearer-token';

async function post(body: unknown, key: string = KEY_A): Promise<CallResult> {
  return h.call('POST', '/api/v1/settings', { key, body });
}

async function stored(body: unknown, key: string = KEY_A): Promise<void> {
  const r = await post(body, key);
  expect(r.status, r.text).toBe(200);
  expect(r.body).toEqual({ message: 'Settings stored' });
}

/** GET /api/v1/settings, checked against 1.11's GETSettingsModel (and its agent and conversation settings against theirs). */
async function v1(key: string = KEY_A): Promise<Record<string, unknown>> {
  const r = await h.call('GET', '/api/v1/settings', { key });
  expect(r.status, r.text).toBe(200);
  expectOpenHandsShape('GETSettingsModel', r.body);
  const body = obj(r.body);
  const agent = obj(body.agent_settings);
  if (obj(agent.llm).model !== null) expectOpenHandsShape('OpenHandsAgentSettings', agent);
  return body;
}

const llmOf = (settings: Record<string, unknown>) => obj(obj(settings.agent_settings).llm);
const conversationOf = (settings: Record<string, unknown>) => obj(settings.conversation_settings);

async function v0(key: string = KEY_A): Promise<Record<string, unknown>> {
  const r = await h.call('GET', '/api/settings', { key });
  expect(r.status, r.text).toBe(200);
  return obj(r.body);
}

async function expect422(r: CallResult, path?: string): Promise<void> {
  expect(r.status, r.text).toBe(422);
  expect(errorCode(r.body)).toBe('VALIDATION_FAILED');
  if (path !== undefined)
    expect(
      arr(obj(r.body).issues).map((i) => obj(i).path),
      r.text,
    ).toContain(path);
  await Promise.resolve();
}

describe('GET /api/v1/settings', () => {
  it('is 404 SETTINGS_NOT_FOUND until settings are stored, then the 1.11 shape with the key withheld', async () => {
    const none = await h.call('GET', '/api/v1/settings');
    expect(none.status).toBe(404);
    expect(errorCode(none.body)).toBe('SETTINGS_NOT_FOUND');

    await stored({
      language: 'en',
      agent_settings_diff: {
        llm: { model: 'openai/gpt-4o-mini', api_key: LLM_KEY, base_url: 'http://127.0.0.1:9/v1' },
      },
      conversation_settings_diff: { max_iterations: 50 },
    });
    const s = await v1();
    expect(s).toMatchObject({
      language: 'en',
      llm_api_key_set: true,
      search_api_key_set: false,
      provider_tokens_set: {},
      secrets_store: { provider_tokens: {} },
      llm_profiles: { profiles: {}, active: null },
      v1_enabled: true,
    });
    expect(obj(s.agent_settings)).toMatchObject({
      agent_kind: 'openhands',
      agent: 'CodeActAgent',
      condenser: { enabled: true, condenser_kind: 'llm_summarizing' },
    });
    expect(llmOf(s)).toEqual({
      model: 'openai/gpt-4o-mini',
      api_key: null,
      base_url: 'http://127.0.0.1:9/v1',
      stream: true,
      is_subscription: false,
    });
    expect(conversationOf(s)).toEqual({
      schema_version: 1,
      max_iterations: 50,
      confirmation_mode: false,
      security_analyzer: 'none',
    });
    for (const text of h.responses) expect(text).not.toContain(LLM_KEY);
  });

  it('shows the agent’s own limits where none are stored', async () => {
    await stored({ agent_settings_diff: { llm: { model: 'openai/gpt-4o' } } });
    const s = await v1();
    expect(conversationOf(s).max_iterations).toBe(h.service.agent.settingsDefaults.max_iterations);
    expect(obj(obj(s.agent_settings).condenser).max_size).toBe(h.service.agent.settingsDefaults.condenser_max_size);
  });

  it('keeps users apart', async () => {
    await stored({ agent_settings_diff: { llm: { model: 'openai/gpt-4o', api_key: LLM_KEY } } });
    const bob = await h.call('GET', '/api/v1/settings', { key: KEY_B });
    expect(bob.status).toBe(404);
    await stored({ language: 'de' }, KEY_B);
    expect(llmOf(await v1(KEY_B)).model).toBeNull();
    expect((await v1(KEY_B)).llm_api_key_set).toBe(false);
    expect(llmOf(await v1()).model).toBe('openai/gpt-4o');
  });
});

describe('POST /api/v1/settings: diffs are merge patches', () => {
  beforeEach(async () => {
    await stored({
      agent_settings_diff: {
        llm: { model: 'anthropic/claude-sonnet-4', api_key: LLM_KEY, base_url: 'https://llm.example.com/v1' },
        condenser: { enabled: true, max_size: 80 },
        mcp_config: {
          fetch: { command: 'uvx', args: ['mcp-server-fetch'], env: { LOG: 'debug' } },
          docs: { url: 'https://mcp.example.com/mcp', auth: MCP_KEY, timeout: 30 },
        },
      },
      conversation_settings_diff: { max_iterations: 40, confirmation_mode: true, security_analyzer: 'llm' },
      search_api_key: SEARCH_KEY,
      git_user_name: 'Alice',
    });
  });

  it('changes only what the diff names, in every nested object', async () => {
    await stored({
      agent_settings_diff: { llm: { model: 'openai/gpt-4o' } },
      conversation_settings_diff: { max_iterations: 7 },
    });
    const s = await v1();
    expect(llmOf(s)).toEqual({
      model: 'openai/gpt-4o',
      api_key: null,
      base_url: 'https://llm.example.com/v1',
      stream: true,
      is_subscription: false,
    });
    expect(s.llm_api_key_set).toBe(true);
    expect(conversationOf(s)).toEqual({
      schema_version: 1,
      max_iterations: 7,
      confirmation_mode: true,
      security_analyzer: 'llm',
    });
    expect(obj(obj(s.agent_settings).condenser)).toEqual({
      enabled: true,
      max_size: 80,
      condenser_kind: 'llm_summarizing',
    });
    expect(s).toMatchObject({ git_user_name: 'Alice', search_api_key_set: true });
    expect(Object.keys(obj(obj(s.agent_settings).mcp_config)).sort()).toEqual(['fetch', 'mcp.example.com']);
  });

  it('null puts a field back to unset: the key is removed, the condenser and limits go back to the defaults', async () => {
    await stored({
      agent_settings_diff: { llm: { api_key: null }, condenser: null },
      conversation_settings_diff: { max_iterations: null, security_analyzer: null },
    });
    const s = await v1();
    expect(s.llm_api_key_set).toBe(false);
    expect(llmOf(s).model).toBe('anthropic/claude-sonnet-4');
    expect(obj(obj(s.agent_settings).condenser)).toEqual({
      enabled: true,
      max_size: h.service.agent.settingsDefaults.condenser_max_size,
      condenser_kind: 'llm_summarizing',
    });
    expect(conversationOf(s)).toMatchObject({
      max_iterations: h.service.agent.settingsDefaults.max_iterations,
      confirmation_mode: true,
      security_analyzer: 'none',
    });
    // llm: null empties the whole model configuration.
    await stored({ agent_settings_diff: { llm: null } });
    expect(llmOf(await v1())).toEqual({
      model: null,
      api_key: null,
      base_url: null,
      stream: true,
      is_subscription: false,
    });
  });

  it('llm.stream is true unless turned off; it is V0’s llm_stream, and null puts it back to true', async () => {
    expect(llmOf(await v1()).stream).toBe(true);
    await stored({ agent_settings_diff: { llm: { stream: false } } });
    expect(llmOf(await v1())).toMatchObject({ stream: false, model: 'anthropic/claude-sonnet-4' });
    expect((await v0()).llm_stream).toBe(false);
    await stored({ agent_settings_diff: { llm: { model: 'openai/gpt-4o' } } });
    expect(llmOf(await v1()).stream).toBe(false);
    await stored({ agent_settings_diff: { llm: { stream: null } } });
    expect(llmOf(await v1()).stream).toBe(true);
    expect((await v0()).llm_stream).toBe(true);
    expect((await h.call('POST', '/api/settings', { body: { llm_stream: false } })).status).toBe(200);
    expect(llmOf(await v1()).stream).toBe(false);
    await expect422(await post({ agent_settings_diff: { llm: { stream: 'yes' } } }), 'agent_settings_diff.llm.stream');
  });

  it('"" removes the keys; a no_op condenser turns condensing off', async () => {
    await stored({
      agent_settings_diff: { llm: { api_key: '' }, condenser: { condenser_kind: 'no_op' } },
      search_api_key: '',
    });
    const s = await v1();
    expect(s).toMatchObject({ llm_api_key_set: false, search_api_key_set: false });
    expect(obj(obj(s.agent_settings).condenser).enabled).toBe(false);
    expect((await v0()).enable_default_condenser).toBe(false);
  });

  it('replaces mcp_config whole; a remote server sent without auth keeps the stored key of its URL', async () => {
    await stored({
      agent_settings_diff: {
        mcp_config: {
          'mcp.example.com': { url: 'https://mcp.example.com/mcp', transport: 'http', timeout: 30 },
          events: { url: 'https://sse.example.com/sse' },
        },
      },
    });
    const view = obj(obj((await v1()).agent_settings).mcp_config);
    expect(view).toEqual({
      'mcp.example.com': { url: 'https://mcp.example.com/mcp', transport: 'http', timeout: 30 },
      'sse.example.com': { url: 'https://sse.example.com/sse', transport: 'sse' },
    });
    const withSecrets = await h.service.settings.loadWithSecrets('alice');
    const mcp = withSecrets._unsafeUnwrap()!.mcp_config;
    expect(mcp.shttp_servers).toEqual([{ url: 'https://mcp.example.com/mcp', api_key: MCP_KEY, timeout: 30 }]);
    expect(mcp.sse_servers).toEqual([{ url: 'https://sse.example.com/sse', api_key: null }]);
    expect(mcp.stdio_servers).toEqual([]);
    for (const text of h.responses) expect(text).not.toContain(MCP_KEY);
  });

  it('takes the whole GET answer back as diffs and changes nothing, once the withheld keys (shown as null) are left out', async () => {
    const before = await v1();
    const { agent_settings, conversation_settings, search_api_key: _s, sandbox_api_key: _b, ...rest } = before;
    const { api_key: _k, ...llm } = llmOf(before);
    await stored({
      ...rest,
      agent_settings_diff: { ...obj(agent_settings), llm },
      conversation_settings_diff: conversation_settings,
    });
    expect(await v1()).toEqual(before);
    // As in 1.11, a null key in the answer sent back as is removes it.
    await stored({ search_api_key: null, agent_settings_diff: { llm: { api_key: null } } });
    expect(await v1()).toMatchObject({ search_api_key_set: false, llm_api_key_set: false });
  });

  it('ignores the 1.11 fields this service has no behaviour for, and unknown keys', async () => {
    await stored({
      git_full_clone: true,
      sandbox_grouping_strategy: 'ADD_TO_ANY',
      disabled_skills: ['x'],
      registered_marketplaces: [{ name: 'm', source: 'github:o/r' }],
      something_else: 1,
      agent_settings_diff: {
        enable_sub_agents: true,
        tools: [],
        llm: { temperature: 0.2, num_retries: 2 },
        condenser: { keep_first: 9 },
        verification: { critic_enabled: true },
      },
      user_version: 3,
    });
    const s = await v1();
    expect(s).toMatchObject({
      git_full_clone: false,
      sandbox_grouping_strategy: 'NO_GROUPING',
      disabled_skills: null,
      registered_marketplaces: [],
      user_version: 3,
    });
    expect(obj(s.agent_settings)).not.toHaveProperty('enable_sub_agents');
    expect(llmOf(s)).not.toHaveProperty('temperature');
  });

  it('refuses what cannot be stored or run here with 422, storing nothing', async () => {
    const before = await v1();
    await expect422(await post({ agent_settings: { llm: { model: 'x' } } }), 'agent_settings');
    await expect422(await post({ conversation_settings: {} }), 'conversation_settings');
    await expect422(await post({ agent_settings_diff: { agent_kind: 'acp' } }), 'agent_settings_diff.agent_kind');
    await expect422(
      await post({ agent_settings_diff: { condenser: { max_size: 10 } } }),
      'agent_settings_diff.condenser.max_size',
    );
    await expect422(
      await post({ agent_settings_diff: { llm: { base_url: 'ftp://x' } } }),
      'agent_settings_diff.llm.base_url',
    );
    await expect422(
      await post({ agent_settings_diff: { mcp_config: { x: { command: 'npx', cwd: '/tmp' } } } }),
      'agent_settings_diff.mcp_config.x.cwd',
    );
    await expect422(
      await post({ agent_settings_diff: { mcp_config: { x: { url: 'https://a.example.com', auth: 'oauth' } } } }),
      'agent_settings_diff.mcp_config.x.auth',
    );
    await expect422(await post({ agent_settings_diff: { mcp_config: { x: { url: 'gopher://a' } } } }));
    await expect422(
      await post({ agent_settings_diff: { mcp_config: { x: {} } } }),
      'agent_settings_diff.mcp_config.x.command',
    );
    await expect422(
      await post({ conversation_settings_diff: { security_analyzer: 'bogus' } }),
      'conversation_settings_diff.security_analyzer',
    );
    await expect422(
      await post({ conversation_settings_diff: { max_iterations: 0 } }),
      'conversation_settings_diff.max_iterations',
    );
    // 1.11 stores this and then cannot load its own settings again (its GET answers 500).
    await expect422(await post({ max_budget_per_task: 'abc' }), 'max_budget_per_task');
    await expect422(await post([1]));
    await expect422(await post({ agent_settings_diff: 'x' }), 'agent_settings_diff');
    expect(await v1()).toEqual(before);
  });
});

describe('one settings record for V0 and V1', () => {
  it('what V0 stores, V1 shows', async () => {
    const r = await h.call('POST', '/api/settings', {
      body: {
        llm_model: 'openai/gpt-4o',
        llm_api_key: LLM_KEY,
        llm_base_url: 'https://proxy.example.com/v1',
        agent: 'CodeActAgent',
        max_iterations: 33,
        confirmation_mode: true,
        security_analyzer: 'rules',
        enable_default_condenser: false,
        condenser_max_size: 60,
        mcp_config: {
          stdio_servers: [{ name: 'fetch', command: 'uvx', args: ['mcp-server-fetch'] }],
          shttp_servers: [{ url: 'https://mcp.example.com/mcp', api_key: MCP_KEY }],
        },
        git_user_name: 'Alice',
        git_user_email: 'alice@example.com',
        max_budget_per_task: 2.5,
        search_api_key: SEARCH_KEY,
        secrets_store: { provider_tokens: { github: { token: 'ghp_v0token', host: 'github.example.com' } } },
      },
    });
    expect(r.status, r.text).toBe(200);
    const s = await h.call('GET', '/api/v1/settings');
    // The security analyzer "rules" is this service's own (1.11 knows llm and none only), so this body is checked field by field.
    const body = obj(s.body);
    expect(llmOf(body)).toEqual({
      model: 'openai/gpt-4o',
      api_key: null,
      base_url: 'https://proxy.example.com/v1',
      stream: true,
      is_subscription: false,
    });
    expect(conversationOf(body)).toEqual({
      schema_version: 1,
      max_iterations: 33,
      confirmation_mode: true,
      security_analyzer: 'rules',
    });
    expect(obj(body.agent_settings)).toMatchObject({
      agent: 'CodeActAgent',
      condenser: { enabled: false, max_size: 60 },
      mcp_config: {
        fetch: { command: 'uvx', args: ['mcp-server-fetch'], env: {} },
        'mcp.example.com': { url: 'https://mcp.example.com/mcp', transport: 'http', timeout: 60 },
      },
    });
    expect(body).toMatchObject({
      git_user_name: 'Alice',
      git_user_email: 'alice@example.com',
      max_budget_per_task: 2.5,
      llm_api_key_set: true,
      search_api_key_set: true,
      provider_tokens_set: { github: 'github.example.com' },
    });
    for (const text of h.responses)
      for (const secret of [LLM_KEY, MCP_KEY, SEARCH_KEY, 'ghp_v0token']) expect(text).not.toContain(secret);
  });

  it('what V1 stores, V0 shows', async () => {
    await stored({
      agent_settings_diff: {
        agent: 'CodeActAgent',
        llm: { model: 'openai/gpt-4o', api_key: LLM_KEY, base_url: 'https://proxy.example.com/v1' },
        condenser: { enabled: false, max_size: 50 },
        mcp_config: {
          fetch: { command: 'uvx', args: ['mcp-server-fetch'] },
          live: { url: 'https://sse.example.com/sse', auth: MCP_KEY },
        },
      },
      conversation_settings_diff: { max_iterations: 12, confirmation_mode: true, security_analyzer: 'ensemble' },
      language: 'fr',
      git_user_email: 'alice@example.com',
      search_api_key: SEARCH_KEY,
      enable_sound_notifications: true,
    });
    const s = await v0();
    expect(s).toMatchObject({
      llm_model: 'openai/gpt-4o',
      llm_api_key: null,
      llm_api_key_set: true,
      llm_base_url: 'https://proxy.example.com/v1',
      agent: 'CodeActAgent',
      max_iterations: 12,
      confirmation_mode: true,
      security_analyzer: 'ensemble',
      enable_default_condenser: false,
      condenser_max_size: 50,
      language: 'fr',
      git_user_email: 'alice@example.com',
      search_api_key_set: true,
      enable_sound_notifications: true,
      mcp_config: {
        stdio_servers: [{ name: 'fetch', command: 'uvx', args: ['mcp-server-fetch'], env: {} }],
        sse_servers: [{ url: 'https://sse.example.com/sse', api_key: null }],
        shttp_servers: [],
      },
    });
    const secrets = (await h.service.settings.loadWithSecrets('alice'))._unsafeUnwrap()!;
    expect(secrets).toMatchObject({ llm_api_key: LLM_KEY, search_api_key: SEARCH_KEY });
    expect(secrets.mcp_config.sse_servers[0]?.api_key).toBe(MCP_KEY);
    // And the engine runs on it: a conversation starts with the V1 settings alone.
    expect((await h.call('POST', '/api/v1/app-conversations', { body: {} })).status).toBe(200);
    for (const text of h.responses)
      for (const secret of [LLM_KEY, MCP_KEY, SEARCH_KEY]) expect(text).not.toContain(secret);
  });
});

describe('the settings forms', () => {
  /** The keys 1.11's SettingsSchema has at each level (its exported examples). */
  async function expectSchemaFormat(path: string, example: string): Promise<Record<string, unknown>> {
    const { readFile } = await import('node:fs/promises');
    const theirs = JSON.parse(
      await readFile(new URL(`./openhands-1.11/schemas/${example}`, import.meta.url), 'utf8'),
    ) as Record<string, unknown>;
    const r = await h.call('GET', path);
    expect(r.status, r.text).toBe(200);
    const ours = obj(r.body);
    const firstSection = (s: Record<string, unknown>) => obj(arr(s.sections)[0]);
    const firstField = (s: Record<string, unknown>) => obj(arr(firstSection(s).fields)[0]);
    expect(Object.keys(ours).sort()).toEqual(Object.keys(theirs).sort());
    expect(ours.model_name).toBe(theirs.model_name);
    expect(Object.keys(firstSection(ours)).sort()).toEqual(Object.keys(firstSection(theirs)).sort());
    for (const section of arr(ours.sections).map(obj)) {
      for (const field of arr(section.fields).map(obj))
        expect(Object.keys(field).sort(), String(field.key)).toEqual(Object.keys(firstField(theirs)).sort());
    }
    return ours;
  }

  const fieldsOf = (schema: Record<string, unknown>) =>
    arr(schema.sections).flatMap((s) => arr(obj(s).fields).map(obj));

  it('agent-schema: 1.11’s format, listing what this service acts on; each key is taken by agent_settings_diff', async () => {
    const schema = await expectSchemaFormat('/api/v1/settings/agent-schema', 'AgentSettingsSchema.example.json');
    const fields = fieldsOf(schema);
    expect(fields.map((f) => f.key)).toEqual([
      'agent',
      'mcp_config',
      'llm.model',
      'llm.api_key',
      'llm.base_url',
      'llm.stream',
      'condenser.enabled',
      'condenser.max_size',
    ]);
    expect(fields.find((f) => f.key === 'llm.api_key')).toMatchObject({ secret: true });
    expect(fields.find((f) => f.key === 'condenser.max_size')).toMatchObject({
      default: h.service.agent.settingsDefaults.condenser_max_size,
      depends_on: ['condenser.enabled'],
    });
    // Setting every field by its key shows up in GET.
    const values: Record<string, unknown> = {
      agent: 'CodeActAgent',
      mcp_config: {},
      'llm.model': 'openai/gpt-4o',
      'llm.api_key': LLM_KEY,
      'llm.base_url': 'https://proxy.example.com/v1',
      'llm.stream': false,
      'condenser.enabled': false,
      'condenser.max_size': 90,
    };
    const diff: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(values)) {
      const [head, tail] = key.split('.') as [string, string | undefined];
      if (tail) diff[head] = { ...(diff[head] as Record<string, unknown> | undefined), [tail]: value };
      else diff[head] = value;
    }
    await stored({ agent_settings_diff: diff });
    const agent = obj((await v1()).agent_settings);
    expect(agent).toMatchObject({
      agent: 'CodeActAgent',
      mcp_config: {},
      llm: { model: 'openai/gpt-4o', base_url: 'https://proxy.example.com/v1', stream: false },
      condenser: { enabled: false, max_size: 90 },
    });
  });

  it('conversation-schema: 1.11’s format, with this service’s analyzers', async () => {
    const schema = await expectSchemaFormat(
      '/api/v1/settings/conversation-schema',
      'ConversationSettingsSchema.example.json',
    );
    const fields = fieldsOf(schema);
    expect(fields.map((f) => f.key)).toEqual(['max_iterations', 'confirmation_mode', 'security_analyzer']);
    expect(arr(fields[2]?.choices).map((c) => obj(c).value)).toEqual(['llm', 'rules', 'ensemble', 'none']);
    expect(fields[0]?.default).toBe(h.service.agent.settingsDefaults.max_iterations);
    for (const analyzer of ['llm', 'rules', 'ensemble', 'none']) {
      await stored({
        conversation_settings_diff: { security_analyzer: analyzer, max_iterations: 9, confirmation_mode: true },
      });
      expect(conversationOf(obj((await h.call('GET', '/api/v1/settings')).body))).toMatchObject({
        security_analyzer: analyzer,
        max_iterations: 9,
        confirmation_mode: true,
      });
    }
  });
});
