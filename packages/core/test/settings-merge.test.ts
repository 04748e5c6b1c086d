import { describe, expect, it } from 'vitest';
import { createMemoryPorts } from '@acs/testing';
import { applySettingsInput, createAgentConversationService } from '../src/index.js';
import { toSettingsView } from '../src/settings/view.js';
import {
  defaultSettings,
  SETTINGS_FIELDS,
  SettingsInputSchema,
  SettingsViewSchema,
  type SettingsInput,
  type StoredSettings,
} from '../src/schemas.js';
import { deepFreeze, issuePaths, parseOk } from './helpers.js';
import { createAgent } from '@acs/agent';

/** Stored settings with a non-default value in every field, so "kept" and "reset" can be told apart. */
function storedSettings(): StoredSettings {
  return {
    language: 'fr',
    agent: 'CodeActAgent',
    max_iterations: 50,
    security_analyzer: 'llm',
    confirmation_mode: true,
    llm_model: 'anthropic/claude-sonnet',
    llm_api_key: 'sk-stored-llm-key',
    llm_base_url: 'https://llm.example.com/v1',
    llm_stream: false,
    remote_runtime_resource_factor: 2,
    secrets_store: {
      provider_tokens: {
        github: { token: 'ghp_storedGithubToken', host: null, user_id: null },
        gitlab: { token: 'glpat-storedGitlabToken', host: 'gitlab.example.com', user_id: 'u-7' },
      },
      custom_secrets: {
        DB_PASSWORD: { secret: 'hunter2-stored-db', description: 'database' },
        NPM_TOKEN: { secret: 'npm-stored-secret', description: null },
      },
    },
    enable_default_condenser: false,
    condenser_max_size: 60,
    enable_sound_notifications: true,
    enable_proactive_conversation_starters: false,
    enable_solvability_analysis: false,
    user_consents_to_analytics: true,
    sandbox_base_container_image: 'python:3.12',
    sandbox_runtime_container_image: 'runtime:1',
    mcp_config: {
      sse_servers: [{ url: 'https://sse.example.com/sse', api_key: 'sse-stored-key' }],
      stdio_servers: [{ name: 'fetch', command: 'uvx', args: ['mcp-server-fetch'], env: { LOG: 'debug' } }],
      shttp_servers: [{ url: 'https://mcp.example.com/mcp', api_key: 'shttp-stored-key', timeout: 30 }],
    },
    search_api_key: 'tvly-stored-search-key',
    sandbox_api_key: 'sandbox-stored-key',
    max_budget_per_task: 5,
    email: 'alice@example.com',
    email_verified: true,
    git_user_name: 'Alice',
    git_user_email: 'alice@example.com',
    llm_profiles: {
      profiles: [
        { id: 'p1', name: 'fast', model: 'openai/gpt-4o-mini', base_url: null, api_key: 'sk-stored-profile-key' },
      ],
      active: null,
    },
    user_version: 3,
  };
}

const SECRET_VALUES = [
  'sk-stored-llm-key',
  'ghp_storedGithubToken',
  'glpat-storedGitlabToken',
  'hunter2-stored-db',
  'npm-stored-secret',
  'sse-stored-key',
  'shttp-stored-key',
  'tvly-stored-search-key',
  'sandbox-stored-key',
  'sk-stored-profile-key',
];

const parse = (body: unknown): SettingsInput => parseOk(SettingsInputSchema, body);
const store = (current: StoredSettings | null, body: unknown): StoredSettings =>
  applySettingsInput(current, parse(body));

type NullRule = 'keep' | 'write' | 'reject';

interface FieldCase {
  field: Exclude<(typeof SETTINGS_FIELDS)[number], 'secrets_store' | 'mcp_config'>;
  /** A value different from the stored one, as sent. */
  sent: unknown;
  /** What it is stored as. */
  expected: unknown;
  onNull: NullRule;
}

