import { ConversationServiceErrors, type AgentConversationService, type ConversationOverview } from '@acs/core';
import {
  AppConversationStartRequestSchema,
  BranchNameSchema,
  ConfirmationEventSchema,
  ConversationEventSchema,
  EventPageSchema,
  GitProviderSchema,
  RepositoryNameSchema,
  SandboxStatusSchema,
  SendMessageRequestSchema,
  StartTaskSchema,
} from '@acs/core/schemas';
import { errAsync } from 'neverthrow';
import { z } from 'zod';
import {
  batchIdList,
  checkBatchIds,
  UUID_PATTERN,
  eventIdParam,
  kindList,
  limitParam,
  pagingQuery,
  timestampParam,
} from '../query.js';
import type { RouteContext } from '../route-context.js';
import { defineRoute, type RouteDefinition, type SseMessage, type StreamPacing } from '../route.js';
import { conversationIdParams } from './params.js';
import {
  ConfirmationRequestSchema,
  conversationFilterQuery,
  CountSchema,
  paged,
  pageOf,
  SuccessSchema,
  toFilter,
} from './shared.js';
import { AppConversationSchema, conversationLinks, toAppConversation } from '../views/conversations.js';
import { deltaGate } from '../realtime/deltas.js';
import { openFeed } from '../realtime/feed.js';
import { chunkQueue } from '../chunk-queue.js';

/** OpenHands' AppSendMessageRequest: only user messages, at least one part, and `run` unless said otherwise. */
const AppSendMessageRequestSchema = SendMessageRequestSchema.extend({
  content: SendMessageRequestSchema.shape.content.min(1, 'give at least one text or image part'),
  run: z
    .boolean()
    .default(true)
    .meta({ description: 'Let the agent act on it (default, as in OpenHands); false only records it.' }),
});

/** OpenHands' AppSendMessageResponse. */
const AppSendMessageResponseSchema = z.object({
  success: z.boolean(),
  sandbox_status: SandboxStatusSchema,
  message: z
    .string()
    .nullable()
    .meta({ description: 'What happens to the message when the agent cannot act on it now.' }),
});

/** OpenHands' AppConversationUpdateRequest: a field left out is kept, null clears it. */
const AppConversationUpdateRequestSchema = z.object({
  title: z
    .string()
    .trim()
    .min(1)
    .max(200)
    .nullable()
    .optional()
    .meta({ description: 'null gives back the default title.' }),
  public: z.boolean().nullable().optional(),
  selected_repository: RepositoryNameSchema.nullable()
    .optional()
    .meta({ description: 'null clears it, with its branch and provider (send those as null or leave them out).' }),
  selected_branch: BranchNameSchema.nullable().optional(),
  git_provider: GitProviderSchema.nullable().optional(),
});

/** How many ids one batch read of conversations may name (OpenHands refuses 100 or more). */
const MAX_CONVERSATION_IDS = 99;
/** How many ids one batch read of start tasks may name. */
const MAX_TASK_IDS = 100;

/** V1 app conversations: start (also streamed), start tasks, search and count, read, change, delete, events, messages, confirmation (literal paths before parameterised ones). */
/** One pattern per id in the document (a second, as a regex, would make it an intersection clients cannot type). */
const UUID = new RegExp(UUID_PATTERN);

