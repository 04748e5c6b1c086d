/**
 * A small tolerant shell lexer: words (quotes, escapes, `$(…)`, backticks, process substitution),
 * control operators, redirects and heredocs. It never executes or expands anything.
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
export type Token = WordToken | OpToken | RedirectToken;

export const MAX_NESTING = 6;
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

export class Lexer {
  readonly tokens: Token[] = [];
  private word = '';
  private inWord = false;
  private subs: string[] = [];
  private pendingHeredocs: { token: RedirectToken; delimiter: string; strip: boolean }[] = [];
  private i = 0;

  constructor(private readonly text: string) {}

  run(): Token[] {
    const t = this.text;
    while (this.i < t.length) {
      const ch = t[this.i] as string;
      if (ch === "'") this.singleQuoted();
      else if (ch === '"') this.doubleQuoted();
      else if (ch === '\\') this.escaped();
      else if (this.substitution()) continue;
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
    this.word = '';
    this.inWord = false;
    this.subs = [];
  }

  private singleQuoted() {
    const end = this.text.indexOf("'", this.i + 1);
    const stop = end < 0 ? this.text.length : end;
    this.word += this.text.slice(this.i + 1, stop);
    this.inWord = true;
    this.i = stop;
  }

  private doubleQuoted() {
    const t = this.text;
    this.inWord = true;
    this.i++;
    while (this.i < t.length && t[this.i] !== '"') {
      const ch = t[this.i] as string;
      if (ch === '\\' && this.i + 1 < t.length && '"\\$`'.includes(t[this.i + 1] as string)) {
        this.word += t[++this.i];
        this.i++;
      } else if (!this.substitution()) {
        this.word += ch;
        this.i++;
      }
    }
  }

  private escaped() {
    const next = this.text[this.i + 1];
    if (next === undefined) return;
    this.i++;
    if (next !== '\n') this.addChar(next);
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

  private resetWord() {
    this.word = '';
    this.inWord = false;
    this.subs = [];
  }

  private heredocDelimiter(token: RedirectToken, strip: boolean) {
    const m = /^[ \t]*(['"]?)([^\s'";&|<>()]+)\1/.exec(this.text.slice(this.i, this.i + 200));
    if (!m) return;
    this.pendingHeredocs.push({ token, delimiter: m[2] as string, strip });
    this.i += m[0].length;
  }
}
