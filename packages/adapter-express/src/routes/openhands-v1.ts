import {
  ConversationServiceErrors,
  MAX_PENDING_MESSAGES,
  WorkspaceServiceErrors,
  type AgentConversationService,
} from '@acs/core';
import { SendMessageRequestSchema } from '@acs/core/schemas';
import { errAsync } from 'neverthrow';
import { z } from 'zod';
import { batchIdList, checkBatchIds, eventIdParam, limitParam, timestampParam } from '../query.js';
import { defineRoute, type RouteDefinition } from '../route.js';
import { frameCount, framePage, framesById, SDK_EVENT_KINDS } from '../views/sdk-events.js';
import { conversationIdParams } from './params.js';
import { CountSchema } from './shared.js';

/** An OpenHands SDK event (a member of the 1.11 `Event` union, told apart by `kind`). */
const SdkEventSchema = z
  .object({
    id: z.string(),
    kind: z.string(),
    timestamp: z.string(),
    source: z.enum(['agent', 'user', 'environment', 'hook']),
  })
  .catchall(z.unknown())
  .meta({
    id: 'SdkEvent',
    description:
      "An OpenHands SDK event; `id` is our event's id, so it is the same here, in /events/stream and on the agent-server socket.",
  });

const frameFilterQuery = {
  kind__eq: z.enum(SDK_EVENT_KINDS).optional().meta({ description: 'Only events of this kind.' }),
  timestamp__gte: timestampParam,
  timestamp__lt: timestampParam,
};

const toFrameFilter = (q: {
  kind__eq?: string | undefined;
  timestamp__gte?: string | undefined;
  timestamp__lt?: string | undefined;
}) => ({
  kind: q.kind__eq,
  timestamp_gte: q.timestamp__gte,
  timestamp_lt: q.timestamp__lt,
});

/** OpenHands' PendingMessageResponse. */
const PendingMessageResponseSchema = z.object({
  id: z.string().meta({ description: "The message's event id." }),
  queued: z.literal(true),
  position: z.int().min(1).meta({ description: 'How many user messages wait for the agent, this one included.' }),
});

/** OpenHands' SkillInfo. */
const SkillInfoSchema = z.object({
  name: z.string(),
  type: z.string().meta({ description: 'repo (always-on instructions) or knowledge (loaded on a trigger word).' }),
  source: z.string().meta({ description: 'The repository (owner/name) whose guidance it is.' }),
  triggers: z.array(z.string()).nullable(),
});
type SkillInfo = z.infer<typeof SkillInfoSchema>;

/**
 * A skills page id: the (source, name) of the last skill of the previous page, as base64url of
 * `source`, U+0000, `name`. Every string of that alphabet names a place in the order (a name is
 * empty when there is no U+0000), so any is taken.
 */
const skillCursor = {
  encode: (skill: SkillInfo) => Buffer.from(`${skill.source}\u0000${skill.name}`, 'utf8').toString('base64url'),
  decode: (id: string): [string, string] => {
    const text = Buffer.from(id, 'base64url').toString('utf8');
    const split = text.indexOf('\u0000');
    return split < 0 ? [text, ''] : [text.slice(0, split), text.slice(split + 1)];
  },
};

const skillOrder = (a: SkillInfo, b: SkillInfo) =>
  a.source === b.source ? (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) : a.source < b.source ? -1 : 1;

/**
 * The OpenHands 1.11 routes beside app conversations: a conversation's events as SDK events
 * (`/api/v1/conversation/{id}/events…`, singular), messages queued while a conversation starts
 * (`/api/v1/conversations/{id}/pending-messages`), and the skills a user's conversations found.
 */
