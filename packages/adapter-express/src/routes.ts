import {
  AppConversationSchema,
  AppConversationStartRequestSchema,
  ConversationInfoSchema,
  ConfirmationEventSchema,
  ConversationEventSchema,
  ConversationStatusSchema,
  ConversationTriggerSchema,
  EventPageSchema,
  MessageEventSchema,
  NewConversationRequestSchema,
  NewConversationResponseSchema,
  SandboxInfoSchema,
  SandboxSpecSchema,
  SendMessageRequestSchema,
  SettingsInputSchema,
  SettingsViewSchema,
  StartSandboxRequestSchema,
  StartTaskSchema,
  validationFailed,
  ConversationServiceErrors,
  SandboxServiceErrors,
  SandboxSpecServiceErrors,
  SettingsServiceErrors,
  type AgentConversationService,
  type ConversationInfo,
  type DomainErrorOf,
  type Page,
  type PageRequest,
} from '@acs/core';
import { errAsync, okAsync, type ResultAsync } from 'neverthrow';
import { z } from 'zod';
import { booleanParam, eventIdParam, idList, kindList, pageIdParam, pageRequestOf, pagingQuery, limitParam, timestampParam } from './query.js';
import { defineRoute, recordPathParams, type RouteDefinition } from './route.js';
import { defaultRouteContext, type RouteContext } from './route-context.js';
import { withLinks } from './conversation-links.js';
import { browserRoutes } from './routes/browser.js';
import { optionRoutes } from './routes/options.js';
import { secretRoutes } from './routes/secrets.js';
import { agentServerRoutes } from './routes/agent-server.js';
import { panelRoutes } from './routes/panels.js';
import { conversationIdParams } from './routes/params.js';

const pageOf = <T extends z.ZodType>(item: T) =>
  z.object({ items: z.array(item), next_page_id: z.string().nullable().meta({ description: 'Pass as page_id for the next page; null on the last page.' }) });

const sandboxIdParams = recordPathParams(z.object({ sandbox_id: z.string().min(1).max(128) }), 'SandboxNotFound', (p) => ({
  type: 'SandboxNotFound',
  sandboxId: p.sandbox_id ?? '',
}));
const SuccessSchema = z.object({ success: z.literal(true) });
const MessageSchema = z.object({ message: z.string() });
const CountSchema = z.int().min(0);

/** V0 `POST /api/conversations/{id}/message` body. */
const V0MessageRequestSchema = z.strictObject({
  message: z
    .string()
    .min(1, 'must not be empty')
    .max(1_000_000, 'must be at most 1,000,000 characters')
    .refine((text) => text.trim() !== '', 'must not be blank'),
});

/** The answer to actions waiting for confirmation (V0 and V1). */
const ConfirmationRequestSchema = z
  .strictObject({
    accept: z.boolean().meta({ description: 'true runs the waiting actions; false rejects them (the agent then waits for a message).' }),
    reason: z.string().max(10_000).nullable().optional().meta({ description: 'Shown to the model with a rejection.' }),
  })
  .meta({ id: 'ConfirmationRequest' });

const ConversationStatusResponseSchema = z.object({
  status: z.literal('ok'),
  conversation_id: z.string(),
  message: z.string().nullable(),
  conversation_status: ConversationStatusSchema,
});

const conversationFilterQuery = {
  title__contains: z.string().max(200).optional().meta({ description: 'Case-insensitive substring of the title.' }),
  created_at__gte: timestampParam,
  created_at__lt: timestampParam,
  updated_at__gte: timestampParam,
  updated_at__lt: timestampParam,
  include_sub_conversations: booleanParam,
};

const toFilter = (q: {
  title__contains?: string | undefined;
  created_at__gte?: string | undefined;
  created_at__lt?: string | undefined;
  updated_at__gte?: string | undefined;
  updated_at__lt?: string | undefined;
  include_sub_conversations?: boolean | undefined;
}) => ({
  ...(q.title__contains !== undefined ? { title_contains: q.title__contains } : {}),
  ...(q.created_at__gte !== undefined ? { created_at_gte: q.created_at__gte } : {}),
  ...(q.created_at__lt !== undefined ? { created_at_lt: q.created_at__lt } : {}),
  ...(q.updated_at__gte !== undefined ? { updated_at_gte: q.updated_at__gte } : {}),
  ...(q.updated_at__lt !== undefined ? { updated_at_lt: q.updated_at__lt } : {}),
  ...(q.include_sub_conversations !== undefined ? { include_sub_conversations: q.include_sub_conversations } : {}),
});

