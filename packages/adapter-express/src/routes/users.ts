import type { AgentConversationService } from '@acs/core';
import { errAsync, okAsync } from 'neverthrow';
import { defineRoute, type RouteDefinition } from '../route.js';
import { toUserInfo, UserInfoSchema } from '../views/user-info.js';

/** `/api/v1/users/*`: who the caller is. */
export function userRoutes(service: AgentConversationService): RouteDefinition[] {
  const { settings } = service;
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/users/me',
      operationId: 'getCurrentUser',
      summary: 'The calling user',
      description:
        'OpenHands 1.11 `UserInfo`: the user’s id and settings, secrets masked (never their values; 200 with defaults before anything is stored). OpenHands clients (the CLI) call it to check a key: 200 while it works, 401 once it does not.',
      tags: ['users (V1)'],
      success: { status: 200, description: 'The user.', schema: UserInfoSchema },
      errors: ['StoreUnavailable'],
      handle: ({ userId }) =>
        settings
          .load(userId)
          .map((view) => toUserInfo(userId, view))
          .orElse((error) => (error.type === 'SettingsNotFound' ? okAsync(toUserInfo(userId, null)) : errAsync(error))),
    }),
  ];
}
