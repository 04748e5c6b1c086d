/**
 * The little of the tar format the Docker archive API needs: one regular file in,
 * the first entry out. ustar headers; PAX headers from the engine are understood for
 * the path and size they may carry.
 */
const BLOCK = 512;

function field(header: Buffer, offset: number, length: number, value: string): void {
  header.write(value, offset, Math.min(length, Buffer.byteLength(value)), 'utf8');
}

const octal = (value: number, length: number) => value.toString(8).padStart(length - 1, '0');

/** A tar archive holding one regular file at `path` (relative, no leading slash). */
export function tarOneFile(path: string, content: Uint8Array, mode = 0o644): Buffer {
  const name = Buffer.byteLength(path) <= 100 ? { name: path, prefix: '' } : splitLongPath(path);
  const header = Buffer.alloc(BLOCK, 0);
  field(header, 0, 100, name.name);
  field(header, 100, 8, octal(mode, 8));
  field(header, 108, 8, octal(0, 8));
  field(header, 116, 8, octal(0, 8));
  field(header, 124, 12, octal(content.length, 12));
  field(header, 136, 12, octal(Math.floor(Date.now() / 1000), 12));
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

export interface TarEntry {
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  content: Buffer;
}

const cString = (buffer: Buffer) => {
  const end = buffer.indexOf(0);
  return buffer.subarray(0, end === -1 ? buffer.length : end).toString('utf8');
};

/** The first real entry of an archive (PAX headers applied), or null for an empty one. */
export function firstTarEntry(archive: Buffer): TarEntry | null {
  let offset = 0;
  let pax: Record<string, string> = {};
  while (offset + BLOCK <= archive.length) {
    const header = archive.subarray(offset, offset + BLOCK);
    if (header.every((b) => b === 0)) return null;
    const size = Number.parseInt(cString(header.subarray(124, 136)).trim() || '0', 8);
    const type = String.fromCharCode(header[156] ?? 0);
    const body = archive.subarray(offset + BLOCK, offset + BLOCK + size);
    offset += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
    if (type === 'x' || type === 'g') {
      pax = { ...pax, ...parsePax(body) };
      continue;
    }
    const prefix = cString(header.subarray(345, 500));
    const path = pax.path ?? (prefix ? `${prefix}/${cString(header.subarray(0, 100))}` : cString(header.subarray(0, 100)));
    const declared = pax.size ? Number(pax.size) : size;
    const kind = type === '0' || type === '\0' ? 'file' : type === '5' ? 'directory' : type === '2' ? 'symlink' : 'other';
    return { path, type: kind, content: Buffer.from(body.subarray(0, declared)) };
  }
  return null;
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
