/**
 * The little of the tar format a runtime's file transfer needs: one regular file in, the first
 * entry out, read from the stream only as far as needed. ustar headers; PAX and GNU long-name
 * headers are understood for the path, size and link target they may carry. Docker's archive API
 * speaks it, and so does `tar` in a Kubernetes pod through exec (what `kubectl cp` does): one
 * reader and writer here, for every runtime adapter.
 */
import { millisOf, type Clock } from '../clock.js';

const BLOCK = 512;

function field(header: Buffer, offset: number, length: number, value: string): void {
  header.write(value, offset, Math.min(length, Buffer.byteLength(value)), 'utf8');
}

const octal = (value: number, length: number) => value.toString(8).padStart(length - 1, '0');

/** A tar archive holding one regular file at `path` (relative, no leading slash), modified now by `clock`. */
export function tarOneFile(path: string, content: Uint8Array, clock: Clock, mode = 0o644): Buffer {
  const name = Buffer.byteLength(path) <= 100 ? { name: path, prefix: '' } : splitLongPath(path);
  const header = Buffer.alloc(BLOCK, 0);
  field(header, 0, 100, name.name);
  field(header, 100, 8, octal(mode, 8));
  field(header, 108, 8, octal(0, 8));
  field(header, 116, 8, octal(0, 8));
  field(header, 124, 12, octal(content.length, 12));
  field(header, 136, 12, octal(Math.floor(millisOf(clock) / 1000), 12));
  header.fill(' ', 148, 156);
  header.write('0', 156);
  field(header, 257, 6, 'ustar');
  field(header, 263, 2, '00');
  field(header, 265, 32, 'root');
  field(header, 297, 32, 'root');
  field(header, 345, 155, name.prefix);
  let sum = 0;
  for (const byte of header) sum += byte;
  field(header, 148, 8, `${octal(sum, 7)}\0`);
  const padding = (BLOCK - (content.length % BLOCK)) % BLOCK;
  return Buffer.concat([header, Buffer.from(content), Buffer.alloc(padding), Buffer.alloc(BLOCK * 2)]);
}

function splitLongPath(path: string): { name: string; prefix: string } {
  for (let i = path.indexOf('/'); i !== -1; i = path.indexOf('/', i + 1)) {
    const prefix = path.slice(0, i);
    const name = path.slice(i + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100) return { name, prefix };
  }
  throw new Error(`path is too long for a tar header: ${path.slice(0, 80)}…`);
}

/** The first entry of an archive as far as it was read: a file's first bytes with its whole size, or what else it is. */
export type TarHead =
  | { type: 'file'; path: string; size: number; content: Buffer }
  | { type: 'symlink'; path: string; target: string }
  | { type: 'directory'; path: string }
  | { type: 'other'; path: string };

/** Metadata entries (PAX, GNU long names) are small; one larger than this is not an archive the engine made. */
const MAX_METADATA_BYTES = 1024 * 1024;

const cString = (buffer: Buffer) => {
  const end = buffer.indexOf(0);
  return buffer.subarray(0, end === -1 ? buffer.length : end).toString('utf8');
};

/** A numeric header field: octal text, or base-256 (high bit of the first byte set) for values octal cannot hold. */
function numeric(field: Buffer): number {
  if (((field[0] ?? 0) & 0x80) !== 0) {
    let value = (field[0] ?? 0) & 0x7f;
    for (const byte of field.subarray(1)) value = value * 256 + byte;
    return value;
  }
  const text = cString(field).trim();
  return text === '' ? 0 : Number.parseInt(text, 8);
}

/**
 * Reads the first real entry of a tar stream (PAX and GNU long-name headers applied) and then
 * ends the stream: a file's content is read up to `maxBytes` and no further, a directory's or a
 * link's not at all. So the memory it takes is bounded by `maxBytes` plus a chunk, whatever the
 * archive holds (the archive of `/` is the whole filesystem). Null for an empty archive.
 */
export async function readFirstTarEntry(stream: AsyncIterable<unknown>, maxBytes: number): Promise<TarHead | null> {
  const bytes = new StreamBytes(stream);
  try {
    let pax: Record<string, string> = {};
    let longName: string | null = null;
    let longLink: string | null = null;
    for (;;) {
      const header = await bytes.take(BLOCK);
      if (header.length < BLOCK || header.every((b) => b === 0)) return null;
      const type = String.fromCharCode(header[156] ?? 0);
      const size = numeric(header.subarray(124, 136));
      if (type === 'x' || type === 'g' || type === 'L' || type === 'K') {
        if (size > MAX_METADATA_BYTES)
          throw new Error(`the archive has a ${size}-byte metadata entry; expected a small one`);
        const body = await bytes.take(size);
        await bytes.skip(padding(size));
        if (type === 'L') longName = cString(body);
        else if (type === 'K') longLink = cString(body);
        else pax = { ...pax, ...parsePax(body) };
        continue;
      }
      const prefix = cString(header.subarray(345, 500));
      const name = cString(header.subarray(0, 100));
      const path = pax.path ?? longName ?? (prefix ? `${prefix}/${name}` : name);
      if (type === '0' || type === '\0' || type === '7') {
        const whole = pax.size ? Number(pax.size) : size;
        return { type: 'file', path, size: whole, content: await bytes.take(Math.min(whole, maxBytes)) };
      }
      if (type === '2')
        return { type: 'symlink', path, target: pax.linkpath ?? longLink ?? cString(header.subarray(157, 257)) };
      return type === '5' ? { type: 'directory', path } : { type: 'other', path };
    }
  } finally {
    await bytes.close();
  }
}

const padding = (size: number) => (BLOCK - (size % BLOCK)) % BLOCK;

/** Bytes pulled from a stream only as they are asked for (the rest is never read). */
class StreamBytes {
  readonly #chunks: AsyncIterator<unknown>;
  #held: Buffer = Buffer.alloc(0);
  #ended = false;

  constructor(stream: AsyncIterable<unknown>) {
    this.#chunks = stream[Symbol.asyncIterator]();
  }

  /** The next `count` bytes (a copy: it holds on to no chunk of the stream), or fewer when the stream ends first. */
  async take(count: number): Promise<Buffer> {
    const pieces: Buffer[] = [];
    let have = 0;
    while (have < count) {
      if (this.#held.length === 0) {
        if (this.#ended) break;
        const next = await this.#chunks.next();
        if (next.done) {
          this.#ended = true;
          break;
        }
        this.#held = Buffer.isBuffer(next.value) ? next.value : Buffer.from(next.value as Uint8Array);
      }
      const piece = this.#held.subarray(0, count - have);
      this.#held = this.#held.subarray(piece.length);
      pieces.push(piece);
      have += piece.length;
    }
    return Buffer.concat(pieces, have);
  }

  async skip(count: number): Promise<void> {
    await this.take(count);
  }

  /** Ends the stream (for a Node stream: destroys it, so the engine stops sending). */
  async close(): Promise<void> {
    await this.#chunks.return?.();
  }
}
function parsePax(body: Buffer): Record<string, string> {
  const records: Record<string, string> = {};
  let offset = 0;
  while (offset < body.length) {
    const space = body.indexOf(0x20, offset);
    if (space === -1) break;
    const length = Number(body.subarray(offset, space).toString('utf8'));
    if (!Number.isFinite(length) || length <= 0) break;
    const record = body.subarray(space + 1, offset + length - 1).toString('utf8');
    const eq = record.indexOf('=');
    if (eq > 0) records[record.slice(0, eq)] = record.slice(eq + 1);
    offset += length;
  }
  return records;
}