const SCALAR_CASES: FieldCase[] = [
  { field: 'language', sent: 'de', expected: 'de', onNull: 'write' },
  { field: 'agent', sent: 'BrowsingAgent', expected: 'BrowsingAgent', onNull: 'write' },
  { field: 'max_iterations', sent: 120, expected: 120, onNull: 'write' },
  { field: 'security_analyzer', sent: 'rules', expected: 'rules', onNull: 'write' },
  { field: 'confirmation_mode', sent: false, expected: false, onNull: 'write' },
  { field: 'llm_model', sent: '  openai/gpt-4o  ', expected: 'openai/gpt-4o', onNull: 'keep' },
  { field: 'llm_api_key', sent: 'sk-new-key', expected: 'sk-new-key', onNull: 'keep' },
  { field: 'llm_base_url', sent: 'http://localhost:4000', expected: 'http://localhost:4000', onNull: 'keep' },
  { field: 'llm_stream', sent: true, expected: true, onNull: 'reject' },
  { field: 'remote_runtime_resource_factor', sent: 4, expected: 4, onNull: 'write' },
  { field: 'enable_default_condenser', sent: true, expected: true, onNull: 'reject' },
  { field: 'condenser_max_size', sent: 40, expected: 40, onNull: 'write' },
  { field: 'enable_sound_notifications', sent: false, expected: false, onNull: 'reject' },
  { field: 'enable_proactive_conversation_starters', sent: true, expected: true, onNull: 'reject' },
  { field: 'enable_solvability_analysis', sent: true, expected: true, onNull: 'reject' },
  { field: 'user_consents_to_analytics', sent: false, expected: false, onNull: 'write' },
  { field: 'sandbox_base_container_image', sent: ' node:22 ', expected: 'node:22', onNull: 'write' },
  { field: 'sandbox_runtime_container_image', sent: 'runtime:2', expected: 'runtime:2', onNull: 'write' },
  { field: 'search_api_key', sent: 'tvly-new', expected: 'tvly-new', onNull: 'keep' },
  { field: 'sandbox_api_key', sent: 'sandbox-new', expected: 'sandbox-new', onNull: 'keep' },
  { field: 'max_budget_per_task', sent: 0.25, expected: 0.25, onNull: 'write' },
  { field: 'email', sent: 'bob@example.com', expected: 'bob@example.com', onNull: 'write' },
  { field: 'email_verified', sent: false, expected: false, onNull: 'write' },
  { field: 'git_user_name', sent: 'Bob', expected: 'Bob', onNull: 'write' },
  { field: 'git_user_email', sent: 'bob@example.com', expected: 'bob@example.com', onNull: 'write' },
];

/** A body that changes every field, secrets_store and mcp_config included. */
function bodyChangingEverything(): Record<string, unknown> {
  const body: Record<string, unknown> = Object.fromEntries(SCALAR_CASES.map((c) => [c.field, c.sent]));
  body.secrets_store = {
    provider_tokens: { bitbucket: { token: 'bb-new' } },
    custom_secrets: { NEW_SECRET: { secret: 'new' } },
  };
  body.mcp_config = { sse_servers: ['https://other.example.com/sse'] };
  return body;
}

describe('settings field table', () => {
  it('covers all 27 Settings fields', () => {
    expect(SETTINGS_FIELDS).toHaveLength(27);
    expect([...SCALAR_CASES.map((c) => c.field), 'secrets_store', 'mcp_config'].sort()).toEqual(
      [...SETTINGS_FIELDS].sort(),
    );
  });
});

