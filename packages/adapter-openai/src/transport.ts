import { readBoundedBody } from '@acs/core/ports';

/** A chat-completions request as the adapter sends it: one POST of a JSON text. */
export interface Post {
  url: string;
  headers: Record<string, string>;
  body: string;
  /** Cancels the exchange (the conversation was stopped). */
  signal: AbortSignal | undefined;
  /** Limit of the whole exchange, from sending to the end of the answer. */
  timeoutMs: number;
}

/** How one exchange ended. `stage` says whether the answer had begun when the connection failed. */
export type Exchange =
  | { outcome: 'answered'; status: number; header: (name: string) => string | null; text: string }
  | { outcome: 'failed'; stage: 'connecting' | 'reading'; error: unknown }
  | { outcome: 'timed_out' | 'cancelled' }
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

/**
 * A transport over a fetch the host gives (a proxy-aware one, say): its timer and cancellation as
 * an AbortSignal. The answer is read into one buffer of at most `maxResponseBytes` (an answer in
 * a million pieces costs its bytes, not a million pieces); past that the exchange fails and the
 * rest is not read. Redirects are not followed.
 */
export function fetchTransport(
  fetch: (input: string | URL | Request, init?: RequestInit) => Promise<Response>,
  options: FetchTransportOptions = {},
): Transport {
  const maxBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const utf8 = new TextDecoder();
  return async (post) => {
    const timer = new AbortController();
    const timeout = setTimeout(() => timer.abort(), post.timeoutMs);
    const stopped = (): Exchange | null =>
      post.signal?.aborted ? { outcome: 'cancelled' } : timer.signal.aborted ? { outcome: 'timed_out' } : null;
    try {
      const unsendable = unsendableHeader(post.headers);
      if (unsendable) return { outcome: 'unsendable', detail: unsendable };
      let response: Response;
      try {
        response = await fetch(post.url, {
          method: 'POST',
          headers: post.headers,
          body: post.body,
          // As the own client: a redirect is an answer, not followed (it could lead off the allowed hosts).
          redirect: 'manual',
          signal: post.signal ? AbortSignal.any([post.signal, timer.signal]) : timer.signal,
        });
      } catch (error) {
        return stopped() ?? { outcome: 'failed', stage: 'connecting', error };
      }
      try {
        const text = utf8.decode(await readBoundedBody(response.body, maxBytes, "the answer's body"));
        return { outcome: 'answered', status: response.status, header: (name) => response.headers.get(name), text };
      } catch (error) {
        return stopped() ?? { outcome: 'failed', stage: 'reading', error };
      }
    } finally {
      clearTimeout(timeout);
    }
  };
}
