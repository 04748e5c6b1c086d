import { ConversationServiceErrors, SettingsServiceErrors, type AgentConversationService } from '@acs/core';
import { okAsync } from 'neverthrow';
import { z } from 'zod';
import { defineRoute, type RouteDefinition } from '../route.js';
import { agentSettingsSchema, conversationSettingsSchema, SettingsSchemaSchema } from '../views/settings-schema.js';
import { toV1Settings, V1SettingsSchema, profileConfigView } from '../views/settings-v1.js';
import {
  profileInputOf,
  profileName,
  SaveProfileBodySchema,
  toSettingsChange,
  V1SettingsUpdateSchema,
} from '../views/settings-v1-input.js';
import { conversationIdParams } from './params.js';
import { MessageSchema, SuccessSchema } from './shared.js';

const TAGS = ['settings (V1)'];

const profileParams = z.object({
  name: profileName.refine((n) => n !== '.' && n !== '..', 'cannot be . or .. (a URL drops such a path segment)'),
});

const ProfileMutationSchema = z
  .object({ name: z.string(), message: z.string() })
  .meta({ id: 'ProfileMutationResponse' });

const IGNORED_V1_FIELDS =
  'disabled_skills, git_full_clone, v1_enabled, sandbox_grouping_strategy, default_sandbox_spec_id, registered_marketplaces, secrets_store, llm_profiles, active_agent_profile_id/revision, and in agent_settings_diff every LLM field but model, base_url, api_key and stream, tools, enable_sub_agents, enable_switch_llm_tool, tool_concurrency_limit, agent_context, verification and the condenser’s tuning (keep_first, max_tokens, …)';

/**
 * The V1 settings (OpenHands 1.11's `/api/v1/settings`): the same record as V0's
 * `/api/settings`, nested the 1.11 way, plus the user's LLM profiles and the forms that describe
 * what can be set.
 */
export function settingsRoutesV1(service: AgentConversationService): RouteDefinition[] {
  const { settings } = service;
  const defaults = () => service.agent.settingsDefaults;
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/settings',
      operationId: 'loadSettingsV1',
      summary: 'Load settings (V1)',
      description:
        'The settings V0 reads at /api/settings, nested as OpenHands 1.11 nests them (GETSettingsModel). Keys are never returned: llm_api_key_set and search_api_key_set say whether they are stored. Unset limits show the agent’s own values. 404 SETTINGS_NOT_FOUND until settings are stored.',
      tags: TAGS,
      success: { status: 200, description: 'The settings.', schema: V1SettingsSchema },
      errors: SettingsServiceErrors.loadWithProfiles,
      handle: ({ userId }) => settings.loadWithProfiles(userId).map((overview) => toV1Settings(overview, defaults())),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/settings',
      operationId: 'storeSettingsV1',
      summary: 'Store settings (V1)',
      description: `A partial update. agent_settings_diff and conversation_settings_diff are merge patches of what GET shows (RFC 7386: a key left out stays, null puts a field back to unset, for llm.api_key: removes it; objects merge; mcp_config is replaced whole, a remote server without auth keeping the stored key of its URL). Other keys set the field of that name ("" or null removes search_api_key and sandbox_api_key). Sending agent_settings or conversation_settings whole is refused (422), as in 1.11. Accepted and ignored (no such behaviour here): ${IGNORED_V1_FIELDS}. The same record as /api/settings.`,
      tags: TAGS,
      body: V1SettingsUpdateSchema,
      success: { status: 200, description: 'Stored.', schema: MessageSchema },
      errors: SettingsServiceErrors.change,
      handle: ({ userId, body }) =>
        settings.change(userId, toSettingsChange(body)).map(() => ({ message: 'Settings stored' })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/settings/agent-schema',
      operationId: 'getAgentSettingsSchema',
      summary: 'The agent settings form',
      description:
        'What agent_settings_diff takes here, as OpenHands 1.11’s SettingsSchema: sections of fields with their key, type, default and choices.',
      tags: TAGS,
      success: { status: 200, description: 'The form.', schema: SettingsSchemaSchema },
      errors: [],
      handle: () => okAsync(agentSettingsSchema(defaults())),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/settings/conversation-schema',
      operationId: 'getConversationSettingsSchema',
      summary: 'The conversation settings form',
      description: 'What conversation_settings_diff takes here, as OpenHands 1.11’s SettingsSchema.',
      tags: TAGS,
      success: { status: 200, description: 'The form.', schema: SettingsSchemaSchema },
      errors: [],
      handle: () => okAsync(conversationSettingsSchema(defaults())),
    }),
    ...profileRoutes(service),
  ];
}

