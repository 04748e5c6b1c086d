import { err, errAsync, ok, type Result, type ResultAsync } from 'neverthrow';
import type { DomainErrorOf, DomainErrorType, ErrorsOf } from '../errors.js';
import type { IdGenerator } from '../ids.js';
import { resultAsync } from '../result.js';
import type { StoreFailure } from '../store-failure.js';
import { applySettingsChange, applySettingsInput, reconcileActiveProfile, type SettingsChange } from './merge.js';
import {
  refusalOfChange,
  refusalOfInput,
  refusalOfProfile,
  resolveEgress,
  unlessRefused,
  type EgressOptions,
} from './egress.js';
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
  store: ['HostNotAllowed', 'SandboxImageNotAllowed', 'StoreUnavailable'],
  listSecrets: ['StoreUnavailable'],
  createSecret: ['SecretNameTaken', 'StoreUnavailable'],
  updateSecret: ['SecretNotFound', 'SecretNameTaken', 'StoreUnavailable'],
  deleteSecret: ['SecretNotFound', 'StoreUnavailable'],
  setProviderTokens: ['StoreUnavailable'],
  unsetProviderTokens: ['StoreUnavailable'],
  loadWithProfiles: ['SettingsNotFound', 'StoreUnavailable'],
  change: ['HostNotAllowed', 'SandboxImageNotAllowed', 'StoreUnavailable'],
  putSecret: ['StoreUnavailable'],
  listProfiles: ['StoreUnavailable'],
  getProfile: ['ProfileNotFound', 'StoreUnavailable'],
  saveProfile: ['SettingsNotFound', 'ProfileLimitReached', 'HostNotAllowed', 'StoreUnavailable'],
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
  createSecret(
    userId: string,
    secret: CustomSecretCreate,
  ): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.createSecret>>;
  /** Renames a custom secret and/or changes its description; its value stays. */
  updateSecret(
    userId: string,
    name: string,
    change: CustomSecretUpdate,
  ): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.updateSecret>>;
  deleteSecret(userId: string, name: string): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.deleteSecret>>;
  /**
   * Replaces the git provider tokens with the ones given (a provider left out is dropped); a
   * provider given without a token keeps its stored token, with the host given.
   */
  setProviderTokens(
    userId: string,
    input: ProviderTokensInput,
  ): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.setProviderTokens>>;
  /** Removes every git provider token. */
  unsetProviderTokens(userId: string): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.unsetProviderTokens>>;
  /** The stored settings with secret values, for the engine; null when none. */
  loadWithSecrets(userId: string): ResultAsync<StoredSettings | null, StoreFailure>;
  /** Load Settings with what only the V1 API shows: the LLM profiles (never their keys) and `user_version`. */
  loadWithProfiles(
    userId: string,
  ): ResultAsync<SettingsOverview, ErrorsOf<typeof SettingsServiceErrors.loadWithProfiles>>;
  /** The V1 API's change: each field given is set as given (see SettingsChange). */
  change(userId: string, change: SettingsChange): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.change>>;
  /** Adds a custom secret or replaces the value of the one with that name (its description stays unless one is given). */
  putSecret(
    userId: string,
    secret: CustomSecretCreate,
  ): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.putSecret>>;
  /** The LLM profiles and which is active; none when nothing is stored. */
  listProfiles(userId: string): ResultAsync<LlmProfilesView, ErrorsOf<typeof SettingsServiceErrors.listProfiles>>;
  getProfile(
    userId: string,
    name: string,
  ): ResultAsync<LlmProfileView, ErrorsOf<typeof SettingsServiceErrors.getProfile>>;
  /** Saves a profile, or overwrites the one of that name in place (see SaveProfileRequest). */
  saveProfile(
    userId: string,
    name: string,
    request: SaveProfileRequest,
  ): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.saveProfile>>;
  /** Deletes a profile (nothing to do when there is none); deleting the active one activates the first left. */
  deleteProfile(userId: string, name: string): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.deleteProfile>>;
  /** Makes the profile's model, base URL, key and streaming the settings' own; returns the model. */
  activateProfile(
    userId: string,
    name: string,
  ): ResultAsync<{ model: string | null }, ErrorsOf<typeof SettingsServiceErrors.activateProfile>>;
  renameProfile(
    userId: string,
    name: string,
    newName: string,
  ): ResultAsync<void, ErrorsOf<typeof SettingsServiceErrors.renameProfile>>;
}

