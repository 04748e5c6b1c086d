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