describe('applySettingsInput: field by field', () => {
  describe.each(SCALAR_CASES)('$field', ({ field, sent, expected, onNull }) => {
    it('is kept when absent, even when every other field changes', () => {
      const body = bodyChangingEverything();
      delete body[field];
      const before = storedSettings();
      const after = store(before, body);
      expect(after[field]).toEqual(before[field]);
      // and the body really did change the others
      const other = SCALAR_CASES.find((c) => c.field !== field);
      expect(other).toBeDefined();
      if (other) expect(after[other.field]).toEqual(other.expected);
    });

    it('is written when present, leaving every other field alone', () => {
      const before = storedSettings();
      expect(before[field]).not.toEqual(expected);
      expect(store(before, { [field]: sent })).toEqual({ ...storedSettings(), [field]: expected });
    });

    it('is written on top of defaults when nothing is stored yet', () => {
      expect(store(null, { [field]: sent })).toEqual({ ...defaultSettings(), [field]: expected });
    });

    if (onNull === 'keep') {
      it('keeps the stored value when sent as null', () => {
        expect(store(storedSettings(), { [field]: null })).toEqual(storedSettings());
      });
      it('is cleared (stored as null) when sent as ""', () => {
        expect(store(storedSettings(), { [field]: '' })).toEqual({ ...storedSettings(), [field]: null });
      });
    } else if (onNull === 'write') {
      it('is written as null when sent as null', () => {
        expect(store(storedSettings(), { [field]: null })).toEqual({ ...storedSettings(), [field]: null });
      });
    } else {
      it('rejects null, naming the field', () => {
        expect(issuePaths(SettingsInputSchema, { [field]: null })).toEqual([field]);
      });
    }
  });

  it('writes "" as "" for nullable text fields that are not keep-when-null', () => {
    const after = store(storedSettings(), { language: '', agent: '', email: '', git_user_name: '' });
    expect(after).toEqual({ ...storedSettings(), language: '', agent: '', email: '', git_user_name: '' });
  });

  it('clears llm_model when sent as whitespace only (trimmed to "")', () => {
    expect(store(storedSettings(), { llm_model: '   ' }).llm_model).toBeNull();
  });

  it('keeps secrets_store and mcp_config when absent', () => {
    const after = store(storedSettings(), { language: 'de' });
    expect(after.secrets_store).toEqual(storedSettings().secrets_store);
    expect(after.mcp_config).toEqual(storedSettings().mcp_config);
  });

  it('rejects null for the non-nullable objects secrets_store and mcp_config', () => {
    expect(issuePaths(SettingsInputSchema, { secrets_store: null })).toEqual(['secrets_store']);
    expect(issuePaths(SettingsInputSchema, { mcp_config: null })).toEqual(['mcp_config']);
  });

  it('an empty body changes nothing', () => {
    expect(store(storedSettings(), {})).toEqual(storedSettings());
  });
});

describe('applySettingsInput: defaults', () => {
  it('applies the documented defaults when nothing is stored and the body is empty', () => {
    const after = store(null, {});
    expect(after).toEqual(defaultSettings());
    expect(after.enable_default_condenser).toBe(true);
    expect(after.enable_sound_notifications).toBe(false);
    expect(after.enable_proactive_conversation_starters).toBe(true);
    expect(after.enable_solvability_analysis).toBe(true);
    expect(after.llm_stream).toBe(true);
    expect(after.llm_api_key).toBeNull();
    expect(after.max_iterations).toBeNull();
    expect(after.secrets_store).toEqual({ provider_tokens: {}, custom_secrets: {} });
    expect(after.mcp_config).toEqual({ sse_servers: [], stdio_servers: [], shttp_servers: [] });
  });
});

