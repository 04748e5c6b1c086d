/**
 * Transient events: what a live client sees while the model writes, and nothing else keeps.
 * They are published to the live subscriptions of a conversation (in this process, and through
 * the notifier in the others), never stored, never in a search, never replayed to a subscriber
 * that comes later: that one gets the stored event that holds the whole answer instead.
 */

/** Most bytes of text one delta carries (a longer piece is published as several). */
export const MAX_DELTA_TEXT = 2_048;

/**
 * A piece of the answer the model is writing, as it arrives. `message_id` names the model call
 * it belongs to (one per step); `attempt` is the adapter's attempt of that call: when a dropped
 * stream is tried again, the text of the new attempt starts afresh (a client drops what it
 * showed of an earlier attempt). The stored event that follows holds the whole text.
 */
export interface StreamingDelta {
  kind: 'delta';
  message_id: string;
  attempt: number;
  /** Text of the answer (for the user, or the thought next to tool calls); null when this piece has none. */
  content: string | null;
  /** The model's reasoning, for models that show it; null when this piece has none. */
  reasoning_content: string | null;
  /** ISO 8601, when the piece arrived. */
  timestamp: string;
}

export type TransientEvent = StreamingDelta;

/** Receives a conversation's transient events while it is subscribed; a late subscriber never sees earlier ones. */
export type TransientListener = (event: TransientEvent) => void;

/** Whether `next` goes on from `held`: a piece of the same attempt of the same message, so the two may be joined. */
export function continuesDelta(held: StreamingDelta, next: StreamingDelta): boolean {
  return held.kind === next.kind && held.message_id === next.message_id && held.attempt === next.attempt;
}

/** `next` joined onto `held` (its texts after held's); held's time stays (when its first piece came). */
export function joinDeltas(held: StreamingDelta, next: StreamingDelta): StreamingDelta {
  const cat = (a: string | null, b: string | null) => (a === null ? b : b === null ? a : a + b);
  return {
    ...held,
    content: cat(held.content, next.content),
    reasoning_content: cat(held.reasoning_content, next.reasoning_content),
  };
}

const isText = (value: unknown): value is string | null => value === null || typeof value === 'string';

/** A transient event as another process sent it (through a notifier), or null when it is not one. */
export function parseTransientEvent(value: unknown): TransientEvent | null {
  if (typeof value !== 'object' || value === null) return null;
  const v = value as Record<string, unknown>;
  if (v['kind'] !== 'delta') return null;
  if (typeof v['message_id'] !== 'string' || typeof v['timestamp'] !== 'string') return null;
  if (typeof v['attempt'] !== 'number' || !Number.isInteger(v['attempt'])) return null;
  if (!isText(v['content']) || !isText(v['reasoning_content'])) return null;
  return {
    kind: 'delta',
    message_id: v['message_id'],
    attempt: v['attempt'],
    content: v['content'],
    reasoning_content: v['reasoning_content'],
    timestamp: v['timestamp'],
  };
}
