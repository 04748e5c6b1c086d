import type { ReplayStep } from '@acs/core';
import type { ConversationEvent } from '@acs/core/schemas';

/**
 * Running a `replay_json` trajectory (parsed and validated by core, `parseReplayTrajectory`):
 * where the log says the replay stands. The engine's `replay` step runs the rest.
 */

/** The synthetic response id (and tool call id) of a replayed action. */
export const replayCallId = (step: ReplayStep) => `replay_${step.index}`;

/** How many steps of the plan the log shows as replayed already: the next one to run. */
export function nextReplayStep(events: readonly ConversationEvent[]): number {
  let next = 0;
  for (const e of events) {
    if ((e.kind === 'action' || e.kind === 'message') && e.replay_step !== undefined)
      next = Math.max(next, e.replay_step + 1);
  }
  return next;
}

/** Index in `events` of the last replayed event, or of the first user message (the trajectory's own) when none ran yet. */
export function replayEndIndex(events: readonly ConversationEvent[]): number {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if ((e.kind === 'action' || e.kind === 'message') && e.replay_step !== undefined) return i;
  }
  return events.findIndex((e) => e.kind === 'message' && e.source === 'user');
}
