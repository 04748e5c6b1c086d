/**
 * Transient events (pieces of an answer being written) as NOTIFY payloads. PostgreSQL refuses a
 * payload of 8000 bytes or more, and core's `MAX_DELTA_TEXT` bounds a delta in UTF-16 units, not
 * in bytes: 2048 units of control characters are 12 KiB of JSON (`\u0001` is six bytes), and a
 * delta carries text and reasoning both. So a delta that does not fit is cut here into pieces
 * that do, and small deltas of one message are joined into one payload while it still fits.
 */
import { parseTransientEvent, type StreamingDelta } from '@acs/core/ports';

/** The largest NOTIFY payload PostgreSQL takes: it must be shorter than 8000 bytes (UTF-8 here). */
export const PAYLOAD_LIMIT = 7_999;

/**
 * The most bytes one UTF-16 unit takes in the JSON: a control character or a lone surrogate is
 * written `\uXXXX`. A payload must have this much room for text, or no text can go out in it.
 */
const WIDEST_UNIT = 6;

/** A payload's sequence number at its widest: sizes are worked out before the number is known. */
const WIDEST_SEQ = Number.MAX_SAFE_INTEGER;

/** A transient event as another process sent it. */
export interface TransientNotification {
  origin: string;
  userId: string;
  conversationId: string;
  event: StreamingDelta;
}

/** A delta that fits one payload, with its payload's size at most (in bytes). */
export interface FittedDelta {
  event: StreamingDelta;
  bytes: number;
}

/**
 * The payload: an object tagged `t` (an append notification is an array, so the two never mix
 * up, and a replica of an older version ignores this one). `o` is the sending notifier (it skips
 * its own), `s` its sequence number: PostgreSQL drops a NOTIFY whose payload repeats another of
 * the same transaction, and two pieces of one text may well be equal. Short keys leave the
 * bytes to the text.
 */
export function encodeTransient(
  origin: string,
  seq: number,
  userId: string,
  conversationId: string,
  event: StreamingDelta,
): string {
  // The event's own fields only, in a fixed order: the size worked out for it is the size sent.
  const e = {
    kind: event.kind,
    message_id: event.message_id,
    attempt: event.attempt,
    content: event.content,
    reasoning_content: event.reasoning_content,
    timestamp: event.timestamp,
  };
  return JSON.stringify({ t: 'transient', o: origin, s: seq, u: userId, c: conversationId, e });
}

/** A parsed payload that is a transient event; null when it is anything else (never trusted: any client may NOTIFY). */
export function decodeTransient(parsed: unknown): TransientNotification | null {
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
  const p = parsed as Record<string, unknown>;
  if (p['t'] !== 'transient') return null;
  const { o: origin, u: userId, c: conversationId } = p;
  if (typeof origin !== 'string' || typeof userId !== 'string' || typeof conversationId !== 'string') return null;
  const event = parseTransientEvent(p['e']);
  return event ? { origin, userId, conversationId, event } : null;
}

/** The bytes of the payload that would carry `event` (with the widest sequence number). */
function payloadBytes(origin: string, userId: string, conversationId: string, event: StreamingDelta): number {
  return Buffer.byteLength(encodeTransient(origin, WIDEST_SEQ, userId, conversationId, event));
}

/** Bytes the UTF-16 unit at `at` takes in JSON.stringify's output as UTF-8, and how many units it spans (2 for a pair). */
function unitCost(text: string, at: number): [bytes: number, units: number] {
  const c = text.charCodeAt(at);
  if (c === 0x22 || c === 0x5c) return [2, 1]; // \" and \\
  if (c < 0x20) return c === 8 || c === 9 || c === 10 || c === 12 || c === 13 ? [2, 1] : [6, 1];
  if (c < 0x80) return [1, 1];
  if (c < 0x800) return [2, 1];
  if (c >= 0xd800 && c <= 0xdbff) {
    const next = text.charCodeAt(at + 1);
    // A pair is one 4-byte character; a lone surrogate is escaped, `\ud83d`.
    return next >= 0xdc00 && next <= 0xdfff ? [4, 2] : [6, 1];
  }
  if (c >= 0xdc00 && c <= 0xdfff) return [6, 1];
  return [3, 1];
}

/** Bytes `text` adds inside a JSON string (null: none). */
function textCost(text: string | null): number {
  if (!text) return 0;
  let bytes = 0;
  for (let at = 0; at < text.length;) {
    const [cost, units] = unitCost(text, at);
    bytes += cost;
    at += units;
  }
  return bytes;
}

/** Where a piece of `text` from `at` that takes at most `room` bytes ends; never inside a surrogate pair. */
function cutAt(text: string, at: number, room: number): number {
  let end = at;
  for (let used = 0; end < text.length;) {
    const [cost, units] = unitCost(text, end);
    if (used + cost > room) break;
    used += cost;
    end += units;
  }
  return end;
}

/**
 * `event` as deltas whose payloads each fit, in order: itself when it fits, else its reasoning
 * then its text in as few pieces as fit (as core splits a long delta). None when its ids alone
 * leave no room for text (a delta is best effort; the stored event holds the whole answer).
 */
export function fitDelta(origin: string, userId: string, conversationId: string, event: StreamingDelta): FittedDelta[] {
  const whole = payloadBytes(origin, userId, conversationId, event);
  if (whole <= PAYLOAD_LIMIT) return [{ event, bytes: whole }];
  const out: FittedDelta[] = [];
  for (const field of ['reasoning_content', 'content'] as const) {
    const text = event[field];
    if (!text) continue;
    const bare: StreamingDelta = { ...event, content: null, reasoning_content: null, [field]: '' };
    const room = PAYLOAD_LIMIT - payloadBytes(origin, userId, conversationId, bare);
    if (room < WIDEST_UNIT) return [];
    for (let at = 0; at < text.length;) {
      const end = cutAt(text, at, room);
      const piece: StreamingDelta = { ...bare, [field]: text.slice(at, end) };
      out.push({ event: piece, bytes: payloadBytes(origin, userId, conversationId, piece) });
      at = end;
    }
  }
  return out;
}

/**
 * The bytes joining `next` onto a held delta adds to its payload, at most: its texts' own bytes
 * (a field going from null to text adds two bytes less; a surrogate pair split across the two
 * takes fewer bytes joined). So a payload sized this way never grows past what was counted.
 */
export function joinedCost(next: StreamingDelta): number {
  return textCost(next.content) + textCost(next.reasoning_content);
}