describe('SettingsInputSchema: unknown keys and value rules', () => {
  it('strips unknown keys, including the echoed view-only fields', () => {
    const input = parse({
      llm_model: 'm',
      llm_api_key_set: true,
      search_api_key_set: false,
      provider_tokens_set: { github: null },
      something_else: 'x',
    });
    expect(input).toEqual({ llm_model: 'm' });
    const after = applySettingsInput(storedSettings(), input);
    expect(Object.keys(after).sort()).toEqual([...SETTINGS_FIELDS, 'llm_profiles', 'user_version'].sort());
  });

  it.each([0, -1, 1.5, '10', 100_001])('rejects max_iterations %j', (value) => {
    expect(issuePaths(SettingsInputSchema, { max_iterations: value })).toEqual(['max_iterations']);
  });

  it('accepts max_iterations 1', () => {
    expect(parse({ max_iterations: 1 }).max_iterations).toBe(1);
  });

  it.each([0, -0.5, '3'])('rejects max_budget_per_task %j', (value) => {
    expect(issuePaths(SettingsInputSchema, { max_budget_per_task: value })).toEqual(['max_budget_per_task']);
  });

  it('accepts a small positive max_budget_per_task', () => {
    expect(parse({ max_budget_per_task: 0.01 }).max_budget_per_task).toBe(0.01);
  });

  it.each([
    'ftp://llm.example.com',
    'llm.example.com',
    'javascript:alert(1)',
    'file:///etc/passwd',
    'http://',
    'http:///v1',
    'http:llm.example.com',
    'not a url',
  ])('rejects llm_base_url %j', (value) => {
    expect(issuePaths(SettingsInputSchema, { llm_base_url: value })).toEqual(['llm_base_url']);
  });

  it.each([
    ['http://localhost:4000', 'http://localhost:4000'],
    ['https://api.example.com/v1', 'https://api.example.com/v1'],
    ['  https://api.example.com/v1  ', 'https://api.example.com/v1'],
    ['', ''],
  ])('accepts llm_base_url %j as %j', (value, parsed) => {
    expect(parse({ llm_base_url: value }).llm_base_url).toBe(parsed);
  });

  it.each(['enable_default_condenser', 'confirmation_mode', 'email_verified', 'llm_stream'])(
    'rejects a string for boolean %s',
    (field) => {
      expect(issuePaths(SettingsInputSchema, { [field]: 'true' })).toEqual([field]);
    },
  );
});

describe('applySettingsInput: secrets_store.provider_tokens', () => {
  const tokens = (body: unknown) =>
    store(storedSettings(), { secrets_store: { provider_tokens: body } }).secrets_store.provider_tokens;

  it('removes a provider whose entry is null and keeps the others', () => {
    expect(tokens({ github: null })).toEqual({
      gitlab: { token: 'glpat-storedGitlabToken', host: 'gitlab.example.com', user_id: 'u-7' },
    });
  });

  it('keeps the stored token when token is null, updating host', () => {
    expect(tokens({ github: { token: null, host: 'ghe.example.com' } }).github).toEqual({
      token: 'ghp_storedGithubToken',
      host: 'ghe.example.com',
      user_id: null,
    });
  });

  it('keeps the stored token and host when they are absent, updating user_id', () => {
    expect(tokens({ gitlab: { user_id: 'u-8' } }).gitlab).toEqual({
      token: 'glpat-storedGitlabToken',
      host: 'gitlab.example.com',
      user_id: 'u-8',
    });
  });

  it('clears the token with "" and keeps the entry while it still has a user_id', () => {
    expect(tokens({ gitlab: { token: '' } }).gitlab).toEqual({
      token: null,
      host: 'gitlab.example.com',
      user_id: 'u-7',
    });
  });

  it('drops an entry left with neither token nor user_id', () => {
    const after = tokens({ github: { token: '' }, gitlab: { token: '', user_id: null } });
    expect(after).toEqual({});
  });

  it('replaces a token and leaves other providers untouched', () => {
    expect(tokens({ github: { token: 'ghp_new' } })).toEqual({
      github: { token: 'ghp_new', host: null, user_id: null },
      gitlab: { token: 'glpat-storedGitlabToken', host: 'gitlab.example.com', user_id: 'u-7' },
    });
  });

  it('adds new providers, but not one with only a host', () => {
    const after = tokens({
      bitbucket: { token: 'bb-token', host: 'bitbucket.example.com' },
      enterprise_sso: { host: 'sso.example.com' },
    });
    expect(after.bitbucket).toEqual({ token: 'bb-token', host: 'bitbucket.example.com', user_id: null });
    expect(after).not.toHaveProperty('enterprise_sso');
    expect(Object.keys(after).sort()).toEqual(['bitbucket', 'github', 'gitlab']);
  });

  it('stores host "" as null', () => {
    expect(tokens({ gitlab: { host: '' } }).gitlab).toEqual({
      token: 'glpat-storedGitlabToken',
      host: null,
      user_id: 'u-7',
    });
  });

  it('keeps everything for an empty secrets_store or empty maps', () => {
    expect(store(storedSettings(), { secrets_store: {} }).secrets_store).toEqual(storedSettings().secrets_store);
    expect(
      store(storedSettings(), { secrets_store: { provider_tokens: {}, custom_secrets: {} } }).secrets_store,
    ).toEqual(storedSettings().secrets_store);
  });

  it('rejects an unknown provider', () => {
    expect(
      issuePaths(SettingsInputSchema, { secrets_store: { provider_tokens: { azure_devops: { token: 'x' } } } }),
    ).toEqual(['secrets_store.provider_tokens']);
  });
});

