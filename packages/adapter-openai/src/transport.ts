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

/** A transport over a fetch the host gives (a proxy-aware one, say): its timer and cancellation as an AbortSignal. */
export function fetchTransport(
  fetch: (input: string | URL | Request, init?: RequestInit) => Promise<Response>,
): Transport {
  return async (post) => {
    const timer = new AbortController();
    const timeout = setTimeout(() => timer.abort(), post.timeoutMs);
    const stopped = (): Exchange | null =>
      post.signal?.aborted ? { outcome: 'cancelled' } : timer.signal.aborted ? { outcome: 'timed_out' } : null;
    try {
      let response: Response;
      try {
        response = await fetch(post.url, {
          method: 'POST',
          headers: post.headers,
          body: post.body,
          signal: post.signal ? AbortSignal.any([post.signal, timer.signal]) : timer.signal,
        });
      } catch (error) {
        return stopped() ?? { outcome: 'failed', stage: 'connecting', error };
      }
      try {
        const text = await response.text();
        return { outcome: 'answered', status: response.status, header: (name) => response.headers.get(name), text };
      } catch (error) {
        return stopped() ?? { outcome: 'failed', stage: 'reading', error };
      }
    } finally {
      clearTimeout(timeout);
    }
  };
}
