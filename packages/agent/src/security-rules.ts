/**
 * A rule-based security analyzer for the agent's actions: pure functions, no I/O.
 *
 * The bash analysis is a small tolerant shell lexer (quotes, operators, redirects,
 * `$(…)`, backticks, process substitution, heredocs, `sh -c` bodies) followed by rules
 * over the simple commands it finds. It is a heuristic: it errs towards flagging,
 * and it never executes or expands anything beyond `~`/`$HOME`.
 */
import { DEFAULT_CREDENTIAL_DIR } from './workspace-setup.js';

export type SecurityRisk = 'low' | 'medium' | 'high' | 'unknown';

export interface RiskAssessment {
  risk: SecurityRisk;
  /** Why, one entry per rule that fired: `<rule-id>: <words>` e.g. "destructive-delete: rm -rf of / or a path outside the working directory". Empty for plain low risk. */
  reasons: string[];
}

export interface AssessedAction {
  tool_name: string;
  /** The parsed arguments; null when the model sent something that is not a JSON object. */
  arguments: Record<string, unknown> | null;
  /** Set for MCP tools: the server's hints about the tool. */
  mcp?: { server: string; tool: string; annotations: { read_only?: boolean; destructive?: boolean; open_world?: boolean } };
}

export interface RuleContext {
  /** The sandbox working directory; paths under it are the agent's own. */
  workingDir: string;
  /** Hosts the agent may contact without that raising the risk (package registries, the git host of the conversation…). Matched exactly or as a parent domain ("github.com" covers "api.github.com"). */
  trustedHosts: readonly string[];
  /** Directories whose files are secrets (e.g. the git credential dir). */
  secretPaths: readonly string[];
}

export const DEFAULT_TRUSTED_HOSTS: readonly string[] = [
  'registry.npmjs.org',
  'registry.yarnpkg.com',
  'pypi.org',
  'files.pythonhosted.org',
  'proxy.golang.org',
  'crates.io',
  'github.com',
  'githubusercontent.com',
  'gitlab.com',
  'bitbucket.org',
  'deb.debian.org',
  'security.debian.org',
  'archive.ubuntu.com',
  'security.ubuntu.com',
  'localhost',
  '127.0.0.1',
  '::1',
];

/** Every rule, with the risk it sets when it fires. */
const RULES = {
  'destructive-delete': 'high',
  'disk-destroy': 'high',
  'fork-bomb': 'high',
  'system-permissions': 'high',
  'system-power': 'high',
  'download-exec': 'high',
  'git-destructive': 'high',
  'secret-read': 'high',
  'secret-exfiltration': 'high',
  'untrusted-upload': 'high',
  'reverse-shell': 'high',
  'system-write': 'high',
  'local-delete': 'medium',
  'git-discard': 'medium',
  'untrusted-network': 'medium',
  sudo: 'medium',
  'package-install': 'medium',
  persistence: 'medium',
  'run-downloaded': 'medium',
  container: 'medium',
  'hook-write': 'medium',
  'outside-write': 'medium',
  'mcp-destructive': 'high',
  'mcp-side-effects': 'medium',
  'mcp-secret-leak': 'high',
  'unknown-tool': 'unknown',
  'invalid-arguments': 'unknown',
} as const satisfies Record<string, SecurityRisk>;

type RuleId = keyof typeof RULES;

export const RULE_IDS: readonly string[] = Object.freeze(Object.keys(RULES));

interface Finding {
  rule: RuleId;
  words: string;
}

const RANK: Record<SecurityRisk, number> = { unknown: -1, low: 0, medium: 1, high: 2 };

function assessmentOf(findings: readonly Finding[], base: SecurityRisk = 'low'): RiskAssessment {
  let risk: SecurityRisk = base;
  const reasons: string[] = [];
  for (const f of findings) {
    const r = RULES[f.rule];
    if (RANK[r] > RANK[risk]) risk = r;
    const reason = `${f.rule}: ${f.words}`;
    if (!reasons.includes(reason)) reasons.push(reason);
  }
  return { risk, reasons };
}

export function highestRisk(assessments: readonly RiskAssessment[]): RiskAssessment {
  let risk: SecurityRisk = 'unknown';
  const reasons: string[] = [];
  for (const a of assessments) {
    if (RANK[a.risk] > RANK[risk]) risk = a.risk;
    for (const r of a.reasons) if (!reasons.includes(r)) reasons.push(r);
  }
  return { risk, reasons };
}

export function assessByRules(action: AssessedAction, context: RuleContext): RiskAssessment {
  if (action.arguments === null || typeof action.arguments !== 'object' || Array.isArray(action.arguments)) {
    return assessmentOf([{ rule: 'invalid-arguments', words: 'the arguments are not a JSON object' }], 'unknown');
  }
  if (action.mcp) return assessmentOf(mcpFindings(action.mcp.annotations, action.arguments));
  switch (action.tool_name) {
    case 'execute_bash':
      return assessBash(action.arguments, context);
    case 'str_replace_editor':
      return assessEditor(action.arguments, context);
    case 'think':
    case 'finish':
      return { risk: 'low', reasons: [] };
    default:
      return assessmentOf([{ rule: 'unknown-tool', words: `no rules for the tool "${action.tool_name}"` }], 'unknown');
  }
}

// ---------------------------------------------------------------------------
// Paths

/** Stands for the home directory: we do not know the sandbox user's home, only that it is not the working directory. */
const HOME = '/~';
const SCRATCH_DIRS = ['/tmp', '/var/tmp'];
const SYSTEM_DIRS = ['/etc', '/usr', '/bin', '/sbin', '/boot', '/var', '/lib', '/lib32', '/lib64', '/opt', '/root', '/home', '/sys', '/proc', '/dev', '/srv', '/mnt', '/media', '/run', HOME];
/** Directories whose files the system (not the agent) runs or trusts: writing there is high risk. */
const PROTECTED_WRITE_DIRS = ['/etc', '/usr', '/bin', '/sbin', '/boot', '/lib', '/lib32', '/lib64', '/sys', '/proc', '/var/spool/cron', DEFAULT_CREDENTIAL_DIR];
const STARTUP_FILES = new Set(['.bashrc', '.bash_profile', '.bash_login', '.bash_logout', '.profile', '.zshrc', '.zprofile', '.zshenv', '.zlogin']);
const TEMPLATE_SUFFIXES = new Set(['example', 'sample', 'template', 'dist', 'defaults', 'default', 'schema', 'tmpl', 'tpl']);
const KEY_FILES = new Set(['id_rsa', 'id_dsa', 'id_ecdsa', 'id_ed25519', '.netrc', '_netrc', '.git-credentials', '.pgpass', '.pypirc']);

function normalizePath(path: string): string {
  const out: string[] = [];
  for (const seg of path.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') out.pop();
    else out.push(seg);
  }
  return `/${out.join('/')}`;
}

