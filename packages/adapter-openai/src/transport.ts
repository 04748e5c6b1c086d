import { BodyTooLargeError, eventSizeCheck, readBoundedBody } from '@acs/core/ports';
import { createParser } from 'eventsource-parser';

/** A chat-completions request as the adapter sends it: one POST of a JSON text. */
export interface Post {
  url: string;
  headers: Record<string, string>;
  body: string;
  /** Cancels the exchange (the conversation was stopped). */
  signal: AbortSignal | undefined;
  /** Limit of the whole exchange, from sending to the end of the answer. */
  timeoutMs: number;
  /**
   * Asks for a streamed answer: a 2xx `text/event-stream` answer is then not read whole but handed
   * on event by event as it arrives (and the exchange ends `streamed`); any other answer (an error,
   * JSON from a server that ignores `stream`) is still read whole.
   */
  events?: EventSink;
}

/** Where the events of a streamed answer go, and the bounds they are read within. */
export interface EventSink {
  /** The `data` of each event, in order, as it arrives. */
  onEvent: (data: string) => void;
  /** Largest event read, in bytes: past it the exchange fails (memory stays proportional to one event). */
  maxEventBytes: number;
  /**
   * Limit of a silence: from sending to the answer's first bytes, and between two pieces of it.
   * It restarts on each piece, so a long answer that keeps coming is never cut by it (`timeoutMs`
   * still bounds the whole exchange).
   */
  idleTimeoutMs: number;
}

/** How one exchange ended. `stage` says whether the answer had begun when the connection failed. */
export type Exchange =
  | { outcome: 'answered'; status: number; header: (name: string) => string | null; text: string }
  /** A 2xx event stream read to its end, its events handed to `Post.events`. */
  | { outcome: 'streamed'; status: number; header: (name: string) => string | null }
  | { outcome: 'failed'; stage: 'connecting' | 'reading'; error: unknown }
  | { outcome: 'cancelled' }
  /** `idle`: the silence limit of a stream (`EventSink.idleTimeoutMs`) passed, not the whole exchange's. */
  | { outcome: 'timed_out'; idle?: boolean }
  /** Nothing was sent: the request cannot be sent as given (a line break in a header's value, say). */
  | { outcome: 'unsendable'; detail: string };

/** Sends one request and reads its whole answer; never rejects. */
export type Transport = (post: Post) => Promise<Exchange>;

/** An HTTP token: what a header's name may be. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** What a header's value may hold: no line break, no NUL, no other control but tab. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\uffff]*$/;

/**
 * Why a header cannot be sent as given (a line break in a key, say), or null. Checked before
 * anything is sent, and said without the value (it may be a key): a fetch would throw its own
 * error, which reads like a failure to connect and would be retried.
 */
export function unsendableHeader(headers: Record<string, string>): string | null {
  for (const [name, value] of Object.entries(headers)) {
    if (!TOKEN.test(name)) return `the header name ${JSON.stringify(name.slice(0, 60))} is not an HTTP token`;
    if (!FIELD_VALUE.test(value))
      return `the header ${name} holds a character HTTP does not allow in a value (a line break, say)`;
  }
  return null;
}

/** The largest answer body read, whichever client reads it: 32 MiB. */
export const DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

interface FetchTransportOptions {
  /** Largest answer body read (once the fetch has undone any content coding), in bytes. Default 32 MiB. */
  maxResponseBytes?: number;
}

/** Whether an answer is to be handed on event by event: a 2xx `text/event-stream`. */
export function isEventStream(status: number, contentType: string | null | undefined): boolean {
  return status >= 200 && status <= 299 && /^\s*text\/event-stream\b/i.test(contentType ?? '');
}

/**
 * Reads an event stream (its content coding already undone) to its end, handing each event's
 * data to `sink` as it arrives. SSE is parsed by `eventsource-parser`, which keeps the event
 * being read; core's `eventSizeCheck` fails the stream once one event passes
 * `sink.maxEventBytes`, so what is held at any time is at most one event, however long the
 * stream. The whole stream is bounded by `maxBytes` too (a stream that never ends is a cost, if
 * not one of memory). `onBytes` is told of each piece as it comes (the silence timer restarts).
 * The pieces are read as they come (a Node stream or a web stream, both async iterables) and
 * handed on synchronously: no stream is made per piece, for a token stream's many small ones.
 */
async function readEventStream(
  body: AsyncIterable<Uint8Array> | null,
  sink: EventSink,
  maxBytes: number,
  onBytes: () => void,
): Promise<void> {
  if (body === null) return;
  const feeder = eventFeeder(sink, maxBytes, onBytes);
  for await (const chunk of body) feeder.push(chunk);
  feeder.end();
}

/** What an event stream is fed through, piece by piece: `push` throws once a bound is passed. */
export interface EventFeeder {
  push(chunk: Uint8Array): void;
  /** The stream ended: what the decoder still holds is parsed. */
  end(): void;
}