describe('applySettingsInput: secrets_store.custom_secrets', () => {
  const secrets = (body: unknown) =>
    store(storedSettings(), { secrets_store: { custom_secrets: body } }).secrets_store.custom_secrets;

  it('removes a secret sent as null', () => {
    expect(secrets({ DB_PASSWORD: null })).toEqual({ NPM_TOKEN: { secret: 'npm-stored-secret', description: null } });
  });

  it('removes a secret whose value is ""', () => {
    expect(secrets({ NPM_TOKEN: { secret: '' } })).toEqual({
      DB_PASSWORD: { secret: 'hunter2-stored-db', description: 'database' },
    });
  });

  it('updates a description alone and keeps the secret value', () => {
    expect(secrets({ DB_PASSWORD: { description: 'primary database' } }).DB_PASSWORD).toEqual({
      secret: 'hunter2-stored-db',
      description: 'primary database',
    });
    expect(secrets({ DB_PASSWORD: { secret: null, description: 'x' } }).DB_PASSWORD).toEqual({
      secret: 'hunter2-stored-db',
      description: 'x',
    });
  });

  it('clears a description sent as null and keeps the secret', () => {
    expect(secrets({ DB_PASSWORD: { description: null } }).DB_PASSWORD).toEqual({
      secret: 'hunter2-stored-db',
      description: null,
    });
  });

  it('replaces a value and keeps the description when it is absent', () => {
    expect(secrets({ DB_PASSWORD: { secret: 'new-db-pass' } }).DB_PASSWORD).toEqual({
      secret: 'new-db-pass',
      description: 'database',
    });
  });

  it('adds a new secret, but not a name sent with a description only', () => {
    const after = secrets({ API_TOKEN: { secret: 'tok', description: 'api' }, ORPHAN: { description: 'no value' } });
    expect(after.API_TOKEN).toEqual({ secret: 'tok', description: 'api' });
    expect(after).not.toHaveProperty('ORPHAN');
    expect(Object.keys(after).sort()).toEqual(['API_TOKEN', 'DB_PASSWORD', 'NPM_TOKEN']);
  });

  it.each(['BAD-NAME', '1ABC', 'HAS SPACE', '', 'a.b'])('rejects the secret name %j', (name) => {
    expect(issuePaths(SettingsInputSchema, { secrets_store: { custom_secrets: { [name]: { secret: 'x' } } } })).toEqual(
      [`secrets_store.custom_secrets.${name}`],
    );
  });

  it('rejects the secret name __proto__ (as JSON sends it) instead of silently dropping it', () => {
    const body = JSON.parse('{"secrets_store":{"custom_secrets":{"__proto__":{"secret":"x"}}}}') as unknown;
    expect(issuePaths(SettingsInputSchema, body)).toEqual(['secrets_store.custom_secrets.__proto__']);
  });

  it.each(['_X', 'a1', 'MY_SECRET_2'])('accepts the secret name %j', (name) => {
    expect(secrets({ [name]: { secret: 'v' } })[name]).toEqual({ secret: 'v', description: null });
  });
});

