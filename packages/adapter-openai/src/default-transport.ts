import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import type { Readable } from 'node:stream';
import { pipeline, type Transform } from 'node:stream';
import zlib from 'node:zlib';
import { BodyTooLargeError, ByteAccumulator } from '@acs/core/ports';
import {
  DEFAULT_MAX_RESPONSE_BYTES,
  exchangeLimits,
  isEventStream,
  eventFeeder,
  type EventFeeder,
  unsendableHeader,
  type EventSink,
  type Exchange,
  type Post,
  type Transport,
} from './transport.js';

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
 * (docs/benchmark-history.md), for nothing a chat completion needs. Connections are kept per origin and reused, and an idle one never keeps the process
 * alive; node:http never sends a POST again by itself on a connection found closed (a retry is
 * the adapter's, counted and logged). TLS trusts Node's bundled roots, `NODE_EXTRA_CA_CERTS` and
 * the system's store, plus `ca` (node:tls is used only to list those roots). An answer is read
 * into one buffer of at most `maxResponseBytes` however many pieces it comes in; node:http leaves
 * content codings to its caller, so one a server used unasked is undone here with Node's zlib,
 * within the same bound. A streamed answer (`Post.events`) is not gathered: its events are handed
 * on as they arrive (`readEventStream`), its content coding undone by zlib's streaming decoders,
 * and a stop destroys the socket at once.
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

/** One POST and its answer (whole, or a stream's events handed on as they come); never rejects. */
function exchange(agents: { http: http.Agent; https: https.Agent }, maxBytes: number, post: Post): Promise<Exchange> {
  const unsendable = unsendableHeader(post.headers);
  if (unsendable) return Promise.resolve({ outcome: 'unsendable', detail: unsendable });
  if (post.signal?.aborted) return Promise.resolve({ outcome: 'cancelled' });
  return new Promise<Exchange>((resolve) => {
    const secure = post.url.startsWith('https:');
    const body = Buffer.from(post.body, 'utf8');
    const limits = exchangeLimits(post);
    let answered = false;
    let settled = false;
    const settle = (result: Exchange) => {
      if (settled) return;
      settled = true;
      limits.clear();
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
        limits.touch();
        readResponse(response, post.events, maxBytes, limits.touch).then(settle, (error: unknown) =>
          settle(limits.stopped() ?? { outcome: 'failed', stage: 'reading', error }),
        );
      },
    );
    // A stop (the caller's, or a limit) ends the exchange at once: the socket is destroyed, a stream with it.
    limits.signal.addEventListener(
      'abort',
      () => {
        const stopped = limits.stopped();
        if (stopped) settle(stopped);
        request.destroy();
      },
      { once: true },
    );
    request.on('error', (error) =>
      settle(limits.stopped() ?? { outcome: 'failed', stage: answered ? 'reading' : 'connecting', error }),
    );
    request.end(body);
  });
}

/** The answer: a 2xx event stream handed on to `events` as it comes, anything else read whole. */
function readResponse(
  response: IncomingMessage,
  events: EventSink | undefined,
  maxBytes: number,
  onBytes: () => void,
): Promise<Exchange> {
  if (events && isEventStream(response.statusCode ?? 0, response.headers['content-type']))
    return streamAnswer(response, events, maxBytes, onBytes);
  return readAnswer(response, maxBytes, onBytes);
}

/** A streamed answer: its content codings undone as it comes (zlib's streaming decoders), its events handed on. */
async function streamAnswer(
  response: IncomingMessage,
  events: EventSink,
  maxBytes: number,
  onBytes: () => void,
): Promise<Exchange> {
  const decoded = decodingStream(response);
  await feedFrom(decoded, eventFeeder(events, maxBytes, onBytes));
  return { outcome: 'streamed', status: response.statusCode ?? 0, header: headerOf(response) };
}

/**
 * Feeds a Node stream's pieces to `feeder` as 'data' events, until its end: no promise per piece
 * (a token stream's pieces are many and small). Rejects when the stream fails, closes before its
 * end, or a bound is passed (the stream is then destroyed, and the connection with it).
 */
function feedFrom(stream: Readable, feeder: EventFeeder): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let over = false;
    const fail = (error: unknown) => {
      if (over) return;
      over = true;
      stream.destroy();
      reject(error instanceof Error ? error : new Error(String(error)));
    };
    stream.on('data', (chunk: Buffer) => {
      try {
        feeder.push(chunk);
      } catch (error) {
        fail(error);
      }
    });
    stream.once('end', () => {
      if (over) return;
      try {
        feeder.end();
      } catch (error) {
        fail(error);
        return;
      }
      over = true;
      resolve();
    });
    stream.once('error', fail);
    stream.once('close', () => fail(new Error('the stream closed before its end')));
  });
}

/** The answer's headers by name (any case). */
function headerOf(response: IncomingMessage): (name: string) => string | null {
  const headers = response.headers;
  return (name) => {
    const value = headers[name.toLowerCase()];
    return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
  };
}

/** The content codings a server used, in the order they are to be undone. */
function codingsOf(response: IncomingMessage): string[] {
  return (response.headers['content-encoding'] ?? '')
    .toLowerCase()
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '' && name !== 'identity')
    .reverse();
}

/**
 * The body as it comes, through a streaming zlib decoder per content coding (a stream cannot
 * wait for its end to be decoded); the pipeline ends them all, and the socket, when one fails or
 * the reader gives up.
 */
function decodingStream(response: IncomingMessage): Readable {
  const decoders = codingsOf(response).map((name): Transform => {
    if (name === 'gzip' || name === 'x-gzip') return zlib.createGunzip();
    if (name === 'br') return zlib.createBrotliDecompress();
    if (name === 'deflate') return zlib.createInflate();
    response.destroy();
    throw new Error(`the answer is in a content coding this client does not read (${name})`);
  });
  if (decoders.length === 0) return response;
  return pipeline([response, ...decoders], () => undefined) as unknown as Readable;
}

/** The answer: its status, headers and whole body, decoded when a server used a content coding, within `maxBytes`. */
async function readAnswer(response: IncomingMessage, maxBytes: number, onBytes: () => void): Promise<Exchange> {
  const gathered = new ByteAccumulator(maxBytes);
  for await (const chunk of response as AsyncIterable<Buffer>) {
    onBytes();
    if (!gathered.append(chunk)) {
      response.destroy();
      throw new BodyTooLargeError(maxBytes, "the answer's body");
    }
  }
  const bytes = gathered.take();
  const raw = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const text = decoded(raw, codingsOf(response), maxBytes).toString('utf8');
  return { outcome: 'answered', status: response.statusCode ?? 0, header: headerOf(response), text };
}

/** The body with its content codings undone (a server may use one unasked), each within `maxBytes`. */
function decoded(body: Buffer, codings: readonly string[], maxBytes: number): Buffer {
  let out = body;
  for (const name of codings) {
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
