import type { ConversationOverview, ConversationStatusChange, CreatedConversation } from '@acs/core';
import {
  ConversationStatusSchema,
  ConversationTriggerSchema,
  ExecutionStatusSchema,
  GitProviderSchema,
  SandboxStatusSchema,
  type ConversationMetrics,
} from '@acs/core/schemas';
import { z } from 'zod';
import type { ConversationKeys } from '../auth/conversation-keys.js';

/**
 * The two shapes of one conversation on the wire: V0's `ConversationInfo` and V1's
 * `AppConversation`, rendered from core's `ConversationOverview`, and V0's answers to a create,
 * start or stop. Core knows none of them; the links in them are the router's (its mount path).
 */

export const NewConversationResponseSchema = z.object({
  status: z.literal('ok'),
  conversation_id: z.string(),
  message: z.string().nullable(),
  conversation_status: ConversationStatusSchema.nullable(),
});
export type NewConversationResponse = z.infer<typeof NewConversationResponseSchema>;

/** The V0 conversation (`GET /api/conversations`). */
export const ConversationInfoSchema = z.object({
  conversation_id: z.string(),
  title: z.string(),
  last_updated_at: z.iso.datetime().nullable(),
  status: ConversationStatusSchema,
  status_detail: z.string().nullable(),
  runtime_status: z.string().nullable(),
  selected_repository: z.string().nullable(),
  selected_branch: z.string().nullable(),
  git_provider: GitProviderSchema.nullable(),
  trigger: ConversationTriggerSchema.nullable(),
  num_connections: z.int(),
  url: z.string().nullable(),
  session_api_key: z.string().nullable(),
  created_at: z.iso.datetime(),
  pr_number: z.array(z.int()),
  conversation_version: z.enum(['V0', 'V1']),
  sub_conversation_ids: z.array(z.string()),
  sandbox_id: z.string().nullable(),
});
export type ConversationInfo = z.infer<typeof ConversationInfoSchema>;

/** Tokens used so far (OpenHands' TokenUsage, accumulated over the conversation's model calls). */
const TokenUsageSchema = z
  .object({
    model: z.string(),
    prompt_tokens: z.int().min(0),
    completion_tokens: z.int().min(0),
    cache_read_tokens: z.int().min(0).meta({ description: 'Prompt tokens the provider served from its cache.' }),
    cache_write_tokens: z.int().min(0).meta({ description: 'Not counted here: always 0.' }),
    reasoning_tokens: z.int().min(0).meta({ description: 'Not counted here: always 0.' }),
    context_window: z.int().min(0).meta({ description: 'Not known here: always 0.' }),
    per_turn_token: z.int().min(0).meta({ description: 'Prompt and completion tokens of the last call.' }),
    response_id: z.string(),
  })
  .meta({ id: 'TokenUsage' });

/** A conversation's model use so far (OpenHands' MetricsSnapshot). */
const MetricsSnapshotSchema = z
  .object({
    model_name: z.string().meta({ description: 'The model of the last call (the conversation’s model before any).' }),
    accumulated_cost: z.number().min(0).meta({
      description: 'USD so far, of the calls whose price is known (as OpenHands counts an unknown price as 0).',
    }),
    accumulated_cost_known: z.boolean().meta({
      description: 'false when the price of a model used is unknown: accumulated_cost then leaves those calls out.',
    }),
    max_budget_per_task: z.number().nullable(),
    accumulated_token_usage: TokenUsageSchema.nullable(),
  })
  .meta({ id: 'MetricsSnapshot' });
type MetricsSnapshot = z.infer<typeof MetricsSnapshotSchema>;

/** The V1 app conversation (OpenHands 1.11's `AppConversation`, plus our status fields). */
export const AppConversationSchema = z.object({
  id: z.string(),
  created_by_user_id: z.string().nullable(),
  sandbox_id: z.string().meta({ description: "Its sandbox ('' for a record without one)." }),
  selected_repository: z.string().nullable(),
  selected_branch: z.string().nullable(),
  git_provider: GitProviderSchema.nullable(),
  title: z.string().nullable(),
  trigger: ConversationTriggerSchema.nullable(),
  pr_number: z.array(z.int()),
  llm_model: z.string().nullable(),
  agent_kind: z.literal('openhands').meta({ description: 'Always openhands: this server runs no ACP agents.' }),
  metrics: MetricsSnapshotSchema.nullable().meta({ description: 'null until the first model call.' }),
  parent_conversation_id: z.string().nullable(),
  sub_conversation_ids: z.array(z.string()),
  public: z.boolean().nullable(),
  tags: z.record(z.string(), z.string()).meta({ description: 'Always empty here.' }),
  acp_server: z.string().nullable().meta({ description: 'The ACP provider of an ACP agent: always null here.' }),
  launched_agent_profile: z
    .object({ agent_profile_id: z.string(), revision: z.int().min(0) })
    .nullable()
    .meta({ description: 'The agent profile that launched it: always null here (no agent profiles).' }),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
  sandbox_status: SandboxStatusSchema,
  execution_status: ExecutionStatusSchema.nullable(),
  conversation_status: ConversationStatusSchema,
  status_detail: z.string().nullable(),
  conversation_url: z.string().nullable(),
  session_api_key: z.string().nullable(),
});
export type AppConversation = z.infer<typeof AppConversationSchema>;

