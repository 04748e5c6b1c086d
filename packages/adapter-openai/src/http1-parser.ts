import { ByteAccumulator } from '@acs/core/ports';

/**
 * An HTTP/1.1 response read from a byte stream (RFC 9112): status line, header fields, and a body
 * framed by Content-Length, by chunked transfer coding, or by the end of the connection. Fed
 * whatever arrives, split anywhere. Every part has a bound, so a server that sends without end
 * costs a failed call, not the process's memory; and what is kept is copied into one buffer
 * (`ByteAccumulator`), so memory follows the bytes, not the pieces they came in (a body of 4
 * million one-byte chunks held a view object per chunk, over 400 MiB for 4 MB, issue 35).
 */

/** The answer does not read as HTTP/1.1, or is larger than allowed; `message` says which. */
export class HttpAnswerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HttpAnswerError';
  }
}

export interface ParserLimits {
  /** Bytes of the status line and header fields together, and of a chunked body's trailer fields. */
  maxHeadBytes: number;
  /** Bytes of the body (as sent, before any content coding is undone). */
  maxBodyBytes: number;
}

type State = 'head' | 'length' | 'chunk-size' | 'chunk-data' | 'chunk-end' | 'trailers' | 'until-close' | 'done';

const HEAD_END = Buffer.from('\r\n\r\n');
const LINE_END = Buffer.from('\r\n');
const STATUS_LINE = /^HTTP\/1\.([01]) ([1-9]\d\d)(?: [^\r\n]*)?$/;
const FIELD_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([^\r\n]*?)[ \t]*$/;
const CHUNK_SIZE = /^([0-9a-fA-F]{1,15})[ \t]*(?:;.*)?$/;
/** A chunk-size line is a few hex digits and perhaps an extension: a longer line is not HTTP. */
const MAX_CHUNK_LINE = 1024;

export const tokensOf = (value: string | undefined) =>
  (value ?? '')
    .toLowerCase()
    .split(',')
    .map((token) => token.trim())
    .filter(Boolean);

/** The value of a hex digit's byte, or -1. */
function hexValue(byte: number): number {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  const lower = byte | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x61 + 10 : -1;
}

/** A chunk-size line of 1 to 15 hex digits and CRLF at `at`, read off the bytes; null for any other (or one not whole yet). */
function plainChunkSize(data: Buffer, at: number): { size: number; next: number } | null {
  let size = 0;
  let i = at;
  for (; i < data.length && i - at < 15; i++) {
    const digit = hexValue(data[i]!);
    if (digit < 0) break;
    size = size * 16 + digit;
  }
  if (i === at || data[i] !== 0x0d || data[i + 1] !== 0x0a) return null;
  return { size, next: i + 2 };
}

/** A Buffer over the same bytes (no copy), for Buffer's search and decoding. */
const asBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);

/**
 * One response, read as its bytes arrive: `push` them, then `status`, `header` and `body` once it
 * says the response is whole. Each push is read where it lies; only what waits for more (part of
 * a head, a line, a chunk's end) is copied aside, and body bytes are copied into the body.
 */
export class ResponseParser {
  status = 0;
  /** Field values by lower-cased name; a repeated field's values joined with ", ". */
  readonly headers = new Map<string, string>();
  /** Whether the connection can carry another request once this response is whole. */
  keepAlive = false;
  #state: State = 'head';
  /** Bytes that arrived and wait for more: at most a head or a line (each bounded), and the push that completes it. */
  readonly #carry = new ByteAccumulator();
  /** Bytes at the start of the carry already searched for the end of the head or line, without finding it. */
  #searched = 0;
  readonly #body: ByteAccumulator;
  #remaining = 0;
  #trailerBytes = 0;
  #started = false;
  #surplus = 0;

  constructor(private readonly limits: ParserLimits) {
    this.#body = new ByteAccumulator(limits.maxBodyBytes);
  }

