import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { manualClock } from '../src/clock.js';
import { readFirstTarEntry, tarOneFile } from '../src/sandbox/tar.js';

/**
 * The streaming reader of the archive API's answer, without an engine: it must read the first
 * entry only as far as asked and end the stream, whatever the archive claims to hold.
 */

const BLOCK = 512;

/** A ustar header block: `size` octal, or base-256 when `base256`. */
function header(options: { name: string; type: string; size?: number; link?: string; base256?: boolean }): Buffer {
  const block = Buffer.alloc(BLOCK, 0);
  block.write(options.name, 0, 100, 'utf8');
  block.write('0000644\0', 100);
  const size = options.size ?? 0;
  if (options.base256) {
    block[124] = 0x80;
    let rest = size;
    for (let i = 135; i > 124; i--) {
      block[i] = rest % 256;
      rest = Math.floor(rest / 256);
    }
  } else {
    block.write(`${size.toString(8).padStart(11, '0')}\0`, 124);
  }
  block.write(options.type, 156);
  if (options.link) block.write(options.link, 157, 100, 'utf8');
  block.write('ustar\0', 257);
  block.write('00', 263);
  return block;
}

const paxRecord = (key: string, value: string) => {
  const body = ` ${key}=${value}\n`;
  let length = body.length + 1;
  while (`${length}${body}`.length !== length) length++;
  return `${length}${body}`;
};

function pax(records: Record<string, string>): Buffer {
  const body = Buffer.from(
    Object.entries(records)
      .map(([k, v]) => paxRecord(k, v))
      .join(''),
  );
  return Buffer.concat([
    header({ name: 'PaxHeaders/x', type: 'x', size: body.length }),
    body,
    Buffer.alloc((BLOCK - (body.length % BLOCK)) % BLOCK),
  ]);
}

/** A stream that yields `head`, then 64 KiB chunks of `fill` for ever, counting what was pulled and whether it was ended. */
function endless(head: Buffer, fill = 0x61) {
  const seen = { pulledBytes: 0, ended: false };
  const chunk = Buffer.alloc(65_536, fill);
  const stream: AsyncIterable<Buffer> = {
    [Symbol.asyncIterator]: () => ({
      next: () => {
        const value = seen.pulledBytes === 0 ? head : chunk;
        seen.pulledBytes += value.length;
        return Promise.resolve({ done: false, value });
      },
      return: () => {
        seen.ended = true;
        return Promise.resolve({ done: true, value: undefined });
      },
    }),
  };
  return { stream, seen };
}

describe('readFirstTarEntry', () => {
  it('reads a whole small file, with its size', async () => {
    const archive = tarOneFile('workspace/a.txt', Buffer.from('hello'), manualClock());
    expect(await readFirstTarEntry(Readable.from([archive]), 1024)).toEqual({
      type: 'file',
      path: 'workspace/a.txt',
      size: 5,
      content: Buffer.from('hello'),
    });
  });

  it("dates the file by the clock it is given (the header's mtime, seconds since the epoch)", () => {
    const archive = tarOneFile('a.txt', Buffer.from('x'), manualClock('2026-03-04T05:06:07.890Z'));
    const mtime = Number.parseInt(archive.subarray(136, 148).toString('utf8'), 8);
    expect(mtime).toBe(Date.parse('2026-03-04T05:06:07.000Z') / 1000);
  });

  it('reads no more of a huge file than asked, then ends the stream', async () => {
    const { stream, seen } = endless(header({ name: 'sparse.bin', type: '0', size: 2 * 1024 ** 3 }));
    const entry = await readFirstTarEntry(stream, 100_000);
    expect(entry).toMatchObject({ type: 'file', size: 2 * 1024 ** 3 });
    expect(entry?.type === 'file' && entry.content.length).toBe(100_000);
    expect(seen.pulledBytes).toBeLessThan(100_000 + BLOCK + 65_536);
    expect(seen.ended).toBe(true);
  });

  it('reads the sizes that octal cannot hold (base-256) and that PAX headers give', async () => {
    const big = 9 * 1024 ** 3;
    expect(
      await readFirstTarEntry(endless(header({ name: 'huge', type: '0', size: big, base256: true })).stream, 10),
    ).toMatchObject({ type: 'file', size: big });
    const viaPax = endless(
      Buffer.concat([
        pax({ size: String(big), path: 'a/very/long/path/' + 'x'.repeat(150) }),
        header({ name: 'short', type: '0', size: 0 }),
      ]),
    );
    expect(await readFirstTarEntry(viaPax.stream, 10)).toMatchObject({
      type: 'file',
      size: big,
      path: `a/very/long/path/${'x'.repeat(150)}`,
    });
  });

  it('stops at the header of a directory, without reading what follows', async () => {
    const { stream, seen } = endless(header({ name: 'usr/', type: '5' }));
    expect(await readFirstTarEntry(stream, 1024 * 1024)).toEqual({ type: 'directory', path: 'usr/' });
    expect(seen.pulledBytes).toBe(BLOCK);
    expect(seen.ended).toBe(true);
  });

  it('gives a link target from the header, a PAX linkpath or a GNU long-link entry', async () => {
    expect(await readFirstTarEntry(Readable.from([header({ name: 'l', type: '2', link: 'd/f' })]), 10)).toEqual({
      type: 'symlink',
      path: 'l',
      target: 'd/f',
    });
    const long = `/${'t'.repeat(200)}`;
    expect(
      await readFirstTarEntry(
        Readable.from([pax({ linkpath: long }), header({ name: 'l', type: '2', link: 'cut' })]),
        10,
      ),
    ).toEqual({ type: 'symlink', path: 'l', target: long });
    const gnu = Buffer.concat([
      header({ name: '././@LongLink', type: 'K', size: long.length + 1 }),
      Buffer.from(`${long}\0`),
      Buffer.alloc(BLOCK - long.length - 1),
    ]);
    expect(await readFirstTarEntry(Readable.from([gnu, header({ name: 'l', type: '2', link: 'cut' })]), 10)).toEqual({
      type: 'symlink',
      path: 'l',
      target: long,
    });
  });

  it('calls a device "other", and an empty or cut archive null', async () => {
    expect(await readFirstTarEntry(Readable.from([header({ name: 'null', type: '3' })]), 10)).toEqual({
      type: 'other',
      path: 'null',
    });
    expect(await readFirstTarEntry(Readable.from([Buffer.alloc(2 * BLOCK)]), 10)).toBeNull();
    expect(await readFirstTarEntry(Readable.from([Buffer.alloc(100, 1)]), 10)).toBeNull();
  });

  it('refuses a metadata entry too large to be the engine’s, without reading it', async () => {
    const { stream } = endless(header({ name: 'PaxHeaders/x', type: 'x', size: 64 * 1024 ** 2 }));
    await expect(readFirstTarEntry(stream, 10)).rejects.toThrow(/metadata entry/);
  });
});