/** Load Settings plus the V1 API's own fields. */
export type SettingsOverview = SettingsView & { user_version: number | null; llm_profiles: LlmProfilesView };

/** Settings stored before a field existed read as that field's default. */
const withDefaults = (stored: StoredSettings | null): StoredSettings | null =>
  stored ? { ...defaultSettings(), ...stored } : null;

export interface SettingsServiceDeps {
  store: SettingsStore;
  /** Ids of new LLM profiles. */
  ids: IdGenerator;
  /** The operator's allow-lists of the hosts model and MCP URLs may name (egress.ts); none: any host. */
  egress?: EgressOptions;
  /**
   * Whether users may name a sandbox image (`sandbox_base_container_image`): null when they
   * may, else why not (the sandbox service's `checkImage`). Without it any image is stored.
   */
  checkImage?: (image: string) => ResultAsync<DomainErrorOf<'SandboxImageNotAllowed'> | null, StoreFailure>;
}

/** Runs `then` unless the sandbox image a change names is one users may not name. */
function unlessImageRefused<T, E>(
  deps: SettingsServiceDeps,
  image: string | null | undefined,
  then: () => ResultAsync<T, E>,
): ResultAsync<T, E | DomainErrorOf<'SandboxImageNotAllowed'> | StoreFailure> {
  if (!image || !deps.checkImage) return then();
  return deps.checkImage(image).andThen((refusal) => (refusal ? errAsync(refusal) : then()));
}

/** Secrets as stored in the settings. */
type Secrets = StoredSettings['secrets_store'];
/** A change of the secrets: the new secrets, or why it is refused. */
type SecretsChange<E> = (secrets: Secrets) => { ok: Secrets } | { refused: E };

export function createSettingsService(deps: SettingsServiceDeps): SettingsService {
  const egress = resolveEgress(deps.egress);
  return {
    listSecrets: (userId) => deps.store.get(userId).map(secretInfosOf),
    createSecret: (userId, secret) => changeSecrets(deps, userId, addSecret(secret)),
    updateSecret: (userId, name, change) => changeSecrets(deps, userId, updateSecret(name, change)),
    deleteSecret: (userId, name) => changeSecrets(deps, userId, removeSecret(name)),
    setProviderTokens: (userId, input) => changeSecrets(deps, userId, setProviderTokens(input)),
    unsetProviderTokens: (userId) =>
      changeSecrets<never>(deps, userId, (secrets) => ({ ok: { ...secrets, provider_tokens: {} } })),
    load: (userId) => resultAsync(load(deps, userId)),
    store: (userId, input) =>
      unlessImageRefused(deps, input.sandbox_base_container_image, () =>
        unlessRefused(refusalOfInput(egress, input), () =>
          deps.store
            .update(userId, (current) => reconcileActiveProfile(applySettingsInput(withDefaults(current), input)))
            .map(() => undefined),
        ),
      ),
    loadWithSecrets: (userId) => deps.store.get(userId).map(withDefaults),
    loadWithProfiles: (userId) => resultAsync(loadWithProfiles(deps, userId)),
    change: (userId, change) =>
      unlessImageRefused(deps, change.sandbox_base_container_image, () =>
        unlessRefused(refusalOfChange(egress, change), () =>
          resultAsync(
            changeSettings<never>(deps, userId, (settings) =>
              ok(reconcileActiveProfile(applySettingsChange(settings, change))),
            ),
          ).map(() => undefined),
        ),
      ),
    putSecret: (userId, secret) => changeSecrets(deps, userId, putSecret(secret)),
    listProfiles: (userId) => deps.store.get(userId).map((stored) => profilesView(withDefaults(stored))),
    getProfile: (userId, name) => resultAsync(getProfile(deps, userId, name)),
    saveProfile: (userId, name, request) =>
      unlessRefused(refusalOfProfile(egress, request), () =>
        resultAsync(
          changeExisting(deps, userId, (settings) => saveProfile(settings, name, request, () => deps.ids.next())),
        ).map(() => undefined),
      ),
    deleteProfile: (userId, name) => resultAsync(removeProfile(deps, userId, name)),
    activateProfile: (userId, name) => resultAsync(activate(deps, userId, name)),
    renameProfile: (userId, name, newName) =>
      resultAsync(changeExisting(deps, userId, (settings) => renameProfile(settings, name, newName))).map(
        () => undefined,
      ),
  };
}

