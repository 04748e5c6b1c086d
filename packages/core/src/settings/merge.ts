import type { McpConfig } from '../mcp/schema.js';
import {
  defaultSettings,
  GIT_PROVIDERS,
  SETTINGS_FIELDS,
  type SettingsInput,
  type StoredSettings,
  type StoredUserSecrets,
} from './schema.js';

/** Fields where a null in the body means "unchanged" (existing clients send null for that). */
const KEEP_WHEN_NULL = new Set<keyof StoredSettings>([
  'llm_api_key',
  'search_api_key',
  'sandbox_api_key',
  'llm_model',
  'llm_base_url',
]);

/**
 * Applies a Store Settings body to what is stored. An absent field keeps its value,
 * a present one is written, except: for the keep-when-null fields null keeps the
 * stored value and "" clears it; `secrets_store` merges per entry; `mcp_config`
 * is replaced whole, but a server's api_key sent as null keeps the stored key of
 * the server with the same URL (Load Settings never returns those keys).
 */
export function applySettingsInput(current: StoredSettings | null, input: SettingsInput): StoredSettings {
  const next: StoredSettings = structuredClone(current ?? defaultSettings());
  const writable = next as unknown as Record<string, unknown>;
  for (const field of SETTINGS_FIELDS) {
    if (!Object.hasOwn(input, field)) continue;
    const value = (input as Record<string, unknown>)[field];
    if (value === undefined) continue;
    if (field === 'secrets_store') {
      next.secrets_store = mergeSecrets(next.secrets_store, input.secrets_store ?? {});
    } else if (field === 'mcp_config') {
      next.mcp_config = mergeMcpConfig(next.mcp_config, input.mcp_config as McpConfig);
    } else if (KEEP_WHEN_NULL.has(field)) {
      if (value === null) continue;
      writable[field] = value === '' ? null : value;
    } else {
      writable[field] = value;
    }
  }
  return next;
}

/**
 * What the V1 settings API changes: each field given is set as given (null clears it, and the
 * field then means what it means unset), except `mcp_config`, which replaces the servers as
 * Store Settings does: a server sent without its api_key (null) keeps the stored key of the
 * server with the same URL, since reads never return those keys; "" clears it.
 */
export type SettingsChange = Partial<Omit<StoredSettings, 'secrets_store' | 'llm_profiles'>>;

/** Applies a V1 settings change to what is stored (see SettingsChange). */
export function applySettingsChange(current: StoredSettings | null, change: SettingsChange): StoredSettings {
  const next: StoredSettings = structuredClone(current ?? defaultSettings());
  const { mcp_config: mcp, ...fields } = change;
  Object.assign(next, structuredClone(fields));
  if (mcp !== undefined) next.mcp_config = mergeMcpConfig(next.mcp_config, mcp);
  return next;
}

/**
 * The active profile stays active only while the settings' model, base URL, key and streaming
 * are the profile's: once they differ it no longer says what runs, and is cleared (as OpenHands does).
 */
export function reconcileActiveProfile(settings: StoredSettings): StoredSettings {
  const { active, profiles } = settings.llm_profiles;
  if (active === null) return settings;
  const profile = profiles.find((p) => p.name === active);
  const same =
    profile &&
    profile.model === settings.llm_model &&
    profile.base_url === settings.llm_base_url &&
    profile.api_key === settings.llm_api_key &&
    (profile.stream ?? true) === settings.llm_stream;
  return same ? settings : { ...settings, llm_profiles: { ...settings.llm_profiles, active: null } };
}

function mergeSecrets(
  stored: StoredUserSecrets,
  input: NonNullable<SettingsInput['secrets_store']>,
): StoredUserSecrets {
  const result: StoredUserSecrets = structuredClone(stored);
  for (const provider of GIT_PROVIDERS) {
    const entry = input.provider_tokens?.[provider];
    if (entry === undefined) continue;
    if (entry === null) {
      delete result.provider_tokens[provider];
      continue;
    }
    const before = result.provider_tokens[provider] ?? { token: null, host: null, user_id: null };
    const after = {
      token: entry.token === undefined || entry.token === null ? before.token : entry.token === '' ? null : entry.token,
      host: entry.host === undefined ? before.host : entry.host === '' ? null : entry.host,
      user_id: entry.user_id === undefined ? before.user_id : entry.user_id === '' ? null : entry.user_id,
    };
    if (after.token === null && after.user_id === null) delete result.provider_tokens[provider];
    else result.provider_tokens[provider] = after;
  }
  for (const [name, entry] of Object.entries(input.custom_secrets ?? {})) {
    if (entry === undefined) continue;
    if (entry === null) {
      delete result.custom_secrets[name];
      continue;
    }
    const before = result.custom_secrets[name];
    const secret =
      entry.secret === undefined || entry.secret === null
        ? (before?.secret ?? null)
        : entry.secret === ''
          ? null
          : entry.secret;
    const description = entry.description === undefined ? (before?.description ?? null) : entry.description;
    if (secret === null) delete result.custom_secrets[name];
    else result.custom_secrets[name] = { secret, description };
  }
  return result;
}

function mergeMcpConfig(stored: McpConfig, input: McpConfig): McpConfig {
  const keyFor = (list: readonly { url: string; api_key: string | null }[], url: string) =>
    list.find((s) => s.url === url)?.api_key ?? null;
  const resolveKey = (sent: string | null, storedKey: string | null) =>
    sent === null ? storedKey : sent === '' ? null : sent;
  return {
    sse_servers: input.sse_servers.map((s) => ({
      ...s,
      api_key: resolveKey(s.api_key, keyFor(stored.sse_servers, s.url)),
    })),
    shttp_servers: input.shttp_servers.map((s) => ({
      ...s,
      api_key: resolveKey(s.api_key, keyFor(stored.shttp_servers, s.url)),
    })),
    stdio_servers: input.stdio_servers.map((s) => ({ ...s, args: [...s.args], env: { ...s.env } })),
  };
}
