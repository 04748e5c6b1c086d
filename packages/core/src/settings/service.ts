import { errAsync, okAsync, type ResultAsync } from 'neverthrow';
import type { DomainError } from '../errors.js';
import { applySettingsInput } from './merge.js';
import { defaultSettings, type SettingsInput, type SettingsView, type StoredSettings } from './schema.js';
import type { SettingsStore } from './store.js';
import { toSettingsView } from './view.js';

export interface SettingsService {
  /** Load Settings: the view with defaults applied; SettingsNotFound until something was stored. */
  load(userId: string): ResultAsync<SettingsView, DomainError>;
  /** Store Settings: merges the body into what is stored (see applySettingsInput). */
  store(userId: string, input: SettingsInput): ResultAsync<void, DomainError>;
  /** The stored settings with secret values, for the engine; null when none. */
  loadWithSecrets(userId: string): ResultAsync<StoredSettings | null, DomainError>;
}

/** Settings stored before a field existed read as that field's default. */
const withDefaults = (stored: StoredSettings | null): StoredSettings | null => (stored ? { ...defaultSettings(), ...stored } : null);

export function createSettingsService(store: SettingsStore): SettingsService {
  return {
    load: (userId) =>
      store
        .get(userId)
        .map(withDefaults)
        .andThen((stored) => (stored ? okAsync(toSettingsView(stored)) : errAsync<SettingsView, DomainError>({ type: 'SettingsNotFound' }))),
    store: (userId, input) => store.update(userId, (current) => applySettingsInput(withDefaults(current), input)).map(() => undefined),
    loadWithSecrets: (userId) => store.get(userId).map(withDefaults),
  };
}
