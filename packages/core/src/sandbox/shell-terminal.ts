import { fromBase64, shellMarkerPattern } from './shell-protocol.js';

// Terminal control sequences: the escape character is what they are about.
// eslint-disable-next-line no-control-regex
const BRACKETED_PASTE = /\x1b\[\?2004[hl]/g;
// eslint-disable-next-line no-control-regex
export const ESCAPE_SEQUENCE = /\x1b\[[0-9;?]*[A-Za-z]/g;

/** Where what the terminal printed goes, in the order it was printed. */
export interface TerminalSink {
  /** Output (bracketed-paste switches and `\r` removed). */
  text(text: string): void;
  /** A DONE marker: the command (or sync line) `id` ended with `exitCode` in `cwd`. */
  marker(id: number, exitCode: number, cwd: string): void;
  /** The PID marker: the shell's process id. */
  pid(pid: number): void;
}

/**
 * Reads what a persistent shell's terminal prints (see shell-protocol.ts for the markers): splits
 * it into output and the markers of the shell with this nonce. A chunk may end halfway through a
 * marker or an escape sequence; what may be the start of one is held back until the next chunk
 * says, so a marker is never shown as output, nor output lost.
 */
export class ShellTerminal {
  readonly #decoder = new TextDecoder('utf-8');
  readonly #marker: RegExp;
  readonly #markerHead: string;
  #scan = '';
  /** How many characters at the start of #scan were already given out (a held-back newline, see releaseHeldNewline). */
  #released = 0;

  constructor(
    nonce: string,
    private readonly sink: TerminalSink,
  ) {
    this.#marker = shellMarkerPattern(nonce);
    this.#markerHead = `\n__ACS_${nonce}_`;
  }

  /** What the terminal printed next. */
  push(chunk: Uint8Array): void {
    this.#scan += this.#decoder.decode(chunk, { stream: true }).replace(/\r/g, '');
    this.#drain();
  }

  /** The terminal has closed: whatever is held back is output. */
  end(): void {
    this.#scan += this.#decoder.decode().replace(/\r/g, '');
    this.#emit(this.#scan.slice(this.#released));
    this.#scan = '';
    this.#released = 0;
  }

  /**
   * A final newline is held back in case it starts a marker; a caller waiting on a running
   * command may have it now: true when it was held (the caller shows it; should the marker
   * follow, the command's output just gains that newline).
   */
  releaseHeldNewline(): boolean {
    if (this.#scan !== '\n' || this.#released !== 0) return false;
    this.#released = 1;
    return true;
  }

  /** Splits what the terminal printed into output and markers. */
  #drain(): void {
    for (;;) {
      const match = this.#marker.exec(this.#scan);
      if (match) {
        this.#emit(this.#scan.slice(Math.min(this.#released, match.index), match.index));
        this.#scan = this.#scan.slice(match.index + match[0].length);
        this.#released = 0;
        if (match[4] !== undefined) this.sink.pid(Number(match[4]));
        else this.sink.marker(Number(match[1]), Number(match[2]), fromBase64(match[3] ?? ''));
        continue;
      }
      // Hold back what may be the start of a marker or of an escape sequence cut in two.
      let keep = this.#scan.length;
      const newline = this.#scan.lastIndexOf('\n');
      if (newline >= 0 && this.#couldBeMarker(this.#scan.slice(newline))) keep = newline;
      const escape = this.#scan.lastIndexOf('\x1b');
      if (escape >= 0 && escape >= this.#scan.length - 8 && escape < keep) keep = escape;
      if (keep > 0) {
        this.#emit(this.#scan.slice(Math.min(this.#released, keep), keep));
        this.#scan = this.#scan.slice(keep);
        this.#released = 0;
      }
      return;
    }
  }

  #couldBeMarker(text: string): boolean {
    if (text.length <= this.#markerHead.length) return this.#markerHead.startsWith(text);
    return (
      text.length < 16_384 &&
      text.startsWith(this.#markerHead) &&
      /^[A-Za-z0-9+/=_]*$/.test(text.slice(this.#markerHead.length))
    );
  }

  #emit(raw: string): void {
    if (raw === '') return;
    this.sink.text(raw.replace(BRACKETED_PASTE, ''));
  }
}
