import { err, errAsync, ok, okAsync, type Result, type ResultAsync } from 'neverthrow';
import type { DomainErrorOf, DomainErrorType, ErrorsOf } from '../errors.js';
import type { IdGenerator } from '../ids.js';
import type { StoreFailure } from '../store-failure.js';
import { applySettingsChange, applySettingsInput, reconcileActiveProfile, type SettingsChange } from './merge.js';
import {
  activateProfile,
  deleteProfile,
  findProfile,
  profilesView,
  profileView,
  renameProfile,
  saveProfile,
  type LlmProfilesView,
  type LlmProfileView,
  type SaveProfileRequest,
} from './profiles.js';
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
  loadWithProfiles: ['SettingsNotFound', 'StoreUnavailable'],
  change: ['StoreUnavailable'],
  putSecret: ['StoreUnavailable'],
  listProfiles: ['StoreUnavailable'],
  getProfile: ['ProfileNotFound', 'StoreUnavailable'],
  saveProfile: ['SettingsNotFound', 'ProfileLimitReached', 'StoreUnavailable'],
  deleteProfile: ['StoreUnavailable'],
  activateProfile: ['ProfileNotFound', 'StoreUnavailable'],
  renameProfile: ['SettingsNotFound', 'ProfileNotFound', 'ProfileNameTaken', 'StoreUnavailable'],
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
  /** Load Settings with what only the V1 API shows: the LLM profiles (never their keys) and `user_version`. */
  loadWithProfiles(userId: string): ResultAsync<SettingsOverview, ErrorsOf<typeof SettingsServiceErrors.loadWithProfiles>>;
  /** The V1 API's change: each field given is set as given (see SettingsChange). */
  change(userId: string, change: SettingsChange): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.change>>;
  /** Adds a custom secret or replaces the value of the one with that name (its description stays unless one is given). */
  putSecret(userId: string, secret: CustomSecretCreate): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.putSecret>>;
  /** The LLM profiles and which is active; none when nothing is stored. */
  listProfiles(userId: string): ResultAsync<LlmProfilesView, ErrorsOf<typeof SettingsServiceErrors.listProfiles>>;
  getProfile(userId: string, name: string): ResultAsync<LlmProfileView, ErrorsOf<typeof SettingsServiceErrors.getProfile>>;
  /** Saves a profile, or overwrites the one of that name in place (see SaveProfileRequest). */
  saveProfile(userId: string, name: string, request: SaveProfileRequest): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.saveProfile>>;
  /** Deletes a profile (nothing to do when there is none); deleting the active one activates the first left. */
  deleteProfile(userId: string, name: string): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.deleteProfile>>;
  /** Makes the profile's model, base URL and key the settings' own; returns the model. */
  activateProfile(userId: string, name: string): ResultAsync<{ model: string | null }, ErrorsOf<typeof SettingsServiceErrors.activateProfile>>;
  renameProfile(userId: string, name: string, newName: string): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.renameProfile>>;
}

/** Load Settings plus the V1 API's own fields. */
export type SettingsOverview = SettingsView & { user_version: number | null; llm_profiles: LlmProfilesView };

/** Settings stored before a field existed read as that field's default. */
const withDefaults = (stored: StoredSettings | null): StoredSettings | null => (stored ? { ...defaultSettings(), ...stored } : null);

