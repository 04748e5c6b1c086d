import type { ConversationRecord, StartTaskRecord } from '../conversation/schema.js';
import type { SandboxRecord, SandboxSpec } from '../sandbox/schema.js';
import { applySettingsInput } from '../settings/merge.js';
import { defaultSettings, SettingsInputSchema, type StoredSettings } from '../settings/schema.js';

let counter = 0;
/** A fresh 32-hex id, unique within the process. */
export const fixtureId = (): string =>
  (++counter).toString(16).padStart(8, '0') + Math.random().toString(16).slice(2, 10).padEnd(8, '0') + '0'.repeat(16);

/** ISO timestamp `n` seconds after a fixed origin, for predictable ordering. */
export const at = (seconds: number): string => new Date(Date.UTC(2026, 0, 1) + seconds * 1000).toISOString();

export function specFixture(overrides: Partial<SandboxSpec> = {}): SandboxSpec {
  return {
    id: 'fixture-spec',
    image: 'acs-sandbox:bookworm',
    command: null,
    working_dir: '/workspace',
    initial_env: { LANG: 'C.UTF-8' },
    description: 'fixture',
    created_at: at(0),
    ...overrides,
  };
}

export function settingsFixture(overrides: Partial<StoredSettings> = {}): StoredSettings {
  return {
    ...defaultSettings(),
    llm_model: 'openai/gpt-4o',
    llm_api_key: 'sk-fixture-ключ-🔑',
    secrets_store: {
      provider_tokens: { github: { token: 'ghp_fixture', host: 'github.example.com', user_id: null } },
      custom_secrets: { API_TOKEN: { secret: 's3cr3t', description: 'fixture' } },
    },
    llm_profiles: {
      profiles: [
        {
          id: 'profile-fast',
          name: 'fast',
          model: 'openai/gpt-4o-mini',
          base_url: null,
          api_key: 'sk-profile-fixture-🔑',
        },
        {
          id: 'profile-local',
          name: 'local',
          model: 'ollama/qwen',
          base_url: 'http://127.0.0.1:11434/v1',
          api_key: null,
        },
      ],
      active: null,
    },
    ...overrides,
  };
}

export function conversationFixture(overrides: Partial<ConversationRecord> = {}): ConversationRecord {
  return {
    id: fixtureId(),
    user_id: 'alice',
    title: 'Conversation fixture',
    status: 'RUNNING',
    status_detail: null,
    execution_status: 'idle',
    sandbox_id: null,
    selected_repository: null,
    selected_branch: null,
    git_provider: null,
    trigger: 'gui',
    pr_number: [],
    llm_model: 'openai/gpt-4o',
    parent_conversation_id: null,
    launch: {
      initial_message: { role: 'user', content: [{ type: 'text', text: 'hello' }], run: true },
      conversation_instructions: null,
      mcp_config: null,
      suggested_task: null,
      create_microagent: null,
      replay_json: null,
      agent_type: 'default',
    },
    conversation_version: 'V1',
    created_at: at(0),
    updated_at: at(0),
    ...overrides,
  };
}

export function sandboxFixture(overrides: Partial<SandboxRecord> = {}): SandboxRecord {
  return {
    id: fixtureId(),
    user_id: 'alice',
    sandbox_spec_id: 'fixture-spec',
    spec: specFixture(),
    status: 'RUNNING',
    status_detail: null,
    exposed_urls: [{ name: 'WORKER_1', url: 'http://127.0.0.1:40001', port: 8011 }],
    created_at: at(0),
    updated_at: at(0),
    ...overrides,
  };
}

export function startTaskFixture(overrides: Partial<StartTaskRecord> = {}): StartTaskRecord {
  return {
    id: fixtureId(),
    user_id: 'alice',
    status: 'WORKING',
    detail: null,
    app_conversation_id: fixtureId(),
    sandbox_id: null,
    request: { initial_message: { role: 'user', content: [{ type: 'text', text: 'hi' }], run: false } },
    created_at: at(0),
    updated_at: at(0),
    ...overrides,
  };
}

/** A secret of each kind settings keep, by where it goes: the secrets-at-rest tests look for each in the stored bytes. */
export const EVERY_SECRET = {
  llm: 'sk-live-LLM-SECRET-1',
  search: 'tvly-SEARCH-SECRET-2',
  sandbox: 'SANDBOX-SECRET-3',
  github: 'ghp_GITHUB-SECRET-4',
  gitlab: 'glpat-GITLAB-SECRET-5',
  custom: 'CUSTOM-SECRET-6',
  mcp: 'MCP-SECRET-7',
  profile: 'sk-PROFILE-SECRET-8',
} as const;

/** Settings holding every secret of EVERY_SECRET: keys, provider tokens, a custom secret, an MCP key and an LLM profile's key. */
export function settingsWithEverySecret(): StoredSettings {
  const secrets = EVERY_SECRET;
  const settings = applySettingsInput(
    null,
    SettingsInputSchema.parse({
      llm_model: 'openai/gpt-4o',
      llm_api_key: secrets.llm,
      search_api_key: secrets.search,
      sandbox_api_key: secrets.sandbox,
      secrets_store: {
        provider_tokens: {
          github: { token: secrets.github },
          gitlab: { token: secrets.gitlab, host: 'gitlab.example.com' },
        },
        custom_secrets: { DEPLOY_TOKEN: { secret: secrets.custom, description: 'deploys' } },
      },
      mcp_config: { shttp_servers: [{ url: 'https://mcp.example.com/mcp', api_key: secrets.mcp }] },
    }),
  );
  return {
    ...settings,
    llm_profiles: {
      profiles: [
        { id: 'p-1', name: 'fast', model: 'openai/gpt-4o-mini', base_url: null, api_key: secrets.profile },
        { id: 'p-2', name: 'keyless', model: 'ollama/qwen', base_url: 'http://127.0.0.1:11434/v1', api_key: null },
      ],
      active: null,
    },
  };
}
