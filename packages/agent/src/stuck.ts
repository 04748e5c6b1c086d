import type { ActionEvent, ConversationEvent, ObservationEvent } from '@acs/core/schemas';

/** How many repetitions make a pattern; OpenHands' defaults. */
export const STUCK_THRESHOLDS = { repeatedAction: 4, repeatedError: 3, alternating: 6, window: 20 } as const;

export type StuckVerdict = { kind: 'ok' } | { kind: 'nudge'; message: string } | { kind: 'stuck'; reason: string };

interface Step {
  action: ActionEvent;
  observation: ObservationEvent | null;
}

const actionKey = (a: ActionEvent) => `${a.tool_name}\u0000${a.raw_arguments.replace(/\s+/g, ' ').trim()}`;
const observationKey = (o: ObservationEvent | null) => (o ? `${o.is_error ? 'E' : 'O'}\u0000${o.content}` : '');

/**
 * Looks at the agent's steps since the last user message (the last 20 events) for loops:
 * the same call with the same result 4 times; the same call failing 3 times (a nudge
 * first, stuck if it fails once more); or two calls alternating 3 times each.
 */
export function detectStuck(events: readonly ConversationEvent[]): StuckVerdict {
  // Only the window matters: stop looking for the last user message at its edge.
  const floor = Math.max(0, events.length - STUCK_THRESHOLDS.window);
  let start = events.length;
  while (start > floor && !(events[start - 1]!.kind === 'message' && events[start - 1]!.source === 'user')) start--;
  const recent = events.slice(start);
  const observations = new Map<string, ObservationEvent>();
  for (const e of recent) if (e.kind === 'observation') observations.set(e.tool_call_id, e);
  const steps: Step[] = recent
    .filter((e): e is ActionEvent => e.kind === 'action' && e.tool_name !== 'think' && e.tool_name !== 'finish')
    .map((action) => ({ action, observation: observations.get(action.tool_call_id) ?? null }));
  const nudged = recent.some(
    (e) => e.kind === 'message' && e.source === 'environment' && e.text.startsWith(NUDGE_PREFIX),
  );

  const tail = (n: number) => (steps.length >= n ? steps.slice(-n) : null);
  const same = (list: Step[], key: (s: Step) => string) => list.every((s) => key(s) === key(list[0]!));

  const repeated = tail(STUCK_THRESHOLDS.repeatedAction);
  if (repeated && same(repeated, (s) => actionKey(s.action)) && same(repeated, (s) => observationKey(s.observation))) {
    return {
      kind: 'stuck',
      reason: `the agent made the same ${repeated[0]!.action.tool_name} call ${repeated.length} times in a row and got the same result each time`,
    };
  }

  const errors = tail(STUCK_THRESHOLDS.repeatedError);
  if (errors && same(errors, (s) => actionKey(s.action)) && errors.every((s) => s.observation?.is_error)) {
    const afterNudge = tail(STUCK_THRESHOLDS.repeatedError + 1);
    if (
      nudged &&
      afterNudge &&
      same(afterNudge, (s) => actionKey(s.action)) &&
      afterNudge.every((s) => s.observation?.is_error)
    ) {
      return {
        kind: 'stuck',
        reason: `the agent kept repeating a failing ${errors[0]!.action.tool_name} call after being told to change approach`,
      };
    }
    if (!nudged) {
      return {
        kind: 'nudge',
        message: `${NUDGE_PREFIX} you have made the same ${errors[0]!.action.tool_name} call ${errors.length} times and it failed each time. Do not repeat it: read the error, think about the cause, and try a different approach.`,
      };
    }
  }

  const alternating = tail(STUCK_THRESHOLDS.alternating);
  if (alternating) {
    const [a, b] = [alternating[0]!, alternating[1]!];
    const keyA = actionKey(a.action) + observationKey(a.observation);
    const keyB = actionKey(b.action) + observationKey(b.observation);
    if (
      keyA !== keyB &&
      alternating.every((s, i) => actionKey(s.action) + observationKey(s.observation) === (i % 2 === 0 ? keyA : keyB))
    ) {
      return {
        kind: 'stuck',
        reason: `the agent alternated between the same two calls (${a.action.tool_name}, ${b.action.tool_name}) ${alternating.length / 2} times each with the same results`,
      };
    }
  }
  return { kind: 'ok' };
}

const NUDGE_PREFIX = 'Note from the service:';
