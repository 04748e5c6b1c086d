import type { AgentConversationService } from '@acs/core';
import { errAsync, okAsync, ResultAsync } from 'neverthrow';
import { z } from 'zod';
import type { OwnSandboxKeyCheck } from '../auth/sandbox-keys.js';
import { booleanParam } from '../query.js';
import { defineRoute, type RouteDefinition } from '../route.js';
import { toExposedUserInfo, toUserInfo, UserInfoSchema } from '../views/user-info.js';

/** `/api/v1/users/*`: who the caller is. */
export function userRoutes(service: AgentConversationService, ownSandboxKey: OwnSandboxKeyCheck): RouteDefinition[] {
  const { settings } = service;
  const view = (userId: string) =>
    settings.load(userId).orElse((error) => (error.type === 'SettingsNotFound' ? okAsync(null) : errAsync(error)));
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/users/me',
      operationId: 'getCurrentUser',
      summary: 'The calling user',
      description:
        'OpenHands 1.11 `UserInfo`: the user’s id and settings, secrets masked (200 with defaults before anything is stored). OpenHands clients (the CLI) call it to check a key: 200 while it works, 401 once it does not. With `expose_secrets=true` the secret values are shown, as OpenHands shows them to code in a sandbox (the SDK’s `OpenHandsCloudWorkspace.get_llm()`): only when `X-Session-API-Key` also holds the key of one of the caller’s running sandboxes (or of a conversation in one): 403 otherwise (the code says whether the key was missing, not such a key, or another user’s).',
      tags: ['users (V1)'],
      query: z.object({ expose_secrets: booleanParam }),
      headers: z.object({ 'X-Session-API-Key': z.string().max(512).optional() }),
      success: { status: 200, description: 'The user.', schema: UserInfoSchema },
      errors: ['SecretsNotExposed', 'StoreUnavailable'],
      handle: ({ userId, query, headers }) =>
        query.expose_secrets
          ? ownSandboxKey(userId, headers['X-Session-API-Key'] ?? null).andThen(() =>
              ResultAsync.combine([view(userId), settings.loadWithSecrets(userId)] as const).map(([shown, stored]) =>
                toExposedUserInfo(userId, shown, stored),
              ),
            )
          : view(userId).map((shown) => toUserInfo(userId, shown)),
    }),
  ];
}