export function createSettingsService(store: SettingsStore, ids: IdGenerator): SettingsService {
  /**
   * One atomic change of the user's settings. `change` returns the new settings, or the error
   * that refuses the change. A change refused on what is stored writes nothing (and creates no
   * settings); one refused only on a record changed meanwhile writes that record back as it is.
   */
  const changeSettings = <E>(userId: string, change: (settings: StoredSettings) => Result<StoredSettings, E>): ResultAsync<StoredSettings, E | StoreFailure> =>
    store.get(userId).andThen((stored) => {
      const refused = change(withDefaults(stored) ?? defaultSettings());
      if (refused.isErr()) return errAsync<StoredSettings, E>(refused.error);
      const decided: { refused: { error: E } | null } = { refused: null };
      return store
        .update(userId, (current) => {
          const base = withDefaults(current) ?? defaultSettings();
          return change(base).match(
            (next) => next,
            (error) => {
              decided.refused = { error };
              return base;
            },
          );
        })
        .andThen((written) => (decided.refused ? errAsync<StoredSettings, E>(decided.refused.error) : okAsync(written)));
    });

  /** changeSettings for a user who has settings: SettingsNotFound, and nothing is created, for one who has none (settings are never deleted). */
  const changeExisting = <E>(userId: string, change: (settings: StoredSettings) => Result<StoredSettings, E>) =>
    store
      .get(userId)
      .andThen((stored) => (stored ? changeSettings(userId, change) : errAsync<StoredSettings, DomainErrorOf<'SettingsNotFound'>>({ type: 'SettingsNotFound' })));

  /** Changes the user's secrets in one atomic update (see changeSettings). */
  const changeSecrets = <E>(
    userId: string,
    change: (secrets: StoredSettings['secrets_store']) => { ok: StoredSettings['secrets_store'] } | { refused: E },
  ): ResultAsync<void, E | StoreFailure> =>
    changeSettings<E>(userId, (settings) => {
      const outcome = change(settings.secrets_store);
      return 'refused' in outcome ? err(outcome.refused) : ok({ ...settings, secrets_store: outcome.ok });
    }).map(() => undefined);

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
    store: (userId, input) => store.update(userId, (current) => reconcileActiveProfile(applySettingsInput(withDefaults(current), input))).map(() => undefined),
    loadWithSecrets: (userId) => store.get(userId).map(withDefaults),
    loadWithProfiles: (userId) =>
      store
        .get(userId)
        .map(withDefaults)
        .andThen((stored) =>
          stored
            ? okAsync<SettingsOverview, never>({ ...toSettingsView(stored), user_version: stored.user_version, llm_profiles: profilesView(stored) })
            : errAsync<SettingsOverview, DomainErrorOf<'SettingsNotFound'>>({ type: 'SettingsNotFound' }),
        ),
    change: (userId, change) => changeSettings<never>(userId, (settings) => ok(reconcileActiveProfile(applySettingsChange(settings, change)))).map(() => undefined),
    putSecret: (userId, secret) =>
      changeSecrets<never>(userId, (secrets) => {
        const before = Object.hasOwn(secrets.custom_secrets, secret.name) ? secrets.custom_secrets[secret.name] : undefined;
        const description = secret.description === undefined ? (before?.description ?? null) : secret.description;
        return { ok: { ...secrets, custom_secrets: { ...secrets.custom_secrets, [secret.name]: { secret: secret.value, description } } } };
      }),
    listProfiles: (userId) => store.get(userId).map((stored) => profilesView(withDefaults(stored))),
    getProfile: (userId, name) =>
      store.get(userId).andThen((stored) => {
        const profile = findProfile(withDefaults(stored), name);
        return profile ? okAsync(profileView(profile)) : errAsync<LlmProfileView, DomainErrorOf<'ProfileNotFound'>>({ type: 'ProfileNotFound', name });
      }),
    saveProfile: (userId, name, request) => changeExisting(userId, (settings) => saveProfile(settings, name, request, () => ids.next())).map(() => undefined),
    deleteProfile: (userId, name) =>
      store.get(userId).andThen((stored) =>
        // Nothing to delete writes nothing (and creates no settings).
        findProfile(withDefaults(stored), name) ? changeSettings<never>(userId, (settings) => ok(deleteProfile(settings, name))).map(() => undefined) : okAsync<void, StoreFailure>(undefined),
      ),
    activateProfile: (userId, name) =>
      changeExisting(userId, (settings) => activateProfile(settings, name))
        .map((written) => ({ model: written.llm_model }))
        // No settings means no profiles: the profile is what is missing.
        .orElse((error) => errAsync(error.type === 'SettingsNotFound' ? { type: 'ProfileNotFound' as const, name } : error)),
    renameProfile: (userId, name, newName) => changeExisting(userId, (settings) => renameProfile(settings, name, newName)).map(() => undefined),
  };
}
