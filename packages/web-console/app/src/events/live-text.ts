/**
 * The answer the model is writing, as the live stream brings it in pieces (`delta` messages,
 * never stored), until the stored event that holds the whole answer replaces it. Pure functions
 * over an immutable state, so the stream applies them as messages arrive and renders once a frame,
 * and the tests drive them without a browser.
 */
// The generated types themselves (api.ts reads the page): the tests type-check this file outside a browser.
import type { components } from '../../../src/client.js';

type ConversationEvent = components['schemas']['ConversationEvent'];

/** A piece of the answer, as the V1 stream sends it (`event: delta`, no `id:`; core's StreamingDelta). */
export interface StreamingDelta {
  kind: 'delta';
  /** The model call it belongs to (one per step). */
  message_id: string;
  /** The call's attempt: a newer one starts the text afresh (the earlier attempt's stream was dropped). */
  attempt: number;
  content: string | null;
  reasoning_content: string | null;
  timestamp: string;
}

/** The message being written: its text and reasoning so far. */
export interface Writing {
  messageId: string;
  attempt: number;
  content: string;
  reasoning: string;
  /** The last stored event's id when the message began: a stored event after it may be its end. */
  sinceId: number;
}

/** What a stored event that replaced a message being written keeps of it on this page. */
export interface Replaced {
  /** So its entry keeps the key of the message it replaced (drawn in place, not anew). */
  messageId: string;
  /** The reasoning the reader saw (not stored: gone after a reload). */
  reasoning: string;
}

export interface LiveText {
  writing: Writing | null;
  /**
   * Messages whose later pieces are not shown, with the attempt up to which: one replaced by its
   * stored event (every attempt), or one cut by a reconnect (the server does not replay pieces,
   * so the rest of that attempt would start mid-sentence; a newer attempt starts afresh).
   */
  closed: ReadonlyMap<string, number>;
  /** The stored agent messages that replaced a message being written, by event id. */
  replaced: ReadonlyMap<number, Replaced>;
}

export const NO_LIVE_TEXT: LiveText = { writing: null, closed: new Map(), replaced: new Map() };

/** How many closed messages are remembered: only a late piece of a recent one can still come. */
const CLOSED_KEPT = 64;

const isText = (value: unknown): value is string | null => value === null || typeof value === 'string';

/** A `delta` message's data, or null when it is not one (it is dropped, as any unknown message). */
export function parseDelta(data: string): StreamingDelta | null {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const v = value as Record<string, unknown>;
  if (v['kind'] !== 'delta' || typeof v['message_id'] !== 'string') return null;
  if (typeof v['attempt'] !== 'number' || !Number.isInteger(v['attempt'])) return null;
  if (!isText(v['content']) || !isText(v['reasoning_content'])) return null;
  return {
    kind: 'delta',
    message_id: v['message_id'],
    attempt: v['attempt'],
    content: v['content'],
    reasoning_content: v['reasoning_content'],
    timestamp: typeof v['timestamp'] === 'string' ? v['timestamp'] : '',
  };
}

function close(closed: ReadonlyMap<string, number>, messageId: string, attempt: number): ReadonlyMap<string, number> {
  const next = new Map(closed);
  next.delete(messageId);
  next.set(messageId, attempt);
  for (const oldest of next.keys()) {
    if (next.size <= CLOSED_KEPT) break;
    next.delete(oldest);
  }
  return next;
}

/** A piece added: to the message being written, or a new message (or attempt) started with it. */
export function withDelta(live: LiveText, delta: StreamingDelta, lastId: number): LiveText {
  const closedAt = live.closed.get(delta.message_id);
  if (closedAt !== undefined && delta.attempt <= closedAt) return live;
  const w = live.writing;
  const content = delta.content ?? '';
  const reasoning = delta.reasoning_content ?? '';
  if (w && w.messageId === delta.message_id) {
    if (delta.attempt < w.attempt) return live;
    if (delta.attempt > w.attempt) return { ...live, writing: { ...w, attempt: delta.attempt, content, reasoning } };
    if (!content && !reasoning) return live;
    return { ...live, writing: { ...w, content: w.content + content, reasoning: w.reasoning + reasoning } };
  }
  // Another message began without a stored end for this one: its pieces are done.
  const closed = w ? close(live.closed, w.messageId, w.attempt) : live.closed;
  return {
    ...live,
    closed,
    writing: { messageId: delta.message_id, attempt: delta.attempt, content, reasoning, sinceId: lastId },
  };
}

/**
 * Whether a stored event ends the message being written: what the agent wrote (its message or
 * actions: the text is in them), an error, a condensation (the summariser's call), a note from
 * the service (after an empty answer), or the agent no longer running (stopped, finished). Not
 * the model call's accounting (it comes just before the answer) nor what the user did meanwhile.
 */
function ends(event: ConversationEvent): boolean {
  if (event.source === 'agent') return true;
  switch (event.kind) {
    case 'error':
    case 'condensation':
      return true;
    case 'message':
      return event.source === 'environment';
    case 'status':
      return event.execution_status !== 'running';
    default:
      return false;
  }
}

/** A stored event arrived: when it ends the message being written, it replaces that text. */
export function withStoredEvent(live: LiveText, event: ConversationEvent): LiveText {
  const w = live.writing;
  if (!w || event.id <= w.sinceId || !ends(event)) return live;
  const replaced =
    event.kind === 'message' && event.source === 'agent'
      ? new Map(live.replaced).set(event.id, { messageId: w.messageId, reasoning: w.reasoning })
      : live.replaced;
  return { writing: null, closed: close(live.closed, w.messageId, Number.POSITIVE_INFINITY), replaced };
}

/** The connection was lost (or opened again): what was being written is dropped, as the server never replays it. */
export function withoutWriting(live: LiveText): LiveText {
  const w = live.writing;
  if (!w) return live;
  return { ...live, writing: null, closed: close(live.closed, w.messageId, w.attempt) };
}

/** Whether there is anything to show of the message being written. */
export const shownWriting = (live: LiveText): Writing | null =>
  live.writing && (live.writing.content.trim() || live.writing.reasoning.trim()) ? live.writing : null;
