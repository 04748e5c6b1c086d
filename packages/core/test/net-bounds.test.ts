import { describe, expect, it } from 'vitest';
import {
  allowedHostSet,
  BodyTooLargeError,
  ByteAccumulator,
  eventStreamBound,
  isHostAllowed,
  normalizeHostEntry,
  readBoundedBody,
  wholeBodyBound,
} from '../src/ports.js';

/** A stream of the given pieces. */
const streamOf = (pieces: readonly Uint8Array[]) =>
  new ReadableStream<Uint8Array>({
    start(controller) {
      for (const piece of pieces) controller.enqueue(piece);
      controller.close();
    },
  });

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (data: Uint8Array) => new TextDecoder().decode(data);

/** Everything a stream hands on, piece by piece, or the error it failed with. */
async function drain(stream: ReadableStream<Uint8Array>): Promise<{ pieces: string[]; error: unknown }> {
  const pieces: string[] = [];
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { pieces, error: null };
      pieces.push(text(value));
    }
  } catch (error) {
    return { pieces, error };
  }
}

describe('the byte accumulator', () => {
  it('gathers a million one-byte pieces in one buffer of at most twice their bytes, grown by doubling', () => {
    const gathered = new ByteAccumulator(32 * 1024 * 1024);
    const one = new Uint8Array([0x78]);
    let refused = 0;
    for (let i = 0; i < 1_000_000; i++) if (!gathered.append(one)) refused++;
    expect(refused).toBe(0);
    expect(gathered.length).toBe(1_000_000);
    expect(gathered.capacity).toBeLessThanOrEqual(2_000_000);
    // From 1 KiB, doubling: 1 + log2(1,000,000 / 1024) allocations, not one per piece.
    expect(gathered.growths).toBeLessThanOrEqual(11);
    expect(gathered.view().every((b) => b === 0x78)).toBe(true);
  });

  it('refuses, and copies nothing of, what would pass its bound; never grows past it', () => {
    const gathered = new ByteAccumulator(1500);
    expect(gathered.append(new Uint8Array(1000))).toBe(true);
    expect(gathered.append(new Uint8Array(501))).toBe(false);
    expect(gathered.length).toBe(1000);
    expect(gathered.append(new Uint8Array(500))).toBe(true);
    expect(gathered.capacity).toBe(1500);
  });

  it('appends a range, drops bytes from the front, and hands its bytes over', () => {
    const gathered = new ByteAccumulator();
    gathered.append(bytes('..hello world..'), 2, 13);
    expect(text(gathered.view())).toBe('hello world');
    gathered.discard(6);
    expect(text(gathered.view())).toBe('world');
    expect(text(gathered.take())).toBe('world');
    expect(gathered.length).toBe(0);
  });
});

describe('reading a whole body', () => {
  it('reads one-byte pieces into one buffer', async () => {
    const pieces = Array.from({ length: 10_000 }, () => bytes('x'));
    expect(text(await readBoundedBody(streamOf(pieces), 10_000))).toBe('x'.repeat(10_000));
    expect((await readBoundedBody(null, 10)).length).toBe(0);
  });

  it('fails one byte past the bound, and cancels the stream', async () => {
    let cancelled = false;
    const stream = new ReadableStream<Uint8Array>({
      pull: (controller) => controller.enqueue(bytes('x')),
      cancel: () => {
        cancelled = true;
      },
    });
    await expect(readBoundedBody(stream, 1000, 'the answer')).rejects.toThrow(
      new BodyTooLargeError(1000, 'the answer'),
    );
    expect(cancelled).toBe(true);
  });

  it('hands a body on as one piece through wholeBodyBound, or fails past it, telling onTooLarge', async () => {
    const pieces = Array.from({ length: 100 }, () => bytes('ab'));
    expect(await drain(streamOf(pieces).pipeThrough(wholeBodyBound(200)))).toEqual({
      pieces: ['ab'.repeat(100)],
      error: null,
    });
    const told: BodyTooLargeError[] = [];
    const failed = await drain(
      streamOf(pieces).pipeThrough(wholeBodyBound(199, { what: 'the reply', onTooLarge: (e) => told.push(e) })),
    );
    expect(failed.pieces).toEqual([]);
    expect(String(failed.error)).toContain('the reply is larger than 199 bytes');
    expect(told).toHaveLength(1);
  });
});

