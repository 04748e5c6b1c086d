import { ConversationServiceErrors, type AgentConversationService, type ConversationOverview } from '@acs/core';
import { AppConversationStartRequestSchema, ConfirmationEventSchema, ConversationEventSchema, EventPageSchema, MessageEventSchema, SendMessageRequestSchema, StartTaskSchema } from '@acs/core/schemas';
import { z } from 'zod';
import { eventIdParam, idList, kindList, limitParam, pagingQuery, timestampParam } from '../query.js';
import type { RouteContext } from '../route-context.js';
import { defineRoute, type RouteDefinition } from '../route.js';
import { conversationIdParams } from './params.js';
import { ConfirmationRequestSchema, conversationFilterQuery, CountSchema, paged, pageOf, toFilter } from './shared.js';
import { AppConversationSchema, conversationLinks, toAppConversation } from '../views/conversations.js';
import { openFeed } from '../realtime/feed.js';

/** V1 app conversations: start tasks, search and count, read, events, messages, confirmation, pause and run (literal paths before parameterised ones). */
export function appConversationRoutes(service: AgentConversationService, context: RouteContext): RouteDefinition[] {
  const { conversations } = service;
  const app = (c: ConversationOverview, userId: string, mountPath: string) => toAppConversation(c, conversationLinks(c.record.id, userId, mountPath, context.conversationKeys));
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/app-conversations',
      operationId: 'startAppConversation',
      summary: 'Create an app conversation',
      description:
        'Returns a start task (WORKING) at once; poll GET /api/v1/app-conversations/start-tasks?ids=… until READY or ERROR. app_conversation_id is known from the first response.',
      tags: ['app conversations (V1)'],
      body: AppConversationStartRequestSchema,
      success: { status: 200, description: 'The start task.', schema: StartTaskSchema },
      errors: ConversationServiceErrors.startApp,
      handle: ({ userId, body }) => conversations.startApp(userId, body),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/app-conversations/search',
      operationId: 'searchAppConversations',
      summary: 'Search app conversations',
      tags: ['app conversations (V1)'],
      query: pagingQuery.extend(conversationFilterQuery),
      success: { status: 200, description: 'A page of conversations, newest first.', schema: pageOf(AppConversationSchema) },
      errors: ConversationServiceErrors.search,
      handle: ({ userId, query, mountPath }) => paged(query, (page) => conversations.search(userId, toFilter(query), page)).map((p) => ({ ...p, items: p.items.map((c) => app(c, userId, mountPath)) })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/app-conversations/count',
      operationId: 'countAppConversations',
      summary: 'Count app conversations',
      tags: ['app conversations (V1)'],
      query: z.object(conversationFilterQuery),
      success: { status: 200, description: 'How many match the filters.', schema: CountSchema },
      errors: ConversationServiceErrors.count,
      handle: ({ userId, query }) => conversations.count(userId, toFilter(query)),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/app-conversations/start-tasks/search',
      operationId: 'searchStartTasks',
      summary: 'Search start tasks',
      tags: ['app conversations (V1)'],
      query: pagingQuery.extend({
        conversation_id__eq: z.string().min(1).max(100).optional(),
        created_at__gte: timestampParam,
        sort_order: z.enum(['CREATED_AT', 'CREATED_AT_DESC']).default('CREATED_AT_DESC'),
      }),
      success: { status: 200, description: 'A page of start tasks.', schema: pageOf(StartTaskSchema) },
      errors: ConversationServiceErrors.searchStartTasks,
      handle: ({ userId, query }) =>
        paged(query, (page) =>
          conversations.searchStartTasks(
            userId,
            {
              ...(query.conversation_id__eq !== undefined ? { app_conversation_id: query.conversation_id__eq } : {}),
              ...(query.created_at__gte !== undefined ? { created_at_gte: query.created_at__gte } : {}),
            },
            page,
            query.sort_order === 'CREATED_AT' ? 'oldest_first' : 'newest_first',
          ),
        ),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/app-conversations/start-tasks/count',
      operationId: 'countStartTasks',
      summary: 'Count start tasks',
      tags: ['app conversations (V1)'],
      query: z.object({ conversation_id__eq: z.string().min(1).max(100).optional(), created_at__gte: timestampParam }),
      success: { status: 200, description: 'How many match.', schema: CountSchema },
      errors: ConversationServiceErrors.countStartTasks,
      handle: ({ userId, query }) =>
        conversations.countStartTasks(userId, {
          ...(query.conversation_id__eq !== undefined ? { app_conversation_id: query.conversation_id__eq } : {}),
          ...(query.created_at__gte !== undefined ? { created_at_gte: query.created_at__gte } : {}),
        }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/app-conversations/start-tasks',
      operationId: 'getStartTasks',
      summary: 'Get start tasks by id',
      tags: ['app conversations (V1)'],
      query: z.object({ ids: idList }),
      success: { status: 200, description: 'In the order asked; null where there is no such task.', schema: z.array(StartTaskSchema.nullable()) },
      errors: ConversationServiceErrors.getStartTasks,
      handle: ({ userId, query }) => conversations.getStartTasks(userId, query.ids),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/app-conversations',
      operationId: 'listAppConversations',
      summary: 'List app conversations, or get them by id',
      description: 'With ids: an array in the order asked, null where there is no such conversation. Without: a page, like /search.',
      tags: ['app conversations (V1)'],
      query: pagingQuery.extend({ ...conversationFilterQuery, ids: idList.optional() }),
      success: {
        status: 200,
        description: 'A page, or an array when ids is given.',
        schema: z.union([pageOf(AppConversationSchema), z.array(AppConversationSchema.nullable())]),
      },
      errors: [...ConversationServiceErrors.getMany, ...ConversationServiceErrors.search],
      handle: ({ userId, query, mountPath }) =>
        query.ids
          ? conversations.getMany(userId, query.ids).map((list): unknown => list.map((c) => (c ? app(c, userId, mountPath) : null)))
          : paged(query, (page) => conversations.search(userId, toFilter(query), page)).map((p): unknown => ({ ...p, items: p.items.map((c) => app(c, userId, mountPath)) })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/app-conversations/{conversation_id}',
      operationId: 'getAppConversation',
      summary: 'Get an app conversation',
      tags: ['app conversations (V1)'],
      params: conversationIdParams,
      success: { status: 200, description: 'The conversation.', schema: AppConversationSchema },
      errors: ConversationServiceErrors.get,
      handle: ({ userId, params, mountPath }) => conversations.get(userId, params.conversation_id).map((c) => app(c, userId, mountPath)),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/app-conversations/{conversation_id}/send-message',
      operationId: 'sendAppConversationMessage',
      summary: 'Send a message to the agent',
      description:
        'Appends a user message (text and/or images) to the conversation and returns the stored message event. With `run: true` a running conversation acts on it at once (also after the agent finished); with `run: false` (the default, as in OpenHands) it is only recorded and the agent sees it on its next run. A working agent sees it at its next step either way; a stopped conversation sees it when started. Only role "user" is accepted.',
      tags: ['events (V1)'],
      params: conversationIdParams,
      body: SendMessageRequestSchema,
      success: { status: 200, description: 'The stored message event.', schema: MessageEventSchema },
      errors: ConversationServiceErrors.sendMessage,
      handle: ({ userId, params, body }) => conversations.sendMessage(userId, params.conversation_id, body),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/app-conversations/{conversation_id}/respond-to-confirmation',
      operationId: 'respondToConfirmation',
      summary: 'Accept or reject the actions waiting for confirmation',
      description:
        'In confirmation mode the agent stops before running actions (execution status waiting_for_confirmation; the actions are in the events with requires_confirmation: true and their security_risk). `accept: true` runs them and the agent goes on; `accept: false` records an observation for each saying it was rejected (with `reason`, which the model sees), and the agent waits for a message. Returns the stored confirmation event; 409 when nothing waits.',
      tags: ['events (V1)'],
      params: conversationIdParams,
      body: ConfirmationRequestSchema,
      success: { status: 200, description: 'The stored confirmation event.', schema: ConfirmationEventSchema },
      errors: ConversationServiceErrors.respondToConfirmation,
      handle: ({ userId, params, body }) => conversations.respondToConfirmation(userId, params.conversation_id, { accept: body.accept, reason: body.reason ?? null }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/app-conversations/{conversation_id}/events',
      operationId: 'searchConversationEvents',
      summary: "Read a conversation's events",
      description:
        'Oldest first, the events with an id greater than `after`, optionally of some kinds only. Pass `next_after` as `after` for the next page; it is null when the page reached the end of the log so far (later events may still come: poll with the last id, or use /events/stream).',
      tags: ['events (V1)'],
      params: conversationIdParams,
      query: z.object({
        after: eventIdParam.default(0).meta({ description: 'Only events with a greater id (default 0: from the start).' }),
        kind: kindList,
        limit: limitParam,
      }),
      success: { status: 200, description: 'A page of events, oldest first.', schema: EventPageSchema },
      errors: ConversationServiceErrors.searchEvents,
      handle: ({ userId, params, query }) =>
        conversations.searchEvents(userId, params.conversation_id, { after: query.after, kinds: query.kind ?? null, limit: query.limit }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/app-conversations/{conversation_id}/events/stream',
      operationId: 'streamConversationEvents',
      summary: "Follow a conversation's events (Server-Sent Events)",
      description:
        'A text/event-stream: first the events after the resume point, then each new event as it happens, each exactly once and in order. Every message is `id: <event id>`, `event: <kind>`, `data: <ConversationEvent JSON>`; a `: ping` comment is sent periodically. Resume with the standard Last-Event-ID header (EventSource sends it when it reconnects) or `?after=<id>`; the header wins. Authenticate like every other route (X-Session-API-Key header or the host\'s own authentication); keys in the URL are not accepted.',
      tags: ['events (V1)'],
      params: conversationIdParams,
      query: z.object({
        after: eventIdParam.optional().meta({ description: 'Resume after this event id (default 0: from the start). Last-Event-ID wins when both are given.' }),
      }),
      headers: z.object({
        'Last-Event-ID': eventIdParam.optional().meta({ description: 'The id of the last event received; the stream resumes after it.' }),
      }),
      success: { status: 200, description: 'The event stream; the data of every message is a ConversationEvent.', schema: ConversationEventSchema },
      errors: ConversationServiceErrors.subscribeEvents,
      stream: ({ userId, params, query, headers }, send, end, pacing) =>
        openFeed(
          service,
          userId,
          params.conversation_id,
          headers['Last-Event-ID'] ?? query.after ?? 0,
          {
            history: (event) => send({ id: event.id, event: event.kind, data: event }),
            live: (event) => send({ id: event.id, event: event.kind, data: event }),
            end,
            // The client resumes with Last-Event-ID either way.
            failed: (failure) => (failure.type === 'ClientNotReading' ? pacing.drop('the client took nothing of the replay') : end()),
          },
          pacing,
        ),
    }),
  ];
}