describe('applySettingsInput: mcp_config', () => {
  const mcp = (body: unknown) => store(storedSettings(), { mcp_config: body }).mcp_config;

  it('is replaced whole: lists not sent become empty', () => {
    expect(mcp({ sse_servers: [] })).toEqual({ sse_servers: [], stdio_servers: [], shttp_servers: [] });
    expect(mcp({})).toEqual({ sse_servers: [], stdio_servers: [], shttp_servers: [] });
  });

  it('keeps the stored api_key of a server with the same url when api_key is null', () => {
    expect(
      mcp({
        sse_servers: [{ url: 'https://sse.example.com/sse', api_key: null }],
        shttp_servers: [{ url: 'https://mcp.example.com/mcp', api_key: null, timeout: 90 }],
      }),
    ).toEqual({
      sse_servers: [{ url: 'https://sse.example.com/sse', api_key: 'sse-stored-key' }],
      stdio_servers: [],
      shttp_servers: [{ url: 'https://mcp.example.com/mcp', api_key: 'shttp-stored-key', timeout: 90 }],
    });
  });

  it('keeps the stored key when the server is echoed back exactly as Load Settings shows it', () => {
    const view = toSettingsView(storedSettings());
    expect(mcp(view.mcp_config)).toEqual(storedSettings().mcp_config);
  });

  it('clears the key with ""', () => {
    expect(
      mcp({
        sse_servers: [{ url: 'https://sse.example.com/sse', api_key: '' }],
        shttp_servers: [{ url: 'https://mcp.example.com/mcp', api_key: '' }],
      }),
    ).toEqual({
      sse_servers: [{ url: 'https://sse.example.com/sse', api_key: null }],
      stdio_servers: [],
      shttp_servers: [{ url: 'https://mcp.example.com/mcp', api_key: null, timeout: 60 }],
    });
  });

  it('writes a new key', () => {
    expect(mcp({ sse_servers: [{ url: 'https://sse.example.com/sse', api_key: 'sse-new' }] }).sse_servers).toEqual([
      { url: 'https://sse.example.com/sse', api_key: 'sse-new' },
    ]);
  });

  it('does not carry a key to a server with another url', () => {
    expect(mcp({ sse_servers: [{ url: 'https://other.example.com/sse', api_key: null }] }).sse_servers).toEqual([
      { url: 'https://other.example.com/sse', api_key: null },
    ]);
  });

  it('does not carry an sse key to an shttp server with the same url, nor the reverse', () => {
    expect(
      mcp({
        sse_servers: [{ url: 'https://mcp.example.com/mcp', api_key: null }],
        shttp_servers: [{ url: 'https://sse.example.com/sse', api_key: null }],
      }),
    ).toEqual({
      sse_servers: [{ url: 'https://mcp.example.com/mcp', api_key: null }],
      stdio_servers: [],
      shttp_servers: [{ url: 'https://sse.example.com/sse', api_key: null, timeout: 60 }],
    });
  });

  it('replaces stdio servers as sent', () => {
    expect(
      mcp({ stdio_servers: [{ name: 'git', command: 'uvx', args: 'mcp-server-git --repo .' }] }).stdio_servers,
    ).toEqual([{ name: 'git', command: 'uvx', args: ['mcp-server-git', '--repo', '.'], env: {} }]);
  });

  it('rejects an invalid mcp_config with the field path', () => {
    expect(issuePaths(SettingsInputSchema, { mcp_config: { sse_servers: ['ftp://x.example.com'] } })).toEqual([
      'mcp_config.sse_servers.0',
    ]);
  });
});

