/**
 * The one shell lexer of the project. It never executes or expands anything. It reads a command
 * line in one of two ways, which share the quoting rules (single quotes literal, double quotes
 * with backslash escapes, a backslash outside quotes escaping the next character):
 *
 * - `splitShellWords`: words only, as Python's `shlex.split` reads them, which is how OpenHands
 *   splits an MCP stdio server's `args` string: whitespace separates, nothing else is special (so
 *   `--url=http://h/?a=1&b=2` stays one word), and an unterminated quote is refused.
 * - `lexShell`: as bash reads it, for the security analyser: words with the bodies of `$(…)`,
 *   backticks and `<(…)` they hold, control operators, redirects (a file descriptor before one is
 *   dropped) and heredocs with their bodies; comments are dropped and a newline is a `;`. It is
 *   tolerant: what an agent wrote is read however broken (an open quote runs to the end).
 *
 * Not shell-quote's `parse`: it expands `$VAR`, splits `&`, `|` and `;` out of a word, keeps
 * neither the bodies of substitutions nor heredocs, drops a file descriptor's digits into a word
 * of their own and reads an unterminated quote as closed; and core imports no package beyond
 * zod, neverthrow and ts-pattern (`.dependency-cruiser.cjs`).
 */

interface WordToken {
  kind: 'word';
  text: string;
  /** Bodies of `$(…)`, backticks and `<(…)` inside this word. */
  subs: string[];
}
interface OpToken {
  kind: 'op';
  text: string;
}
interface RedirectToken {
  kind: 'redirect';
  text: string;
  heredoc?: string;
}
export type ShellToken = WordToken | OpToken | RedirectToken;

/** Bash's reading of a command line: its operators, redirects, substitutions and heredocs (see the file's comment). */
export function lexShell(text: string): ShellToken[] {
  return new Lexer(text, true).run();
}

/**
 * Splits a command line into words as `shlex.split` does: whitespace separates, single quotes
 * are literal, double quotes allow \" and \\, a backslash outside quotes escapes the next
 * character. Null on an unterminated quote, so the caller can report it.
 */
export function splitShellWords(input: string): string[] | null {
  const lexer = new Lexer(input, false);
  const words = lexer.run().map((token) => token.text);
  return lexer.unterminated ? null : words;
}

const REDIRECT_OPS = ['&>>', '<<<', '<<-', '>>', '>|', '>&', '<&', '<>', '&>', '<<', '>', '<'];
const CONTROL_OPS = ['&&', '||', '|&', ';;', '|', ';', '&', '(', ')'];

/** Index just after the `)` closing a `(` that was opened before `start`; the end of the text if none. */
function closingParen(text: string, start: number): number {
  let depth = 1;
  let quote: string | null = null;
  for (let i = start; i < text.length; i++) {
    const ch = text[i];
    if (quote) {
      if (ch === '\\' && quote === '"') i++;
      else if (ch === quote) quote = null;
    } else if (ch === '\\') i++;
    else if (ch === "'" || ch === '"') quote = ch;
    else if (ch === '(') depth++;
    else if (ch === ')' && --depth === 0) return i + 1;
  }
  return text.length;
}

function closingBacktick(text: string, start: number): number {
  for (let i = start; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === '`') return i + 1;
  }
  return text.length;
}

/** One pass over a command line; `bash` adds operators, substitutions, heredocs and comments to the words. */
class Lexer {
  readonly tokens: ShellToken[] = [];
  /** A quote was still open at the end of the text. */
  unterminated = false;
  private word = '';
  private inWord = false;
  private subs: string[] = [];
  private pendingHeredocs: { token: RedirectToken; delimiter: string; strip: boolean }[] = [];
  private i = 0;

  constructor(
    private readonly text: string,
    private readonly bash: boolean,
  ) {}

  run(): ShellToken[] {
    const t = this.text;
    while (this.i < t.length) {
      const ch = t[this.i] as string;
      if (ch === "'") this.singleQuoted();
      else if (ch === '"') this.doubleQuoted();
      else if (ch === '\\') this.escaped();
      else if (!this.bash) {
        if (/\s/.test(ch)) this.endWord();
        else this.addChar(ch);
      } else if (this.substitution()) continue;
      else if (ch === '\n') this.newline();
      else if (ch === ' ' || ch === '\t' || ch === '\r') this.endWord();
      else if (ch === '#' && !this.inWord) this.comment();
      else if (this.operator()) continue;
      else this.addChar(ch);
      this.i++;
    }
    this.endWord();
    return this.tokens;
  }

  private addChar(ch: string) {
    this.word += ch;
    this.inWord = true;
  }

