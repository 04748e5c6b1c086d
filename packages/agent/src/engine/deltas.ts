import { randomUUID } from 'node:crypto';
import { continuesDelta, joinDeltas, type AgentHost, type LlmDelta, type StreamingDelta } from '@acs/core/ports';
import type { Runner } from './runner.js';

/** Where a model call's pieces go: the conversation's live subscriptions (never the stored log), stamped with the time. */
export interface DeltaPublisherDeps {
  log: Pick<AgentHost['log'], 'publishTransient'>;
  now: () => string;
}

/** What live clients have been shown of one model call: its text and reasoning so far, and the attempt they know it by. */
interface Shown {
  content: string;
  reasoning: string;
  /** null until the first piece goes out. */
  attempt: number | null;
}

/** The adapter's attempt under way and what it has written so far (a retried call writes afresh). */
interface Writing {
  attempt: number;
  content: string;
  reasoning: string;
}

/** One model call's stream, as `onDelta` keeps it: the message id its deltas carry, what was shown, what is being written. */
interface CallStream {
  messageId: string;
  shown: Shown;
  writing: Writing | null;
  /**
   * The attempt being written has caught up with what was shown and agrees with it, so each of
   * its pieces goes out as it is: no comparison per piece (a long answer costs its length, not
   * its length squared).
   */
  following: boolean;
}

/** What goes out for one delta. */
interface Piece {
  attempt: number;
  content: string | null;
  reasoning: string | null;
}

/**
 * The `onDelta` of one model call (one fresh `message_id`): each piece of text or reasoning is
 * published as a transient `delta` event to the conversation's live subscriptions.
 *
 * A dropped stream that the adapter tries again writes its text from the start, under the next
 * attempt. Clients see no text twice: while the new attempt writes what they have been shown
 * already, nothing goes out; once it writes past it, only the new part does, under the attempt
 * they know (so they do not start over). If it writes something else, all of its text goes out
 * under its own attempt, and clients drop what they showed of the earlier ones.
 */
export function deltaPublisher(deps: DeltaPublisherDeps, r: Runner): (delta: LlmDelta) => void {
  const stream: CallStream = {
    messageId: randomUUID(),
    shown: { content: '', reasoning: '', attempt: null },
    writing: null,
    following: false,
  };
  return (delta) => publishDelta(deps, r, stream, delta);
}

function publishDelta(deps: DeltaPublisherDeps, r: Runner, stream: CallStream, delta: LlmDelta): void {
  // A stopped run (or one another process has taken over) shows nothing more of its call.
  if (r.stopped) return;
  if (stream.writing?.attempt !== delta.attempt) {
    stream.writing = { attempt: delta.attempt, content: '', reasoning: '' };
    stream.following = false;
  }
  const piece = nextPiece(stream, delta.content ?? '', delta.reasoning_content ?? '');
  if (!piece) return;
  const event: StreamingDelta = {
    kind: 'delta',
    message_id: stream.messageId,
    attempt: piece.attempt,
    content: piece.content,
    reasoning_content: piece.reasoning,
    timestamp: deps.now(),
  };
  deps.log.publishTransient(r.userId, r.conversationId, event);
}

/** Whether `piece`, written at offset `at` of a text, agrees with `shown` where the two overlap. */
function agreesAt(shown: string, at: number, piece: string): boolean {
  if (at >= shown.length) return true;
  return shown.startsWith(piece.slice(0, shown.length - at), at);
}

/** What of the text being written clients have not been shown (and `shown` moved on by it); null: nothing new. */
function nextPiece(stream: CallStream, content: string, reasoning: string): Piece | null {
  const { shown } = stream;
  const writing = stream.writing!;
  if (stream.following) {
    writing.content += content;
    writing.reasoning += reasoning;
    shown.content += content;
    shown.reasoning += reasoning;
    if (content === '' && reasoning === '') return null;
    shown.attempt ??= writing.attempt;
    return { attempt: shown.attempt, content: content || null, reasoning: reasoning || null };
  }
  const agrees =
    agreesAt(shown.content, writing.content.length, content) &&
    agreesAt(shown.reasoning, writing.reasoning.length, reasoning);
  writing.content += content;
  writing.reasoning += reasoning;
  if (!agrees) {
    // This attempt writes something else: it is shown from its start, under its own attempt.
    shown.attempt = writing.attempt;
    shown.content = writing.content;
    shown.reasoning = writing.reasoning;
    stream.following = true;
    return { attempt: writing.attempt, content: writing.content || null, reasoning: writing.reasoning || null };
  }
  const newContent = writing.content.slice(shown.content.length);
  const newReasoning = writing.reasoning.slice(shown.reasoning.length);
  shown.content += newContent;
  shown.reasoning += newReasoning;
  stream.following =
    writing.content.length >= shown.content.length && writing.reasoning.length >= shown.reasoning.length;
  if (newContent === '' && newReasoning === '') return null;
  shown.attempt ??= writing.attempt;
  return { attempt: shown.attempt, content: newContent || null, reasoning: newReasoning || null };
}

/** The publishing side of a model call's deltas: `publishTransient`, plus `flush` once the call is over. */
export interface DeltaSink {
  publishTransient: AgentHost['log']['publishTransient'];
  /** Publishes what is held now (the call ended: its pieces go out before its stored event). */
  flush(): void;
  /** Forgets what is held (the run was stopped: it shows nothing more). */
  drop(): void;
}

/** How long pieces of an answer are held to go out together, by default: well under what a reader notices. */
export const DELTA_WINDOW_MS = 10;

/**
 * Pieces of one model call held for up to `windowMs` and published as one delta (text and
 * reasoning each joined): a model writing a token every few milliseconds costs a publish, a
 * notification across replicas and a write per client every `windowMs`, not per token. The
 * first piece of a window waits at most `windowMs`; a piece of another message or attempt sends
 * what is held first. `windowMs` 0: every piece at once.
 */
export function coalescingSink(log: Pick<AgentHost['log'], 'publishTransient'>, windowMs: number): DeltaSink {
  let held: { userId: string; conversationId: string; event: StreamingDelta } | null = null;
  let timer: NodeJS.Timeout | null = null;
  const flush = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    if (!held) return;
    const { userId, conversationId, event } = held;
    held = null;
    log.publishTransient(userId, conversationId, event);
  };
  return {
    flush,
    drop: () => {
      held = null;
      flush();
    },
    publishTransient: (userId, conversationId, event) => {
      if (windowMs <= 0) return log.publishTransient(userId, conversationId, event);
      if (held && !continuesDelta(held.event, event)) flush();
      if (held) {
        held.event = joinDeltas(held.event, event);
        return;
      }
      held = { userId, conversationId, event };
      timer = setTimeout(flush, windowMs);
    },
  };
}
