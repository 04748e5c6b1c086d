import { ByteAccumulator } from './byte-accumulator.js';

/**
 * Bounds for what a peer sends, whichever client reads it (a fetch `Response`'s body, an SDK's
 * stream): the bytes of a whole answer, or of one event of an event stream, gathered in one
 * buffer (`ByteAccumulator`) so that memory follows bytes, not pieces. A body past its bound
 * fails with `BodyTooLargeError` and the rest is not read.
 */

/** A body, or one event of an event stream, longer than allowed: reading stopped there. */
export class BodyTooLargeError extends Error {
  constructor(
    readonly limit: number,
    what: string,
  ) {
    super(`${what} is larger than ${limit} bytes; the rest was not read`);
    this.name = 'BodyTooLargeError';
  }
}

/** How a bounding stream names what it bounds, and whom it tells when the bound is passed. */
export interface BoundOptions {
  /** Names what is read in the error (`the answer of MCP server at …`). */
  what?: string;
  /** Told (before the stream fails) when the bound is passed: whoever reads may not hear of it (an SDK that swallows stream errors). */
  onTooLarge?: (error: BodyTooLargeError) => void;
}

/** The error of a bound passed, told to `onTooLarge` first. */
function tooLarge(limit: number, what: string, options: BoundOptions): BodyTooLargeError {
  const error = new BodyTooLargeError(limit, what);
  options.onTooLarge?.(error);
  return error;
}

/**
 * Reads a whole body into one buffer of at most `maxBytes`; rejects with `BodyTooLargeError`
 * past that, having cancelled the stream (so the connection under it is given up).
 */
export async function readBoundedBody(
  body: ReadableStream<Uint8Array> | null,
  maxBytes: number,
  what = 'the answer',
): Promise<Uint8Array> {
  if (body === null) return new Uint8Array(0);
  const gathered = new ByteAccumulator(maxBytes);
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return gathered.take();
    if (!gathered.append(value)) {
      await reader.cancel().catch(() => undefined);
      throw new BodyTooLargeError(maxBytes, what);
    }
  }
}

/**
 * A stream that hands a body on whole, as one chunk once it has ended (what a reader of JSON
 * needs anyway), and fails with `BodyTooLargeError` once it passes `maxBytes`.
 */
export function wholeBodyBound(maxBytes: number, options: BoundOptions = {}): TransformStream<Uint8Array, Uint8Array> {
  const gathered = new ByteAccumulator(maxBytes);
  return new TransformStream({
    transform: (chunk) => {
      if (!gathered.append(chunk)) throw tooLarge(maxBytes, options.what ?? 'the answer', options);
    },
    flush: (controller) => {
      if (gathered.length > 0) controller.enqueue(gathered.take());
    },
  });
}

/** Where an event stream's reading is: the bytes of the event not yet ended, and of its line. */
interface EventScan {
  /** Bytes of the event that has not ended yet (from earlier chunks). */
  pending: ByteAccumulator;
  /** Bytes since the last event ended, terminators included. */
  eventBytes: number;
  /** No byte but line ends since the last line end: a line end now is a blank line. */
  lineEmpty: boolean;
  /** The last byte was a CR that ended a line, or an event: an LF now belongs to it (CRLF is one line end). */
  afterCr: 'none' | 'line' | 'event';
}

const LF = 0x0a;
const CR = 0x0d;

/**
 * A stream that hands a `text/event-stream` body on in whole events (an event ends at a blank
 * line, whatever the line ends: CRLF, LF or CR), and fails with `BodyTooLargeError` once one
 * event passes `maxEventBytes`. The stream itself may run for ever; what is held at any time is
 * the event being read. Readers downstream get whole events, so they too keep one piece per event.
 */
export function eventStreamBound(
  maxEventBytes: number,
  options: BoundOptions = {},
): TransformStream<Uint8Array, Uint8Array> {
  const scan: EventScan = {
    pending: new ByteAccumulator(),
    eventBytes: 0,
    lineEmpty: true,
    afterCr: 'none',
  };
  return new TransformStream({
    transform: (chunk, controller) => {
      const ended = lastEventEnd(scan, chunk, maxEventBytes);
      if (ended < 0) throw tooLarge(maxEventBytes, options.what ?? 'an event of the stream', options);
      passWholeEvents(scan, chunk, ended, controller);
    },
    // An event the stream ended in the middle of: passed on as it is (a reader drops it).
    flush: (controller) => {
      if (scan.pending.length > 0) controller.enqueue(scan.pending.take());
    },
  });
}

/**
 * The same bound as `eventStreamBound` for a reader that parses as it goes (an SSE parser that
 * keeps only the event being read): a check each chunk passes through, false once one event has
 * passed `maxEventBytes`. Nothing is held or copied, and no stream is made per chunk (a token
 * stream's chunks are many and small).
 */
export function eventSizeCheck(maxEventBytes: number): (chunk: Uint8Array) => boolean {
  const scan: EventScan = { pending: new ByteAccumulator(), eventBytes: 0, lineEmpty: true, afterCr: 'none' };
  return (chunk) => lastEventEnd(scan, chunk, maxEventBytes) >= 0;
}

/** Hands on the events that end in `chunk` (up to `ended`) as one piece, and keeps the rest for the next. */
function passWholeEvents(
  scan: EventScan,
  chunk: Uint8Array,
  ended: number,
  controller: TransformStreamDefaultController<Uint8Array>,
): void {
  if (ended > 0) {
    if (scan.pending.length === 0) controller.enqueue(chunk.subarray(0, ended));
    else {
      scan.pending.append(chunk, 0, ended);
      controller.enqueue(scan.pending.take());
    }
  }
  // Copied, so the rest of a large chunk is not held by a view of it.
  scan.pending.append(chunk, ended);
}

/** Reads `chunk` on from `scan`: the offset just after the last event that ends in it (0: none; -1: an event passed the bound). */
function lastEventEnd(scan: EventScan, chunk: Uint8Array, maxEventBytes: number): number {
  let ended = 0;
  for (let i = 0; i < chunk.length; i++) {
    const byte = chunk[i]!;
    scan.eventBytes++;
    if (byte === LF && scan.afterCr !== 'none') {
      // The LF of a CRLF: the line (or the event) ended at the CR, and the LF goes with it.
      if (scan.afterCr === 'event') {
        ended = i + 1;
        scan.eventBytes = 0;
      }
      scan.afterCr = 'none';
      continue;
    }
    if (byte === LF || byte === CR) {
      const blank = scan.lineEmpty;
      scan.lineEmpty = true;
      scan.afterCr = byte === LF ? 'none' : blank ? 'event' : 'line';
      if (blank) {
        ended = i + 1;
        scan.eventBytes = 0;
        continue;
      }
    } else {
      scan.lineEmpty = false;
      scan.afterCr = 'none';
    }
    if (scan.eventBytes > maxEventBytes) return -1;
  }
  return ended;
}
