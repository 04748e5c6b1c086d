import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';

const base = { ACS_STORAGE: 'memory', ACS_SANDBOXES: 'fake' };

describe('the example server configuration', () => {
  it('reads lists, keys, specs and switches from the environment (blank counts as unset)', () => {
    const config = loadConfig({
      ...base,
      SESSION_API_KEY: 'default-key-0123456789',
      ACS_API_KEYS: ' alice:alice-key-0123456789 , bob:bob-key-0123456789 ',
      ACS_MODELS: 'a/one, b/two,,',
      ACS_GIT_ALLOWED_HOSTS: 'GitHub.com, git.example',
      ACS_TRUST_PROXY: '1',
      ACS_SANDBOX_SPECS: JSON.stringify([{ id: 'mine', image: 'acs-sandbox:bookworm', working_dir: '/workspace' }]),
      ACS_SANDBOX_POOL: 'mine=2',
      ACS_SECRET_KEY: '',
    });
    expect(config.apiKeys).toEqual({
      'default-key-0123456789': 'default',
      'alice-key-0123456789': 'alice',
      'bob-key-0123456789': 'bob',
    });
    expect(config.generateDefaultKey).toBe(false);
    expect(config.extraModels).toEqual(['a/one', 'b/two']);
    expect(config.git.allowedHosts).toEqual(['github.com', 'git.example']);
    expect(config.trustProxy).toBe(true);
    expect(config.sandboxes.specs.map((s) => s.id)).toEqual(['mine']);
    expect(config.sandboxes.pool).toEqual({ mine: 2 });
    expect(config.sandboxes.runtime.name).toBe('fake');
    expect(config.secretKey).toBeNull();
    expect(config.storage).toEqual({ kind: 'memory' });
  });

  it('refuses a mistake with the variable and what is wrong', () => {
    const refused = (env: Record<string, string>, message: RegExp) =>
      expect(() => loadConfig({ ...base, ...env })).toThrow(message);
    refused({ PORT: 'eighty' }, /Invalid configuration: PORT/);
    refused({ ACS_API_KEYS: 'no-colon-here' }, /ACS_API_KEYS must be comma-separated user:key pairs/);
    refused(
      { SESSION_API_KEY: 'shared-key-0123456789', ACS_API_KEYS: 'alice:shared-key-0123456789' },
      /the same key is given to two users/,
    );
    refused({ ACS_SANDBOX_SPECS: '[{' }, /ACS_SANDBOX_SPECS must be a JSON array/);
    refused({ ACS_SANDBOX_SPECS: '[]' }, /ACS_SANDBOX_SPECS: /);
    refused({ ACS_STANDALONE_SANDBOX_SPEC: 'nowhere' }, /ACS_STANDALONE_SANDBOX_SPEC: no spec "nowhere"/);
    refused({ ACS_STORAGE: 'postgres' }, /ACS_STORAGE=postgres needs DATABASE_URL/);
    refused({ ACS_SQLITE_SYNCHRONOUS: 'off' }, /Invalid configuration: ACS_SQLITE_SYNCHRONOUS/);
  });

  it('caps what users’ settings may scale, by default and as the operator says, and reads the image allow-list', () => {
    expect(loadConfig(base).userLimits).toEqual({
      maxResourceFactor: 1,
      maxCondenserSize: 1000,
      maxIterations: 500,
      maxBudgetPerTask: null,
      allowedImages: [],
    });
    const set = loadConfig({
      ...base,
      ACS_MAX_ITERATIONS: '900',
      ACS_MAX_RESOURCE_FACTOR: '4',
      ACS_MAX_BUDGET_PER_TASK: '2.5',
      ACS_ALLOWED_IMAGES: 'ghcr.io/acme/*, python:3.12',
    }).userLimits;
    expect(set).toMatchObject({ maxResourceFactor: 4, maxIterations: 900, maxBudgetPerTask: 2.5 });
    expect(set.allowedImages).toEqual(['ghcr.io/acme/*', 'python:3.12']);
    expect(loadConfig({ ...base, ACS_ALLOWED_IMAGES: '*' }).userLimits.allowedImages).toBeNull();
    expect(() => loadConfig({ ...base, ACS_MAX_RESOURCE_FACTOR: '65' })).toThrow(/ACS_MAX_RESOURCE_FACTOR/);
  });

  it('gives device sign-in keys 90 days by default, the days ACS_DEVICE_KEY_TTL_DAYS says, or no expiry with 0', () => {
    expect(loadConfig(base).deviceKeyTtlDays).toBe(90);
    expect(loadConfig({ ...base, ACS_DEVICE_KEY_TTL_DAYS: '7' }).deviceKeyTtlDays).toBe(7);
    expect(loadConfig({ ...base, ACS_DEVICE_KEY_TTL_DAYS: '0' }).deviceKeyTtlDays).toBeNull();
    for (const wrong of ['-1', '1.5', '3651', 'soon'])
      expect(() => loadConfig({ ...base, ACS_DEVICE_KEY_TTL_DAYS: wrong }), wrong).toThrow(
        /Invalid configuration: ACS_DEVICE_KEY_TTL_DAYS/,
      );
  });

  it('keeps SQLite commits through a crash by default, and fsyncs each one when told to', () => {
    expect(loadConfig({ ACS_SANDBOXES: 'fake' }).storage).toEqual({
      kind: 'sqlite',
      chosen: false,
      synchronous: 'normal',
    });
    expect(
      loadConfig({ ACS_SANDBOXES: 'fake', ACS_STORAGE: 'sqlite', ACS_SQLITE_SYNCHRONOUS: 'full' }).storage,
    ).toEqual({ kind: 'sqlite', chosen: true, synchronous: 'full' });
  });
});

describe('the outbound allow-lists', () => {
  it('read host and host:port entries in any case, as they are matched; unset or blank allows any host', () => {
    const config = loadConfig({
      ...base,
      ACS_LLM_ALLOWED_HOSTS: ' API.OpenAI.com , litellm.internal:4000,[::1]:11434 ',
      ACS_MCP_ALLOWED_HOSTS: 'mcp.example',
    });
    expect(config.llm.allowedHosts).toEqual(['api.openai.com', 'litellm.internal:4000', '[::1]:11434']);
    expect(config.llm.mcpAllowedHosts).toEqual(['mcp.example']);
    const open = loadConfig({ ...base, ACS_LLM_ALLOWED_HOSTS: '' });
    expect([open.llm.allowedHosts, open.llm.mcpAllowedHosts]).toEqual([null, null]);
  });

  it('refuse an entry that is not a host, and a list of none', () => {
    expect(() => loadConfig({ ...base, ACS_LLM_ALLOWED_HOSTS: 'api.openai.com, https://x.example/v1' })).toThrow(
      'Invalid configuration: ACS_LLM_ALLOWED_HOSTS: "https://x.example/v1" is not a host or host:port',
    );
    expect(() => loadConfig({ ...base, ACS_MCP_ALLOWED_HOSTS: ' , ' })).toThrow(
      'Invalid configuration: ACS_MCP_ALLOWED_HOSTS names no host; leave it unset to allow any',
    );
  });
});
