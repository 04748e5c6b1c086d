import { err, ok, type Result } from 'neverthrow';
import { match, P } from 'ts-pattern';
import type { SandboxLifecycleStatus } from '../sandbox/schema.js';
import type { ConversationStatus } from './schema.js';

export type ConversationStatusEvent =
  | 'sandbox_ready' // its sandbox answered: the conversation can run
  | 'start_failed' // the sandbox could not be started
  | 'sandbox_lost' // its sandbox vanished, died or was deleted
  | 'stop' // the user stopped it
  | 'start'; // the user (re)started it

export interface IllegalConversationEvent {
  readonly from: ConversationStatus;
  readonly event: ConversationStatusEvent;
}

/**
 * STARTING → RUNNING when the sandbox is up; STARTING|RUNNING → STOPPED on stop,
 * failure or sandbox loss; STOPPED → STARTING on start. Repeating the current
 * state is a no-op (same status back). Anything else is illegal.
 */
export function nextConversationStatus(
  from: ConversationStatus,
  event: ConversationStatusEvent,
): Result<ConversationStatus, IllegalConversationEvent> {
  return match<[ConversationStatus, ConversationStatusEvent], Result<ConversationStatus, IllegalConversationEvent>>([
    from,
    event,
  ])
    .with(['STARTING', 'sandbox_ready'], () => ok('RUNNING'))
    .with(['STARTING', P.union('start_failed', 'sandbox_lost', 'stop')], () => ok('STOPPED'))
    .with([P.union('STARTING', 'RUNNING'), 'start'], ([s]) => ok(s))
    .with(['RUNNING', 'sandbox_ready'], () => ok('RUNNING'))
    .with(['RUNNING', P.union('sandbox_lost', 'stop')], () => ok('STOPPED'))
    .with(['STOPPED', 'start'], () => ok('STARTING'))
    .with(['STOPPED', P.union('stop', 'sandbox_lost', 'start_failed')], () => ok('STOPPED'))
    .with(['RUNNING', 'start_failed'], () => err({ from, event }))
    .with(['STOPPED', 'sandbox_ready'], () => err({ from, event }))
    .exhaustive();
}

/**
 * The status a client sees. A conversation that is RUNNING by intent shows what its
 * sandbox allows: STARTING while the sandbox resumes, STOPPED while it is paused or gone.
 */
export function effectiveConversationStatus(
  stored: ConversationStatus,
  sandboxStatus: SandboxLifecycleStatus | null,
): ConversationStatus {
  if (stored !== 'RUNNING') return stored;
  return match(sandboxStatus)
    .with('RUNNING', () => 'RUNNING' as const)
    .with('STARTING', () => 'STARTING' as const)
    .with(P.union('PAUSED', 'ERROR', 'MISSING', 'DELETED', null), () => 'STOPPED' as const)
    .exhaustive();
}
