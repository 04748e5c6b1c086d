/**
 * Bytes gathered from a stream into one contiguous buffer, so that what they cost is in
 * proportion to how many there are, never to how many pieces they came in. A body read as a list
 * of the pieces a peer sent costs a view object per piece (about 100 bytes of heap for a one-byte
 * chunk: 4 million one-byte chunks held 500 MiB for 4 MB of body, issue 35); here each piece is
 * copied in, and the buffer grows by doubling, so gathering n bytes costs at most 2n of memory
 * and copies every byte at most twice.
 */

const EMPTY = new Uint8Array(0);
/** The first buffer's size: small answers fit in one allocation. */
const FIRST_CAPACITY = 1024;

export class ByteAccumulator {
  #bytes: Uint8Array = EMPTY;
  #length = 0;
  #growths = 0;

  /** `maxBytes`: the most it will hold; `append` refuses what would pass it (default: no limit). */
  constructor(readonly maxBytes: number = Number.POSITIVE_INFINITY) {}

  /** Bytes held. */
  get length(): number {
    return this.#length;
  }

  /** Bytes of the buffer held (at most twice `length`, and never more than `maxBytes`, once it holds any). */
  get capacity(): number {
    return this.#bytes.length;
  }

  /** How many times the buffer was allocated (each growth doubles it). */
  get growths(): number {
    return this.#growths;
  }

  /** Copies `bytes[start, end)` in; false, and nothing is copied, when that would pass `maxBytes`. */
  append(bytes: Uint8Array, start = 0, end = bytes.length): boolean {
    const count = end - start;
    if (count <= 0) return true;
    if (this.#length + count > this.maxBytes) return false;
    this.#ensure(this.#length + count);
    this.#bytes.set(bytes.subarray(start, end), this.#length);
    this.#length += count;
    return true;
  }

  /** The bytes held, as a view of the buffer: valid until the next `append`, `discard` or `take`. */
  view(): Uint8Array {
    return this.#bytes.subarray(0, this.#length);
  }

  /** Drops the first `count` bytes; the rest move to the front. */
  discard(count: number): void {
    if (count <= 0) return;
    if (count >= this.#length) {
      this.#length = 0;
      return;
    }
    this.#bytes.copyWithin(0, count, this.#length);
    this.#length -= count;
  }

  /** The bytes held, and it is empty again (the buffer is handed over, not copied). */
  take(): Uint8Array {
    const taken = this.view();
    this.#bytes = EMPTY;
    this.#length = 0;
    return taken;
  }

  #ensure(needed: number): void {
    if (needed <= this.#bytes.length) return;
    const doubled = Math.max(FIRST_CAPACITY, this.#bytes.length * 2, needed);
    // `needed` is within maxBytes (append checked): the buffer never grows past it.
    const grown = new Uint8Array(Math.min(doubled, this.maxBytes));
    grown.set(this.#bytes.subarray(0, this.#length));
    this.#bytes = grown;
    this.#growths++;
  }
}