function expandHome(word: string): string {
  if (word === '~' || word === '$HOME' || word === '${HOME}') return HOME;
  for (const prefix of ['~/', '$HOME/', '${HOME}/']) if (word.startsWith(prefix)) return `${HOME}/${word.slice(prefix.length)}`;
  // ~user: someone's home; still not ours.
  if (/^~[\w.-]+(\/|$)/.test(word)) return `${HOME}/${word.slice(word.indexOf('/') + 1 || word.length)}`;
  return word;
}

function resolvePath(word: string, cwd: string): string {
  const expanded = expandHome(word);
  return normalizePath(expanded.startsWith('/') ? expanded : `${cwd}/${expanded}`);
}

function isWithin(path: string, dir: string): boolean {
  return dir === '/' || path === dir || path.startsWith(`${dir}/`);
}

const isStrictlyWithin = (path: string, dir: string) => path !== dir && isWithin(path, dir);
const baseName = (path: string) => path.slice(path.lastIndexOf('/') + 1);
const segmentsOf = (path: string) => path.split('/').filter((s) => s !== '');

function isSecretPath(path: string, context: RuleContext): boolean {
  if ([...context.secretPaths, DEFAULT_CREDENTIAL_DIR].some((dir) => isWithin(path, normalizePath(expandHome(dir))))) return true;
  const segs = segmentsOf(path);
  const name = segs[segs.length - 1] ?? '';
  const parent = segs[segs.length - 2] ?? '';
  if (segs.includes('.ssh')) return !(name.endsWith('.pub') || name === 'known_hosts' || name === 'known_hosts.old');
  if (KEY_FILES.has(name)) return true;
  if (parent === '.aws' && (name === 'credentials' || name === 'config')) return true;
  if ((parent === '.kube' && name === 'config') || (parent === '.docker' && name === 'config.json')) return true;
  if (name === '.env') return true;
  if (name.startsWith('.env.')) return !TEMPLATE_SUFFIXES.has(name.slice(name.lastIndexOf('.') + 1).toLowerCase());
  if (segs[0] === 'proc' && name === 'environ') return true;
  return path === '/etc/shadow' || path === '/etc/gshadow';
}

/** System directories, key directories and secret directories (not every secret-looking file: writing `.env` is ordinary work). */
function isProtectedWritePath(path: string, context: RuleContext): boolean {
  if (PROTECTED_WRITE_DIRS.some((dir) => isWithin(path, dir))) return true;
  if (segmentsOf(path).includes('.ssh')) return true;
  return context.secretPaths.some((dir) => isWithin(path, normalizePath(expandHome(dir))));
}

const isStartupFile = (path: string) => STARTUP_FILES.has(baseName(path));

/** Part of a word that may name a file: `@file` (curl), `key=file` (dd, long options). */
function pathCandidates(word: string): string[] {
  const out = [word];
  if (word.startsWith('@')) out.push(word.slice(1));
  const eq = word.indexOf('=');
  if (eq > 0 && !word.includes('://')) {
    const value = word.slice(eq + 1);
    out.push(value.startsWith('@') ? value.slice(1) : value);
  }
  return out.filter((p) => p !== '' && !p.includes('://'));
}

// ---------------------------------------------------------------------------
// Shell lexing

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
type Token = WordToken | OpToken | RedirectToken;

const MAX_NESTING = 6;
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

