import { errAsync, okAsync, type ResultAsync } from 'neverthrow';
import type { DomainErrorOf, DomainErrorType, ErrorsOf } from '../errors.js';
import type { StoreFailure } from '../store-failure.js';
import { applySettingsInput } from './merge.js';
import { defaultSettings, type SettingsInput, type SettingsView, type StoredSettings } from './schema.js';
import type { SettingsStore } from './store.js';
import { toSettingsView } from './view.js';

/** What each settings operation can fail with (the compiler holds the implementation to it). */
export const SettingsServiceErrors = {
  load: ['SettingsNotFound', 'StoreUnavailable'],
  store: ['StoreUnavailable'],
} as const satisfies Record<string, readonly DomainErrorType[]>;

export interface SettingsService {
  /** Load Settings: the view with defaults applied; SettingsNotFound until something was stored. */
  load(userId: string): ResultAsync<SettingsView, ErrorsOf<typeof SettingsServiceErrors.load>>;
  /** Store Settings: merges the body into what is stored (see applySettingsInput). */
  store(userId: string, input: SettingsInput): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.store>>;
  /** The stored settings with secret values, for the engine; null when none. */
  loadWithSecrets(userId: string): ResultAsync<StoredSettings | null, StoreFailure>;
}

/** Settings stored before a field existed read as that field's default. */
const withDefaults = (stored: StoredSettings | null): StoredSettings | null => (stored ? { ...defaultSettings(), ...stored } : null);

export function createSettingsService(store: SettingsStore): SettingsService {
  return {
    load: (userId) =>
      store
        .get(userId)
        .map(withDefaults)
        .andThen((stored) => (stored ? okAsync(toSettingsView(stored)) : errAsync<SettingsView, DomainErrorOf<'SettingsNotFound'>>({ type: 'SettingsNotFound' }))),
    store: (userId, input) => store.update(userId, (current) => applySettingsInput(withDefaults(current), input)).map(() => undefined),
    loadWithSecrets: (userId) => store.get(userId).map(withDefaults),
  };
}
