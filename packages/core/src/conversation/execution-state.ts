import { err, ok, type Result } from 'neverthrow';
import { match, P } from 'ts-pattern';
import type { ExecutionStatus } from '../events/schema.js';

/** What happens to the agent of a conversation. */
export type ExecutionEvent =
  | 'ready' // the sandbox is up; nothing to do yet
  | 'run' // a step is about to be taken (a message arrived, or the user resumed)
  | 'finish' // the agent called finish or replied without tools
  | 'fail' // an error a message alone does not cure (LLM failure, budget, sandbox lost)
  | 'stuck' // it repeats itself
  | 'pause' // the user stopped the conversation, or its sandbox went away
  | 'await_confirmation' // an action waits for the user's yes or no
  | 'reject' // the user said no: the agent waits for a message
  | 'await_message'; // it stopped short of the task at a limit a message lifts (max_iterations): it waits for one

export interface IllegalExecutionEvent {
  readonly from: ExecutionStatus | null;
  readonly event: ExecutionEvent;
}

/**
 * null (not started) → idle when the sandbox is ready; idle, finished, paused, error,
 * stuck and waiting_for_confirmation → running on run; running → finished, error, stuck,
 * paused or waiting_for_confirmation, and → idle on await_message; waiting_for_confirmation → idle on
 * reject. Pausing an agent that is not running keeps its status.
 */
export function nextExecutionStatus(
  from: ExecutionStatus | null,
  event: ExecutionEvent,
): Result<ExecutionStatus, IllegalExecutionEvent> {
  return match<[ExecutionStatus | null, ExecutionEvent], Result<ExecutionStatus, IllegalExecutionEvent>>([from, event])
    .with([null, 'ready'], () => ok('idle'))
    .with([P.not(null), 'ready'], ([s]) => ok(s))
    .with([P.union(null, 'running'), 'run'], () => ok('running'))
    .with([P.union('idle', 'finished', 'paused', 'error', 'stuck', 'waiting_for_confirmation'), 'run'], () =>
      ok('running'),
    )
    .with(['running', 'finish'], () => ok('finished'))
    .with(['running', 'fail'], () => ok('error'))
    .with(['running', 'stuck'], () => ok('stuck'))
    .with(['running', 'await_confirmation'], () => ok('waiting_for_confirmation'))
    .with(['waiting_for_confirmation', 'reject'], () => ok('idle'))
    .with(['running', 'await_message'], () => ok('idle'))
    .with([P.union('running', 'waiting_for_confirmation'), 'pause'], () => ok('paused'))
    .with([P.union(null, 'idle', 'finished', 'paused', 'error', 'stuck'), 'pause'], ([s]) => ok(s ?? 'idle'))
    .with(
      [
        P.union(null, 'idle', 'finished', 'paused', 'error', 'stuck', 'waiting_for_confirmation'),
        P.union('finish', 'fail', 'stuck', 'await_confirmation'),
      ],
      () => err({ from, event }),
    )
    .with([P.union(null, 'idle', 'running', 'finished', 'paused', 'error', 'stuck'), 'reject'], () =>
      err({ from, event }),
    )
    .with(
      [P.union(null, 'idle', 'finished', 'paused', 'error', 'stuck', 'waiting_for_confirmation'), 'await_message'],
      () => err({ from, event }),
    )
    .exhaustive();
}
