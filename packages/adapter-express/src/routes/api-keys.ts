import { ApiKeyServiceErrors, type AgentConversationService } from '@acs/core';
import { ApiKeyCreateSchema, ApiKeyInfoSchema, CreatedApiKeySchema } from '@acs/core/schemas';
import { z } from 'zod';
import { defineRoute, recordPathParams, type RouteDefinition } from '../route.js';
import { pathSegment } from './params.js';
import { SuccessSchema } from './shared.js';

const keyPath = recordPathParams(z.object({ key_id: pathSegment(64) }), 'ApiKeyNotFound', (p) => ({
  type: 'ApiKeyNotFound',
  keyId: p.key_id ?? '',
}));

/** OpenHands' `LlmApiKeyResponse`: the model key the CLI puts in its local agent settings. */
const LlmApiKeySchema = z
  .object({
    key: z
      .string()
      .nullable()
      .meta({ description: 'The caller’s stored llm_api_key (settings), or null when none is stored.' }),
  })
  .meta({ id: 'LlmApiKeyResponse' });

/**
 * The user's own API keys (named, listed without secrets, revoked at once) and, as OpenHands
 * answers its CLI, the user's model key.
 */
export function apiKeyRoutes(service: AgentConversationService): RouteDefinition[] {
  const { apiKeys, settings } = service;
  return [
    defineRoute({
      method: 'get',
      path: '/api/keys',
      operationId: 'listApiKeys',
      summary: 'List your API keys',
      description:
        'The keys you made (here, in the console, or by signing in a device such as the OpenHands CLI), oldest first, without their secrets, with when each expires (`expires_at`; an expired key opens nothing and goes when you next make one). Keys from the server’s configuration are not listed.',
      tags: ['keys'],
      success: { status: 200, description: 'Your keys.', schema: z.array(ApiKeyInfoSchema) },
      errors: ApiKeyServiceErrors.list,
      handle: ({ userId }) => apiKeys.list(userId),
    }),
    defineRoute({
      method: 'post',
      path: '/api/keys',
      operationId: 'createApiKey',
      summary: 'Make an API key',
      description:
        'A new key of yours with the name given, never expiring unless `expires_in_days` says when. Its secret (acsk_…) is in this answer only: only its hash is kept. 409 API_KEY_LIMIT_REACHED past the limit per user (expired keys do not count).',
      tags: ['keys'],
      body: ApiKeyCreateSchema,
      success: { status: 200, description: 'The key, with its secret this once.', schema: CreatedApiKeySchema },
      errors: ApiKeyServiceErrors.create,
      handle: ({ userId, body }) =>
        apiKeys.create(userId, body.name, {
          lifetimeMs: body.expires_in_days ? body.expires_in_days * 24 * 3600_000 : null,
        }),
    }),
    defineRoute({
      method: 'delete',
      path: '/api/keys/{key_id}',
      operationId: 'revokeApiKey',
      summary: 'Revoke an API key',
      description:
        'From now on the key opens nothing: requests with it get 401, browser sessions it signed in end, and live channels opened with it (or with those sessions) close within a second.',
      tags: ['keys'],
      params: keyPath,
      success: { status: 200, description: 'Revoked.', schema: SuccessSchema },
      errors: ApiKeyServiceErrors.revoke,
      handle: ({ userId, params }) => apiKeys.revoke(userId, params.key_id).map(() => ({ success: true as const })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/keys/llm/byor',
      operationId: 'getLlmApiKey',
      summary: 'Your model key (as OpenHands answers its CLI)',
      description:
        'The llm_api_key stored in your settings, in clear, or null: what `openhands login` puts into its local agent settings. Only with an API key (X-Session-API-Key or Bearer): a browser session gets 403 API_KEY_REQUIRED and a conversation’s key 401, so no page and no sandbox can read it.',
      tags: ['keys'],
      apiKeyOnly: true,
      success: { status: 200, description: 'The key, or null.', schema: LlmApiKeySchema },
      errors: ['StoreUnavailable'],
      handle: ({ userId }) => settings.loadWithSecrets(userId).map((stored) => ({ key: stored?.llm_api_key || null })),
    }),
  ];
}
