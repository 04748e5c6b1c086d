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
export const EMPTY_ANSWER_NOTE = 'Your last answer was empty. Call a tool to continue the work, or call finish with a message for the user.';