export function openHandsV1Routes(service: AgentConversationService): RouteDefinition[] {
  const { conversations } = service;
  const eventTags = ['events (V1)'];
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/conversation/{conversation_id}/events/search',
      operationId: 'searchSdkEvents',
      summary: "Search a conversation's events (OpenHands SDK form)",
      description:
        'The events as OpenHands 1.11 serves them: SDK events (MessageEvent, ActionEvent, ObservationEvent, ConversationStateUpdateEvent, AgentErrorEvent, ConversationErrorEvent), oldest first (`sort_order=TIMESTAMP`) or newest first. `page_id` is the `next_page_id` of the page before (an event id).',
      tags: eventTags,
      params: conversationIdParams,
      query: z.object({
        ...frameFilterQuery,
        sort_order: z.enum(['TIMESTAMP', 'TIMESTAMP_DESC']).default('TIMESTAMP'),
        page_id: eventIdParam.optional().meta({ description: "The previous page's next_page_id." }),
        limit: limitParam,
      }),
      success: {
        status: 200,
        description: 'A page of events.',
        schema: z.object({ items: z.array(SdkEventSchema), next_page_id: z.string().nullable() }),
      },
      errors: ConversationServiceErrors.searchEvents,
      handle: ({ userId, params, query }) =>
        framePage(service, userId, params.conversation_id, {
          filter: toFrameFilter(query),
          newestFirst: query.sort_order === 'TIMESTAMP_DESC',
          pageId: query.page_id ?? null,
          limit: query.limit,
        }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/conversation/{conversation_id}/events/count',
      operationId: 'countSdkEvents',
      summary: "Count a conversation's events (OpenHands SDK form)",
      tags: eventTags,
      params: conversationIdParams,
      query: z.object(frameFilterQuery),
      success: { status: 200, description: 'How many match.', schema: CountSchema },
      errors: ConversationServiceErrors.searchEvents,
      handle: ({ userId, params, query }) => frameCount(service, userId, params.conversation_id, toFrameFilter(query)),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/conversation/{conversation_id}/events',
      operationId: 'getSdkEvents',
      summary: "Get a conversation's events by id (OpenHands SDK form)",
      description: 'Ids as the events carry them; at most 100 (400 INVALID_IDS otherwise, as OpenHands answers).',
      tags: eventTags,
      params: conversationIdParams,
      query: z.object({ id: batchIdList(z.string().meta({ pattern: '^[0-9]{1,10}$' })) }),
      success: {
        status: 200,
        description: 'In the order asked; null where there is no such event.',
        schema: z.array(SdkEventSchema.nullable()),
      },
      errors: ['InvalidIds', ...ConversationServiceErrors.searchEvents],
      handle: ({ userId, params, query }) => {
        const refused = checkBatchIds('id', query.id, { max: 100, form: 'digits' });
        return refused ? errAsync(refused) : framesById(service, userId, params.conversation_id, query.id.map(Number));
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/conversations/{conversation_id}/pending-messages',
      operationId: 'queuePendingMessage',
      summary: 'Queue a message for a conversation that is starting',
      description: `The conversation is its id, or \`task-<start task id>\` before the client knows it. The message goes into its log at once, and its agent acts on it as soon as it runs (as send-message with run: true). 429 TOO_MANY_PENDING_MESSAGES when ${MAX_PENDING_MESSAGES} user messages already wait for the agent.`,
      tags: eventTags,
      params: conversationIdParams,
      body: z.object({
        role: SendMessageRequestSchema.shape.role,
        content: SendMessageRequestSchema.shape.content.min(1, 'give at least one text or image part'),
      }),
      success: { status: 201, description: 'Queued.', schema: PendingMessageResponseSchema },
      errors: ConversationServiceErrors.queueMessage,
      handle: ({ userId, params, body }) =>
        conversations
          .queueMessage(userId, params.conversation_id, { role: body.role, content: body.content, run: true })
          .map((queued) => ({ id: String(queued.event.id), queued: true as const, position: queued.position })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/skills/search',
      operationId: 'searchSkills',
      summary: "The skills your conversations' repositories give",
      description:
        'The guidance files the agent found in the repositories of your conversations (always-on instructions and knowledge files), one per repository and name, sorted by repository then name. There are no global or user skills here. Every stored conversation of yours is read for it (no sandbox is asked), so it costs as much as you have conversations.',
      tags: ['skills (V1)'],
      query: z.object({
        page_id: z
          .string()
          .regex(/^[A-Za-z0-9_-]{1,1024}$/, 'is not a page id; use next_page_id from the previous page')
          .optional()
          .meta({ description: "The previous page's next_page_id." }),
        limit: limitParam,
      }),
      success: {
        status: 200,
        description: 'A page of skills.',
        schema: z.object({ items: z.array(SkillInfoSchema), next_page_id: z.string().nullable() }),
      },
      errors: WorkspaceServiceErrors.repositorySkills,
      handle: ({ userId, query }) => {
        const after = query.page_id === undefined ? null : skillCursor.decode(query.page_id);
        return service.workspace.repositorySkills(userId).map((found) => {
          const skills = found.map((s): SkillInfo => ({
            name: s.name,
            type: s.type,
            source: s.repository,
            triggers: s.type === 'knowledge' ? s.triggers : null,
          }));
          const rest = after
            ? skills.filter((s) => skillOrder(s, { source: after[0], name: after[1], type: '', triggers: null }) > 0)
            : skills;
          const items = rest.slice(0, query.limit);
          return { items, next_page_id: rest.length > query.limit ? skillCursor.encode(items.at(-1)!) : null };
        });
      },
    }),
  ];
}
