import net from 'node:net';
import tls from 'node:tls';
import zlib from 'node:zlib';
import { HttpAnswerError, ResponseParser, tokensOf, type ParserLimits } from './http1-parser.js';
import { DEFAULT_MAX_RESPONSE_BYTES, type Exchange, type Post, type Transport } from './transport.js';

/**
 * The adapter's own HTTP/1.1 client: one POST, its whole answer, on keep-alive connections over
 * node:net and node:tls. A chat completion needs no more than that, and node:http's client
 * (ClientRequest, the agent's queues, IncomingMessage streams, a dozen events per exchange) spent
 * about three times the CPU of this one per call on loopback: 140 against 48 µs for a 16 kB
 * prompt, more than the model server spent answering it (issue 27, bench/steps.ts).
 *
 * - A connection is reused for the next call to the same origin while it is idle, for
 *   `idleTimeoutMs` or the shorter keep-alive the server announces; idle connections do not keep
 *   the process alive.
 * - A reused connection that the server had closed meanwhile (nothing of the answer arrived) is
 *   replaced, and the request sent once more on a new connection.
 * - The answer's header, body and decoded body are bounded (`maxResponseBytes`).
 * - Header fields are checked before anything is sent: a line break in a key or a configured
 *   header is refused, never sent as a second field.
 */
export interface Http1TransportOptions {
  /** Largest answer body accepted, in bytes, as sent and once its content coding is undone. Default 32 MiB. */
  maxResponseBytes?: number;
  /** How long an idle connection is kept for the next call to its origin. Default 4000 ms. */
  idleTimeoutMs?: number;
  /** Certificates to trust for https besides Node's own (a private CA, a test's self-signed one). */
  ca?: string | Buffer | readonly (string | Buffer)[];
}

const DEFAULT_IDLE_MS = 4000;
const MAX_HEAD_BYTES = 64 * 1024;
/** Idle connections kept per origin (as many as node:http's agent keeps); more are closed as they come back. */
const MAX_IDLE_PER_ORIGIN = 256;

/** Where a request goes: the origin its connections are pooled by, and how to reach it. */
interface Target {
  origin: string;
  secure: boolean;
  host: string;
  port: number;
  /** What goes on the wire: request line and header fields. */
  head: string;
}

/** The exchange a connection carries: how its answer reads, and whom to tell how it ended. */
interface Pending {
  parser: ResponseParser;
  /** Once: the exchange's end, or `stale` when a reused connection had been closed by the server before it. */
  finish(result: Exchange | 'stale'): void;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Visible ASCII, space, tab and obs-text (sent as latin1, as node:http sends it). */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/** A character past ASCII in a (checked) head: then it goes out as latin1, apart from the UTF-8 body. */
const PAST_ASCII = /[\x80-\xff]/;
/** Fields this client writes itself: the request's framing and connection handling are not the caller's. */
const OWN_FIELDS = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'te',
  'upgrade',
]);

/** The request line and header fields, or why a field cannot be sent as given. */
function requestHead(url: URL, headers: Record<string, string>, bodyBytes: number): string | { unsendable: string } {
  let head = `POST ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n`;
  for (const [name, value] of Object.entries(headers)) {
    if (!TOKEN.test(name))
      return { unsendable: `the header name ${JSON.stringify(name.slice(0, 60))} is not an HTTP token` };
    // The value is not quoted: it may be a key.
    if (!FIELD_VALUE.test(value))
      return { unsendable: `the header ${name} holds a character HTTP does not allow in a value (a line break, say)` };
    if (!OWN_FIELDS.has(name.toLowerCase())) head += `${name}: ${value}\r\n`;
  }
  return `${head}Content-Length: ${bodyBytes}\r\nConnection: keep-alive\r\n\r\n`;
}

/** As undici's fetch fails to connect: a TypeError whose cause says why (what the error classification reads). */
const connectFailure = (cause: unknown): Exchange => ({
  outcome: 'failed',
  stage: 'connecting',
  error: new TypeError('fetch failed', { cause }),
});

/** The answer ended early: said in the words (and with the code) the error classification knows. */
function dropped(error: Error | null): Error {
  return Object.assign(
    new Error(`the connection dropped while reading the answer${error ? ` (${error.message})` : ''}`),
    { code: 'ECONNRESET' },
  );
}

