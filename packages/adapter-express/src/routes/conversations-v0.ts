import { ConversationServiceErrors, type AgentConversationService, type ConversationOverview } from '@acs/core';
import { ConversationTriggerSchema, NewConversationRequestSchema } from '@acs/core/schemas';
import { z } from 'zod';
import { booleanParam, limitParam, pageIdParam } from '../query.js';
import type { RouteContext } from '../route-context.js';
import { defineRoute, type RouteDefinition } from '../route.js';
import { conversationIdParams } from './params.js';
import { ConfirmationRequestSchema, paged, SuccessSchema } from './shared.js';
import {
  conversationLinks,
  ConversationInfoSchema,
  ConversationStatusResponseSchema,
  NewConversationResponseSchema,
  toConversationInfo,
  toConversationStatusResponse,
  toNewConversationResponse,
} from '../views/conversations.js';

/** V0 `POST /api/conversations/{id}/message` body. */
const V0MessageRequestSchema = z.strictObject({
  message: z
    .string()
    .min(1, 'must not be empty')
    .max(1_000_000, 'must be at most 1,000,000 characters')
    .refine((text) => text.trim() !== '', 'must not be blank'),
});

/** V0 conversations: create, list, read, rename, delete, start and stop, messages, events and confirmation. */
export function conversationRoutesV0(service: AgentConversationService, context: RouteContext): RouteDefinition[] {
  const { conversations } = service;
  const info = (c: ConversationOverview, userId: string, mountPath: string) =>
    toConversationInfo(c, conversationLinks(c.record, userId, mountPath, context.conversationKeys));
  return [
    defineRoute({
      method: 'post',
      path: '/api/conversations',
      operationId: 'newConversation',
      summary: 'New Conversation',
      description:
        'Creates a conversation in a new sandbox and starts it. Needs stored settings with llm_model and llm_api_key unless replay_json is given. Nothing is stored when the request is refused.',
      tags: ['conversations (V0)'],
      body: NewConversationRequestSchema,
      success: { status: 200, description: 'Successful Response', schema: NewConversationResponseSchema },
      errors: ConversationServiceErrors.create,
      handle: ({ userId, body }) => conversations.create(userId, body).map(toNewConversationResponse),
    }),
    defineRoute({
      method: 'get',
      path: '/api/conversations',
      operationId: 'listConversations',
      summary: 'List conversations (V0 shape)',
      tags: ['conversations (V0)'],
      query: z.object({
        page_id: pageIdParam,
        limit: limitParam,
        selected_repository: z.string().max(255).optional(),
        conversation_trigger: ConversationTriggerSchema.optional(),
        include_sub_conversations: booleanParam,
      }),
      success: {
        status: 200,
        description: 'A page of conversations, newest first.',
        schema: z.object({ results: z.array(ConversationInfoSchema), next_page_id: z.string().nullable() }),
      },
      errors: ConversationServiceErrors.search,
      handle: ({ userId, query, mountPath }) =>
        paged(query, (page) =>
          conversations.search(
            userId,
            {
              ...(query.selected_repository !== undefined ? { selected_repository: query.selected_repository } : {}),
              ...(query.conversation_trigger !== undefined ? { trigger: query.conversation_trigger } : {}),
              ...(query.include_sub_conversations !== undefined
                ? { include_sub_conversations: query.include_sub_conversations }
                : {}),
            },
            page,
          ),
        ).map((p) => ({ results: p.items.map((c) => info(c, userId, mountPath)), next_page_id: p.next_page_id })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/conversations/{conversation_id}',
      operationId: 'getConversation',
      summary: 'Get a conversation (V0 shape)',
      tags: ['conversations (V0)'],
      params: conversationIdParams,
      success: { status: 200, description: 'The conversation.', schema: ConversationInfoSchema },
      errors: ConversationServiceErrors.get,
      handle: ({ userId, params, mountPath }) =>
        conversations.get(userId, params.conversation_id).map((c) => info(c, userId, mountPath)),
    }),
    defineRoute({
      method: 'delete',
      path: '/api/conversations/{conversation_id}',
      operationId: 'deleteConversation',
      summary: 'Delete a conversation',
      description: 'Deletes the conversation and its start tasks, and its sandbox when no other conversation uses it.',
      tags: ['conversations (V0)'],
      params: conversationIdParams,
      success: { status: 200, description: 'Deleted.', schema: z.literal(true) },
      errors: ConversationServiceErrors.delete,
      handle: ({ userId, params }) => conversations.delete(userId, params.conversation_id).map(() => true as const),
    }),
    defineRoute({
      method: 'post',
      path: '/api/conversations/{conversation_id}/start',
      operationId: 'startConversation',
      summary: 'Start a stopped conversation',
      description:
        'Resumes its sandbox (or starts a new one if it was lost) and brings the conversation back to RUNNING.',
      tags: ['conversations (V0)'],
      params: conversationIdParams,
      body: z.object({ providers_set: z.array(z.string()).nullable().optional() }).optional(),
      bodyRequired: false,
      success: {
        status: 200,
        description: 'The conversation is starting or already running.',
        schema: ConversationStatusResponseSchema,
      },
      errors: ConversationServiceErrors.start,
      handle: ({ userId, params }) =>
        conversations.start(userId, params.conversation_id).map(toConversationStatusResponse),
    }),
    defineRoute({
      method: 'post',
      path: '/api/conversations/{conversation_id}/stop',
      operationId: 'stopConversation',
      summary: 'Stop a conversation',
      description: 'Marks it STOPPED and pauses its sandbox unless another running conversation uses it.',
      tags: ['conversations (V0)'],
      params: conversationIdParams,
      success: { status: 200, description: 'The conversation is stopped.', schema: ConversationStatusResponseSchema },
      errors: ConversationServiceErrors.stop,
      handle: ({ userId, params }) =>
        conversations.stop(userId, params.conversation_id).map(toConversationStatusResponse),
    }),
    defineRoute({
      method: 'post',
      path: '/api/conversations/{conversation_id}/message',
      operationId: 'sendConversationMessage',
      summary: 'Send a message to the agent (V0 shape)',
      description:
        'Appends a user message to the conversation. A running conversation acts on it at once (also after the agent finished, its sandbox resumed first if it was paused); a stopped one acts on it when started.',
      tags: ['conversations (V0)'],
      params: conversationIdParams,
      body: V0MessageRequestSchema,
      success: { status: 200, description: 'The message is stored.', schema: SuccessSchema },
      errors: ConversationServiceErrors.sendMessage,
      handle: ({ userId, params, body }) =>
        conversations
          .sendMessage(userId, params.conversation_id, {
            role: 'user',
            content: [{ type: 'text', text: body.message }],
            run: true,
          })
          .map(() => ({ success: true as const })),
    }),

    defineRoute({
      method: 'post',
      path: '/api/conversations/{conversation_id}/events/respond_to_confirmation',
      operationId: 'respondToConfirmationV0',
      summary: 'Accept or reject the actions waiting for confirmation (V0 shape)',
      description:
        'In confirmation mode the agent stops before running actions (execution status waiting_for_confirmation). `accept: true` runs them and the agent goes on; `accept: false` records an observation for each saying it was rejected (with `reason`), and the agent waits for a message. 409 when nothing waits.',
      tags: ['conversations (V0)'],
      params: conversationIdParams,
      body: ConfirmationRequestSchema,
      success: { status: 200, description: 'The decision is recorded.', schema: SuccessSchema },
      errors: ConversationServiceErrors.respondToConfirmation,
      handle: ({ userId, params, body }) =>
        conversations
          .respondToConfirmation(userId, params.conversation_id, { accept: body.accept, reason: body.reason ?? null })
          .map(() => ({ success: true as const })),
    }),
  ];
}