export function appConversationRoutes(service: AgentConversationService, context: RouteContext): RouteDefinition[] {
  const { conversations } = service;
  const app = (c: ConversationOverview, userId: string, mountPath: string) =>
    toAppConversation(c, conversationLinks(c.record, userId, mountPath, context.conversationKeys));
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
      method: 'post',
      path: '/api/v1/app-conversations/stream-start',
      operationId: 'streamStartAppConversation',
      summary: 'Create an app conversation, following its start',
      description:
        'As POST /api/v1/app-conversations, but the answer is a JSON array written as the start goes on (as OpenHands streams it: `[`, then each start task snapshot, `,` between them, `]` once it is READY or ERROR). A refused request is a JSON error as usual.',
      tags: ['app conversations (V1)'],
      body: AppConversationStartRequestSchema,
      success: {
        status: 200,
        description: 'The start task at each step, oldest first.',
        contentType: 'application/json',
        schema: z.array(StartTaskSchema),
      },
      errors: [...ConversationServiceErrors.startApp, ...ConversationServiceErrors.followStartTask],
      respond: ({ userId, body }) =>
        conversations.startApp(userId, body).andThen((first) => {
          let follow: { close(): void } | null = null;
          const queue = chunkQueue(() => follow?.close());
          let sent = 0;
          const send = (task: unknown) => queue.push(`${sent++ === 0 ? '[\n' : ',\n'}${JSON.stringify(task)}`);
          send(first);
          return conversations
            .followStartTask(
              userId,
              first.id,
              (task) => {
                if (task.updated_at !== first.updated_at || task.status !== first.status) send(task);
              },
              () => {
                queue.push(']');
                queue.end();
              },
            )
            .map((handle) => {
              follow = handle;
              return { chunks: queue.chunks };
            });
        }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/app-conversations/search',
      operationId: 'searchAppConversations',
      summary: 'Search app conversations',
      tags: ['app conversations (V1)'],
      query: pagingQuery.extend(conversationFilterQuery),
      success: {
        status: 200,
        description: 'A page of conversations, newest first.',
        schema: pageOf(AppConversationSchema),
      },
      errors: ConversationServiceErrors.search,
      handle: ({ userId, query, mountPath }) =>
        paged(query, (page) => conversations.search(userId, toFilter(query), page)).map((p) => ({
          ...p,
          items: p.items.map((c) => app(c, userId, mountPath)),
        })),
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
      description: `Ids are UUIDs (32 hex digits, dashed or not); 400 INVALID_IDS for more than ${MAX_TASK_IDS}, as OpenHands answers.`,
      tags: ['app conversations (V1)'],
      query: z.object({
        ids: batchIdList(
          z
            .string()
            .meta({ pattern: UUID_PATTERN })
            .refine((id) => UUID.test(id), 'must be a UUID (32 hex digits, dashed or not)'),
        ),
      }),
      success: {
        status: 200,
        description: 'In the order asked; null where there is no such task.',
        schema: z.array(StartTaskSchema.nullable()),
      },
      errors: ['InvalidIds', ...ConversationServiceErrors.getStartTasks],
      handle: ({ userId, query }) => {
        const refused = checkBatchIds('ids', query.ids, { max: MAX_TASK_IDS });
        return refused ? errAsync(refused) : conversations.getStartTasks(userId, query.ids);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/app-conversations',
      operationId: 'listAppConversations',
      summary: 'List app conversations, or get them by id',
      description: `With ids (UUIDs, 32 hex digits dashed or not, on a server that issues only its own ids; at most ${MAX_CONVERSATION_IDS}, as OpenHands allows; 400 INVALID_IDS otherwise): an array in the order asked, null where there is no such conversation. Without: a page, like /search.`,
      tags: ['app conversations (V1)'],
      query: pagingQuery.extend({
        ...conversationFilterQuery,
        ids: batchIdList(z.string().meta({ pattern: UUID_PATTERN })).optional(),
      }),
      success: {
        status: 200,
        description: 'A page, or an array when ids is given.',
        schema: z.union([pageOf(AppConversationSchema), z.array(AppConversationSchema.nullable())]),
      },
      errors: ['InvalidIds', ...ConversationServiceErrors.getMany, ...ConversationServiceErrors.search],
      handle: ({ userId, query, mountPath }) => {
        if (!query.ids)
          return paged(query, (page) => conversations.search(userId, toFilter(query), page)).map((p): unknown => ({
            ...p,
            items: p.items.map((c) => app(c, userId, mountPath)),
          }));
        const refused = checkBatchIds('ids', query.ids, {
          max: MAX_CONVERSATION_IDS,
          ...(conversations.acceptsClientIds ? {} : { form: 'uuid' as const }),
        });
        if (refused) return errAsync(refused);
        return conversations
          .getMany(userId, query.ids)
          .map((list): unknown => list.map((c) => (c ? app(c, userId, mountPath) : null)));
      },
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
      handle: ({ userId, params, mountPath }) =>
        conversations.get(userId, params.conversation_id).map((c) => app(c, userId, mountPath)),
    }),
    defineRoute({
      method: 'patch',
      path: '/api/v1/app-conversations/{conversation_id}',
      operationId: 'updateAppConversation',
      summary: 'Change an app conversation',
      description:
        'Its title, whether it is public, its repository, branch and provider: only what the body names changes (null clears it). Nothing runs: a new repository is cloned when the conversation is next started in a new sandbox.',
      tags: ['app conversations (V1)'],
      params: conversationIdParams,
      body: AppConversationUpdateRequestSchema,
      success: { status: 200, description: 'The conversation as it is now.', schema: AppConversationSchema },
      errors: ConversationServiceErrors.update,
      handle: ({ userId, params, body, mountPath }) =>
        conversations
          .update(userId, params.conversation_id, {
            ...(body.title !== undefined ? { title: body.title } : {}),
            ...(body.public !== undefined ? { public: body.public } : {}),
            ...(body.selected_repository !== undefined ? { selected_repository: body.selected_repository } : {}),
            ...(body.selected_branch !== undefined ? { selected_branch: body.selected_branch } : {}),
            ...(body.git_provider !== undefined ? { git_provider: body.git_provider } : {}),
          })
          .map((c) => app(c, userId, mountPath)),
    }),
    defineRoute({
      method: 'delete',
      path: '/api/v1/app-conversations/{conversation_id}',
      operationId: 'deleteAppConversation',
      summary: 'Delete an app conversation',
      description:
        'As DELETE /api/conversations/{id}: the conversation, its events and start tasks, and its sandbox when no other conversation uses it.',
      tags: ['app conversations (V1)'],
      params: conversationIdParams,
      success: { status: 200, description: 'Deleted.', schema: SuccessSchema },
      errors: ConversationServiceErrors.delete,
      handle: ({ userId, params }) =>
        conversations.delete(userId, params.conversation_id).map(() => ({ success: true as const })),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/app-conversations/{conversation_id}/rotate-key',
      operationId: 'rotateAppConversationKey',
      summary: 'Give the conversation a new key',
      description:
        'Its `session_api_key` (which opens its live channels and agent routes, and, while its sandbox runs, the sandbox’s secret routes) is replaced: the old one opens nothing from now on, and live channels opened with it close within a second. Answers the conversation with its new key. A key also stops working when the conversation’s sandbox is deleted, or when the conversation moves to another sandbox. Not with the conversation’s own key: an API key or a browser session.',
      tags: ['app conversations (V1)'],
      params: conversationIdParams,
      success: { status: 200, description: 'The conversation, with its new key.', schema: AppConversationSchema },
      errors: ConversationServiceErrors.rotateKey,
      handle: ({ userId, params, mountPath }) =>
        conversations
          .rotateKey(userId, params.conversation_id)
          .andThen(() => conversations.get(userId, params.conversation_id))
          .map((c) => app(c, userId, mountPath)),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/app-conversations/{conversation_id}/send-message',
      operationId: 'sendAppConversationMessage',
      summary: 'Send a message to the agent',
      description:
        'Appends a user message (text and/or images) to the conversation. With `run: true` (the default, as in OpenHands) a running conversation acts on it at once (also after the agent finished); with `run: false` it is only recorded and the agent sees it on its next run. A working agent sees it at its next step either way. A running conversation whose sandbox was paused (idle, its conversations finished, or to make room for another) gets the sandbox resumed first, within the per-user sandbox limit, workspace as it was. Unlike OpenHands, a conversation whose sandbox is not running takes the message too (a stopped one, or a resume refused at the limit): its agent sees it when the conversation is started (`message` says so). Only role "user" is accepted.',
      tags: ['events (V1)'],
      params: conversationIdParams,
      body: AppSendMessageRequestSchema,
      success: { status: 200, description: 'The message is stored.', schema: AppSendMessageResponseSchema },
      errors: [...ConversationServiceErrors.sendMessage, ...ConversationServiceErrors.get],
      handle: ({ userId, params, body }) =>
        conversations
          .sendMessage(userId, params.conversation_id, body)
          .andThen(() => conversations.get(userId, params.conversation_id))
          .map((c) => ({
            success: true,
            sandbox_status: c.sandbox_status,
            message:
              c.status === 'RUNNING'
                ? null
                : `The conversation is ${c.status} (its sandbox is ${c.sandbox_status}): the agent acts on the message when the conversation is started.`,
          })),
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
      handle: ({ userId, params, body }) =>
        conversations.respondToConfirmation(userId, params.conversation_id, {
          accept: body.accept,
          reason: body.reason ?? null,
        }),
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
        after: eventIdParam
          .default(0)
          .meta({ description: 'Only events with a greater id (default 0: from the start).' }),
        kind: kindList,
        limit: limitParam,
      }),
      success: { status: 200, description: 'A page of events, oldest first.', schema: EventPageSchema },
      errors: ConversationServiceErrors.searchEvents,
      handle: ({ userId, params, query }) =>
        conversations.searchEvents(userId, params.conversation_id, {
          after: query.after,
          kinds: query.kind ?? null,
          limit: query.limit,
        }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/app-conversations/{conversation_id}/events/stream',
      operationId: 'streamConversationEvents',
      summary: "Follow a conversation's events (Server-Sent Events)",
      description:
        "A text/event-stream: first the events after the resume point, then each new event as it happens, each exactly once and in order. Every such message is `id: <event id>`, `event: <kind>`, `data: <ConversationEvent JSON>`; a `: ping` comment is sent periodically. Resume with the standard Last-Event-ID header (EventSource sends it when it reconnects) or `?after=<id>`; the header wins. Authenticate like every other route (X-Session-API-Key header or the host's own authentication); keys in the URL are not accepted.\n\nWhile the model writes an answer, its pieces come live as `event: delta` messages with NO `id:` line (so Last-Event-ID and EventSource's lastEventId always name a stored event) and `data: {kind: \"delta\", message_id, attempt, content, reasoning_content, timestamp}`: `content` is text of the answer (or of the thought beside tool calls), `reasoning_content` the model's reasoning, either null; pieces of one `message_id` and `attempt` join in order, and a new `attempt` of the same `message_id` starts the text afresh (drop what was shown of the earlier one). Deltas are never stored: they are not replayed on resume, not sent to a stream that opens later, and not in the event search; the stored event that follows (a message, or an action's thought) holds the whole text and replaces them. A client that falls behind is not cut off for deltas: the rest of the answer's deltas are left out for it (it keeps the start it has) until the stored event comes.",
      tags: ['events (V1)'],
      params: conversationIdParams,
      query: z.object({
        after: eventIdParam.optional().meta({
          description:
            'Resume after this event id (default 0: from the start). Last-Event-ID wins when both are given.',
        }),
      }),
      headers: z.object({
        'Last-Event-ID': eventIdParam
          .optional()
          .meta({ description: 'The id of the last event received; the stream resumes after it.' }),
      }),
      success: {
        status: 200,
        description:
          'The event stream; the data of every message with an id is a ConversationEvent, that of an `event: delta` message (no id) a piece of an answer being written.',
        schema: ConversationEventSchema,
      },
      errors: ConversationServiceErrors.subscribeEvents,
      stream: ({ userId, params, query, headers }, send, end, pacing) =>
        followEvents(service, userId, params.conversation_id, headers['Last-Event-ID'] ?? query.after ?? 0, {
          send,
          end,
          pacing,
        }),
    }),
  ];
}

/**
 * A conversation's events after `after` as Server-Sent Events: stored events with their ids,
 * then, live, the deltas of answers being written as `event: delta` without an id (while the
 * client has room for them: see `deltaGate`).
 */
function followEvents(
  service: AgentConversationService,
  userId: string,
  conversationId: string,
  after: number,
  stream: { send: (message: SseMessage) => void; end: () => void; pacing: StreamPacing },
) {
  const { send, end, pacing } = stream;
  const mayGo = deltaGate(() => pacing.roomForTransient());
  return openFeed(
    service,
    userId,
    conversationId,
    after,
    {
      history: (event) => send({ id: event.id, event: event.kind, data: event }),
      live: (event) => send({ id: event.id, event: event.kind, data: event }),
      transient: (event) => {
        if (mayGo(event)) send({ event: event.kind, data: event });
      },
      end,
      // The client resumes with Last-Event-ID either way.
      failed: (failure) =>
        failure.type === 'ClientNotReading' ? pacing.drop('the client took nothing of the replay') : end(),
    },
    pacing,
  );
}