describe('applySettingsInput: no mutation', () => {
  it('mutates neither the stored object nor the input, and shares no objects with them', () => {
    const stored = deepFreeze(storedSettings());
    const input = deepFreeze(
      parse({
        ...bodyChangingEverything(),
        llm_api_key: null,
        secrets_store: {
          provider_tokens: { github: null, gitlab: { token: '' }, bitbucket: { token: 'bb' } },
          custom_secrets: { DB_PASSWORD: { description: 'd' }, NPM_TOKEN: null, NEW: { secret: 's' } },
        },
        mcp_config: {
          sse_servers: [{ url: 'https://sse.example.com/sse', api_key: null }],
          stdio_servers: [{ name: 'x', command: 'y', args: ['a'], env: { A: 'b' } }],
          shttp_servers: ['https://mcp.example.com/mcp'],
        },
      }),
    );
    const inputCopy = structuredClone(input);
    const after = applySettingsInput(stored, input);
    expect(stored).toEqual(storedSettings());
    expect(input).toEqual(inputCopy);

    // the result is a fresh graph: changing it touches neither argument
    expect(Object.isFrozen(after)).toBe(false);
    after.secrets_store.custom_secrets.DB_PASSWORD!.secret = 'changed';
    after.mcp_config.stdio_servers[0]!.args.push('more');
    after.mcp_config.stdio_servers[0]!.env.B = 'c';
    after.mcp_config.sse_servers[0]!.api_key = 'changed';
    expect(after.secrets_store.custom_secrets.DB_PASSWORD?.secret).toBe('changed');
    expect(stored).toEqual(storedSettings());
    expect(input).toEqual(inputCopy);
  });

  it('does not mutate defaults between calls', () => {
    const first = store(null, {
      secrets_store: { custom_secrets: { A: { secret: 'x' } } },
      mcp_config: { sse_servers: ['http://a.example.com'] },
    });
    expect(first.secrets_store.custom_secrets).toEqual({ A: { secret: 'x', description: null } });
    expect(defaultSettings().secrets_store.custom_secrets).toEqual({});
    expect(store(null, {}).mcp_config.sse_servers).toEqual([]);
  });
});