class Lexer {
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

// ---------------------------------------------------------------------------
// Commands

interface Redirect {
  op: string;
  target: string;
  heredoc?: string;
}

interface SimpleCommand {
  /** argv without prefixes (assignments, sudo, env, nohup…). */
  words: string[];
  /** Basename of words[0], lowercased, versions folded (python3.11 → python). */
  program: string;
  redirects: Redirect[];
  /** Commands found inside this command's `$(…)`, backticks and `<(…)`. */
  substituted: SimpleCommand[];
  sudo: boolean;
  /** Position in its pipeline (0 = first). */
  stage: number;
  pipeline: SimpleCommand[];
  /** Working directory when it runs, as far as `cd` in the same command line tells. */
  cwd: string;
}

const SHELLS = new Set(['sh', 'bash', 'zsh', 'dash', 'ksh', 'ash', 'fish', 'csh', 'tcsh', 'mksh']);
const INTERPRETERS = new Set(['python', 'perl', 'ruby', 'node', 'php', 'deno', 'bun', 'lua', 'pwsh']);
const DOWNLOADERS = new Set(['curl', 'wget', 'aria2c', 'http', 'https', 'fetch', 'lwp-download']);
const NETCATS = new Set(['nc', 'ncat', 'netcat', 'socat', 'telnet']);
const REMOTE_COPY = new Set(['scp', 'sftp', 'rsync']);
const NETWORK_SENDERS = new Set([...DOWNLOADERS, ...NETCATS, ...REMOTE_COPY, 'ssh', 'ftp', 'lftp', 'mail', 'sendmail', 'dig', 'nslookup', 'host', 'ping']);
const SKIP_KEYWORDS = new Set(['!', '{', '}', 'if', 'then', 'else', 'elif', 'fi', 'do', 'done', 'while', 'until', 'time', 'esac']);
/** Prefixes that run the rest of the line as a command, with the options that take a value. */
const WRAPPERS: Record<string, string[]> = {
  sudo: ['-u', '-g', '-C', '-D', '-h', '-p', '-r', '-t', '-U', '-T'],
  doas: ['-u', '-C'],
  command: [],
  builtin: [],
  exec: ['-a'],
  nohup: [],
  nice: ['-n'],
  ionice: ['-c', '-n', '-p'],
  timeout: ['-s', '-k', '--signal', '--kill-after'],
  stdbuf: ['-i', '-o', '-e'],
  xargs: ['-I', '-n', '-P', '-d', '-L', '-a', '-E', '-s'],
  env: ['-u', '-C', '-S', '--unset', '--chdir'],
  chronic: [],
  unbuffer: [],
};

function programName(word: string): string {
  const name = baseName(word).toLowerCase();
  for (const family of ['python', 'pip', 'perl', 'ruby', 'node', 'php']) {
    if (new RegExp(`^${family}[\\d.]*$`).test(name)) return family;
  }
  return name;
}

const isAssignment = (word: string) => /^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=/.test(word);

/** Drops assignments, keywords and wrappers; reports whether sudo was among them. */
function stripPrefixes(words: string[]): { words: string[]; sudo: boolean } {
  let i = 0;
  let sudo = false;
  while (i < words.length) {
    const w = words[i] as string;
    if (isAssignment(w) || SKIP_KEYWORDS.has(w)) {
      i++;
      continue;
    }
    const name = programName(w);
    const valued = WRAPPERS[name];
    if (!valued) break;
    let j = i + 1;
    while (j < words.length && (words[j] as string).startsWith('-') && words[j] !== '--') j += valued.includes(words[j] as string) ? 2 : 1;
    if (words[j] === '--') j++;
    if (name === 'env') while (j < words.length && isAssignment(words[j] as string)) j++;
    if (name === 'timeout' && j < words.length) j++;
    // `env` alone prints the environment; `exec 3<>/dev/tcp/…` has only redirects: keep them as commands.
    if (j >= words.length) break;
    if (name === 'sudo' || name === 'doas') sudo = true;
    i = j;
  }
  return { words: words.slice(i), sudo };
}

/** The code of `sh -c CODE`, `python -c CODE`, `node -e CODE`, `perl -e CODE`, `php -r CODE`, `su -c CODE`. */
function inlineCode(cmd: { program: string; words: string[] }): string | null {
  const flags = SHELLS.has(cmd.program) || cmd.program === 'su' || cmd.program === 'python' ? ['c'] : cmd.program === 'php' ? ['r'] : ['e', 'p'];
  if (!SHELLS.has(cmd.program) && !INTERPRETERS.has(cmd.program) && cmd.program !== 'su') return null;
  for (let i = 1; i < cmd.words.length; i++) {
    const w = cmd.words[i] as string;
    if (w === '--eval' || w === '--print' || w === '--command') return cmd.words[i + 1] ?? null;
    if (/^-[A-Za-z]+$/.test(w) && flags.includes(w[w.length - 1] as string)) return cmd.words[i + 1] ?? null;
    if (!w.startsWith('-') && cmd.program !== 'su') return null;
  }
  return null;
}

function splitPipelines(tokens: readonly Token[]): Token[][][] {
  const pipelines: Token[][][] = [];
  let pipeline: Token[][] = [];
  let command: Token[] = [];
  const endCommand = () => {
    if (command.length > 0) pipeline.push(command);
    command = [];
  };
  for (const token of tokens) {
    if (token.kind !== 'op') command.push(token);
    else if (token.text === '|' || token.text === '|&') endCommand();
    else {
      endCommand();
      if (pipeline.length > 0) pipelines.push(pipeline);
      pipeline = [];
    }
  }
  endCommand();
  if (pipeline.length > 0) pipelines.push(pipeline);
  return pipelines;
}

interface ParseState {
  cwd: string;
  workingDir: string;
  /** Every command, nested ones included, in the order they were found. */
  all: SimpleCommand[];
}

function parseLine(text: string, state: ParseState, depth: number): SimpleCommand[][] {
  if (depth > MAX_NESTING) return [];
  const out: SimpleCommand[][] = [];
  for (const raw of splitPipelines(new Lexer(text).run())) {
    const pipeline: SimpleCommand[] = [];
    raw.forEach((tokens, stage) => {
      const cmd = buildCommand(tokens, stage, pipeline, state, depth);
      if (cmd) pipeline.push(cmd);
    });
    if (pipeline.length > 0) out.push(pipeline);
  }
  return out;
}

function buildCommand(tokens: readonly Token[], stage: number, pipeline: SimpleCommand[], state: ParseState, depth: number): SimpleCommand | null {
  const words: string[] = [];
  const redirects: Redirect[] = [];
  const subs: string[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as Token;
    if (token.kind === 'word') {
      words.push(token.text);
      subs.push(...token.subs);
    } else if (token.kind === 'redirect') {
      const next = tokens[i + 1];
      const target = next?.kind === 'word' ? next : null;
      if (target) {
        subs.push(...target.subs);
        i++;
      }
      redirects.push({ op: token.text, target: target?.text ?? '', heredoc: token.heredoc });
    }
  }
  const stripped = stripPrefixes(words);
  const cmd: SimpleCommand = {
    words: stripped.words,
    program: stripped.words[0] ? programName(stripped.words[0]) : '',
    redirects,
    substituted: [],
    sudo: stripped.sudo,
    stage,
    pipeline,
    cwd: state.cwd,
  };
  if (cmd.words.length === 0 && redirects.length === 0 && subs.length === 0) return null;
  state.all.push(cmd);
  trackDirectory(cmd, state);
  const bodies: string[] = [...subs];
  if (cmd.program === 'eval') bodies.push(cmd.words.slice(1).join(' '));
  const printed = pipeline[pipeline.length - 1];
  // `echo "…" | sh` runs the printed text.
  if (SHELLS.has(cmd.program) && stage > 0 && (printed?.program === 'echo' || printed?.program === 'printf')) {
    bodies.push(printed.words.slice(1).filter((w) => !w.startsWith('-')).join(' '));
  }
  const code = SHELLS.has(cmd.program) || cmd.program === 'su' ? inlineCode(cmd) : null;
  if (code !== null) bodies.push(code);
  if (SHELLS.has(cmd.program)) for (const r of redirects) if (r.heredoc !== undefined) bodies.push(r.heredoc);
  const before = state.all.length;
  for (const body of subs) parseLine(body, state, depth + 1);
  cmd.substituted = state.all.slice(before);
  for (const body of bodies.slice(subs.length)) parseLine(body, state, depth + 1);
  return cmd;
}

function trackDirectory(cmd: SimpleCommand, state: ParseState) {
  if (cmd.program === 'cd' || cmd.program === 'pushd') {
    const target = cmd.words.slice(1).find((w) => !w.startsWith('-') || w === '-');
    if (target === '-') return;
    if (target === undefined) state.cwd = HOME;
    else if (!target.includes('$(…)')) state.cwd = resolvePath(target, state.cwd);
  } else if (cmd.program === 'git') {
    // git -C DIR: only for this command.
    const at = cmd.words.indexOf('-C');
    if (at > 0 && cmd.words[at + 1]) cmd.cwd = resolvePath(cmd.words[at + 1] as string, state.cwd);
  }
}

// ---------------------------------------------------------------------------
// Argument helpers

/** Non-option arguments; `valued` lists options (short letters as "-x", long as "--name") that consume the next word. */
function positionals(args: readonly string[], valued: ReadonlySet<string>): string[] {
  const out: string[] = [];
  let optionsDone = false;
  for (let i = 0; i < args.length; i++) {
    const w = args[i] as string;
    if (optionsDone || !w.startsWith('-') || w === '-') {
      out.push(w);
      continue;
    }
    if (w === '--') optionsDone = true;
    else if (w.startsWith('--')) {
      if (!w.includes('=') && valued.has(w)) i++;
    } else if (valued.has(`-${w[w.length - 1]}`) && (w.length === 2 || !valued.has(`-${w[1]}`))) i++;
  }
  return out;
}

/** Values of options, e.g. `-o FILE`, `-oFILE`, `--output FILE`, `--output=FILE`. */
function optionValues(args: readonly string[], names: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const w = args[i] as string;
    for (const name of names) {
      if (w === name) out.push(args[i + 1] ?? '');
      else if (name.startsWith('--') && w.startsWith(`${name}=`)) out.push(w.slice(name.length + 1));
      else if (!name.startsWith('--') && /^-[A-Za-z]+$/.test(w) && w.length > 2 && w.endsWith(name[1] as string)) out.push(args[i + 1] ?? '');
    }
  }
  return out;
}

function hasFlag(args: readonly string[], short: string, long: readonly string[] = []): boolean {
  return args.some((w) => long.includes(w) || (/^-[A-Za-z0-9]+$/.test(w) && w.slice(1).includes(short)));
}

const args = (cmd: SimpleCommand) => cmd.words.slice(1);

// ---------------------------------------------------------------------------
// Hosts

type HostRef = { host: string } | { unresolved: true };