/** The record's metrics as OpenHands reports them (records from before the extra counts read 0 for them). */
function toMetricsSnapshot(metrics: ConversationMetrics, conversationModel: string | null): MetricsSnapshot {
  const model = metrics.model ?? conversationModel ?? 'default';
  return {
    model_name: model,
    accumulated_cost: metrics.priced_cost ?? metrics.accumulated_cost ?? 0,
    accumulated_cost_known: metrics.accumulated_cost !== null,
    max_budget_per_task: metrics.max_budget_per_task,
    accumulated_token_usage: {
      model,
      prompt_tokens: metrics.prompt_tokens,
      completion_tokens: metrics.completion_tokens,
      cache_read_tokens: metrics.cache_read_tokens ?? 0,
      cache_write_tokens: 0,
      reasoning_tokens: 0,
      context_window: 0,
      per_turn_token: metrics.last_call_tokens ?? 0,
      response_id: '',
    },
  };
}

/** V0's answer to a start or stop. */
export const ConversationStatusResponseSchema = z.object({
  status: z.literal('ok'),
  conversation_id: z.string(),
  message: z.string().nullable(),
  conversation_status: ConversationStatusSchema,
});
export type ConversationStatusResponse = z.infer<typeof ConversationStatusResponseSchema>;

/**
 * Where a conversation's agent routes and realtime channels are, for the client: relative to the
 * router's mount point (so one origin serves the UI, the API and the channels), and the
 * conversation's own key, which opens only those (bound to its sandbox and key generation: a
 * rotation, or another sandbox, makes another key).
 */
export interface ConversationLinks {
  url: string;
  session_api_key: string;
}

export function conversationLinks(
  record: Pick<ConversationOverview['record'], 'id' | 'sandbox_id' | 'key_generation'>,
  userId: string,
  mountPath: string,
  keys: ConversationKeys,
): ConversationLinks {
  return {
    url: `${mountPath.replace(/\/+$/, '')}/api/conversations/${record.id}`,
    session_api_key: keys.mint(userId, record.id, {
      sandbox_id: record.sandbox_id,
      key_generation: record.key_generation ?? 0,
    }),
  };
}

const runtimeStatusOf = (overview: ConversationOverview): string | null => {
  switch (overview.status) {
    case 'STARTING':
      return 'STATUS$STARTING_RUNTIME';
    case 'RUNNING':
      return overview.record.execution_status === 'error' || overview.record.execution_status === 'stuck'
        ? 'STATUS$ERROR'
        : 'STATUS$READY';
    case 'STOPPED':
      return null;
  }
};

/** The V0 view of a conversation. */
export function toConversationInfo(overview: ConversationOverview, links: ConversationLinks): ConversationInfo {
  const { record } = overview;
  return {
    conversation_id: record.id,
    title: record.title,
    last_updated_at: record.updated_at,
    status: overview.status,
    status_detail: overview.status_detail,
    runtime_status: runtimeStatusOf(overview),
    selected_repository: record.selected_repository,
    selected_branch: record.selected_branch,
    git_provider: record.git_provider,
    trigger: record.trigger,
    num_connections: 0,
    url: links.url,
    session_api_key: links.session_api_key,
    created_at: record.created_at,
    pr_number: record.pr_number,
    conversation_version: record.conversation_version,
    sub_conversation_ids: overview.sub_conversation_ids,
    sandbox_id: record.sandbox_id,
  };
}

/**
 * A conversation's stored facts as OpenHands' AppConversationInfo has them (the V1 view without
 * the live status and the links): what a download's meta.json holds.
 */
export function toAppConversationInfo(overview: ConversationOverview) {
  const { record } = overview;
  return {
    id: record.id,
    created_by_user_id: record.user_id,
    sandbox_id: record.sandbox_id ?? '',
    selected_repository: record.selected_repository,
    selected_branch: record.selected_branch,
    git_provider: record.git_provider,
    title: record.title,
    trigger: record.trigger,
    pr_number: record.pr_number,
    llm_model: record.llm_model,
    agent_kind: 'openhands' as const,
    metrics: record.metrics ? toMetricsSnapshot(record.metrics, record.llm_model) : null,
    parent_conversation_id: record.parent_conversation_id,
    sub_conversation_ids: overview.sub_conversation_ids,
    public: record.public ?? null,
    tags: {},
    acp_server: null as string | null,
    launched_agent_profile: null as { agent_profile_id: string; revision: number } | null,
    created_at: record.created_at,
    updated_at: record.updated_at,
  };
}

/** The V1 view of a conversation. */
export function toAppConversation(overview: ConversationOverview, links: ConversationLinks): AppConversation {
  return {
    ...toAppConversationInfo(overview),
    sandbox_status: overview.sandbox_status,
    execution_status: overview.record.execution_status,
    conversation_status: overview.status,
    status_detail: overview.status_detail,
    conversation_url: links.url,
    session_api_key: links.session_api_key,
  };
}

/** V0's answer to a create. */
export function toNewConversationResponse(created: CreatedConversation): NewConversationResponse {
  return { status: 'ok', conversation_id: created.conversation_id, message: null, conversation_status: created.status };
}

const STATUS_CHANGE_MESSAGES: Record<ConversationStatusChange['outcome'], string> = {
  stopped: 'Conversation stopped',
  was_not_running: 'Conversation was not running',
  starting: 'Conversation is starting',
  was_running: 'Conversation is already running',
};

/** V0's answer to a start or stop. */
export function toConversationStatusResponse(change: ConversationStatusChange): ConversationStatusResponse {
  return {
    status: 'ok',
    conversation_id: change.conversation_id,
    message: STATUS_CHANGE_MESSAGES[change.outcome],
    conversation_status: change.status,
  };
}