/** Named LLM profiles, and switching a conversation to one. */
function profileRoutes(service: AgentConversationService): RouteDefinition[] {
  const { settings, conversations } = service;
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/settings/profiles',
      operationId: 'listLlmProfiles',
      summary: 'List LLM profiles',
      description: 'In the order they were saved; keys never shown (api_key_set). Empty when no settings are stored.',
      tags: TAGS,
      success: {
        status: 200,
        description: 'The profiles.',
        schema: z
          .object({
            profiles: z.array(
              z.object({
                name: z.string(),
                model: z.string().nullable(),
                base_url: z.string().nullable(),
                api_key_set: z.boolean(),
                stream: z.boolean(),
              }),
            ),
            active_profile: z.string().nullable(),
          })
          .meta({ id: 'ProfileListResponse' }),
      },
      errors: SettingsServiceErrors.listProfiles,
      handle: ({ userId }) =>
        settings.listProfiles(userId).map((list) => ({ profiles: list.profiles, active_profile: list.active })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/settings/profiles/{name}',
      operationId: 'getLlmProfile',
      summary: 'Get an LLM profile',
      tags: TAGS,
      params: profileParams,
      success: {
        status: 200,
        description: 'The profile; config.api_key is always null.',
        schema: z
          .object({ name: z.string(), config: z.record(z.string(), z.unknown()), api_key_set: z.boolean() })
          .meta({ id: 'ProfileDetailResponse' }),
      },
      errors: SettingsServiceErrors.getProfile,
      handle: ({ userId, params }) =>
        settings
          .getProfile(userId, params.name)
          .map((p) => ({ name: p.name, config: profileConfigView(p), api_key_set: p.api_key_set })),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/settings/profiles/{name}',
      operationId: 'saveLlmProfile',
      summary: 'Save an LLM profile',
      description:
        'Saves llm (model, base_url, api_key, stream: true unless given) under the name, or, without llm, the settings’ own model, base URL, key and streaming; overwrites a profile of that name in place (an api_key left out or null keeps its key). include_secrets false saves no key; preserve_existing_api_key keeps the stored profile’s key. At most 10 profiles (409 PROFILE_LIMIT_REACHED); 404 SETTINGS_NOT_FOUND before settings are stored. Unknown llm keys are refused (422).',
      tags: TAGS,
      params: profileParams,
      body: SaveProfileBodySchema.optional(),
      bodyRequired: false,
      success: { status: 201, description: 'Saved.', schema: ProfileMutationSchema },
      errors: SettingsServiceErrors.saveProfile,
      handle: ({ userId, params, body }) => {
        const request = body ?? SaveProfileBodySchema.parse({});
        return settings
          .saveProfile(userId, params.name, {
            llm: request.llm ? profileInputOf(request.llm) : null,
            include_secrets: request.include_secrets,
            preserve_existing_api_key: request.preserve_existing_api_key,
          })
          .map(() => ({ name: params.name, message: `Profile '${params.name}' saved` }));
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/v1/settings/profiles/{name}',
      operationId: 'deleteLlmProfile',
      summary: 'Delete an LLM profile',
      description: 'Idempotent. Deleting the active profile activates the first one left.',
      tags: TAGS,
      params: profileParams,
      success: { status: 200, description: 'Deleted (or there was none).', schema: ProfileMutationSchema },
      errors: SettingsServiceErrors.deleteProfile,
      handle: ({ userId, params }) =>
        settings
          .deleteProfile(userId, params.name)
          .map(() => ({ name: params.name, message: `Profile '${params.name}' deleted` })),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/settings/profiles/{name}/activate',
      operationId: 'activateLlmProfile',
      summary: 'Activate an LLM profile',
      description:
        'Its model, base URL, key and streaming become the settings’ own (what new conversations use). 404 PROFILE_NOT_FOUND when there is no such profile.',
      tags: TAGS,
      params: profileParams,
      bodyRequired: false,
      success: {
        status: 200,
        description: 'Activated.',
        schema: z
          .object({ name: z.string(), message: z.string(), model: z.string().nullable() })
          .meta({ id: 'ActivateProfileResponse' }),
      },
      errors: SettingsServiceErrors.activateProfile,
      handle: ({ userId, params }) =>
        settings
          .activateProfile(userId, params.name)
          .map(({ model }) => ({ name: params.name, message: `Switched to profile '${params.name}'`, model })),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/settings/profiles/{name}/rename',
      operationId: 'renameLlmProfile',
      summary: 'Rename an LLM profile',
      description:
        'It keeps its place, key and active flag, and conversations switched to it keep using it. 409 PROFILE_NAME_TAKEN when the new name is in use.',
      tags: TAGS,
      params: profileParams,
      body: z.object({ new_name: profileName }).meta({ id: 'RenameProfileRequest' }),
      success: { status: 200, description: 'Renamed.', schema: ProfileMutationSchema },
      errors: SettingsServiceErrors.renameProfile,
      handle: ({ userId, params, body }) =>
        settings
          .renameProfile(userId, params.name, body.new_name)
          .map(() => ({ name: body.new_name, message: `Profile '${params.name}' renamed to '${body.new_name}'` })),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/app-conversations/{conversation_id}/switch_profile',
      operationId: 'switchConversationProfile',
      summary: 'Switch a conversation to an LLM profile',
      description:
        'From its next model call on (one in flight finishes as it began), the conversation uses the profile’s model, base URL, key (the settings’ key when the profile has none) and streaming; its llm_model shows the profile’s model. Works whatever the conversation’s state. A rename keeps the switch; once the profile is deleted the conversation uses its llm_model with the settings’ key again.',
      tags: ['app-conversations (V1)'],
      params: conversationIdParams,
      body: z.object({ profile_name: z.string().min(1).max(64) }).meta({ id: 'SwitchProfileRequest' }),
      success: { status: 200, description: 'Switched.', schema: SuccessSchema },
      errors: ConversationServiceErrors.switchProfile,
      handle: ({ userId, params, body }) =>
        conversations
          .switchProfile(userId, params.conversation_id, body.profile_name)
          .map(() => ({ success: true as const })),
    }),
  ];
}
