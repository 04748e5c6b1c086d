import type { SandboxRecord } from '../sandbox/schema.js';
import { toSandboxInfo } from '../sandbox/schema.js';
import type { AppConversation, ConversationInfo, ConversationRecord, ConversationStatus } from './schema.js';
import { effectiveConversationStatus } from './state.js';

const runtimeStatusOf = (record: ConversationRecord, status: ConversationStatus): string | null => {
  switch (status) {
    case 'STARTING':
      return 'STATUS$STARTING_RUNTIME';
    case 'RUNNING':
      return record.execution_status === 'error' || record.execution_status === 'stuck' ? 'STATUS$ERROR' : 'STATUS$READY';
    case 'STOPPED':
      return null;
  }
};

/** The V0 view of a conversation. */
export function toConversationInfo(
  record: ConversationRecord,
  sandbox: SandboxRecord | null,
  subConversationIds: string[],
): ConversationInfo {
  const status = effectiveConversationStatus(record.status, sandbox?.status ?? null);
  return {
    conversation_id: record.id,
    title: record.title,
    last_updated_at: record.updated_at,
    status,
    status_detail: statusDetail(record, sandbox),
    runtime_status: runtimeStatusOf(record, status),
    selected_repository: record.selected_repository,
    selected_branch: record.selected_branch,
    git_provider: record.git_provider,
    trigger: record.trigger,
    num_connections: 0,
    // Where the conversation is served is the HTTP adapter's to say (it knows its mount path).
    url: null,
    session_api_key: null,
    created_at: record.created_at,
    pr_number: record.pr_number,
    conversation_version: record.conversation_version,
    sub_conversation_ids: subConversationIds,
    sandbox_id: record.sandbox_id,
  };
}

/** The V1 view of a conversation, with its sandbox's live status. */
export function toAppConversation(
  record: ConversationRecord,
  sandbox: SandboxRecord | null,
  subConversationIds: string[],
): AppConversation {
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
    sub_conversation_ids: subConversationIds,
    created_at: record.created_at,
    updated_at: record.updated_at,
    sandbox_status: sandbox ? toSandboxInfo(sandbox).status : 'MISSING',
    execution_status: record.execution_status,
    conversation_status: effectiveConversationStatus(record.status, sandbox?.status ?? null),
    status_detail: statusDetail(record, sandbox),
    conversation_url: null,
    session_api_key: null,
  };
}

/** Why the conversation is not running, when its own record or its sandbox says so. */
function statusDetail(record: ConversationRecord, sandbox: SandboxRecord | null): string | null {
  if (record.status === 'RUNNING' && sandbox && sandbox.status !== 'RUNNING') {
    return sandbox.status === 'PAUSED' ? `sandbox ${sandbox.id} is paused` : `sandbox ${sandbox.id} is ${sandbox.status}`;
  }
  return record.status_detail;
}
