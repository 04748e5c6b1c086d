import { ConversationServiceErrors, type AgentConversationService } from '@acs/core';
import { okAsync } from 'neverthrow';
import { z } from 'zod';
import { readWholeLog } from '../realtime/feed.js';
import { countV1Frames } from '../realtime/v1-events.js';
import { defineRoute, type RouteDefinition } from '../route.js';
import { conversationIdParams } from './params.js';

const SuccessSchema = z.object({ success: z.literal(true) });

/**
 * The agent-server routes the OpenHands UI calls in V1 mode, with the conversation's own key
 * (`session_api_key`) as X-Session-API-Key, or the user's key or session.
 */
export function agentServerRoutes(service: AgentConversationService): RouteDefinition[] {
  const { conversations } = service;
  return [
    defineRoute({
      method: 'post',
      path: '/api/conversations/{conversation_id}/pause',
      operationId: 'pauseAgent',
      summary: 'Pause the agent',
      description:
        'Stops the agent where it is (a model call in flight is aborted); the conversation and its sandbox stay up. `/run` lets it go on.',
      tags: ['agent (V1 UI)'],
      params: conversationIdParams,
      bodyRequired: false,
      success: { status: 200, description: 'Paused.', schema: SuccessSchema },
      errors: ConversationServiceErrors.pauseAgent,
      conversationScope: ({ params }) => params.conversation_id,
      handle: ({ userId, params }) =>
        conversations.pauseAgent(userId, params.conversation_id).map(() => ({ success: true as const })),
    }),
    defineRoute({
      method: 'post',
      path: '/api/conversations/{conversation_id}/run',
      operationId: 'runAgent',
      summary: 'Let a paused agent go on',
      description:
        'Resumes an agent paused in a running conversation (a stopped conversation is started with POST /api/conversations/{id}/start).',
      tags: ['agent (V1 UI)'],
      params: conversationIdParams,
      bodyRequired: false,
      success: { status: 200, description: 'Running (or nothing to do).', schema: SuccessSchema },
      errors: ConversationServiceErrors.runAgent,
      conversationScope: ({ params }) => params.conversation_id,
      handle: ({ userId, params }) =>
        conversations.runAgent(userId, params.conversation_id).map(() => ({ success: true as const })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/events/count',
      operationId: 'countEvents',
      summary: 'How many events the agent-server socket replays',
      description:
        'The number of frames `/sockets/events/{id}?resend_all=true` sends for the history (the UI uses it to know when the replay is done).',
      tags: ['agent (V1 UI)'],
      query: z.object({ conversation_id__eq: z.string().min(1).max(100) }),
      success: { status: 200, description: 'The count.', schema: z.int().min(0) },
      errors: ConversationServiceErrors.searchEvents,
      conversationScope: ({ query }) => query.conversation_id__eq,
      handle: ({ userId, query }) => readWholeLog(service, userId, query.conversation_id__eq).map(countV1Frames),
    }),
    defineRoute({
      method: 'get',
      path: '/api/vscode/url',
      operationId: 'getVsCodeUrl',
      summary: 'The VS Code URL of the sandbox (none)',
      description: 'Sandboxes here run no VS Code server: always `{"url": null}`.',
      tags: ['agent (V1 UI)'],
      success: { status: 200, description: 'No VS Code.', schema: z.object({ url: z.null() }) },
      errors: [],
      conversationScope: ({ caller }) => caller.conversationId,
      handle: () => okAsync({ url: null }),
    }),
  ];
}