/** What `paged` adds to the errors of the list it runs: a page id this server never issued. */
const PAGED_ERRORS = ['ValidationFailed'] as const;

/** Runs `list` with the decoded page, or refuses a page id this server never issued. */
function paged<T, E>(query: { page_id?: string | undefined; limit: number }, list: (page: PageRequest) => ResultAsync<Page<T>, E>) {
  const page = pageRequestOf(query);
  if ('invalidPageId' in page) {
    return errAsync<Page<T>, E | DomainErrorOf<(typeof PAGED_ERRORS)[number]>>(
      validationFailed([{ path: 'query.page_id', message: 'is not a page id issued by this server; use next_page_id from the previous page' }]),
    );
  }
  return list(page);
}

const ok = okAsync;

/** Every route of the service, in registration order (literal paths before parameterised ones). */
export function buildRoutes(service: AgentConversationService, context: RouteContext = defaultRouteContext()): RouteDefinition[] {
  const { settings, conversations, sandboxes, sandboxSpecs } = service;
  const link = (c: ConversationInfo, userId: string, mountPath: string) => withLinks(c, userId, mountPath, context.conversationKeys);
  return [
    ...browserRoutes(context),
    ...optionRoutes(context),
    ...secretRoutes(service),
    ...agentServerRoutes(service),
    ...panelRoutes(service),
    // ---- health (open) ----
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

    // ---- V0 settings ----
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
      description: 'Every field with defaults applied. Secret values are never returned; the *_set fields say whether they are stored. 404 until settings are stored.',
      tags: ['settings'],
      success: { status: 200, description: 'Successful Response', schema: SettingsViewSchema },
      errors: SettingsServiceErrors.load,
      handle: ({ userId }) => settings.load(userId),
    }),

    // ---- V0 conversations ----
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
      handle: ({ userId, body }) => conversations.create(userId, body),
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
      errors: [...ConversationServiceErrors.listInfo, ...PAGED_ERRORS],
      handle: ({ userId, query, mountPath }) =>
        paged(query, (page) =>
          conversations.listInfo(
            userId,
            {
              ...(query.selected_repository !== undefined ? { selected_repository: query.selected_repository } : {}),
              ...(query.conversation_trigger !== undefined ? { trigger: query.conversation_trigger } : {}),
              ...(query.include_sub_conversations !== undefined ? { include_sub_conversations: query.include_sub_conversations } : {}),
            },
            page,
          ),
        ).map((p) => ({ results: p.items.map((c) => link(c, userId, mountPath)), next_page_id: p.next_page_id })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/conversations/{conversation_id}',
      operationId: 'getConversation',
      summary: 'Get a conversation (V0 shape)',
      tags: ['conversations (V0)'],
      params: conversationIdParams,
      success: { status: 200, description: 'The conversation.', schema: ConversationInfoSchema },
      errors: ConversationServiceErrors.getInfo,
      handle: ({ userId, params, mountPath }) => conversations.getInfo(userId, params.conversation_id).map((c) => withLinks(c, userId, mountPath, context.conversationKeys)),
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
      description: 'Resumes its sandbox (or starts a new one if it was lost) and brings the conversation back to RUNNING.',
      tags: ['conversations (V0)'],
      params: conversationIdParams,
      body: z.object({ providers_set: z.array(z.string()).nullable().optional() }).optional(),
      bodyRequired: false,
      success: { status: 200, description: 'The conversation is starting or already running.', schema: ConversationStatusResponseSchema },
      errors: ConversationServiceErrors.start,
      handle: ({ userId, params }) => conversations.start(userId, params.conversation_id),
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
      handle: ({ userId, params }) => conversations.stop(userId, params.conversation_id),
    }),
    defineRoute({
      method: 'post',
      path: '/api/conversations/{conversation_id}/message',
      operationId: 'sendConversationMessage',
      summary: 'Send a message to the agent (V0 shape)',
      description:
        'Appends a user message to the conversation. A running conversation acts on it at once (also after the agent finished); a stopped one acts on it when started.',
      tags: ['conversations (V0)'],
      params: conversationIdParams,
      body: V0MessageRequestSchema,
      success: { status: 200, description: 'The message is stored.', schema: SuccessSchema },
      errors: ConversationServiceErrors.sendMessage,
      handle: ({ userId, params, body }) =>
        conversations
          .sendMessage(userId, params.conversation_id, { role: 'user', content: [{ type: 'text', text: body.message }], run: true })
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
        conversations.respondToConfirmation(userId, params.conversation_id, { accept: body.accept, reason: body.reason ?? null }).map(() => ({ success: true as const })),
    }),

    // ---- V1 app conversations (literal paths first) ----
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
      errors: [...ConversationServiceErrors.search, ...PAGED_ERRORS],
      handle: ({ userId, query, mountPath }) => paged(query, (page) => conversations.search(userId, toFilter(query), page)).map((p) => ({ ...p, items: p.items.map((c) => withLinks(c, userId, mountPath, context.conversationKeys)) })),
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
      errors: [...ConversationServiceErrors.searchStartTasks, ...PAGED_ERRORS],
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
      errors: [...ConversationServiceErrors.getMany, ...ConversationServiceErrors.search, ...PAGED_ERRORS],
      handle: ({ userId, query, mountPath }) =>
        query.ids
          ? conversations.getMany(userId, query.ids).map((list): unknown => list.map((c) => (c ? withLinks(c, userId, mountPath, context.conversationKeys) : null)))
          : paged(query, (page) => conversations.search(userId, toFilter(query), page)).map((p): unknown => ({ ...p, items: p.items.map((c) => withLinks(c, userId, mountPath, context.conversationKeys)) })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/app-conversations/{conversation_id}',
      operationId: 'getAppConversation',
      summary: 'Get an app conversation',
      tags: ['app conversations (V1)'],
      params: conversationIdParams,
      success: { status: 200, description: 'The conversation.', schema: AppConversationSchema },
      errors: [...ConversationServiceErrors.getMany, 'ConversationNotFound'],
      handle: ({ userId, params, mountPath }) =>
        conversations
          .getMany(userId, [params.conversation_id])
          .andThen(([c]) => (c ? okAsync(withLinks(c, userId, mountPath, context.conversationKeys)) : errAsync<typeof c, DomainErrorOf<'ConversationNotFound'>>({ type: 'ConversationNotFound', conversationId: params.conversation_id }))),
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
      stream: ({ userId, params, query, headers }, send, end) =>
        conversations.subscribeEvents(
          userId,
          params.conversation_id,
          headers['Last-Event-ID'] ?? query.after ?? 0,
          (event) => send({ id: event.id, event: event.kind, data: event }),
          end,
        ),
    }),

    // ---- V1 sandboxes ----
    defineRoute({
      method: 'get',
      path: '/api/v1/sandboxes/search',
      operationId: 'searchSandboxes',
      summary: 'Search sandboxes',
      tags: ['sandboxes (V1)'],
      query: pagingQuery,
      success: { status: 200, description: 'A page of sandboxes, newest first.', schema: pageOf(SandboxInfoSchema) },
      errors: [...SandboxServiceErrors.search, ...PAGED_ERRORS],
      handle: ({ userId, query }) => paged(query, (page) => sandboxes.search(userId, page)),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/sandboxes',
      operationId: 'getSandboxes',
      summary: 'Get sandboxes by id',
      tags: ['sandboxes (V1)'],
      query: z.object({ id: idList }),
      success: { status: 200, description: 'In the order asked; null where there is no such sandbox.', schema: z.array(SandboxInfoSchema.nullable()) },
      errors: SandboxServiceErrors.getMany,
      handle: ({ userId, query }) => sandboxes.getMany(userId, query.id),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/sandboxes',
      operationId: 'startSandbox',
      summary: 'Start a sandbox',
      description: 'From the spec given in the body or the query (sandbox_spec_id), else the default spec. Returns at once with STARTING.',
      tags: ['sandboxes (V1)'],
      query: z.object({ sandbox_spec_id: z.string().min(1).max(512).optional() }),
      body: StartSandboxRequestSchema.optional(),
      bodyRequired: false,
      success: { status: 200, description: 'The new sandbox.', schema: SandboxInfoSchema },
      errors: SandboxServiceErrors.start,
      handle: ({ userId, query, body }) => sandboxes.start(userId, body?.sandbox_spec_id ?? query.sandbox_spec_id ?? null),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/sandboxes/{sandbox_id}',
      operationId: 'getSandbox',
      summary: 'Get a sandbox',
      tags: ['sandboxes (V1)'],
      params: sandboxIdParams,
      success: { status: 200, description: 'The sandbox, with its status as the runtime reports it now.', schema: SandboxInfoSchema },
      errors: SandboxServiceErrors.get,
      handle: ({ userId, params }) => sandboxes.get(userId, params.sandbox_id),
    }),
    defineRoute({
      method: 'delete',
      path: '/api/v1/sandboxes/{sandbox_id}',
      operationId: 'deleteSandbox',
      summary: 'Delete a sandbox',
      description: 'Removes it from the runtime; conversations in it become STOPPED.',
      tags: ['sandboxes (V1)'],
      params: sandboxIdParams,
      query: z.object({ sandbox_id: z.string().optional().meta({ description: 'Accepted for compatibility; the path decides.' }) }),
      success: { status: 200, description: 'Deleted.', schema: SuccessSchema },
      errors: SandboxServiceErrors.delete,
      handle: ({ userId, params }) => sandboxes.delete(userId, params.sandbox_id).map(() => ({ success: true as const })),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/sandboxes/{sandbox_id}/pause',
      operationId: 'pauseSandbox',
      summary: 'Pause a sandbox',
      description: 'Idempotent: pausing a paused sandbox succeeds. 409 when its state forbids it (starting, in error, missing, deleted).',
      tags: ['sandboxes (V1)'],
      params: sandboxIdParams,
      success: { status: 200, description: 'Paused.', schema: SuccessSchema },
      errors: SandboxServiceErrors.pause,
      handle: ({ userId, params }) => sandboxes.pause(userId, params.sandbox_id).map(() => ({ success: true as const })),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/sandboxes/{sandbox_id}/resume',
      operationId: 'resumeSandbox',
      summary: 'Resume a sandbox',
      description: 'Idempotent: resuming a running sandbox succeeds. 409 when its state forbids it (in error, missing, deleted).',
      tags: ['sandboxes (V1)'],
      params: sandboxIdParams,
      success: { status: 200, description: 'Resumed (it may show STARTING briefly).', schema: SuccessSchema },
      errors: SandboxServiceErrors.resume,
      handle: ({ userId, params }) => sandboxes.resume(userId, params.sandbox_id).map(() => ({ success: true as const })),
    }),

    // ---- V1 sandbox specs ----
    defineRoute({
      method: 'get',
      path: '/api/v1/sandbox-specs/search',
      operationId: 'searchSandboxSpecs',
      summary: 'Search sandbox specs',
      description: 'In configured order; the first is the default.',
      tags: ['sandbox specs (V1)'],
      query: pagingQuery,
      success: { status: 200, description: 'A page of specs.', schema: pageOf(SandboxSpecSchema) },
      errors: [...SandboxSpecServiceErrors.search, ...PAGED_ERRORS],
      handle: ({ query }) => paged(query, (page) => sandboxSpecs.search(page)),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/sandbox-specs',
      operationId: 'getSandboxSpecs',
      summary: 'Get sandbox specs by id',
      tags: ['sandbox specs (V1)'],
      query: z.object({ id: idList }),
      success: { status: 200, description: 'In the order asked; null where there is no such spec.', schema: z.array(SandboxSpecSchema.nullable()) },
      errors: SandboxSpecServiceErrors.getMany,
      handle: ({ query }) => sandboxSpecs.getMany(query.id),
    }),
  ];
}
