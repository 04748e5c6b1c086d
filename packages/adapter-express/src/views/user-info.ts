import type { SettingsView } from '@acs/core/schemas';
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
  return {
    id: userId,
    language: view?.language ?? null,
    agent_settings: {
      ...(view?.agent ? { agent: view.agent } : {}),
      llm: {
        model: view?.llm_model ?? null,
        base_url: view?.llm_base_url ?? null,
        api_key: mask(view?.llm_api_key_set ?? false),
      },
    },
    conversation_settings: {
      ...(view?.max_iterations ? { max_iterations: view.max_iterations } : {}),
      confirmation_mode: view?.confirmation_mode ?? false,
      ...analyzerOf(view?.security_analyzer ?? null),
    },
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
