/**
 * An HTTP/1.1 response read from a byte stream (RFC 9112): status line, header fields, and a body
 * framed by Content-Length, by chunked transfer coding, or by the end of the connection. Fed
 * whatever arrives, split anywhere. Every part has a bound, so a server that sends without end
 * costs a failed call, not the process's memory.
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

const EMPTY = Buffer.alloc(0);
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

/** One response, read as its bytes arrive: `push` them, then `status`, `header` and `body` once it says the response is whole. */
export class ResponseParser {
  status = 0;
  /** Field values by lower-cased name; a repeated field's values joined with ", ". */
  readonly headers = new Map<string, string>();
  /** Whether the connection can carry another request once this response is whole. */
  keepAlive = false;
  #state: State = 'head';
  #buffer: Buffer = EMPTY;
  #remaining = 0;
  #parts: Buffer[] = [];
  #bodyBytes = 0;
  #trailerBytes = 0;

  constructor(private readonly limits: ParserLimits) {}

  /** Feeds the next bytes; true once the response is whole. Throws `HttpAnswerError` for what is not HTTP. */
  push(chunk: Buffer): boolean {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    while (this.#advance());
    return this.#state === 'done';
  }

  /** The connection ended: true when that completes the response (a body that runs to the end). */
  end(): boolean {
    if (this.#state === 'until-close') this.#state = 'done';
    return this.#state === 'done';
  }

  /** Whether any byte of the response has arrived. */
  get started(): boolean {
    return this.#state !== 'head' || this.#buffer.length > 0;
  }

  /** Bytes that arrived after the response ended (a server that answers what was not asked). */
  get surplus(): number {
    return this.#state === 'done' ? this.#buffer.length : 0;
  }

  /** The body as sent, once the response is whole. */
  body(): Buffer {
    return this.#parts.length === 1 ? this.#parts[0]! : Buffer.concat(this.#parts, this.#bodyBytes);
  }

  /** One step of reading; false when it needs more bytes (or the response is whole). */
  #advance(): boolean {
    switch (this.#state) {
      case 'head':
        return this.#readHead();
      case 'length':
      case 'chunk-data':
        return this.#readCounted();
      case 'chunk-size':
        return this.#readChunkSize();
      case 'chunk-end':
        return this.#readChunkEnd();
      case 'trailers':
        return this.#readTrailer();
      case 'until-close':
        if (this.#buffer.length > 0) this.#take(this.#buffer.length);
        return false;
      case 'done':
        return false;
    }
  }

  #readHead(): boolean {
    const end = this.#buffer.indexOf(HEAD_END);
    if (end > this.limits.maxHeadBytes || (end < 0 && this.#buffer.length > this.limits.maxHeadBytes))
      throw new HttpAnswerError(`the answer's header is larger than ${this.limits.maxHeadBytes} bytes`);
    if (end < 0) return false;
    const lines = this.#buffer.toString('latin1', 0, end).split('\r\n');
    this.#buffer = this.#buffer.subarray(end + HEAD_END.length);
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
    if (this.status < 200) return true;
    this.#frame(status[1] === '1');
    return true;
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
    if (this.#bodyBytes + more > this.limits.maxBodyBytes)
      throw new HttpAnswerError(`the answer's body is larger than ${this.limits.maxBodyBytes} bytes`);
  }

  /** Moves `count` buffered bytes into the body. */
  #take(count: number): void {
    this.#ensureRoom(count);
    this.#parts.push(this.#buffer.subarray(0, count));
    this.#bodyBytes += count;
    this.#buffer = this.#buffer.subarray(count);
  }

  #readCounted(): boolean {
    const count = Math.min(this.#remaining, this.#buffer.length);
    if (count === 0) return false;
    this.#take(count);
    this.#remaining -= count;
    if (this.#remaining === 0) this.#state = this.#state === 'length' ? 'done' : 'chunk-end';
    return true;
  }

  /** The next line, without its CRLF; null until it has arrived. */
  #line(max: number, what: string): string | null {
    const end = this.#buffer.indexOf(LINE_END);
    if (end > max || (end < 0 && this.#buffer.length > max))
      throw new HttpAnswerError(`the answer has a ${what} that is too long`);
    if (end < 0) return null;
    const line = this.#buffer.toString('latin1', 0, end);
    this.#buffer = this.#buffer.subarray(end + LINE_END.length);
    return line;
  }

  #readChunkSize(): boolean {
    const line = this.#line(MAX_CHUNK_LINE, 'chunk-size line');
    if (line === null) return false;
    const size = CHUNK_SIZE.exec(line);
    if (!size) throw new HttpAnswerError(`the answer has a chunk whose size is not hexadecimal`);
    this.#remaining = parseInt(size[1]!, 16);
    this.#ensureRoom(this.#remaining);
    this.#state = this.#remaining === 0 ? 'trailers' : 'chunk-data';
    return true;
  }

  #readChunkEnd(): boolean {
    if (this.#buffer.length < LINE_END.length) return false;
    if (this.#buffer[0] !== 0x0d || this.#buffer[1] !== 0x0a)
      throw new HttpAnswerError('the answer has a chunk longer than its size');
    this.#buffer = this.#buffer.subarray(LINE_END.length);
    this.#state = 'chunk-size';
    return true;
  }

  /** Trailer fields after the last chunk: read over (a chat completion has none it needs), up to the empty line. */
  #readTrailer(): boolean {
    const room = this.limits.maxHeadBytes - this.#trailerBytes;
    const line = this.#line(room, 'trailer section');
    if (line === null) return false;
    this.#trailerBytes += line.length + LINE_END.length;
    if (line === '') this.#state = 'done';
    return true;
  }
}