/**
 * One atomic change of the user's settings. `change` returns the new settings, or the error
 * that refuses the change. A change refused on what is stored writes nothing (and creates no
 * settings); one refused only on a record changed meanwhile writes that record back as it is.
 */
async function changeSettings<E>(
  deps: SettingsServiceDeps,
  userId: string,
  change: (settings: StoredSettings) => Result<StoredSettings, E>,
): Promise<Result<StoredSettings, E | StoreFailure>> {
  const stored = await deps.store.get(userId);
  if (stored.isErr()) return err(stored.error);
  const refused = change(withDefaults(stored.value) ?? defaultSettings());
  if (refused.isErr()) return err(refused.error);
  const decided: { refused: { error: E } | null } = { refused: null };
  const written = await deps.store.update(userId, (current) => {
    const base = withDefaults(current) ?? defaultSettings();
    return change(base).match(
      (next) => next,
      (error) => {
        decided.refused = { error };
        return base;
      },
    );
  });
  if (written.isErr()) return err(written.error);
  if (decided.refused) return err(decided.refused.error);
  return ok(written.value);
}

/** changeSettings for a user who has settings: SettingsNotFound, and nothing is created, for one who has none (settings are never deleted). */
async function changeExisting<E>(
  deps: SettingsServiceDeps,
  userId: string,
  change: (settings: StoredSettings) => Result<StoredSettings, E>,
): Promise<Result<StoredSettings, E | StoreFailure | DomainErrorOf<'SettingsNotFound'>>> {
  const stored = await deps.store.get(userId);
  if (stored.isErr()) return err(stored.error);
  if (!stored.value) return err({ type: 'SettingsNotFound' });
  return changeSettings(deps, userId, change);
}

/** Changes the user's secrets in one atomic update (see changeSettings). */
function changeSecrets<E>(
  deps: SettingsServiceDeps,
  userId: string,
  change: SecretsChange<E>,
): ResultAsync<void, E | StoreFailure> {
  const changed = changeSettings<E>(deps, userId, (settings) => {
    const outcome = change(settings.secrets_store);
    return 'refused' in outcome ? err(outcome.refused) : ok({ ...settings, secrets_store: outcome.ok });
  });
  return resultAsync(changed).map(() => undefined);
}