describe('an event stream', () => {
  it('is handed on in whole events, however it was split, with any line ends', async () => {
    const wire = 'data: one\n\nevent: x\r\ndata: two\r\n\r\ndata: three\r\rdata: fo';
    const byteAtATime = Array.from(bytes(wire), (b) => new Uint8Array([b]));
    expect(await drain(streamOf(byteAtATime).pipeThrough(eventStreamBound(100)))).toEqual({
      // A CRLF split between two pieces stays split (a reader joins it, as it must for any stream).
      pieces: ['data: one\n\n', 'event: x\r\ndata: two\r\n\r', '\n', 'data: three\r\r', 'data: fo'],
      error: null,
    });
    // Whole: the events that end in one piece are handed on together.
    expect(await drain(streamOf([bytes(wire)]).pipeThrough(eventStreamBound(100)))).toEqual({
      pieces: ['data: one\n\nevent: x\r\ndata: two\r\n\r\ndata: three\r\r', 'data: fo'],
      error: null,
    });
  });

  it('bounds one event, not the stream: many events pass, one endless event fails', async () => {
    const many = Array.from({ length: 1000 }, (_, i) => bytes(`data: ${i}\n\n`));
    expect((await drain(streamOf(many).pipeThrough(eventStreamBound(16)))).error).toBeNull();

    const told: BodyTooLargeError[] = [];
    const endless = new ReadableStream<Uint8Array>({ pull: (controller) => controller.enqueue(bytes('x')) });
    const failed = await drain(
      endless.pipeThrough(eventStreamBound(1024, { what: 'an event', onTooLarge: (e) => told.push(e) })),
    );
    expect(failed.error).toBeInstanceOf(BodyTooLargeError);
    expect(String(failed.error)).toContain('an event is larger than 1024 bytes');
    expect(told).toHaveLength(1);
  });

  it('counts lines that end, but no blank line, as one event', async () => {
    const lines = Array.from({ length: 100 }, () => bytes('data: x\n'));
    expect(String((await drain(streamOf(lines).pipeThrough(eventStreamBound(400)))).error)).toContain(
      'larger than 400 bytes',
    );
  });
});

describe('allowed hosts', () => {
  it.each([
    ['API.OpenAI.com', 'api.openai.com'],
    [' models.example:8443 ', 'models.example:8443'],
    ['127.1', '127.0.0.1'],
    ['[::1]:11434', '[::1]:11434'],
    ['bücher.example', 'xn--bcher-kva.example'],
    ['models.example:080', 'models.example:80'],
  ])('reads the entry %j as %j', (entry, normalized) => {
    expect(normalizeHostEntry(entry)).toBe(normalized);
  });

  it.each(['https://api.openai.com', 'api.openai.com/v1', '*.openai.azure.com', '::1', 'h:0', 'h:70000', 'a b', ''])(
    'refuses the entry %j',
    (entry) => {
      expect(normalizeHostEntry(entry)).toBeNull();
    },
  );

  it('names the entries that are not hosts, and skips empty ones', () => {
    expect([...allowedHostSet(['a.example', ' ', 'B.example:1'])]).toEqual(['a.example', 'b.example:1']);
    expect(() => allowedHostSet(['ok.example', 'http://x', 'y/z'], 'ACS_X')).toThrow(
      'ACS_X: "http://x", "y/z" are not a host or host:port',
    );
  });

  it('matches a host at any port, or at its port (the scheme’s default when the URL names none)', () => {
    const allowed = allowedHostSet(['any.example', 'one.example:8443', 'tls.example:443', '[::1]:11434']);
    const allows = (url: string) => isHostAllowed(allowed, new URL(url));
    expect(allows('http://ANY.example:1/x')).toBe(true);
    expect(allows('https://one.example:8443/v1')).toBe(true);
    expect(allows('https://one.example/v1')).toBe(false);
    expect(allows('https://tls.example/v1')).toBe(true);
    expect(allows('http://tls.example/v1')).toBe(false);
    expect(allows('http://[::1]:11434/v1')).toBe(true);
    expect(allows('http://[::1]:11435/v1')).toBe(false);
    expect(allows('http://any.example.evil/x')).toBe(false);
    expect(allows('http://any.example@evil.example/x')).toBe(false);
  });
});
