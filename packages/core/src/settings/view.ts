import { GIT_PROVIDERS, SETTINGS_FIELDS, type SettingsView, type StoredSettings } from './schema.js';

const isSet = (value: string | null) => value !== null && value.trim() !== '';

/** Load Settings: every field, secrets replaced by null and `_set` flags. */
export function toSettingsView(stored: StoredSettings): SettingsView {
  const providerTokens = GIT_PROVIDERS.flatMap((provider) => {
    const token = stored.secrets_store.provider_tokens[provider];
    return token && (isSet(token.token) || token.user_id !== null) ? [[provider, token] as const] : [];
  });
  const view: SettingsView = {
    ...orderedFields(stored),
    llm_api_key: null,
    search_api_key: null,
    sandbox_api_key: null,
    mcp_config: {
      sse_servers: stored.mcp_config.sse_servers.map((s) => ({ url: s.url, api_key: null })),
      shttp_servers: stored.mcp_config.shttp_servers.map((s) => ({ url: s.url, api_key: null, timeout: s.timeout })),
      stdio_servers: stored.mcp_config.stdio_servers.map((s) => ({ ...s, args: [...s.args], env: { ...s.env } })),
    },
    secrets_store: {
      provider_tokens: Object.fromEntries(providerTokens.map(([p, t]) => [p, { host: t.host, user_id: t.user_id }])),
      custom_secrets: Object.fromEntries(
        Object.entries(stored.secrets_store.custom_secrets).map(([name, s]) => [name, { description: s.description }]),
      ),
    },
    llm_api_key_set: isSet(stored.llm_api_key),
    search_api_key_set: isSet(stored.search_api_key),
    provider_tokens_set: Object.fromEntries(providerTokens.map(([p, t]) => [p, t.host])),
  };
  return view;
}

/** The fields in the spec's order, whatever order the store kept them in (jsonb reorders keys). */
function orderedFields(stored: StoredSettings): StoredSettings {
  return Object.fromEntries(SETTINGS_FIELDS.map((field) => [field, stored[field]])) as unknown as StoredSettings;
}