function secretInfosOf(stored: StoredSettings | null): CustomSecretInfo[] {
  return Object.entries(withDefaults(stored)?.secrets_store.custom_secrets ?? {})
    .map(([name, secret]) => ({ name, description: secret.description }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

const addSecret =
  (secret: CustomSecretCreate): SecretsChange<DomainErrorOf<'SecretNameTaken'>> =>
  (secrets) =>
    Object.hasOwn(secrets.custom_secrets, secret.name)
      ? { refused: { type: 'SecretNameTaken', name: secret.name } }
      : {
          ok: {
            ...secrets,
            custom_secrets: {
              ...secrets.custom_secrets,
              [secret.name]: { secret: secret.value, description: secret.description ?? null },
            },
          },
        };

const updateSecret =
  (name: string, change: CustomSecretUpdate): SecretsChange<DomainErrorOf<'SecretNotFound' | 'SecretNameTaken'>> =>
  (secrets) => {
    const existing = Object.hasOwn(secrets.custom_secrets, name) ? secrets.custom_secrets[name] : undefined;
    if (!existing) return { refused: { type: 'SecretNotFound', name } };
    if (change.name !== name && Object.hasOwn(secrets.custom_secrets, change.name))
      return { refused: { type: 'SecretNameTaken', name: change.name } };
    const rest = Object.fromEntries(Object.entries(secrets.custom_secrets).filter(([key]) => key !== name));
    const description = change.description === undefined ? existing.description : change.description;
    return { ok: { ...secrets, custom_secrets: { ...rest, [change.name]: { secret: existing.secret, description } } } };
  };

const removeSecret =
  (name: string): SecretsChange<DomainErrorOf<'SecretNotFound'>> =>
  (secrets) =>
    Object.hasOwn(secrets.custom_secrets, name)
      ? {
          ok: {
            ...secrets,
            custom_secrets: Object.fromEntries(Object.entries(secrets.custom_secrets).filter(([key]) => key !== name)),
          },
        }
      : { refused: { type: 'SecretNotFound', name } };

const setProviderTokens =
  (input: ProviderTokensInput): SecretsChange<never> =>
  (secrets) => {
    const next: Partial<Record<GitProvider, StoredProviderToken>> = {};
    for (const [provider, given] of Object.entries(input.provider_tokens) as [
      GitProvider,
      NonNullable<ProviderTokensInput['provider_tokens'][GitProvider]>,
    ][]) {
      const stored = secrets.provider_tokens[provider];
      const token = given.token ? given.token : (stored?.token ?? null);
      next[provider] = { token, host: given.host ?? null, user_id: given.user_id ?? stored?.user_id ?? null };
    }
    return { ok: { ...secrets, provider_tokens: next } };
  };

const putSecret =
  (secret: CustomSecretCreate): SecretsChange<never> =>
  (secrets) => {
    const before = Object.hasOwn(secrets.custom_secrets, secret.name) ? secrets.custom_secrets[secret.name] : undefined;
    const description = secret.description === undefined ? (before?.description ?? null) : secret.description;
    return {
      ok: {
        ...secrets,
        custom_secrets: { ...secrets.custom_secrets, [secret.name]: { secret: secret.value, description } },
      },
    };
  };

async function load(
  deps: SettingsServiceDeps,
  userId: string,
): Promise<Result<SettingsView, ErrorsOf<typeof SettingsServiceErrors.load>>> {
  const stored = await deps.store.get(userId);
  if (stored.isErr()) return err(stored.error);
  const settings = withDefaults(stored.value);
  if (!settings) return err({ type: 'SettingsNotFound' });
  return ok(toSettingsView(settings));
}

async function loadWithProfiles(
  deps: SettingsServiceDeps,
  userId: string,
): Promise<Result<SettingsOverview, ErrorsOf<typeof SettingsServiceErrors.loadWithProfiles>>> {
  const stored = await deps.store.get(userId);
  if (stored.isErr()) return err(stored.error);
  const settings = withDefaults(stored.value);
  if (!settings) return err({ type: 'SettingsNotFound' });
  return ok({ ...toSettingsView(settings), user_version: settings.user_version, llm_profiles: profilesView(settings) });
}

async function getProfile(
  deps: SettingsServiceDeps,
  userId: string,
  name: string,
): Promise<Result<LlmProfileView, ErrorsOf<typeof SettingsServiceErrors.getProfile>>> {
  const stored = await deps.store.get(userId);
  if (stored.isErr()) return err(stored.error);
  const profile = findProfile(withDefaults(stored.value), name);
  if (!profile) return err({ type: 'ProfileNotFound', name });
  return ok(profileView(profile));
}

async function removeProfile(
  deps: SettingsServiceDeps,
  userId: string,
  name: string,
): Promise<Result<void, ErrorsOf<typeof SettingsServiceErrors.deleteProfile>>> {
  const stored = await deps.store.get(userId);
  if (stored.isErr()) return err(stored.error);
  // Nothing to delete writes nothing (and creates no settings).
  if (!findProfile(withDefaults(stored.value), name)) return ok(undefined);
  const changed = await changeSettings<never>(deps, userId, (settings) => ok(deleteProfile(settings, name)));
  if (changed.isErr()) return err(changed.error);
  return ok(undefined);
}

async function activate(
  deps: SettingsServiceDeps,
  userId: string,
  name: string,
): Promise<Result<{ model: string | null }, ErrorsOf<typeof SettingsServiceErrors.activateProfile>>> {
  const written = await changeExisting(deps, userId, (settings) => activateProfile(settings, name));
  // No settings means no profiles: the profile is what is missing.
  if (written.isErr())
    return err(written.error.type === 'SettingsNotFound' ? { type: 'ProfileNotFound', name } : written.error);
  return ok({ model: written.value.llm_model });
}
