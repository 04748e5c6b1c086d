import type { SettingsView, StoredSettings } from '@acs/core/schemas';
import { z } from 'zod';

/** What OpenHands 1.11 shows in place of a secret that is set. */
const MASK = '**********';

/**
 * `GET /api/v1/users/me` as OpenHands 1.11 answers it (`UserInfo`: its settings model plus the
 * user's id), from our settings view: secrets as its mask when set (null otherwise), the model
 * under `agent_settings.llm`, limits and confirmation under `conversation_settings`. Fields our
 * settings have no value for are left out (1.11 gives them defaults).
 */
export const UserInfoSchema = z
  .looseObject({
    id: z.string().meta({ description: 'The user id (what every record of this user is kept under).' }),
    language: z.string().nullable(),
    agent_settings: z.looseObject({
      agent: z.string().optional(),
      llm: z.looseObject({
        model: z.string().nullable(),
        base_url: z.string().nullable(),
        api_key: z
          .string()
          .nullable()
          .meta({ description: `"${MASK}" when a key is stored, else null: never the key.` }),
      }),
    }),
    conversation_settings: z.looseObject({
      max_iterations: z.int().optional(),
      confirmation_mode: z.boolean(),
      security_analyzer: z.enum(['llm', 'none']).nullable().optional(),
    }),
    llm_model: z
      .string()
      .nullable()
      .meta({ description: 'The model, as `agent_settings.llm.model` (SDK 1.58 reads it here).' }),
    llm_base_url: z.string().nullable(),
    llm_api_key: z
      .string()
      .nullable()
      .meta({ description: `"${MASK}" when a key is stored, else null; the key itself only with expose_secrets.` }),
    llm_profiles: z
      .object({
        profiles: z.record(
          z.string(),
          z.object({ model: z.string().nullable(), base_url: z.string().nullable(), api_key: z.string().nullable() }),
        ),
      })
      .meta({
        description:
          'The LLM profiles by name, as `OpenHandsCloudWorkspace.get_llm(profile_name)` reads them; keys masked unless exposed.',
      }),
    search_api_key: z.string().nullable(),
    sandbox_api_key: z.string().nullable(),
    secrets_store: z.object({ provider_tokens: z.record(z.string(), z.unknown()) }),
    email: z.string().nullable(),
    email_verified: z.boolean().nullable(),
    git_user_name: z.string().nullable(),
    git_user_email: z.string().nullable(),
    v1_enabled: z.boolean(),
  })
  .meta({ id: 'UserInfo', description: 'OpenHands 1.11 `UserInfo`: the user’s settings (secrets masked) and id.' });
export type UserInfo = z.infer<typeof UserInfoSchema>;

const mask = (set: boolean) => (set ? MASK : null);

/** 1.11 knows two analyzers: the model's own rating (`llm`) or none; our rule-based ones have no name there. */
function analyzerOf(name: string | null): { security_analyzer?: 'llm' | 'none' } {
  if (name === 'llm') return { security_analyzer: 'llm' };
  return name === null ? { security_analyzer: 'none' } : {};
}

export function toUserInfo(userId: string, view: SettingsView | null): UserInfo {
  const llm = {
    model: view?.llm_model ?? null,
    base_url: view?.llm_base_url ?? null,
    api_key: mask(view?.llm_api_key_set ?? false),
  };
  return {
    id: userId,
    language: view?.language ?? null,
    agent_settings: {
      ...(view?.agent ? { agent: view.agent } : {}),
      llm,
    },
    conversation_settings: {
      ...(view?.max_iterations ? { max_iterations: view.max_iterations } : {}),
      confirmation_mode: view?.confirmation_mode ?? false,
      ...analyzerOf(view?.security_analyzer ?? null),
    },
    llm_model: llm.model,
    llm_base_url: llm.base_url,
    llm_api_key: llm.api_key,
    llm_profiles: { profiles: {} },
    search_api_key: mask(view?.search_api_key_set ?? false),
    sandbox_api_key: null,
    // Git provider tokens are never shown, masked or not; which providers are set is in GET /api/settings.
    secrets_store: { provider_tokens: {} },
    email: view?.email ?? null,
    email_verified: view?.email_verified ?? null,
    git_user_name: view?.git_user_name ?? null,
    git_user_email: view?.git_user_email ?? null,
    enable_sound_notifications: view?.enable_sound_notifications ?? false,
    enable_proactive_conversation_starters: view?.enable_proactive_conversation_starters ?? true,
    user_consents_to_analytics: view?.user_consents_to_analytics ?? null,
    sandbox_base_container_image: view?.sandbox_base_container_image ?? null,
    sandbox_runtime_container_image: view?.sandbox_runtime_container_image ?? null,
    remote_runtime_resource_factor: view?.remote_runtime_resource_factor ?? null,
    max_budget_per_task: view?.max_budget_per_task ?? null,
    v1_enabled: true,
  };
}

/**
 * The same with secret values shown (`expose_secrets=true`, for code in one of the user's
 * running sandboxes): the model key, the search key and each LLM profile with its key.
 */
export function toExposedUserInfo(userId: string, view: SettingsView | null, stored: StoredSettings | null): UserInfo {
  const info = toUserInfo(userId, view);
  const key = stored?.llm_api_key ?? null;
  return {
    ...info,
    agent_settings: { ...info.agent_settings, llm: { ...info.agent_settings.llm, api_key: key } },
    llm_api_key: key,
    llm_profiles: {
      profiles: Object.fromEntries(
        (stored?.llm_profiles.profiles ?? []).map((p) => [
          p.name,
          { model: p.model, base_url: p.base_url, api_key: p.api_key },
        ]),
      ),
    },
    search_api_key: stored?.search_api_key ?? null,
  };
}