/** The body with its content coding undone (a server may use one unasked), within `max` bytes. */
function decoded(body: Buffer, coding: string | undefined, max: number): Buffer {
  let out = body;
  for (const name of tokensOf(coding).reverse()) {
    try {
      if (name === 'identity') continue;
      if (name === 'gzip' || name === 'x-gzip') out = zlib.gunzipSync(out, { maxOutputLength: max });
      else if (name === 'br') out = zlib.brotliDecompressSync(out, { maxOutputLength: max });
      else if (name === 'deflate') out = inflate(out, max);
      else throw new HttpAnswerError(`the answer is in a content coding this client does not read (${name})`);
    } catch (error) {
      if (error instanceof HttpAnswerError) throw error;
      throw new HttpAnswerError(
        `the answer's ${name} body does not decode within ${max} bytes (${(error as Error).message})`,
      );
    }
  }
  return out;
}

/** `deflate` as RFC 9110 means it (zlib), or as some servers send it (raw). */
function inflate(body: Buffer, max: number): Buffer {
  try {
    return zlib.inflateSync(body, { maxOutputLength: max });
  } catch {
    return zlib.inflateRawSync(body, { maxOutputLength: max });
  }
}

/** One connection to an origin, carrying one exchange at a time. */
class Connection {
  readonly socket: net.Socket;
  #connected = false;
  /** Exchanges it has completed: a connection that carried one before is a reused one. */
  #completed = 0;
  #pending: Pending | null = null;
  #idleTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly target: Target,
    private readonly pool: ConnectionPool,
  ) {
    const { host, port } = target;
    this.socket = target.secure
      ? tls.connect({
          host,
          port,
          servername: net.isIP(host) ? undefined : host,
          ALPNProtocols: ['http/1.1'],
          secureContext: pool.secureContext(),
        })
      : net.connect({ host, port });
    this.socket.setNoDelay(true);
    this.socket.once(target.secure ? 'secureConnect' : 'connect', () => (this.#connected = true));
    this.socket.on('data', (chunk: Buffer) => this.#received(chunk));
    // Without an error listener a reset would end the process: every one is heard here.
    this.socket.on('error', (error) => this.#ended(error));
    this.socket.on('end', () => this.#ended(null));
    this.socket.on('close', () => this.#ended(null));
  }

  /** Sends a request (head and body); `pending` hears how it ends. */
  send(head: string, body: string, pending: Pending): void {
    this.#pending = pending;
    if (!PAST_ASCII.test(head)) {
      this.socket.write(head + body);
    } else {
      this.socket.cork();
      this.socket.write(head, 'latin1');
      this.socket.write(body, 'utf8');
      this.socket.uncork();
    }
  }

  /** The exchange was given up (cancelled, timed out): the connection goes with it. */
  abandon(): void {
    this.#pending = null;
    this.close();
  }

  close(): void {
    clearTimeout(this.#idleTimer);
    this.pool.forget(this);
    this.socket.destroy();
  }

  /** Back in the pool: it no longer keeps the process alive, and closes after `ms`. */
  sleep(ms: number): void {
    this.socket.unref();
    this.#idleTimer = setTimeout(() => this.close(), ms).unref();
  }

  /** Taken from the pool; false when it has closed meanwhile. */
  wake(): boolean {
    clearTimeout(this.#idleTimer);
    if (this.socket.destroyed || !this.socket.writable) return false;
    this.socket.ref();
    return true;
  }

  #received(chunk: Buffer): void {
    const pending = this.#pending;
    if (!pending) return this.close(); // bytes nobody asked for
    let whole: boolean;
    try {
      whole = pending.parser.push(chunk);
    } catch (error) {
      this.#pending = null;
      this.close();
      return pending.finish({ outcome: 'failed', stage: 'reading', error });
    }
    if (whole) this.#answered(pending, pending.parser.keepAlive && pending.parser.surplus === 0);
  }

  #answered(pending: Pending, reusable: boolean): void {
    this.#pending = null;
    this.#completed++;
    const { parser } = pending;
    let text: string;
    try {
      text = decoded(parser.body(), parser.headers.get('content-encoding'), this.pool.limits.maxBodyBytes).toString(
        'utf8',
      );
    } catch (error) {
      this.close();
      return pending.finish({ outcome: 'failed', stage: 'reading', error });
    }
    if (reusable) this.pool.release(this, parser.headers.get('keep-alive'));
    else this.close();
    const header = (name: string) => parser.headers.get(name.toLowerCase()) ?? null;
    pending.finish({ outcome: 'answered', status: parser.status, header, text });
  }

  /** The connection ended or failed: what that means for the exchange it carries, if any. */
  #ended(error: Error | null): void {
    const pending = this.#pending;
    this.#pending = null;
    if (pending && error === null && pending.parser.end()) return this.#answered(pending, false);
    this.close();
    if (!pending) return;
    if (pending.parser.started) return pending.finish({ outcome: 'failed', stage: 'reading', error: dropped(error) });
    if (this.#completed > 0) return pending.finish('stale');
    pending.finish(
      connectFailure(error ?? new Error(this.#connected ? 'the server closed the connection' : 'connection closed')),
    );
  }
}

/** Idle connections by origin, the limits every answer is read with, and the TLS trust. */
class ConnectionPool {
  readonly #idle = new Map<string, Connection[]>();
  readonly limits: ParserLimits;
  readonly #idleMs: number;
  readonly #ca: readonly (string | Buffer)[] | null;
  #context: tls.SecureContext | undefined;

  constructor(options: Http1TransportOptions) {
    this.limits = {
      maxHeadBytes: MAX_HEAD_BYTES,
      maxBodyBytes: options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
    };
    this.#idleMs = options.idleTimeoutMs ?? DEFAULT_IDLE_MS;
    this.#ca =
      options.ca === undefined ? null : Array.isArray(options.ca) ? options.ca : [options.ca as string | Buffer];
  }

  /** Node's root certificates and the extra ones, made once. */
  secureContext(): tls.SecureContext | undefined {
    if (this.#ca === null) return undefined;
    this.#context ??= tls.createSecureContext({ ca: [...tls.rootCertificates, ...this.#ca] });
    return this.#context;
  }

  /** An idle connection to the target's origin, or a new one. */
  connection(target: Target, fresh: boolean): Connection {
    const idle = fresh ? undefined : this.#idle.get(target.origin);
    while (idle && idle.length > 0) {
      const connection = idle.pop()!;
      if (connection.wake()) return connection;
      connection.close();
    }
    return new Connection(target, this);
  }

  /** A connection whose exchange ended cleanly: kept for the next call, unless the server means to close it soon. */
  release(connection: Connection, keepAlive: string | undefined): void {
    const announced = /(?:^|,)\s*timeout=(\d+)/i.exec(keepAlive ?? '');
    // A server that says how long it keeps a connection: give it up a second earlier than it does.
    const ms = announced ? Math.min(this.#idleMs, Number(announced[1]) * 1000 - 1000) : this.#idleMs;
    const idle = this.#idle.get(connection.target.origin) ?? [];
    if (ms <= 0 || idle.length >= MAX_IDLE_PER_ORIGIN) return connection.close();
    idle.push(connection);
    this.#idle.set(connection.target.origin, idle);
    connection.sleep(ms);
  }

  forget(connection: Connection): void {
    const idle = this.#idle.get(connection.target.origin);
    const at = idle?.indexOf(connection) ?? -1;
    if (at >= 0) idle!.splice(at, 1);
    if (idle?.length === 0) this.#idle.delete(connection.target.origin);
  }
}

/** Where a post goes, or the exchange it ends in without being sent. */
function targetOf(post: Post): Target | Exchange {
  const url = URL.parse(post.url);
  const secure = url?.protocol === 'https:';
  if (!url || (!secure && url.protocol !== 'http:'))
    return connectFailure(new Error(`"${post.url}" is not an http(s) URL`));
  const head = requestHead(url, post.headers, Buffer.byteLength(post.body));
  if (typeof head !== 'string') return { outcome: 'unsendable', detail: head.unsendable };
  return {
    origin: `${url.protocol}//${url.host}`,
    secure,
    // An IPv6 literal's brackets belong to the URL, not to the address.
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? (secure ? 443 : 80) : Number(url.port),
    head,
  };
}

/** A transport of its own connections (see `Http1TransportOptions`). */
export function createHttp1Transport(options: Http1TransportOptions = {}): Transport {
  const pool = new ConnectionPool(options);
  return (post: Post) => {
    const { signal } = post;
    if (signal?.aborted) return Promise.resolve<Exchange>({ outcome: 'cancelled' });
    const target = targetOf(post);
    if ('outcome' in target) return Promise.resolve(target);
    return new Promise<Exchange>((resolve) => {
      let connection: Connection | null = null;
      let settled = false;
      const settle = (exchange: Exchange) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(exchange);
      };
      const stop = (exchange: Exchange) => {
        connection?.abandon();
        settle(exchange);
      };
      const onAbort = () => stop({ outcome: 'cancelled' });
      const timer = setTimeout(() => stop({ outcome: 'timed_out' }), post.timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      const send = (fresh: boolean) => {
        connection = pool.connection(target, fresh);
        connection.send(target.head, post.body, {
          parser: new ResponseParser(pool.limits),
          // Only a reused connection can be stale, so the new one sent on is never.
          finish: (result) => (result === 'stale' ? send(true) : settle(result)),
        });
      };
      send(false);
    });
  };
}
