import http from 'node:http';
import https from 'node:https';

/**
 * The `fetch` this adapter gives the OpenAI SDK: node:http(s) on keep-alive agents, the answer
 * read whole. A chat completion (not streamed) needs no more than that, and Node's own fetch
 * (undici, with WHATWG streams, Request and Response around every call) spends 3–5 times the CPU
 * of a plain http.request on each call: about half of what the server spent per agent step
 * (issue 27, bench/steps.ts). A body this adapter never sends (a form, a stream) goes to the
 * global fetch.
 */
export function nodeHttpFetch(input: string | URL | Request, init: RequestInit = {}): Promise<Response> {
  const body = init.body;
  const payload = typeof body === 'string' ? body : body instanceof Uint8Array ? body : body === undefined || body === null ? undefined : null;
  if (payload === null || input instanceof Request) return globalThis.fetch(input, init);
  const url = input instanceof URL ? input : new URL(input);
  const signal = init.signal ?? null;
  const method = (init.method ?? 'GET').toUpperCase();
  return new Promise<Response>((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortError(signal));
      return;
    }
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    if (payload !== undefined) headers['content-length'] = String(typeof payload === 'string' ? Buffer.byteLength(payload) : payload.byteLength);
    const secure = url.protocol === 'https:';
    let settled = false;
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      outcome();
    };
    // As undici's fetch fails: a TypeError whose cause says why (the SDK makes it a connection error).
    const fail = (cause: Error) => settle(() => reject(new TypeError('fetch failed', { cause })));
    const request = (secure ? https : http).request(url, { method, headers, agent: secure ? agents.https : agents.http }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const status = response.statusCode ?? 0;
        const names = response.rawHeaders;
        const answerHeaders = new Headers();
        for (let i = 0; i + 1 < names.length; i += 2) answerHeaders.append(names[i]!, names[i + 1]!);
        const empty = method === 'HEAD' || status === 101 || status === 204 || status === 205 || status === 304;
        try {
          const answer = new Response(empty ? null : Buffer.concat(chunks), { status, statusText: response.statusMessage ?? '', headers: answerHeaders });
          settle(() => resolve(answer));
        } catch (error) {
          fail(error instanceof Error ? error : new Error(String(error)));
        }
      });
      response.on('error', (error) => fail(dropped(error)));
      response.on('close', () => {
        if (!response.complete) fail(dropped(null));
      });
    });
    const onAbort = () => {
      request.destroy();
      settle(() => reject(abortError(signal)));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    request.on('error', (error) => fail(error));
    request.end(payload);
  });
}

const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

function abortError(signal: AbortSignal | null): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error && reason.name === 'AbortError' ? reason : new DOMException('This operation was aborted', 'AbortError');
}

/** The answer ended early: said in the words (and with the code) the adapter's error classification knows. */
function dropped(error: Error | null): Error {
  return Object.assign(new Error(`the connection dropped while reading the answer${error ? ` (${error.message})` : ''}`), { code: 'ECONNRESET' });
}