  private endWord() {
    if (this.inWord) this.tokens.push({ kind: 'word', text: this.word, subs: this.subs });
    this.resetWord();
  }

  private resetWord() {
    this.word = '';
    this.inWord = false;
    this.subs = [];
  }

  private singleQuoted() {
    const end = this.text.indexOf("'", this.i + 1);
    if (end < 0) this.unterminated = true;
    const stop = end < 0 ? this.text.length : end;
    this.word += this.text.slice(this.i + 1, stop);
    this.inWord = true;
    this.i = stop;
  }

  /** Inside double quotes a backslash escapes `"` and `\` (bash: also `$` and a backtick); bash also substitutes. */
  private doubleQuoted() {
    const t = this.text;
    const escapes = this.bash ? '"\\$`' : '"\\';
    this.inWord = true;
    this.i++;
    while (this.i < t.length && t[this.i] !== '"') {
      const ch = t[this.i] as string;
      if (ch === '\\' && this.i + 1 < t.length && escapes.includes(t[this.i + 1] as string)) {
        this.word += t[++this.i];
        this.i++;
      } else if (!(this.bash && this.substitution())) {
        this.word += ch;
        this.i++;
      }
    }
    if (this.i >= t.length) this.unterminated = true;
  }

  /** A backslash outside quotes: the next character, literal. To bash a backslash-newline joins lines, and a last backslash is nothing; to shlex both are kept. */
  private escaped() {
    const next = this.text[this.i + 1];
    if (next === undefined) {
      if (!this.bash) this.addChar('\\');
      return;
    }
    this.i++;
    if (next !== '\n' || !this.bash) this.addChar(next);
  }

  /** `$(…)`, `` `…` ``, `<(…)`, `>(…)`: records the body and leaves the index after it. */
  private substitution(): boolean {
    const t = this.text;
    const two = t.slice(this.i, this.i + 2);
    let end: number;
    let body: string;
    if (two === '$(' || ((two === '<(' || two === '>(') && !this.inWord)) {
      end = closingParen(t, this.i + 2);
      body = t.slice(this.i + 2, t[end - 1] === ')' ? end - 1 : end);
    } else if (t[this.i] === '`') {
      end = closingBacktick(t, this.i + 1);
      body = t.slice(this.i + 1, t[end - 1] === '`' ? end - 1 : end);
    } else return false;
    this.subs.push(body);
    this.word += '$(…)';
    this.inWord = true;
    this.i = end;
    return true;
  }

  private comment() {
    const end = this.text.indexOf('\n', this.i);
    this.i = (end < 0 ? this.text.length : end) - 1;
  }

  private newline() {
    this.endWord();
    this.tokens.push({ kind: 'op', text: ';' });
    if (this.pendingHeredocs.length > 0) this.heredocBodies();
  }

  private heredocBodies() {
    const t = this.text;
    let pos = this.i + 1;
    for (const h of this.pendingHeredocs) {
      const lines: string[] = [];
      while (pos < t.length) {
        const nl = t.indexOf('\n', pos);
        const lineEnd = nl < 0 ? t.length : nl;
        const line = t.slice(pos, lineEnd);
        pos = lineEnd + 1;
        if ((h.strip ? line.replace(/^\t+/, '') : line) === h.delimiter) break;
        lines.push(line);
      }
      h.token.heredoc = lines.join('\n');
    }
    this.pendingHeredocs = [];
    this.i = Math.min(pos, t.length) - 1;
  }

  private operator(): boolean {
    const t = this.text;
    const redirect = REDIRECT_OPS.find((op) => t.startsWith(op, this.i));
    if (redirect) {
      if (!/^\d+$/.test(this.word) || !this.inWord) this.endWord();
      else this.resetWord();
      const token: RedirectToken = { kind: 'redirect', text: redirect };
      this.tokens.push(token);
      this.i += redirect.length;
      if (redirect === '<<' || redirect === '<<-') this.heredocDelimiter(token, redirect === '<<-');
      return true;
    }
    const control = CONTROL_OPS.find((op) => t.startsWith(op, this.i));
    if (!control) return false;
    this.endWord();
    this.tokens.push({ kind: 'op', text: control });
    this.i += control.length;
    return true;
  }

  private heredocDelimiter(token: RedirectToken, strip: boolean) {
    const m = /^[ \t]*(['"]?)([^\s'";&|<>()]+)\1/.exec(this.text.slice(this.i, this.i + 200));
    if (!m) return;
    this.pendingHeredocs.push({ token, delimiter: m[2] as string, strip });
    this.i += m[0].length;
  }
}
