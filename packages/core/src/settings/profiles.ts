import { err, ok, type Result } from 'neverthrow';
import type { DomainErrorOf } from '../errors.js';
import { MAX_LLM_PROFILES, type StoredLlmProfile, type StoredSettings } from './schema.js';
import { reconcileActiveProfile } from './merge.js';

/**
 * LLM profiles: named model configurations (model, base URL, key, streaming) kept in the user's settings.
 * Activating one makes it the settings' own model; a running conversation can be switched to
 * one (its next model calls use it). Pure functions over the stored settings; the settings
 * service runs them inside the store's atomic update.
 */

/** A model configuration to save under a name. */
export interface LlmProfileInput {
  model: string | null;
  base_url: string | null;
  /** Absent or null: when a profile of that name exists, its key stays. "" saves no key. */
  api_key?: string | null | undefined;
  /** Whether its calls stream; absent or null: they do (the default of `llm_stream`). */
  stream?: boolean | null | undefined;
}

export interface SaveProfileRequest {
  /** What to save; null saves the settings' own model, base URL, key and streaming. */
  llm: LlmProfileInput | null;
  /** False saves the profile without a key. */
  include_secrets: boolean;
  /** The stored profile of that name keeps its key (or its lack of one), whatever `llm` says: a client with no new key to give. */
  preserve_existing_api_key: boolean;
}

/** A profile as shown: never its key, only whether it has one. */
export interface LlmProfileView {
  name: string;
  model: string | null;
  base_url: string | null;
  api_key_set: boolean;
  stream: boolean;
}

export interface LlmProfilesView {
  profiles: LlmProfileView[];
  active: string | null;
}

const hasKey = (key: string | null) => key !== null && key.trim() !== '';
const orNull = (value: string | null | undefined) => (value === undefined || value === '' ? null : value);

export const profileView = (profile: StoredLlmProfile): LlmProfileView => ({
  name: profile.name,
  model: profile.model,
  base_url: profile.base_url,
  api_key_set: hasKey(profile.api_key),
  stream: profile.stream ?? true,
});

export function profilesView(settings: StoredSettings | null): LlmProfilesView {
  if (!settings) return { profiles: [], active: null };
  return { profiles: settings.llm_profiles.profiles.map(profileView), active: settings.llm_profiles.active };
}

export const findProfile = (settings: StoredSettings | null, name: string): StoredLlmProfile | undefined =>
  settings?.llm_profiles.profiles.find((p) => p.name === name);

/** The key a saved profile gets: see SaveProfileRequest and LlmProfileInput. */
function keyToSave(
  settings: StoredSettings,
  existing: StoredLlmProfile | undefined,
  request: SaveProfileRequest,
): string | null {
  if (!request.include_secrets) return null;
  if (request.preserve_existing_api_key && existing) return existing.api_key;
  if (!request.llm) return settings.llm_api_key;
  const given = request.llm.api_key;
  if (given === undefined || given === null) return existing?.api_key ?? null;
  return orNull(given);
}

/** Saves (or overwrites, in place) the profile `name`; ProfileLimitReached for one more than allowed. */
export function saveProfile(
  settings: StoredSettings,
  name: string,
  request: SaveProfileRequest,
  newId: () => string,
): Result<StoredSettings, DomainErrorOf<'ProfileLimitReached'>> {
  const profiles = settings.llm_profiles.profiles;
  const existing = profiles.find((p) => p.name === name);
  if (!existing && profiles.length >= MAX_LLM_PROFILES)
    return err({ type: 'ProfileLimitReached', limit: MAX_LLM_PROFILES });
  const source = request.llm ?? { model: settings.llm_model, base_url: settings.llm_base_url };
  const saved: StoredLlmProfile = {
    id: existing?.id ?? newId(),
    name,
    model: orNull(source.model),
    base_url: orNull(source.base_url),
    api_key: keyToSave(settings, existing, request),
    stream: request.llm ? (request.llm.stream ?? true) : settings.llm_stream,
  };
  const next = existing ? profiles.map((p) => (p.name === name ? saved : p)) : [...profiles, saved];
  return ok(reconcileActiveProfile({ ...settings, llm_profiles: { ...settings.llm_profiles, profiles: next } }));
}

/** Makes the profile the settings' own model, base URL, key and streaming, and the active one. */
export function activateProfile(
  settings: StoredSettings,
  name: string,
): Result<StoredSettings, DomainErrorOf<'ProfileNotFound'>> {
  const profile = findProfile(settings, name);
  if (!profile) return err({ type: 'ProfileNotFound', name });
  return ok({
    ...settings,
    llm_model: profile.model,
    llm_base_url: profile.base_url,
    llm_api_key: profile.api_key,
    llm_stream: profile.stream ?? true,
    llm_profiles: { ...settings.llm_profiles, active: name },
  });
}

/**
 * Deletes the profile (nothing happens when there is none). When it was the active one and
 * others remain, the first of them is activated, so the user is not left without one.
 */
export function deleteProfile(settings: StoredSettings, name: string): StoredSettings {
  if (!findProfile(settings, name)) return settings;
  const remaining = settings.llm_profiles.profiles.filter((p) => p.name !== name);
  const wasActive = settings.llm_profiles.active === name;
  const next: StoredSettings = {
    ...settings,
    llm_profiles: { profiles: remaining, active: wasActive ? null : settings.llm_profiles.active },
  };
  const first = remaining[0];
  return wasActive && first ? activateProfile(next, first.name).unwrapOr(next) : next;
}

/** Renames a profile in place; it keeps its id, key and active flag. */
export function renameProfile(
  settings: StoredSettings,
  from: string,
  to: string,
): Result<StoredSettings, DomainErrorOf<'ProfileNotFound' | 'ProfileNameTaken'>> {
  if (!findProfile(settings, from)) return err({ type: 'ProfileNotFound', name: from });
  if (from === to) return ok(settings);
  if (findProfile(settings, to)) return err({ type: 'ProfileNameTaken', name: to });
  const { profiles, active } = settings.llm_profiles;
  return ok({
    ...settings,
    llm_profiles: {
      profiles: profiles.map((p) => (p.name === from ? { ...p, name: to } : p)),
      active: active === from ? to : active,
    },
  });
}
