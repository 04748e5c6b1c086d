import type { ActionEvent, ExecutionStatus } from '@acs/core/schemas';
import type { Actions } from './actions.js';
import { decisionOn, pendingConfirmation } from './log-reading.js';
import type { Recording } from './recording.js';
import type { Runner } from './runner.js';

/** What recovery needs: recording and the observations of actions. */
export interface RecoveryDeps {
  recording: Recording;
  actions: Pick<Actions, 'interruptedObservation'>;
}

/**
 * Recovery of a conversation found running with nobody at it (after a restart, or a process that
 * died): the log says which tool calls never got an observation.
 *
 * Closes the tool calls the stop cut short with an error observation (the runner holds the
 * conversation's lease); how many it closed. A conversation waiting for the user had nothing
 * cut short: a decision recorded just before the stop is acted on by the next run.
 */
export async function closeInterrupted(deps: RecoveryDeps, r: Runner, status: ExecutionStatus | null): Promise<number> {
  const { append, catchUp, errorEvent } = deps.recording;
  const { interruptedObservation } = deps.actions;
  await catchUp(r);
  if (status === 'waiting_for_confirmation') return 0;
  const answered = new Set(r.log.events.flatMap((e) => (e.kind === 'observation' ? [e.tool_call_id] : [])));
  // Actions still waiting for the user never started: they wait again rather than count as interrupted.
  const awaiting = pendingConfirmation(r.log.events);
  const undecided = new Set(decisionOn(r.log.events, awaiting) ? [] : awaiting.map((a) => a.tool_call_id));
  const open = r.log.events.filter(
    (e): e is ActionEvent => e.kind === 'action' && !answered.has(e.tool_call_id) && !undecided.has(e.tool_call_id),
  );
  if (open.length === 0) return 0;
  await append(r, [
    ...open.map((a) =>
      interruptedObservation(
        a,
        'Interrupted: the service restarted while this call was running; it may or may not have completed. Check its effects before repeating it.',
      ),
    ),
    errorEvent(
      'restart_interrupted',
      `The service restarted while ${open.length} tool call(s) ran; they are recorded as interrupted and the agent goes on.`,
    ),
  ]);
  return open.length;
}
