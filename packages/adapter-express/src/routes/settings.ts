import { SettingsServiceErrors, type AgentConversationService } from '@acs/core';
import { SettingsInputSchema, SettingsViewSchema } from '@acs/core/schemas';
import { defineRoute, type RouteDefinition } from '../route.js';
import { MessageSchema } from './shared.js';

/** The user's settings (V0): load and store; secrets are write-only. */
export function settingsRoutes(service: AgentConversationService): RouteDefinition[] {
  const { settings } = service;
  return [
    defineRoute({
      method: 'post',
      path: '/api/settings',
      operationId: 'storeSettings',
      summary: 'Store Settings',
      description:
        'Merges the body into the stored settings. An absent field keeps its value. For llm_api_key, search_api_key, sandbox_api_key, llm_model and llm_base_url, null keeps the stored value and "" clears it. secrets_store entries merge one by one (null removes an entry). Unknown keys are ignored.',
      tags: ['settings'],
      body: SettingsInputSchema,
      success: { status: 200, description: 'Settings stored.', schema: MessageSchema },
      errors: SettingsServiceErrors.store,
      handle: ({ userId, body }) => settings.store(userId, body).map(() => ({ message: 'Settings stored' })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/settings',
      operationId: 'loadSettings',
      summary: 'Load Settings',
      description:
        'Every field with defaults applied. Secret values are never returned; the *_set fields say whether they are stored. 404 until settings are stored.',
      tags: ['settings'],
      success: { status: 200, description: 'Successful Response', schema: SettingsViewSchema },
      errors: SettingsServiceErrors.load,
      handle: ({ userId }) => settings.load(userId),
    }),
  ];
}
