/** At most this much of one command's output is kept in memory (and in its spill file); beyond it only the tail. */
const MAX_CAPTURE_CHARS = 16 * 1024 * 1024;

/** One command's output: all of it up to `limit` characters, then only the last `tailChars`. */
export class ShellCapture {
  #kept = '';
  #tail = '';
  total = 0;
  constructor(
    private readonly tailChars: number,
    private readonly limit = MAX_CAPTURE_CHARS,
  ) {}

  append(text: string) {
    if (text === '') return;
    const room = this.limit - this.#kept.length;
    if (room > 0) this.#kept += text.slice(0, room);
    if (text.length > room) this.#tail = (this.#tail + text.slice(Math.max(0, room))).slice(-this.tailChars);
    this.total += text.length;
  }

  /** The output from logical offset `from` to now. */
  since(from: number): string {
    if (this.total <= this.limit) return this.#kept.slice(from);
    const tailStart = this.total - this.#tail.length;
    if (from >= tailStart) return this.#tail.slice(from - tailStart);
    const lost = tailStart - Math.max(from, this.limit);
    return `${this.#kept.slice(from)}${lost > 0 ? `\n[… ${lost} characters were not kept …]\n` : ''}${this.#tail}`;
  }

  full(): string {
    return this.since(0);
  }
}
