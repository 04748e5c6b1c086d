import { SettingsServiceErrors, type AgentConversationService } from '@acs/core';
import {
  CustomSecretCreateSchema,
  CustomSecretInfoSchema,
  CustomSecretUpdateSchema,
  ProviderTokensInputSchema,
} from '@acs/core/schemas';
import { z } from 'zod';
import { defineRoute, recordPathParams, type RouteDefinition } from '../route.js';
import { pathSegment } from './params.js';

const MessageSchema = z.object({ message: z.string() });
const secretPath = recordPathParams(z.object({ secret_id: pathSegment(128) }), 'SecretNotFound', (p) => ({
  type: 'SecretNotFound',
  name: p.secret_id ?? '',
}));

/**
 * The user's custom secrets (made available to their agents) and git provider tokens, as the
 * OpenHands UI manages them. Values are write-only: they are stored (encrypted by storage that
 * can) and never returned.
 */
export function secretRoutes(service: AgentConversationService): RouteDefinition[] {
  const { settings } = service;
  return [
    defineRoute({
      method: 'get',
      path: '/api/secrets',
      operationId: 'listSecrets',
      summary: "List the user's custom secrets",
      description: 'Names and descriptions, never values.',
      tags: ['secrets'],
      success: {
        status: 200,
        description: 'The secrets.',
        schema: z.object({ custom_secrets: z.array(CustomSecretInfoSchema) }),
      },
      errors: SettingsServiceErrors.listSecrets,
      handle: ({ userId }) => settings.listSecrets(userId).map((custom_secrets) => ({ custom_secrets })),
    }),
    defineRoute({
      method: 'post',
      path: '/api/secrets',
      operationId: 'createSecret',
      summary: 'Add a custom secret',
      description:
        '409 SECRET_NAME_TAKEN when the user has a secret of that name (change it with PUT, or delete it first).',
      tags: ['secrets'],
      body: CustomSecretCreateSchema,
      success: { status: 200, description: 'Stored.', schema: MessageSchema },
      errors: SettingsServiceErrors.createSecret,
      handle: ({ userId, body }) =>
        settings.createSecret(userId, body).map(() => ({ message: 'Secret created successfully' })),
    }),
    defineRoute({
      method: 'put',
      path: '/api/secrets/{secret_id}',
      operationId: 'updateSecret',
      summary: 'Rename a custom secret or change its description',
      description: 'The value cannot be read or changed here: delete the secret and add it again to change it.',
      tags: ['secrets'],
      params: secretPath,
      body: CustomSecretUpdateSchema,
      success: { status: 200, description: 'Updated.', schema: MessageSchema },
      errors: SettingsServiceErrors.updateSecret,
      handle: ({ userId, params, body }) =>
        settings.updateSecret(userId, params.secret_id, body).map(() => ({ message: 'Secret updated successfully' })),
    }),
    defineRoute({
      method: 'delete',
      path: '/api/secrets/{secret_id}',
      operationId: 'deleteSecret',
      summary: 'Delete a custom secret',
      tags: ['secrets'],
      params: secretPath,
      success: { status: 200, description: 'Deleted.', schema: MessageSchema },
      errors: SettingsServiceErrors.deleteSecret,
      handle: ({ userId, params }) =>
        settings.deleteSecret(userId, params.secret_id).map(() => ({ message: 'Secret deleted successfully' })),
    }),
    defineRoute({
      method: 'post',
      path: '/api/add-git-providers',
      operationId: 'setGitProviderTokens',
      summary: 'Store git provider tokens',
      description:
        'Replaces the set of provider tokens with the one given (a provider left out is dropped); a provider given without a token keeps its stored token, with the host given. Tokens are write-only (the settings show `provider_tokens_set`). They are not checked against the provider here.',
      tags: ['secrets'],
      body: ProviderTokensInputSchema,
      success: { status: 200, description: 'Stored.', schema: MessageSchema },
      errors: SettingsServiceErrors.setProviderTokens,
      handle: ({ userId, body }) =>
        settings.setProviderTokens(userId, body).map(() => ({ message: 'Git providers stored' })),
    }),
    defineRoute({
      method: 'post',
      path: '/api/unset-provider-tokens',
      operationId: 'unsetGitProviderTokens',
      summary: 'Remove every git provider token',
      tags: ['secrets'],
      success: { status: 200, description: 'Removed.', schema: MessageSchema },
      errors: SettingsServiceErrors.unsetProviderTokens,
      handle: ({ userId }) =>
        settings.unsetProviderTokens(userId).map(() => ({ message: 'Unset Git provider tokens' })),
    }),
  ];
}
