import { errAsync, okAsync, type ResultAsync } from 'neverthrow';
import type { DomainErrorOf, DomainErrorType, ErrorsOf } from '../errors.js';
import type { StoreFailure } from '../store-failure.js';
import { applySettingsInput } from './merge.js';
import {
  defaultSettings,
  type CustomSecretCreate,
  type CustomSecretInfo,
  type CustomSecretUpdate,
  type GitProvider,
  type ProviderTokensInput,
  type SettingsInput,
  type SettingsView,
  type StoredProviderToken,
  type StoredSettings,
} from './schema.js';
import type { SettingsStore } from './store.js';
import { toSettingsView } from './view.js';

/** What each settings operation can fail with (the compiler holds the implementation to it). */
export const SettingsServiceErrors = {
  load: ['SettingsNotFound', 'StoreUnavailable'],
  store: ['StoreUnavailable'],
  listSecrets: ['StoreUnavailable'],
  createSecret: ['SecretNameTaken', 'StoreUnavailable'],
  updateSecret: ['SecretNotFound', 'SecretNameTaken', 'StoreUnavailable'],
  deleteSecret: ['SecretNotFound', 'StoreUnavailable'],
  setProviderTokens: ['StoreUnavailable'],
  unsetProviderTokens: ['StoreUnavailable'],
} as const satisfies Record<string, readonly DomainErrorType[]>;

export interface SettingsService {
  /** Load Settings: the view with defaults applied; SettingsNotFound until something was stored. */
  load(userId: string): ResultAsync<SettingsView, ErrorsOf<typeof SettingsServiceErrors.load>>;
  /** Store Settings: merges the body into what is stored (see applySettingsInput). */
  store(userId: string, input: SettingsInput): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.store>>;
  /** The user's custom secrets: names and descriptions, never values. */
  listSecrets(userId: string): ResultAsync<CustomSecretInfo[], ErrorsOf<typeof SettingsServiceErrors.listSecrets>>;
  /** Adds a custom secret; SecretNameTaken when one has that name. */
  createSecret(userId: string, secret: CustomSecretCreate): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.createSecret>>;
  /** Renames a custom secret and/or changes its description; its value stays. */
  updateSecret(userId: string, name: string, change: CustomSecretUpdate): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.updateSecret>>;
  deleteSecret(userId: string, name: string): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.deleteSecret>>;
  /**
   * Replaces the git provider tokens with the ones given (a provider left out is dropped); a
   * provider given without a token keeps its stored token, with the host given.
   */
  setProviderTokens(userId: string, input: ProviderTokensInput): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.setProviderTokens>>;
  /** Removes every git provider token. */
  unsetProviderTokens(userId: string): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.unsetProviderTokens>>;
  /** The stored settings with secret values, for the engine; null when none. */
  loadWithSecrets(userId: string): ResultAsync<StoredSettings | null, StoreFailure>;
}

/** Settings stored before a field existed read as that field's default. */
const withDefaults = (stored: StoredSettings | null): StoredSettings | null => (stored ? { ...defaultSettings(), ...stored } : null);

export function createSettingsService(store: SettingsStore): SettingsService {
  /**
   * Changes the user's secrets in one atomic update. `change` returns the new secrets, or the
   * error that refuses the change (then nothing changes: the record is written back as it was).
   */
  const changeSecrets = <E>(
    userId: string,
    change: (secrets: StoredSettings['secrets_store']) => { ok: StoredSettings['secrets_store'] } | { refused: E },
  ): ResultAsync<void, E | StoreFailure> => {
    const decided: { refused: { error: E } | null } = { refused: null };
    return store
      .update(userId, (current) => {
        const base = withDefaults(current) ?? defaultSettings();
        const outcome = change(base.secrets_store);
        if ('refused' in outcome) {
          decided.refused = { error: outcome.refused };
          return base;
        }
        return { ...base, secrets_store: outcome.ok };
      })
      .andThen(() => (decided.refused ? errAsync<void, E | StoreFailure>(decided.refused.error) : okAsync(undefined)));
  };

  return {
    listSecrets: (userId) =>
      store
        .get(userId)
        .map((stored) =>
          Object.entries(withDefaults(stored)?.secrets_store.custom_secrets ?? {})
            .map(([name, secret]) => ({ name, description: secret.description }))
            .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
        ),
    createSecret: (userId, secret) =>
      changeSecrets<DomainErrorOf<'SecretNameTaken'>>(userId, (secrets) =>
        Object.hasOwn(secrets.custom_secrets, secret.name)
          ? { refused: { type: 'SecretNameTaken', name: secret.name } }
          : { ok: { ...secrets, custom_secrets: { ...secrets.custom_secrets, [secret.name]: { secret: secret.value, description: secret.description ?? null } } } },
      ),
    updateSecret: (userId, name, change) =>
      changeSecrets<DomainErrorOf<'SecretNotFound' | 'SecretNameTaken'>>(userId, (secrets) => {
        const existing = Object.hasOwn(secrets.custom_secrets, name) ? secrets.custom_secrets[name] : undefined;
        if (!existing) return { refused: { type: 'SecretNotFound', name } };
        if (change.name !== name && Object.hasOwn(secrets.custom_secrets, change.name)) return { refused: { type: 'SecretNameTaken', name: change.name } };
        const rest = Object.fromEntries(Object.entries(secrets.custom_secrets).filter(([key]) => key !== name));
        const description = change.description === undefined ? existing.description : change.description;
        return { ok: { ...secrets, custom_secrets: { ...rest, [change.name]: { secret: existing.secret, description } } } };
      }),
    deleteSecret: (userId, name) =>
      changeSecrets<DomainErrorOf<'SecretNotFound'>>(userId, (secrets) =>
        Object.hasOwn(secrets.custom_secrets, name)
          ? { ok: { ...secrets, custom_secrets: Object.fromEntries(Object.entries(secrets.custom_secrets).filter(([key]) => key !== name)) } }
          : { refused: { type: 'SecretNotFound', name } },
      ),
    setProviderTokens: (userId, input) =>
      changeSecrets<never>(userId, (secrets) => {
        const next: Partial<Record<GitProvider, StoredProviderToken>> = {};
        for (const [provider, given] of Object.entries(input.provider_tokens) as [GitProvider, NonNullable<ProviderTokensInput['provider_tokens'][GitProvider]>][]) {
          const stored = secrets.provider_tokens[provider];
          const token = given.token ? given.token : (stored?.token ?? null);
          next[provider] = { token, host: given.host ?? null, user_id: given.user_id ?? stored?.user_id ?? null };
        }
        return { ok: { ...secrets, provider_tokens: next } };
      }),
    unsetProviderTokens: (userId) => changeSecrets<never>(userId, (secrets) => ({ ok: { ...secrets, provider_tokens: {} } })),
    load: (userId) =>
      store
        .get(userId)
        .map(withDefaults)
        .andThen((stored) => (stored ? okAsync(toSettingsView(stored)) : errAsync<SettingsView, DomainErrorOf<'SettingsNotFound'>>({ type: 'SettingsNotFound' }))),
    store: (userId, input) => store.update(userId, (current) => applySettingsInput(withDefaults(current), input)).map(() => undefined),
    loadWithSecrets: (userId) => store.get(userId).map(withDefaults),
  };
}