/** The bounds, the decoder and the SSE parser of one event stream (see `readEventStream`). */
export function eventFeeder(sink: EventSink, maxBytes: number, onBytes: () => void): EventFeeder {
  let total = 0;
  const fits = eventSizeCheck(sink.maxEventBytes);
  const decoder = new TextDecoder();
  const parser = createParser({ onEvent: (event) => sink.onEvent(event.data) });
  return {
    push: (chunk) => {
      total += chunk.byteLength;
      if (total > maxBytes) throw new BodyTooLargeError(maxBytes, "the answer's stream");
      if (!fits(chunk)) throw new BodyTooLargeError(sink.maxEventBytes, "an event of the answer's stream");
      onBytes();
      parser.feed(decoder.decode(chunk, { stream: true }));
    },
    end: () => {
      const rest = decoder.decode();
      if (rest !== '') parser.feed(rest);
    },
  };
}

/** A stream that passes its bytes on unchanged, telling `onBytes` of each piece. */
function tapped(body: ReadableStream<Uint8Array> | null, onBytes: () => void): ReadableStream<Uint8Array> | null {
  return body === null
    ? null
    : body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform: (chunk, controller) => {
            onBytes();
            controller.enqueue(chunk);
          },
        }),
      );
}

/** The limits of one exchange: its whole time, a stream's silences, and the caller's cancellation. */
export interface ExchangeLimits {
  /** Aborts once a limit passes or the caller cancels. */
  signal: AbortSignal;
  /** How the exchange ended if a limit or the caller stopped it, else null. */
  stopped: () => Exchange | null;
  /** A piece of the answer came: the silence timer restarts. */
  touch: () => void;
  /** The exchange is over: timers and listeners are let go. */
  clear: () => void;
}

/** Starts the timers of `post` (the whole exchange's, and with `events` the silence's) and listens to its signal. */
export function exchangeLimits(post: Post): ExchangeLimits {
  const controller = new AbortController();
  let why: Exchange | null = null;
  let over = false;
  const stop = (result: Exchange) => {
    if (why !== null || over) return;
    why = result;
    controller.abort();
  };
  const whole = setTimeout(() => stop({ outcome: 'timed_out' }), post.timeoutMs);
  const idle = post.events
    ? setTimeout(() => stop({ outcome: 'timed_out', idle: true }), post.events.idleTimeoutMs)
    : undefined;
  const cancel = () => stop({ outcome: 'cancelled' });
  if (post.signal?.aborted) cancel();
  else post.signal?.addEventListener('abort', cancel, { once: true });
  return {
    signal: controller.signal,
    stopped: () => why,
    touch: () => {
      if (!over) idle?.refresh();
    },
    clear: () => {
      over = true;
      clearTimeout(whole);
      clearTimeout(idle);
      post.signal?.removeEventListener('abort', cancel);
    },
  };
}

/**
 * A transport over a fetch the host gives (a proxy-aware one, say): its timers and cancellation as
 * an AbortSignal. The answer is read into one buffer of at most `maxResponseBytes` (an answer in
 * a million pieces costs its bytes, not a million pieces); past that the exchange fails and the
 * rest is not read. A streamed answer (`Post.events`) is handed on event by event within the same
 * bounds (`readEventStream`). Redirects are not followed.
 */
export function fetchTransport(
  fetch: (input: string | URL | Request, init?: RequestInit) => Promise<Response>,
  options: FetchTransportOptions = {},
): Transport {
  const maxBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  return (post) => fetchExchange(fetch, maxBytes, post);
}

const utf8 = new TextDecoder();

async function fetchExchange(
  fetch: (input: string | URL | Request, init?: RequestInit) => Promise<Response>,
  maxBytes: number,
  post: Post,
): Promise<Exchange> {
  const unsendable = unsendableHeader(post.headers);
  if (unsendable) return { outcome: 'unsendable', detail: unsendable };
  const limits = exchangeLimits(post);
  try {
    let response: Response;
    try {
      response = await fetch(post.url, {
        method: 'POST',
        headers: post.headers,
        body: post.body,
        // As the own client: a redirect is an answer, not followed (it could lead off the allowed hosts).
        redirect: 'manual',
        signal: limits.signal,
      });
    } catch (error) {
      return limits.stopped() ?? { outcome: 'failed', stage: 'connecting', error };
    }
    limits.touch();
    const header = (name: string) => response.headers.get(name);
    try {
      if (post.events && isEventStream(response.status, response.headers.get('content-type'))) {
        await readEventStream(response.body, post.events, maxBytes, limits.touch);
        return { outcome: 'streamed', status: response.status, header };
      }
      const body = post.events ? tapped(response.body, limits.touch) : response.body;
      const text = utf8.decode(await readBoundedBody(body, maxBytes, "the answer's body"));
      return { outcome: 'answered', status: response.status, header, text };
    } catch (error) {
      return limits.stopped() ?? { outcome: 'failed', stage: 'reading', error };
    }
  } finally {
    limits.clear();
  }
}
