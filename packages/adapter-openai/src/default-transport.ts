import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import zlib from 'node:zlib';
import { BodyTooLargeError, ByteAccumulator } from '@acs/core/ports';
import { DEFAULT_MAX_RESPONSE_BYTES, unsendableHeader, type Exchange, type Post, type Transport } from './transport.js';

export interface DefaultTransportOptions {
  /**
   * Certificates to trust besides the default ones (Node's bundled roots, the system's store,
   * and `NODE_EXTRA_CA_CERTS`): a private CA's, say. They are added, never put in their place.
   */
  ca?: readonly (string | Buffer)[];
  /** Largest answer body read, once any content coding is undone. Default 32 MiB. */
  maxResponseBytes?: number;
  /** Where the proxy variables are read (`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`). Default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/**
 * How the adapter calls models when the host gives no fetch: Node's own HTTP client (node:http
 * and node:https, kept by Node's maintainers) on keep-alive agents with Node's built-in proxy
 * support (`proxyEnv`, Node ≥ 22.21), so the operator's `HTTP_PROXY`, `HTTPS_PROXY` and
 * `NO_PROXY` are honoured as curl and npm honour them (an https model through the proxy's
 * CONNECT). Why not undici, which the issue named: in `bench:steps` the adapter alone cost
 * 0.48 ms of CPU per call over its `request` against 0.46 ms over node:http, the whole step 1.04
 * against 0.77 ms (its `fetch`: 1.40 ms), and loading it took 17 MiB more RSS than node:http
 * (README, Benchmark), for nothing a chat completion needs. Connections are kept per origin and reused, and an idle one never keeps the process
 * alive; node:http never sends a POST again by itself on a connection found closed (a retry is
 * the adapter's, counted and logged). TLS trusts Node's bundled roots, `NODE_EXTRA_CA_CERTS` and
 * the system's store, plus `ca` (node:tls is used only to list those roots). An answer is read
 * into one buffer of at most `maxResponseBytes` however many pieces it comes in; node:http leaves
 * content codings to its caller, so one a server used unasked is undone here with Node's zlib,
 * within the same bound.
 */
export function createDefaultTransport(options: DefaultTransportOptions = {}): Transport {
  const maxBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const proxyEnv = options.env ?? process.env;
  // `proxyEnv` is Node's (22.21, 24.5); @types/node 22 does not know it yet.
  const httpOptions: http.AgentOptions & { proxyEnv: NodeJS.ProcessEnv } = { keepAlive: true, proxyEnv };
  const httpsOptions: https.AgentOptions & { proxyEnv: NodeJS.ProcessEnv } = {
    keepAlive: true,
    proxyEnv,
    ca: trustedCertificates(options.ca ?? []),
  };
  const agents = { http: new http.Agent(httpOptions), https: new https.Agent(httpsOptions) };
  return (post) => exchange(agents, maxBytes, post);
}

/** One POST and its whole answer; never rejects. */
function exchange(agents: { http: http.Agent; https: https.Agent }, maxBytes: number, post: Post): Promise<Exchange> {
  const unsendable = unsendableHeader(post.headers);
  if (unsendable) return Promise.resolve({ outcome: 'unsendable', detail: unsendable });
  if (post.signal?.aborted) return Promise.resolve({ outcome: 'cancelled' });
  return new Promise<Exchange>((resolve) => {
    const secure = post.url.startsWith('https:');
    const body = Buffer.from(post.body, 'utf8');
    let answered = false;
    let settled = false;
    const settle = (result: Exchange) => {
      if (settled) return;
      settled = true;
      clearTimeout(timeout);
      post.signal?.removeEventListener('abort', cancel);
      resolve(result);
    };
    const request = (secure ? https : http).request(
      post.url,
      {
        method: 'POST',
        headers: { ...post.headers, 'Content-Length': String(body.length) },
        agent: secure ? agents.https : agents.http,
      },
      (response) => {
        answered = true;
        readAnswer(response, maxBytes).then(settle, (error: unknown) =>
          settle({ outcome: 'failed', stage: 'reading', error }),
        );
      },
    );
    const stop = (outcome: 'cancelled' | 'timed_out') => {
      settle({ outcome });
      request.destroy();
    };
    const cancel = () => stop('cancelled');
    const timeout = setTimeout(() => stop('timed_out'), post.timeoutMs);
    post.signal?.addEventListener('abort', cancel, { once: true });
    request.on('error', (error) => settle({ outcome: 'failed', stage: answered ? 'reading' : 'connecting', error }));
    request.end(body);
  });
}

/** The answer: its status, headers and whole body, decoded when a server used a content coding, within `maxBytes`. */
async function readAnswer(response: IncomingMessage, maxBytes: number): Promise<Exchange> {
  const gathered = new ByteAccumulator(maxBytes);
  for await (const chunk of response as AsyncIterable<Buffer>) {
    if (!gathered.append(chunk)) {
      response.destroy();
      throw new BodyTooLargeError(maxBytes, "the answer's body");
    }
  }
  const bytes = gathered.take();
  const raw = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const text = decoded(raw, response.headers['content-encoding'], maxBytes).toString('utf8');
  const headers = response.headers;
  return {
    outcome: 'answered',
    status: response.statusCode ?? 0,
    header: (name) => {
      const value = headers[name.toLowerCase()];
      return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
    },
    text,
  };
}

/** The body with its content codings undone (a server may use one unasked), each within `maxBytes`. */
function decoded(body: Buffer, coding: string | undefined, maxBytes: number): Buffer {
  let out = body;
  const codings = (coding ?? '')
    .toLowerCase()
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '' && name !== 'identity');
  for (const name of codings.reverse()) {
    const options = { maxOutputLength: maxBytes };
    try {
      if (name === 'gzip' || name === 'x-gzip') out = zlib.gunzipSync(out, options);
      else if (name === 'br') out = zlib.brotliDecompressSync(out, options);
      else if (name === 'deflate') out = inflate(out, maxBytes);
      else throw new Error(`the answer is in a content coding this client does not read (${name})`);
    } catch (error) {
      throw new Error(
        `the answer's ${name} body does not decode within ${maxBytes} bytes (${(error as Error).message})`,
        {
          cause: error,
        },
      );
    }
  }
  return out;
}

/** `deflate` as RFC 9110 means it (zlib), or as some servers send it (raw). */
function inflate(body: Buffer, maxBytes: number): Buffer {
  try {
    return zlib.inflateSync(body, { maxOutputLength: maxBytes });
  } catch {
    return zlib.inflateRawSync(body, { maxOutputLength: maxBytes });
  }
}

/**
 * Node's default roots (bundled, and `NODE_EXTRA_CA_CERTS`), the system's store, and the
 * host's own: a `ca` given to TLS replaces the defaults, so they are listed together.
 */
function trustedCertificates(extra: readonly (string | Buffer)[]): string[] {
  const all = new Set<string>(tls.getCACertificates('default'));
  try {
    for (const certificate of tls.getCACertificates('system')) all.add(certificate);
  } catch {
    // No system store on this platform: the defaults stand.
  }
  for (const certificate of extra)
    all.add(typeof certificate === 'string' ? certificate : certificate.toString('utf8'));
  return [...all];
}
