import type { AgentConversationService } from '@acs/core';
import { okAsync } from 'neverthrow';
import { z } from 'zod';
import { defineRoute, type RouteDefinition } from '../route.js';

const ok = okAsync;

/** Liveness and readiness, open to everyone. */
export function healthRoutes(_service: AgentConversationService): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/alive',
      operationId: 'alive',
      summary: 'Liveness probe',
      tags: ['health'],
      authenticated: false,
      success: { status: 200, description: 'The process is up.', schema: z.object({ status: z.literal('ok') }) },
      errors: [],
      handle: () => ok({ status: 'ok' }),
    }),
    defineRoute({
      method: 'get',
      path: '/health',
      operationId: 'health',
      summary: 'Health probe',
      tags: ['health'],
      authenticated: false,
      success: { status: 200, description: 'The service answers.', schema: z.literal('OK') },
      errors: [],
      handle: () => ok('OK'),
    }),
  ];
}