describe('toSettingsView', () => {
  it('shows every field with secrets nulled, _set flags and value-free secrets_store', () => {
    const view = toSettingsView(storedSettings());
    // The profiles and user_version are the V1 API's: Load Settings (V0) does not show them.
    const {
      secrets_store: _s,
      mcp_config: _m,
      llm_api_key: _k,
      search_api_key: _sk,
      sandbox_api_key: _sb,
      llm_profiles: _p,
      user_version: _v,
      ...plain
    } = storedSettings();
    expect(view).toEqual({
      ...plain,
      llm_api_key: null,
      search_api_key: null,
      sandbox_api_key: null,
      secrets_store: {
        provider_tokens: {
          github: { host: null, user_id: null },
          gitlab: { host: 'gitlab.example.com', user_id: 'u-7' },
        },
        custom_secrets: { DB_PASSWORD: { description: 'database' }, NPM_TOKEN: { description: null } },
      },
      mcp_config: {
        sse_servers: [{ url: 'https://sse.example.com/sse', api_key: null }],
        stdio_servers: [{ name: 'fetch', command: 'uvx', args: ['mcp-server-fetch'], env: { LOG: 'debug' } }],
        shttp_servers: [{ url: 'https://mcp.example.com/mcp', api_key: null, timeout: 30 }],
      },
      llm_api_key_set: true,
      search_api_key_set: true,
      provider_tokens_set: { github: null, gitlab: 'gitlab.example.com' },
    });
  });

  it('matches SettingsViewSchema exactly (no extra keys)', () => {
    const view = toSettingsView(storedSettings());
    expect(parseOk(SettingsViewSchema, view)).toEqual(view);
    expect(Object.keys(view).sort()).toEqual(
      [...SETTINGS_FIELDS, 'llm_api_key_set', 'search_api_key_set', 'provider_tokens_set'].sort(),
    );
  });

  it('never contains a secret value anywhere', () => {
    const json = JSON.stringify(toSettingsView(storedSettings()));
    for (const secret of SECRET_VALUES) expect(json).not.toContain(secret);
  });

  it('shows defaults for fresh settings', () => {
    const view = toSettingsView(defaultSettings());
    expect(view.llm_api_key_set).toBe(false);
    expect(view.search_api_key_set).toBe(false);
    expect(view.provider_tokens_set).toEqual({});
    expect(view.secrets_store).toEqual({ provider_tokens: {}, custom_secrets: {} });
    expect(view.enable_default_condenser).toBe(true);
    expect(view.enable_sound_notifications).toBe(false);
  });

  it('counts a whitespace-only or null key as not set', () => {
    const view = toSettingsView({ ...storedSettings(), llm_api_key: '   ', search_api_key: '\t\n' });
    expect(view.llm_api_key_set).toBe(false);
    expect(view.search_api_key_set).toBe(false);
    expect(toSettingsView({ ...storedSettings(), llm_api_key: null, search_api_key: '' })).toMatchObject({
      llm_api_key_set: false,
      search_api_key_set: false,
    });
  });

  it('lists a provider with a user_id but no token, and omits one with a blank token and no user_id', () => {
    const stored = storedSettings();
    stored.secrets_store.provider_tokens = {
      github: { token: '  ', host: 'github.example.com', user_id: null },
      bitbucket: { token: null, host: 'bb.example.com', user_id: 'u-1' },
      enterprise_sso: { token: 'sso-token', host: null, user_id: null },
    };
    const view = toSettingsView(stored);
    expect(view.provider_tokens_set).toEqual({ bitbucket: 'bb.example.com', enterprise_sso: null });
    expect(view.secrets_store.provider_tokens).toEqual({
      bitbucket: { host: 'bb.example.com', user_id: 'u-1' },
      enterprise_sso: { host: null, user_id: null },
    });
    expect(JSON.stringify(view)).not.toContain('sso-token');
  });

  it('does not mutate the stored object and shares no nested objects with it', () => {
    const stored = deepFreeze(storedSettings());
    const view = toSettingsView(stored);
    expect(stored).toEqual(storedSettings());
    view.mcp_config.stdio_servers[0]!.args.push('x');
    view.mcp_config.stdio_servers[0]!.env.X = 'y';
    expect(stored.mcp_config.stdio_servers[0]!.args).toEqual(['mcp-server-fetch']);
    expect(stored.mcp_config.stdio_servers[0]!.env).toEqual({ LOG: 'debug' });
  });
});

describe('settings stored before a field existed', () => {
  it('read and merge as that field’s default', async () => {
    const ports = createMemoryPorts();
    const store = ports.settings;
    const old = defaultSettings() as unknown as Record<string, unknown>;
    delete old.condenser_max_size;
    await store.update('alice', () => old as unknown as StoredSettings);
    const service = createAgentConversationService({ ...ports, agent: createAgent() }).settings;
    expect((await service.load('alice'))._unsafeUnwrap()).toHaveProperty('condenser_max_size', null);
    expect((await service.loadWithSecrets('alice'))._unsafeUnwrap()).toHaveProperty('condenser_max_size', null);
    await service.store('alice', { language: 'fr' });
    expect((await store.get('alice'))._unsafeUnwrap()).toHaveProperty('condenser_max_size', null);
  });

  it('read llm_stream as true (model calls stream) until it is turned off', async () => {
    const ports = createMemoryPorts();
    const old = defaultSettings() as unknown as Record<string, unknown>;
    delete old.llm_stream;
    await ports.settings.update('alice', () => old as unknown as StoredSettings);
    const service = createAgentConversationService({ ...ports, agent: createAgent() }).settings;
    expect((await service.load('alice'))._unsafeUnwrap()).toHaveProperty('llm_stream', true);
    expect((await service.loadWithSecrets('alice'))._unsafeUnwrap()).toHaveProperty('llm_stream', true);
    await service.store('alice', { llm_stream: false });
    expect((await service.load('alice'))._unsafeUnwrap()).toHaveProperty('llm_stream', false);
    await service.store('alice', { language: 'fr' });
    expect((await service.load('alice'))._unsafeUnwrap()).toHaveProperty('llm_stream', false);
  });
});