  /** Feeds the next bytes; true once the response is whole. Throws `HttpAnswerError` for what is not HTTP. */
  push(chunk: Buffer): boolean {
    if (chunk.length > 0) this.#started = true;
    if (this.#whole()) {
      this.#surplus += chunk.length;
      return true;
    }
    const fromCarry = this.#carry.length > 0;
    if (fromCarry) this.#carry.append(chunk);
    const data = fromCarry ? asBuffer(this.#carry.view()) : chunk;
    let at = 0;
    while (!this.#whole()) {
      const next = this.#advance(data, at);
      if (next < 0) break;
      at = next;
    }
    if (this.#whole()) {
      this.#surplus = data.length - at;
      this.#carry.take();
    } else if (fromCarry) this.#carry.discard(at);
    // Copied, so that no view of a large chunk is kept for the few bytes that wait.
    else this.#carry.append(data, at);
    return this.#whole();
  }

  /** Whether the response is whole (a method, so that what a step did is read afresh). */
  #whole(): boolean {
    return this.#state === 'done';
  }

  /** The connection ended: true when that completes the response (a body that runs to the end). */
  end(): boolean {
    if (this.#state === 'until-close') this.#state = 'done';
    return this.#state === 'done';
  }

  /** Whether any byte of the response has arrived. */
  get started(): boolean {
    return this.#started;
  }

  /** Bytes that arrived after the response ended (a server that answers what was not asked). */
  get surplus(): number {
    return this.#state === 'done' ? this.#surplus : 0;
  }

  /** The body as sent, once the response is whole (a view of the one buffer it was gathered in). */
  body(): Buffer {
    return asBuffer(this.#body.view());
  }

  /** One step of reading `data` from `at`: where the next step starts, or -1 when it needs more bytes. */
  #advance(data: Buffer, at: number): number {
    switch (this.#state) {
      case 'head':
        return this.#readHead(data, at);
      case 'length':
      case 'chunk-data':
        return this.#readCounted(data, at);
      case 'chunk-size':
        return this.#readChunkSize(data, at);
      case 'chunk-end':
        return this.#readChunkEnd(data, at);
      case 'trailers':
        return this.#readTrailer(data, at);
      case 'until-close':
        if (at === data.length) return -1;
        this.#take(data, at, data.length - at);
        return data.length;
      case 'done':
        return -1;
    }
  }

  /**
   * Where `end` begins in `data` after `at` (-1: not yet), at most `max` bytes on; throws with
   * `tooLong` past that. Bytes searched in vain are not searched again at the next push.
   */
  #find(data: Buffer, at: number, end: Buffer, max: number, tooLong: string): number {
    const found = data.indexOf(end, at + this.#searched);
    if (found - at > max || (found < 0 && data.length - at > max)) throw new HttpAnswerError(tooLong);
    this.#searched = found < 0 ? Math.max(0, data.length - at - (end.length - 1)) : 0;
    return found;
  }

  #readHead(data: Buffer, at: number): number {
    const { maxHeadBytes } = this.limits;
    const end = this.#find(
      data,
      at,
      HEAD_END,
      maxHeadBytes,
      `the answer's header is larger than ${maxHeadBytes} bytes`,
    );
    if (end < 0) return -1;
    const lines = data.toString('latin1', at, end).split('\r\n');
    const status = STATUS_LINE.exec(lines[0]!);
    if (!status) throw new HttpAnswerError(`the answer does not begin with an HTTP/1.x status line`);
    this.headers.clear();
    for (const line of lines.slice(1)) {
      const field = FIELD_LINE.exec(line);
      if (!field) throw new HttpAnswerError(`the answer has a header line that is not a field`);
      const name = field[1]!.toLowerCase();
      const before = this.headers.get(name);
      this.headers.set(name, before === undefined ? field[2]! : `${before}, ${field[2]!}`);
    }
    this.status = Number(status[2]);
    if (this.status === 101) throw new HttpAnswerError('the server switched protocols, which was not asked for');
    // An interim answer (100 Continue, 103 Early Hints): the final one follows.
    if (this.status >= 200) this.#frame(status[1] === '1');
    return end + HEAD_END.length;
  }

  /** How the body is delimited (RFC 9112 §6.3), and whether the connection stays open after it. */
  #frame(http11: boolean): void {
    const connection = tokensOf(this.headers.get('connection'));
    this.keepAlive = http11 ? !connection.includes('close') : connection.includes('keep-alive');
    const codings = tokensOf(this.headers.get('transfer-encoding'));
    const length = this.headers.get('content-length');
    if (this.status === 204 || this.status === 304) {
      this.#state = 'done';
    } else if (codings.length > 0) {
      // Chunked last: chunks. Any other last coding runs to the end of the connection.
      if (codings.at(-1) === 'chunked') this.#state = 'chunk-size';
      else this.#untilClose();
      if (length !== undefined) this.keepAlive = false;
    } else if (length !== undefined) {
      const values = new Set(length.split(',').map((value) => value.trim()));
      const [only] = values;
      if (values.size !== 1 || !/^\d{1,15}$/.test(only!))
        throw new HttpAnswerError(`the answer's Content-Length "${length.slice(0, 40)}" is not a length`);
      this.#remaining = Number(only);
      this.#ensureRoom(this.#remaining);
      this.#state = this.#remaining === 0 ? 'done' : 'length';
    } else {
      this.#untilClose();
    }
  }

  #untilClose(): void {
    this.keepAlive = false;
    this.#state = 'until-close';
  }

  #ensureRoom(more: number): void {
    if (this.#body.length + more > this.limits.maxBodyBytes)
      throw new HttpAnswerError(`the answer's body is larger than ${this.limits.maxBodyBytes} bytes`);
  }

  /** Copies `count` bytes of `data` from `at` into the body. */
  #take(data: Buffer, at: number, count: number): void {
    this.#ensureRoom(count);
    this.#body.append(data, at, at + count);
  }

  #readCounted(data: Buffer, at: number): number {
    const count = Math.min(this.#remaining, data.length - at);
    if (count === 0) return -1;
    this.#take(data, at, count);
    this.#remaining -= count;
    if (this.#remaining === 0) this.#state = this.#state === 'length' ? 'done' : 'chunk-end';
    return at + count;
  }

  /** The next line from `at`, without its CRLF, and where what follows it begins; null until it has arrived. */
  #line(data: Buffer, at: number, max: number, what: string): { line: string; next: number } | null {
    const end = this.#find(data, at, LINE_END, max, `the answer has a ${what} that is too long`);
    if (end < 0) return null;
    return { line: data.toString('latin1', at, end), next: end + LINE_END.length };
  }

  #readChunkSize(data: Buffer, at: number): number {
    // The usual line, hex digits and CRLF, read off the bytes: no string per chunk.
    const plain = plainChunkSize(data, at);
    let next: number;
    if (plain !== null) {
      this.#remaining = plain.size;
      next = plain.next;
      // What an earlier push searched in vain for is read now.
      this.#searched = 0;
    } else {
      const read = this.#line(data, at, MAX_CHUNK_LINE, 'chunk-size line');
      if (read === null) return -1;
      const size = CHUNK_SIZE.exec(read.line);
      if (!size) throw new HttpAnswerError(`the answer has a chunk whose size is not hexadecimal`);
      this.#remaining = parseInt(size[1]!, 16);
      next = read.next;
    }
    this.#ensureRoom(this.#remaining);
    this.#state = this.#remaining === 0 ? 'trailers' : 'chunk-data';
    return next;
  }

  #readChunkEnd(data: Buffer, at: number): number {
    if (data.length - at < LINE_END.length) return -1;
    if (data[at] !== 0x0d || data[at + 1] !== 0x0a)
      throw new HttpAnswerError('the answer has a chunk longer than its size');
    this.#state = 'chunk-size';
    return at + LINE_END.length;
  }

  /** Trailer fields after the last chunk: read over (a chat completion has none it needs), up to the empty line. */
  #readTrailer(data: Buffer, at: number): number {
    const room = this.limits.maxHeadBytes - this.#trailerBytes;
    const read = this.#line(data, at, room, 'trailer section');
    if (read === null) return -1;
    this.#trailerBytes += read.next - at;
    if (read.line === '') this.#state = 'done';
    return read.next;
  }
}
