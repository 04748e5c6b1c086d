import type { ExecutionStatus } from '../events/schema.js';
import type { SandboxUse } from '../sandbox/service.js';
import type { ConversationRecord } from './schema.js';

/**
 * The execution statuses in which an agent does nothing until the user acts: it finished, waits
 * for a message (idle: also after a limit or a rejection; stuck; error) or a confirmation, or
 * was paused. `running` works; null has not started yet (its first run is coming).
 */
const RESTING_EXECUTION_STATUSES: readonly ExecutionStatus[] = [
  'idle',
  'finished',
  'waiting_for_confirmation',
  'paused',
  'error',
  'stuck',
];

/** Whether this conversation leaves its sandbox with nothing to do: stopped, or running with its agent at rest. */
const rests = (conversation: ConversationRecord): boolean =>
  conversation.status === 'STOPPED' ||
  (conversation.status === 'RUNNING' &&
    conversation.execution_status !== null &&
    RESTING_EXECUTION_STATUSES.includes(conversation.execution_status));

/**
 * What a sandbox's conversations are doing, for the sandbox service's pausing (`SandboxUse`):
 * resting when every one of them rests, since the last of them changed (a finish, a wait, a
 * stop: the agent writes the record when its status changes).
 */
export function sandboxUseOf(conversations: readonly ConversationRecord[]): SandboxUse {
  if (conversations.length === 0) return { kind: 'unused' };
  let since = 0;
  for (const conversation of conversations) {
    if (!rests(conversation)) return { kind: 'working' };
    since = Math.max(since, Date.parse(conversation.updated_at));
  }
  return { kind: 'resting', since };
}
