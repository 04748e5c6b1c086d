import type { ConversationOverview, ConversationStatusChange, CreatedConversation } from '@acs/core';
import { ConversationStatusSchema, ConversationTriggerSchema, ExecutionStatusSchema, GitProviderSchema, MetricsSnapshotSchema, SandboxStatusSchema } from '@acs/core/schemas';
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


/** The V1 app conversation (`GET /api/v1/app-conversations`). */
export const AppConversationSchema = z.object({
  id: z.string(),
  created_by_user_id: z.string().nullable(),
  sandbox_id: z.string().nullable(),
  selected_repository: z.string().nullable(),
  selected_branch: z.string().nullable(),
  git_provider: GitProviderSchema.nullable(),
  title: z.string().nullable(),
  trigger: ConversationTriggerSchema.nullable(),
  pr_number: z.array(z.int()),
  llm_model: z.string().nullable(),
  metrics: MetricsSnapshotSchema.nullable(),
  parent_conversation_id: z.string().nullable(),
  sub_conversation_ids: z.array(z.string()),
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
 * conversation's own key, which opens only those.
 */
export interface ConversationLinks {
  url: string;
  session_api_key: string;
}

export function conversationLinks(conversationId: string, userId: string, mountPath: string, keys: ConversationKeys): ConversationLinks {
  return { url: `${mountPath.replace(/\/+$/, '')}/api/conversations/${conversationId}`, session_api_key: keys.mint(userId, conversationId) };
}

const runtimeStatusOf = (overview: ConversationOverview): string | null => {
  switch (overview.status) {
    case 'STARTING':
      return 'STATUS$STARTING_RUNTIME';
    case 'RUNNING':
      return overview.record.execution_status === 'error' || overview.record.execution_status === 'stuck' ? 'STATUS$ERROR' : 'STATUS$READY';
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

/** The V1 view of a conversation. */
export function toAppConversation(overview: ConversationOverview, links: ConversationLinks): AppConversation {
  const { record } = overview;
  return {
    id: record.id,
    created_by_user_id: record.user_id,
    sandbox_id: record.sandbox_id,
    selected_repository: record.selected_repository,
    selected_branch: record.selected_branch,
    git_provider: record.git_provider,
    title: record.title,
    trigger: record.trigger,
    pr_number: record.pr_number,
    llm_model: record.llm_model,
    metrics: record.metrics ?? null,
    parent_conversation_id: record.parent_conversation_id,
    sub_conversation_ids: overview.sub_conversation_ids,
    created_at: record.created_at,
    updated_at: record.updated_at,
    sandbox_status: overview.sandbox_status,
    execution_status: record.execution_status,
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
  return { status: 'ok', conversation_id: change.conversation_id, message: STATUS_CHANGE_MESSAGES[change.outcome], conversation_status: change.status };
}
