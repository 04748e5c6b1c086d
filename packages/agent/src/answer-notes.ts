import type { ConversationEvent } from '@acs/core/schemas';

/**
 * What the service tells the model about an answer it cannot take as it is: cut off by the
 * output token limit, or empty. Small models produce both; the words say what to do next.
 */

/** The result of each call of an answer cut off by the output token limit: none of them ran. */
export const CUT_OFF_CALL_RESULT =
  'Not run: your answer was cut off at the output token limit, so this call may be incomplete, and no call of that answer was run. ' +
  'Answer in smaller pieces: make one call at a time, and write a long file in parts (create it with the first part, then add the rest with insert).';

/** Said after an answer without calls that was cut off by the output token limit. */
export const CUT_OFF_ANSWER_NOTE =
  'Your last answer was cut off at the output token limit. Answer in smaller pieces: say less at once, or call a tool for one small step.';

/** Said after an answer with neither text nor calls. */
export const EMPTY_ANSWER_NOTE =
  'Your last answer was empty. Call a tool to continue the work, or call finish with a message for the user.';

/**
 * Whether the model has been given this note and has shown nothing since (no message, call or
 * result after it). Saying it again would add nothing the model can tell apart: the projection
 * merges adjacent user turns, so a run of empty answers used to become one user message with
 * the same note over and over.
 */
export function noteStillStands(events: readonly ConversationEvent[], note: string): boolean {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (e.kind === 'message') return e.source === 'environment' && e.text === note;
    if (e.kind === 'action' || e.kind === 'observation') return false;
  }
  return false;
}