function hostOfUrl(url: string): HostRef {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? url : `http://${url}`;
  if (withScheme.includes('$')) return { unresolved: true };
  try {
    const host = new URL(withScheme).hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '').toLowerCase();
    return host === '' ? { unresolved: true } : { host };
  } catch {
    return { unresolved: true };
  }
}

function isTrustedHost(host: string, context: RuleContext): boolean {
  return context.trustedHosts.some((t) => {
    const trusted = t.toLowerCase().replace(/^\[|\]$/g, '');
    return host === trusted || host.endsWith(`.${trusted}`);
  });
}

const URL_IN_TEXT = /[a-z][a-z0-9+.-]{0,20}:\/\/[^\s'"`<>()]{1,2000}/gi;
const SCP_LIKE = /^(?:[^\s/@:]+@)?(\[[0-9a-f:]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):(?!\/\/)/i;
const DEV_NET = /\/dev\/(?:tcp|udp)\/([^/\s]+)\//;
const CURL_VALUED = new Set(['-o', '-d', '-H', '-X', '-u', '-A', '-e', '-F', '-T', '-x', '-b', '-c', '-K', '-w', '-m', '-r', '-E', '-C', '-Y', '-y', '-z', '-U', '-Q', '--data', '--data-raw', '--data-binary', '--data-urlencode', '--data-ascii', '--json', '--header', '--output', '--user', '--request', '--form', '--form-string', '--upload-file', '--proxy', '--cookie', '--cookie-jar', '--connect-timeout', '--max-time', '--retry', '--cacert', '--cert', '--key', '--user-agent', '--referer', '--resolve', '--interface', '--output-dir', '--config', '--write-out', '--range', '--retry-delay', '--retry-max-time', '--limit-rate', '--max-filesize']);
const WGET_VALUED = new Set(['-O', '-o', '-P', '-U', '-e', '-t', '-T', '-a', '-i', '-B', '-w', '-Q', '-l', '--header', '--post-data', '--post-file', '--body-data', '--body-file', '--user', '--password', '--output-document', '--directory-prefix', '--method', '--user-agent', '--tries', '--timeout', '--input-file', '--output-file', '--referer']);
const SSH_VALUED = new Set(['-p', '-i', '-l', '-o', '-F', '-J', '-L', '-R', '-D', '-b', '-c', '-E', '-e', '-m', '-O', '-Q', '-S', '-W', '-w', '-B', '-P']);
const NC_VALUED = new Set(['-p', '-s', '-w', '-e', '-c', '-i', '-q', '-x', '-X', '-P', '-I', '-O', '-T', '-V', '-W']);
/** Programs whose URL arguments are fetched (not, say, grep's or echo's). */
const URL_PROGRAMS = new Set(['git', 'pip', 'pipx', 'uv', 'poetry', 'conda', 'npm', 'yarn', 'pnpm', 'bun', 'go', 'cargo', 'gem', 'composer', 'svn', 'hg', 'helm', 'brew', 'apt-get', 'apt', 'ssh', 'scp', 'sftp', 'rsync', 'ftp', 'lftp', 'docker', 'podman']);
const NETWORK_CODE = /\b(?:urllib|requests|httpx|aiohttp|http\.client|socket|fetch\s?\(|https?\.(?:request|get)|XMLHttpRequest|LWP|IO::Socket|Net::HTTP|open-uri|fsockopen|curl_exec)/;

/** Hosts a command contacts, as far as its words tell. */
function hostsOf(cmd: SimpleCommand): HostRef[] {
  const a = args(cmd);
  const refs: HostRef[] = [];
  const p = cmd.program;
  if (DOWNLOADERS.has(p)) {
    const valued = p === 'wget' ? WGET_VALUED : CURL_VALUED;
    for (const w of [...positionals(a, valued), ...optionValues(a, ['--url'])]) refs.push(hostOfUrl(w));
  } else if (p === 'ssh') {
    const target = positionals(a, SSH_VALUED)[0];
    if (target !== undefined) refs.push(hostOfUrl(target.replace(/^[^@]*@/, '')));
  } else if (REMOTE_COPY.has(p)) {
    for (const w of positionals(a, SSH_VALUED)) {
      const m = SCP_LIKE.exec(w);
      if (m && !w.startsWith('/') && !w.startsWith('.')) refs.push(hostOfUrl(m[1] as string));
    }
  } else if (p === 'socat') {
    for (const w of a) {
      const m = /^(?:tcp[46]?|udp[46]?|openssl|ssl):([^:,]+):/i.exec(w);
      if (m) refs.push(hostOfUrl(m[1] as string));
    }
  } else if (NETCATS.has(p) || p === 'ftp' || p === 'lftp') {
    if (!hasFlag(a, 'l', ['--listen'])) {
      const target = positionals(a, NC_VALUED)[0];
      if (target !== undefined) refs.push(hostOfUrl(target));
    }
  } else if (p === 'git') {
    for (const w of a) {
      const m = /^[\w.-]+@([\w.-]+):/.exec(w);
      if (m) refs.push(hostOfUrl(m[1] as string));
    }
  }
  const code = INTERPRETERS.has(p) ? inlineCode(cmd) : null;
  const urlWords = code !== null ? [code] : URL_PROGRAMS.has(p) ? cmd.words : [];
  for (const w of urlWords) for (const m of w.matchAll(URL_IN_TEXT)) refs.push(hostOfUrl(m[0]));
  for (const w of [...cmd.words, ...cmd.redirects.map((r) => r.target)]) {
    const m = DEV_NET.exec(w);
    if (m) refs.push(hostOfUrl(m[1] as string));
  }
  return refs;
}

function isNetworkSender(cmd: SimpleCommand): boolean {
  if (NETWORK_SENDERS.has(cmd.program)) return true;
  const code = INTERPRETERS.has(cmd.program) ? inlineCode(cmd) : null;
  if (code !== null && NETWORK_CODE.test(code)) return true;
  return [...cmd.words, ...cmd.redirects.map((r) => r.target)].some((w) => DEV_NET.test(w));
}

/** Whether the command sends local data (not just a request) to where it connects. */
function isUpload(cmd: SimpleCommand): boolean {
  const a = args(cmd);
  if (cmd.program === 'curl') {
    return a.some((w) => /^(?:-[A-Za-z]*[dFT]|--data(?:-[a-z]+)?|--json|--form(?:-string)?|--upload-file)(?:=|$)/.test(w) || /^-[dFT]./.test(w));
  }
  if (cmd.program === 'wget') return a.some((w) => /^--(?:post|body)-(?:data|file)(?:=|$)/.test(w));
  if (cmd.program === 'http' || cmd.program === 'https') return a.some((w) => /^[\w-]+:?=/.test(w) || w === '--form' || w === '-f');
  if (REMOTE_COPY.has(cmd.program)) {
    const pos = positionals(a, SSH_VALUED);
    const dest = pos[pos.length - 1];
    return pos.length >= 2 && dest !== undefined && SCP_LIKE.test(dest) && !dest.startsWith('/');
  }
  if (NETCATS.has(cmd.program) || cmd.program === 'ssh') {
    return cmd.stage > 0 || cmd.redirects.some((r) => r.op === '<' || r.op === '<<<' || r.op === '<<');
  }
  return false;
}

// ---------------------------------------------------------------------------
// Bash rules

type BashRule = (cmd: SimpleCommand, context: RuleContext) => Finding[];

const SECRET_VAR = /\$\{?[A-Za-z_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE|CREDENTIAL|AWS_)[A-Za-z0-9_]*\}?/i;
const SECRET_IN_CODE = /\.ssh\/|\.aws\/credentials|\.netrc|\.git-credentials|\/proc\/[^/\s]{1,20}\/environ|\bid_(?:rsa|ed25519|ecdsa|dsa)\b|(?:^|[/'"\s])\.env(?=$|['"\s])|os\.environ|process\.env/;
const SECRET_TOKEN = /-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{20,}|\bglpat-[A-Za-z0-9_-]{20,}|\bsk-[A-Za-z0-9_-]{20,}|\bxox[abprs]-[A-Za-z0-9-]{10,}/;
/** Programs that print (or send) what they read; `source .env` and `cp .env.example .env` are not among them. */
const READERS = new Set(['cat', 'tac', 'head', 'tail', 'less', 'more', 'nl', 'base64', 'base32', 'xxd', 'od', 'hexdump', 'strings', 'grep', 'egrep', 'fgrep', 'rg', 'ag', 'awk', 'gawk', 'sed', 'cut', 'sort', 'uniq', 'tar', 'zip', 'gzip', 'bzip2', 'xz', '7z', 'openssl', 'gpg', 'vi', 'vim', 'nano', 'emacs', 'diff', 'jq', 'yq', 'dd', 'paste', 'column', 'view', 'bat', 'batcat', 'curl', 'wget', 'scp', 'rsync', 'nc', 'ncat', 'socat']);

function secretWordIn(cmd: SimpleCommand, context: RuleContext): string | null {
  const words = [...args(cmd), ...cmd.redirects.filter((r) => r.op.startsWith('<') && r.op !== '<<' && r.op !== '<<-').map((r) => r.target)];
  for (const w of words) {
    for (const candidate of pathCandidates(w)) if (isSecretPath(resolvePath(candidate, cmd.cwd), context)) return w;
  }
  return null;
}

/** Secret material the command reads: secret files, the whole environment, code that reads either. */
function secretMaterial(cmd: SimpleCommand, context: RuleContext): string | null {
  const word = secretWordIn(cmd, context);
  if (word !== null) return word;
  const a = args(cmd);
  if (cmd.program === 'env' && a.every((w) => w.startsWith('-'))) return 'env';
  if (cmd.program === 'printenv' && (a.length === 0 || a.some((w) => SECRET_VAR.test(`$${w}`)))) return 'printenv';
  if ((cmd.program === 'set' || cmd.program === 'export' || cmd.program === 'declare') && (a.length === 0 || a.includes('-p'))) return cmd.program;
  const code = INTERPRETERS.has(cmd.program) ? inlineCode(cmd) : null;
  if (code !== null && (SECRET_IN_CODE.test(code) || context.secretPaths.some((p) => code.includes(p)))) return `${cmd.program} code`;
  return null;
}

interface DeleteKind {
  label: string;
  /** -r or -f: deleting outside the working directory this way is high risk. */
  strong: boolean;
  /** -r: worth a look even inside the working directory; `rm -f file.o` is not. */
  recursive: boolean;
  /** The command deletes things under its targets (find -delete), not the targets themselves. */
  contentsOnly: boolean;
}

function deleteFindings(targets: readonly string[], cwd: string, kind: DeleteKind, context: RuleContext): Finding[] {
  const { label, strong, recursive } = kind;
  const workingDir = normalizePath(context.workingDir);
  const out: Finding[] = [];
  for (const target of targets) {
    const expanded = expandHome(target);
    if (expanded.includes('$')) {
      if (recursive) out.push({ rule: 'local-delete', words: `${label} of a path that depends on a variable (${target})` });
      continue;
    }
    const path = resolvePath(expanded.replace(/\/[^/]*[*?[][^]*$/, '') || '/', cwd);
    const contents = kind.contentsOnly || /[*?[]/.test(expanded);
    if (isStrictlyWithin(path, workingDir) || (contents && path === workingDir)) {
      if (recursive) out.push({ rule: 'local-delete', words: `${label} inside the working directory` });
    } else if (SCRATCH_DIRS.some((d) => isStrictlyWithin(path, d)) && !isSecretPath(path, context)) {
      if (recursive) out.push({ rule: 'local-delete', words: `${label} in a temporary directory` });
    } else if (strong || SYSTEM_DIRS.some((d) => isWithin(path, d)) || path === '/') {
      out.push({ rule: 'destructive-delete', words: `${label} of / or a path outside the working directory (${target})` });
    } else {
      out.push({ rule: 'outside-write', words: `${label} of a file outside the working directory (${target})` });
    }
  }
  return out;
}

const deleteRule: BashRule = (cmd, context) => {
  const a = args(cmd);
  if (cmd.program === 'rm') {
    if (a.includes('--no-preserve-root')) return [{ rule: 'destructive-delete', words: 'rm --no-preserve-root' }];
    const recursive = hasFlag(a, 'r', ['--recursive']) || hasFlag(a, 'R');
    const kind = { label: 'rm -rf', strong: recursive || hasFlag(a, 'f', ['--force']), recursive, contentsOnly: false };
    return deleteFindings(positionals(a, new Set()), cmd.cwd, kind, context);
  }
  if (cmd.program === 'find' && (a.includes('-delete') || /(?:^|\s)-exec(?:dir)?\s+(?:\S*\/)?rm\b/.test(a.join(' ')))) {
    const starts = a.slice(0, Math.max(0, a.findIndex((w) => w.startsWith('-') || w === '(' || w === '!')));
    const kind = { label: 'find -delete', strong: true, recursive: true, contentsOnly: true };
    return deleteFindings(starts.length > 0 ? starts : ['.'], cmd.cwd, kind, context);
  }
  if (cmd.program === 'git' && gitSubcommand(cmd) === 'clean' && hasFlag(a, 'f', ['--force'])) {
    const workingDir = normalizePath(context.workingDir);
    return isWithin(cmd.cwd, workingDir)
      ? [{ rule: 'git-discard', words: 'git clean -f deletes untracked files in the working directory' }]
      : [{ rule: 'git-destructive', words: 'git clean -f outside the working directory' }];
  }
  return [];
};

const RAW_DEVICE = /^\/dev\/(?:sd|hd|vd|xvd|nvme|mmcblk|md|dm-|loop|disk|mapper\/|mem$|kmem$|port$|sr|fd\d)/;

const diskRule: BashRule = (cmd) => {
  const p = cmd.program;
  const a = args(cmd);
  if (/^mkfs(\.|$)/.test(p) || p === 'mke2fs' || p === 'mkswap' || p === 'wipefs' || p === 'fdisk' || p === 'sfdisk' || p === 'parted' || p === 'blkdiscard') {
    return [{ rule: 'disk-destroy', words: `${p} rewrites a disk or partition` }];
  }
  if (p === 'dd' && a.some((w) => /^of=\/dev\//.test(w) && RAW_DEVICE.test(w.slice(3)))) return [{ rule: 'disk-destroy', words: 'dd onto a raw device' }];
  if ((p === 'shred' || p === 'cp') && a.some((w) => RAW_DEVICE.test(w))) {
    return [{ rule: 'disk-destroy', words: `${p} onto a raw device` }];
  }
  if (cmd.redirects.some((r) => r.op.includes('>') && RAW_DEVICE.test(r.target))) return [{ rule: 'disk-destroy', words: 'output redirected onto a raw device' }];
  return [];
};

const permissionsRule: BashRule = (cmd, context) => {
  if (cmd.program !== 'chmod' && cmd.program !== 'chown' && cmd.program !== 'chgrp') return [];
  const a = args(cmd);
  const pos = positionals(a, new Set(['--reference']));
  const targets = pos.slice(1).map((t) => resolvePath(t.replace(/\/\*$/, '') || '/', cmd.cwd));
  const recursive = hasFlag(a, 'R', ['--recursive']);
  const workingDir = normalizePath(context.workingDir);
  const hits = targets.filter((t) => !isWithin(t, workingDir) && (t === '/' || PROTECTED_WRITE_DIRS.some((d) => isWithin(t, d)) || SYSTEM_DIRS.some((d) => (recursive ? isWithin(t, d) : t === d)) || isSecretPath(t, context)));
  return hits.length > 0 ? [{ rule: 'system-permissions', words: `${cmd.program}${recursive ? ' -R' : ''} on a system path` }] : [];
};

const powerRule: BashRule = (cmd) => {
  const p = cmd.program;
  const a = args(cmd);
  if (['shutdown', 'reboot', 'halt', 'poweroff', 'kexec'].includes(p)) return [{ rule: 'system-power', words: `${p} stops the machine` }];
  if ((p === 'init' || p === 'telinit') && ['0', '6'].includes(a[0] ?? '')) return [{ rule: 'system-power', words: `${p} ${a[0]} stops the machine` }];
  if (p === 'systemctl' && a.some((w) => ['reboot', 'poweroff', 'halt', 'kexec'].includes(w))) return [{ rule: 'system-power', words: 'systemctl stops the machine' }];
  if (p === 'kill') {
    let rest = a;
    if (rest[0] === '-s' || rest[0] === '-n') rest = rest.slice(2);
    else if (rest[0] !== undefined && /^-(?:\d+|[A-Z]+)$/.test(rest[0]) && rest.length > 1) rest = rest.slice(1);
    if (rest[0] === '--') rest = rest.slice(1);
    if (rest.some((w) => w === '-1' || w === '1')) return [{ rule: 'system-power', words: 'kill of every process or of init' }];
  }
  return [];
};

const DECODERS = (cmd: SimpleCommand) =>
  ((cmd.program === 'base64' || cmd.program === 'base32') && hasFlag(args(cmd), 'd', ['--decode'])) ||
  (cmd.program === 'xxd' && hasFlag(args(cmd), 'r')) ||
  (cmd.program === 'openssl' && args(cmd).includes('-d'));

/** Whether the command runs code it reads from standard input. */
function runsStdin(cmd: SimpleCommand): boolean {
  const a = args(cmd);
  if (SHELLS.has(cmd.program)) return inlineCode(cmd) === null;
  if (!INTERPRETERS.has(cmd.program)) return cmd.program === 'source' || cmd.program === '.' ? a.some((w) => w === '/dev/stdin' || w === '-') : false;
  if (a.some((w) => ['-c', '-e', '-E', '-m', '-p', '-r', '--eval', '--print'].includes(w))) return false;
  const pos = a.filter((w) => !w.startsWith('-') || w === '-');
  return pos.length === 0 || pos[0] === '-';
}

const CODE_RUNNERS = new Set([...SHELLS, ...INTERPRETERS, 'eval', 'source', '.', 'exec']);

const downloadExecRule: BashRule = (cmd) => {
  const out: Finding[] = [];
  const upstream = cmd.pipeline.slice(0, cmd.stage);
  if (runsStdin(cmd) && upstream.some((c) => DOWNLOADERS.has(c.program))) {
    out.push({ rule: 'download-exec', words: `downloaded content piped into ${cmd.program}` });
  } else if (runsStdin(cmd) && upstream.some(DECODERS)) {
    out.push({ rule: 'download-exec', words: `decoded (hidden) content piped into ${cmd.program}` });
  }
  if (CODE_RUNNERS.has(cmd.program) && cmd.substituted.some((c) => DOWNLOADERS.has(c.program))) {
    out.push({ rule: 'download-exec', words: `${cmd.program} runs downloaded content` });
  }
  return out;
};

function gitSubcommand(cmd: SimpleCommand): string | undefined {
  return positionals(args(cmd), new Set(['-C', '-c', '--git-dir', '--work-tree', '--namespace']))[0];
}

const gitRule: BashRule = (cmd) => {
  if (cmd.program !== 'git') return [];
  const a = args(cmd);
  const sub = gitSubcommand(cmd);
  const rest = a.slice(a.indexOf(sub ?? '') + 1);
  if (sub === 'push') {
    const pos = positionals(rest, new Set(['--repo', '--receive-pack', '--exec', '-o', '--push-option']));
    if (hasFlag(rest, 'f', ['--force', '--mirror', '--delete', '--prune']) || hasFlag(rest, 'd') || rest.some((w) => w.startsWith('--force-with-lease') || w.startsWith('--force-if-includes')) || pos.slice(1).some((r) => r.startsWith(':') || r.startsWith('+'))) {
      return [{ rule: 'git-destructive', words: 'git push that rewrites or deletes remote history' }];
    }
  }
  if (sub === 'reset' && rest.includes('--hard')) return [{ rule: 'git-discard', words: 'git reset --hard discards uncommitted work' }];
  if (sub === 'checkout' && (hasFlag(rest, 'f', ['--force']) || rest.includes('--') || rest.includes('.'))) return [{ rule: 'git-discard', words: 'git checkout discards uncommitted changes' }];
  if (sub === 'restore' && !rest.includes('--staged')) return [{ rule: 'git-discard', words: 'git restore discards uncommitted changes' }];
  return [];
};

const reverseShellRule: BashRule = (cmd, _context) => {
  const a = args(cmd);
  const p = cmd.program;
  if ((p === 'nc' || p === 'ncat' || p === 'netcat') && (hasFlag(a, 'e', ['--exec', '--sh-exec', '--lua-exec']) || hasFlag(a, 'c') || hasFlag(a, 'l', ['--listen']))) {
    return [{ rule: 'reverse-shell', words: `${p} listener or command execution over the network` }];
  }
  if (p === 'socat' && a.some((w) => /^(?:exec|system|pty)[:,]|(?:tcp|udp)[46]?-listen/i.test(w))) {
    return [{ rule: 'reverse-shell', words: 'socat listener or shell over the network' }];
  }
  const devNet = cmd.redirects.some((r) => DEV_NET.test(r.target)) || a.some((w) => DEV_NET.test(w));
  if (devNet && (SHELLS.has(p) || p === 'exec' || cmd.words.length === 0)) return [{ rule: 'reverse-shell', words: 'a shell wired to a /dev/tcp connection' }];
  const code = INTERPRETERS.has(p) ? inlineCode(cmd) : null;
  if (code !== null && /socket/.test(code) && /pty|dup2|subprocess|\/bin\/(?:ba)?sh|exec/.test(code)) return [{ rule: 'reverse-shell', words: `${p} code that connects a shell to a socket` }];
  const pipeShell = cmd.pipeline.some((c) => SHELLS.has(c.program)) && cmd.pipeline.some((c) => NETCATS.has(c.program) || c.program === 'openssl');
  if (cmd.stage === 0 && pipeShell) return [{ rule: 'reverse-shell', words: 'a shell piped to or from a network connection' }];
  return [];
};

const WRITE_VALUED: Record<string, ReadonlySet<string>> = {
  cp: new Set(['-t', '-S', '--suffix', '--target-directory']),
  mv: new Set(['-t', '-S', '--suffix', '--target-directory']),
  install: new Set(['-t', '-m', '-o', '-g', '-S', '--mode', '--owner', '--group']),
  ln: new Set(['-t', '-S', '--suffix']),
  truncate: new Set(['-s', '-r', '--size', '--reference']),
  sed: new Set(['-e', '-f', '-l', '--expression', '--file']),
  perl: new Set(['-e', '-E', '-I', '-M']),
};

function writeTargets(cmd: SimpleCommand): string[] {
  const a = args(cmd);
  const targets = cmd.redirects.filter((r) => ['>', '>>', '>|', '&>', '&>>', '<>'].includes(r.op)).map((r) => r.target);
  const pos = positionals(a, WRITE_VALUED[cmd.program] ?? new Set());
  if (cmd.program === 'tee' || cmd.program === 'touch' || cmd.program === 'truncate') targets.push(...pos);
  if (['cp', 'mv', 'install', 'ln', 'rsync'].includes(cmd.program) && pos.length >= 2) targets.push(pos[pos.length - 1] as string);
  if ((cmd.program === 'sed' || cmd.program === 'perl') && a.some((w) => /^-[A-Za-z]*i/.test(w) || w.startsWith('--in-place'))) {
    targets.push(...(hasFlag(a, 'e', ['--expression']) ? pos : pos.slice(1)));
  }
  if (cmd.program === 'dd') targets.push(...a.filter((w) => w.startsWith('of=')).map((w) => w.slice(3)));
  return targets.filter((t) => t !== '' && !/^&?\d*-?$/.test(t));
}

const DEVICE_SINKS = /^\/dev\/(?:null|zero|stdout|stderr|stdin|tty|fd\/|pts\/|tcp\/|udp\/)/;

const writeRule: BashRule = (cmd, context) => {
  const out: Finding[] = [];
  for (const target of writeTargets(cmd)) {
    const path = resolvePath(target, cmd.cwd);
    if (DEVICE_SINKS.test(path) || RAW_DEVICE.test(path)) continue;
    if (isProtectedWritePath(path, context)) out.push({ rule: 'system-write', words: `writes to a system or credential path (${target})` });
    else if (isStartupFile(path) && !isWithin(path, normalizePath(context.workingDir))) out.push({ rule: 'persistence', words: `writes to a shell startup file (${target})` });
  }
  if (cmd.program === 'crontab' && !hasFlag(args(cmd), 'l')) out.push({ rule: 'persistence', words: 'changes the crontab' });
  return out;
};

const secretReadRule: BashRule = (cmd, context) => {
  if (!READERS.has(cmd.program) && !cmd.redirects.some((r) => r.op === '<')) return [];
  const word = secretWordIn(cmd, context);
  return word === null ? [] : [{ rule: 'secret-read', words: `reads secret material (${word}) into the conversation` }];
};

const PACKAGE_MANAGERS: Record<string, string[]> = {
  apt: ['install', 'reinstall'],
  'apt-get': ['install', 'reinstall', 'build-dep'],
  aptitude: ['install'],
  yum: ['install', 'localinstall'],
  dnf: ['install'],
  apk: ['add'],
  zypper: ['install', 'in'],
  pacman: ['-S', '-U'],
  brew: ['install'],
  pip: ['install', 'download'],
  pipx: ['install', 'run'],
  uv: ['add', 'install', 'pip', 'tool'],
  poetry: ['add', 'install'],
  pipenv: ['install'],
  conda: ['install', 'create'],
  npm: ['install', 'i', 'ci', 'add', 'update'],
  yarn: ['add', 'install', 'dlx'],
  pnpm: ['add', 'install', 'i', 'dlx'],
  bun: ['add', 'install', 'i'],
  gem: ['install'],
  cargo: ['install'],
  go: ['install', 'get'],
  composer: ['require', 'install'],
  snap: ['install'],
};

const packageRule: BashRule = (cmd) => {
  const sub = positionals(args(cmd), new Set(['-m', '--prefix', '-C', '--cwd', '--registry']));
  let manager = cmd.program;
  let words = sub;
  if (cmd.program === 'python' && args(cmd)[0] === '-m') {
    manager = programName(args(cmd)[1] ?? '');
    words = args(cmd).slice(2);
  }
  const verbs = PACKAGE_MANAGERS[manager];
  if (!verbs) return [];
  const verb = manager === 'pacman' ? args(cmd).find((w) => /^-[SU]/.test(w))?.slice(0, 2) : words.find((w) => !w.startsWith('-'));
  if (manager === 'yarn' && words.length === 0) return [{ rule: 'package-install', words: 'yarn install runs third-party code' }];
  return verb !== undefined && verbs.includes(verb) ? [{ rule: 'package-install', words: `${manager} ${verb} runs third-party code` }] : [];
};

const containerRule: BashRule = (cmd) =>
  ['docker', 'podman', 'docker-compose', 'nerdctl'].includes(cmd.program) ? [{ rule: 'container', words: `${cmd.program} controls containers on the host` }] : [];

const sudoRule: BashRule = (cmd) => (cmd.sudo || cmd.program === 'su' || cmd.program === 'sudo' || cmd.program === 'doas' ? [{ rule: 'sudo', words: 'runs with elevated privileges' }] : []);

const networkRule: BashRule = (cmd, context) => {
  const out: Finding[] = [];
  const upload = isUpload(cmd);
  for (const ref of hostsOf(cmd)) {
    if ('host' in ref && isTrustedHost(ref.host, context)) continue;
    const where = 'host' in ref ? ref.host : 'a host it computes';
    out.push(upload ? { rule: 'untrusted-upload', words: `sends data to ${where}, which is not trusted` } : { rule: 'untrusted-network', words: `contacts ${where}, which is not trusted` });
  }
  return out;
};

const BASH_RULES: readonly BashRule[] = [deleteRule, diskRule, permissionsRule, powerRule, downloadExecRule, gitRule, reverseShellRule, writeRule, secretReadRule, packageRule, containerRule, sudoRule, networkRule];

const FORK_BOMB = /([\w:.]{1,40})\(\)\{\1\|\1&/;

/** Rules over the whole command line rather than one command. */
function lineFindings(text: string, commands: readonly SimpleCommand[], context: RuleContext): Finding[] {
  const out: Finding[] = [];
  if (FORK_BOMB.test(text.replace(/\s+/g, ''))) out.push({ rule: 'fork-bomb', words: 'a function that spawns itself without end' });
  const senders = commands.filter(isNetworkSender);
  if (senders.length > 0) {
    const secret = commands.map((c) => secretMaterial(c, context)).find((s) => s !== null);
    if (secret) out.push({ rule: 'secret-exfiltration', words: `secret material (${secret}) in a command that uses the network (${senders[0]?.program})` });
    else if ((SECRET_TOKEN.test(text) || SECRET_VAR.test(text)) && senders.some((c) => hostsOf(c).some((h) => !('host' in h) || !isTrustedHost(h.host, context)))) {
      // A token or a $…TOKEN variable is normal when talking to the git host; not to anyone else.
      out.push({ rule: 'secret-exfiltration', words: 'a secret token or secret variable sent to a host that is not trusted' });
    }
  }
  out.push(...downloadedRunFindings(commands));
  return out;
}

/** Files that curl/wget save, by base name. */
function downloadedFiles(commands: readonly SimpleCommand[]): Set<string> {
  const names = new Set<string>();
  for (const cmd of commands) {
    const a = args(cmd);
    if (cmd.program === 'curl') {
      for (const f of optionValues(a, ['-o', '--output'])) names.add(baseName(f));
      if (hasFlag(a, 'O', ['--remote-name'])) for (const u of positionals(a, CURL_VALUED)) names.add(baseName(u.split(/[?#]/)[0] ?? ''));
    } else if (cmd.program === 'wget') {
      const out = optionValues(a, ['-O', '--output-document']);
      if (out.length > 0) for (const f of out) names.add(baseName(f));
      else for (const u of positionals(a, WGET_VALUED)) names.add(baseName(u.split(/[?#]/)[0] ?? ''));
    }
  }
  names.delete('');
  names.delete('-');
  return names;
}

function downloadedRunFindings(commands: readonly SimpleCommand[]): Finding[] {
  const files = downloadedFiles(commands);
  if (files.size === 0) return [];
  const isDownloaded = (w: string | undefined) => w !== undefined && files.has(baseName(w));
  for (const cmd of commands) {
    const a = args(cmd);
    const chmodX = cmd.program === 'chmod' && /(?:^|[,ugoa])\+[rwX]*x|^[0-7]?[1357][0-7]{2}$/.test(a.find((w) => !w.startsWith('-')) ?? '') && a.some(isDownloaded);
    const runsIt = (cmd.words[0]?.includes('/') && isDownloaded(cmd.words[0])) || ((SHELLS.has(cmd.program) || INTERPRETERS.has(cmd.program)) && isDownloaded(a.find((w) => !w.startsWith('-'))));
    if (chmodX || runsIt) return [{ rule: 'run-downloaded', words: 'makes executable or runs a file it just downloaded' }];
  }
  return [];
}

function assessBash(argumentsObject: Record<string, unknown>, context: RuleContext): RiskAssessment {
  const command = argumentsObject.command;
  if (typeof command !== 'string') return assessmentOf([{ rule: 'invalid-arguments', words: 'execute_bash without a command string' }], 'unknown');
  const workingDir = normalizePath(context.workingDir);
  const state: ParseState = { cwd: workingDir, workingDir, all: [] };
  parseLine(command, state, 0);
  const findings: Finding[] = [];
  for (const cmd of state.all) for (const rule of BASH_RULES) findings.push(...rule(cmd, context));
  findings.push(...lineFindings(command, state.all, context));
  return assessmentOf(findings);
}

// ---------------------------------------------------------------------------
// Editor

const EDITOR_WRITES = new Set(['create', 'str_replace', 'insert', 'undo_edit']);

function assessEditor(argumentsObject: Record<string, unknown>, context: RuleContext): RiskAssessment {
  const { command, path } = argumentsObject;
  if (typeof path !== 'string' || path === '' || typeof command !== 'string' || (command !== 'view' && !EDITOR_WRITES.has(command))) {
    return assessmentOf([{ rule: 'invalid-arguments', words: 'str_replace_editor without a known command and a path' }], 'unknown');
  }
  const workingDir = normalizePath(context.workingDir);
  const resolved = resolvePath(path, workingDir);
  if (command === 'view') {
    return assessmentOf(isSecretPath(resolved, context) ? [{ rule: 'secret-read', words: `reads secret material (${path}) into the conversation` }] : []);
  }
  return assessmentOf(editorWriteFindings(resolved, path, workingDir, context));
}

function editorWriteFindings(resolved: string, path: string, workingDir: string, context: RuleContext): Finding[] {
  if (isProtectedWritePath(resolved, context) || (isStartupFile(resolved) && !isWithin(resolved, workingDir)) || /^\/etc\/cron|^\/var\/spool\/cron/.test(resolved)) {
    return [{ rule: 'system-write', words: `writes to a system or credential path (${path})` }];
  }
  const inside = isStrictlyWithin(resolved, workingDir);
  const relative = inside ? resolved.slice(workingDir.length) : resolved;
  const findings: Finding[] = [];
  if (/\/\.git\/hooks\/|\/\.git\/config$|\/\.github\/workflows\/|\/\.husky\//.test(relative)) {
    findings.push({ rule: 'hook-write', words: `writes a file that runs code later (${path})` });
  }
  if (!inside) findings.push({ rule: 'outside-write', words: `writes outside the working directory (${path})` });
  return findings;
}

// ---------------------------------------------------------------------------
// MCP

const MAX_SCANNED_STRINGS = 10_000;

function stringsIn(value: unknown, out: string[], depth: number): void {
  if (out.length >= MAX_SCANNED_STRINGS || depth > 20) return;
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) stringsIn(v, out, depth + 1);
  else if (value !== null && typeof value === 'object') for (const v of Object.values(value)) stringsIn(v, out, depth + 1);
}

function mcpFindings(annotations: NonNullable<AssessedAction['mcp']>['annotations'], argumentsObject: Record<string, unknown>): Finding[] {
  const findings: Finding[] = [];
  // MCP's defaults: a tool not marked read-only is destructive unless it says otherwise.
  if (annotations.destructive === true) findings.push({ rule: 'mcp-destructive', words: 'the server marks this tool as destructive' });
  else if (annotations.read_only !== true && annotations.destructive === undefined) {
    findings.push({ rule: 'mcp-destructive', words: 'the server does not say the tool is read-only or harmless, so MCP counts it as destructive' });
  } else if (annotations.read_only !== true) findings.push({ rule: 'mcp-side-effects', words: 'an external tool with side effects we cannot see' });
  const strings: string[] = [];
  stringsIn(argumentsObject, strings, 0);
  if (strings.some((s) => SECRET_TOKEN.test(s))) findings.push({ rule: 'mcp-secret-leak', words: 'secrets sent to an external tool' });
  return findings;
}
