import { err, ok, type Result } from 'neverthrow';
import { cloneData } from '../clone.js';
import type { StoredSettings } from '../settings/schema.js';
import type { SecretCipher } from './cipher.js';

/**
 * Settings as a storage adapter keeps them: every secret value sealed by the SecretCipher, bound to
 * its user and its place in the record. One format for every adapter (PostgreSQL, PGlite, SQLite),
 * so sealed records can be copied from one database to another as they are.
 */

/** Each secret's place in the settings record; the path is bound to the ciphertext with the user id. */
type SecretSlot = {
  path: string;
  get: (s: StoredSettings) => string | null;
  set: (s: StoredSettings, value: string) => void;
};

function secretSlots(settings: StoredSettings): SecretSlot[] {
  const slots: SecretSlot[] = [
    { path: 'llm_api_key', get: (s) => s.llm_api_key, set: (s, v) => (s.llm_api_key = v) },
    { path: 'search_api_key', get: (s) => s.search_api_key, set: (s, v) => (s.search_api_key = v) },
    { path: 'sandbox_api_key', get: (s) => s.sandbox_api_key, set: (s, v) => (s.sandbox_api_key = v) },
  ];
  for (const provider of Object.keys(
    settings.secrets_store.provider_tokens,
  ) as (keyof StoredSettings['secrets_store']['provider_tokens'])[]) {
    slots.push({
      path: `secrets_store.provider_tokens.${provider}.token`,
      get: (s) => s.secrets_store.provider_tokens[provider]?.token ?? null,
      set: (s, v) => ((s.secrets_store.provider_tokens[provider] as { token: string | null }).token = v),
    });
  }
  for (const name of Object.keys(settings.secrets_store.custom_secrets)) {
    slots.push({
      path: `secrets_store.custom_secrets.${name}.secret`,
      get: (s) => s.secrets_store.custom_secrets[name]?.secret ?? null,
      set: (s, v) => ((s.secrets_store.custom_secrets[name] as { secret: string }).secret = v),
    });
  }
  // Settings stored before profiles existed have none.
  for (const profile of settings.llm_profiles?.profiles ?? []) {
    slots.push({
      path: `llm_profiles.${profile.id}.api_key`,
      get: (s) => s.llm_profiles.profiles.find((p) => p.id === profile.id)?.api_key ?? null,
      set: (s, v) =>
        ((s.llm_profiles.profiles.find((p) => p.id === profile.id) as { api_key: string | null }).api_key = v),
    });
  }
  for (const list of ['sse_servers', 'shttp_servers'] as const) {
    settings.mcp_config[list].forEach((_, i) =>
      slots.push({
        path: `mcp_config.${list}.${i}.api_key`,
        get: (s) => s.mcp_config[list][i]?.api_key ?? null,
        set: (s, v) => ((s.mcp_config[list][i] as { api_key: string | null }).api_key = v),
      }),
    );
  }
  return slots;
}

const contextOf = (userId: string, path: string) => `acs:settings:${userId}:${path}`;

/** The record as stored: every secret value replaced by its envelope. Also returns the key ids used. */
export function sealSettings(
  settings: StoredSettings,
  userId: string,
  cipher: SecretCipher,
): { data: StoredSettings; keyIds: string[] } {
  const data = cloneData(settings);
  let used = false;
  for (const slot of secretSlots(data)) {
    const value = slot.get(data);
    if (value === null) continue;
    slot.set(data, cipher.encrypt(value, contextOf(userId, slot.path)));
    used = true;
  }
  return { data, keyIds: used ? [cipher.currentKeyId] : [] };
}

/** The record with its secrets decrypted, or an error naming the field that cannot be read. */
export function openSettings(
  data: StoredSettings,
  userId: string,
  cipher: SecretCipher,
): Result<StoredSettings, Error> {
  // Opened on every read of a user's settings (each agent step): the plain-data copy, not structuredClone.
  const settings = cloneData(data);
  for (const slot of secretSlots(settings)) {
    const envelope = slot.get(settings);
    if (envelope === null) continue;
    const opened = cipher.decrypt(envelope, contextOf(userId, slot.path));
    if (opened.isErr()) return err(new Error(`cannot decrypt ${slot.path} of user ${userId}: ${opened.error.message}`));
    slot.set(settings, opened.value);
  }
  return ok(settings);
}
