import http from 'node:http';
import https from 'node:https';

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
type Exchange =
  | { outcome: 'answered'; status: number; header: (name: string) => string | null; text: string }
  | { outcome: 'failed'; stage: 'connecting' | 'reading'; error: unknown }
  | { outcome: 'timed_out' | 'cancelled' };

/** Sends one request and reads its whole answer; never rejects. */
export type Transport = (post: Post) => Promise<Exchange>;

const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

/**
 * node:http(s) on keep-alive agents, the answer read whole. A chat completion (not streamed) needs
 * no more, and Node's own fetch (undici, with WHATWG streams, Request, Response, Headers and an
 * AbortSignal.any around every call) spends several times the CPU of a plain http.request: a
 * large part of what the server spent per agent step (issue 27, bench/steps.ts). One timer and
 * one abort listener per exchange, both gone when it ends.
 */
export const nodeHttpTransport: Transport = (post) =>
  new Promise<Exchange>((resolve) => {
    const { signal } = post;
    if (signal?.aborted) {
      resolve({ outcome: 'cancelled' });
      return;
    }
    const url = new URL(post.url);
    const secure = url.protocol === 'https:';
    let answered = false;
    let settled = false;
    const settle = (exchange: Exchange) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve(exchange);
    };
    const stop = (exchange: Exchange) => {
      settle(exchange);
      request.destroy();
    };
    const onAbort = () => stop({ outcome: 'cancelled' });
    const timer = setTimeout(() => stop({ outcome: 'timed_out' }), post.timeoutMs);
    const headers = { ...post.headers, 'content-length': String(Buffer.byteLength(post.body)) };
    const request = (secure ? https : http).request(
      url,
      { method: 'POST', headers, agent: secure ? agents.https : agents.http },
      (response) => {
        answered = true;
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const text = (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString('utf8');
          const received = response.headers;
          const header = (name: string) => {
            const value = received[name.toLowerCase()];
            return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
          };
          settle({ outcome: 'answered', status: response.statusCode ?? 0, header, text });
        });
        response.on('error', (error) => settle({ outcome: 'failed', stage: 'reading', error: dropped(error) }));
        response.on('close', () => {
          if (!response.complete) settle({ outcome: 'failed', stage: 'reading', error: dropped(null) });
        });
      },
    );
    signal?.addEventListener('abort', onAbort, { once: true });
    // As undici's fetch fails to connect: a TypeError whose cause says why (what the error classification reads).
    request.on('error', (error) =>
      settle(
        answered
          ? { outcome: 'failed', stage: 'reading', error: dropped(error) }
          : { outcome: 'failed', stage: 'connecting', error: new TypeError('fetch failed', { cause: error }) },
      ),
    );
    request.end(post.body);
  });

/** The answer ended early: said in the words (and with the code) the error classification knows. */
function dropped(error: Error | null): Error {
  return Object.assign(
    new Error(`the connection dropped while reading the answer${error ? ` (${error.message})` : ''}`),
    { code: 'ECONNRESET' },
  );
}

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
