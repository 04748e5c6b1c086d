import type { SandboxRecord, SandboxStatus } from '../sandbox/schema.js';
import type { ConversationRecord, ConversationStatus } from './schema.js';
import { effectiveConversationStatus } from './state.js';

/**
 * A conversation as its owner sees it: the stored record, and what its sandbox and its children
 * add to it. The HTTP adapter renders this as the V0 `ConversationInfo` or the V1
 * `AppConversation`; core knows neither shape.
 */
export interface ConversationOverview {
  record: ConversationRecord;
  /** The status the owner sees: the record's, or STOPPED when its sandbox is lost. */
  status: ConversationStatus;
  /** Why it is not running, when its record or its sandbox says so. */
  status_detail: string | null;
  /** Its sandbox's status; MISSING without a sandbox or when the sandbox was deleted. */
  sandbox_status: SandboxStatus;
  /** The conversations started from this one. */
  sub_conversation_ids: string[];
}

/** What a stop or start did (the V0 routes phrase it). */
export type ConversationStatusChange = {
  conversation_id: string;
  /** The conversation's status afterwards. */
  status: ConversationStatus;
  outcome: 'stopped' | 'was_not_running' | 'starting' | 'was_running';
};

export function toConversationOverview(
  record: ConversationRecord,
  sandbox: SandboxRecord | null,
  subConversationIds: string[],
): ConversationOverview {
  return {
    record,
    status: effectiveConversationStatus(record.status, sandbox?.status ?? null),
    status_detail: statusDetail(record, sandbox),
    sandbox_status: !sandbox || sandbox.status === 'DELETED' ? 'MISSING' : sandbox.status,
    sub_conversation_ids: subConversationIds,
  };
}

/** Why the conversation is not running, when its own record or its sandbox says so. */
function statusDetail(record: ConversationRecord, sandbox: SandboxRecord | null): string | null {
  if (record.status === 'RUNNING' && sandbox && sandbox.status !== 'RUNNING') {
    return sandbox.status === 'PAUSED'
      ? `sandbox ${sandbox.id} is paused`
      : `sandbox ${sandbox.id} is ${sandbox.status}`;
  }
  return record.status_detail;
}
