/**
 * From the tokens of core's shell lexer (`lexShell`) to simple commands: pipelines split,
 * assignments, keywords and wrappers (`sudo`, `env`, `timeout`…) stripped, `sh -c`/`python -c`
 * bodies parsed in turn, and `cd` tracked so each command knows its working directory.
 */
import { lexShell, type ShellToken } from '@acs/core';
import { baseName, HOME, resolvePath } from './paths.js';

interface Redirect {
  op: string;
  target: string;
  heredoc?: string;
}

export interface SimpleCommand {
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

/** How deep `sh -c`, `eval` and substitutions inside one another are read; deeper ones are not. */
const MAX_NESTING = 6;

export const SHELLS = new Set(['sh', 'bash', 'zsh', 'dash', 'ksh', 'ash', 'fish', 'csh', 'tcsh', 'mksh']);
export const INTERPRETERS = new Set(['python', 'perl', 'ruby', 'node', 'php', 'deno', 'bun', 'lua', 'pwsh']);
export const DOWNLOADERS = new Set(['curl', 'wget', 'aria2c', 'http', 'https', 'fetch', 'lwp-download']);
export const NETCATS = new Set(['nc', 'ncat', 'netcat', 'socat', 'telnet']);
export const REMOTE_COPY = new Set(['scp', 'sftp', 'rsync']);
export const NETWORK_SENDERS = new Set([
  ...DOWNLOADERS,
  ...NETCATS,
  ...REMOTE_COPY,
  'ssh',
  'ftp',
  'lftp',
  'mail',
  'sendmail',
  'dig',
  'nslookup',
  'host',
  'ping',
]);
const SKIP_KEYWORDS = new Set([
  '!',
  '{',
  '}',
  'if',
  'then',
  'else',
  'elif',
  'fi',
  'do',
  'done',
  'while',
  'until',
  'time',
  'esac',
]);
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

export function programName(word: string): string {
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
    while (j < words.length && (words[j] as string).startsWith('-') && words[j] !== '--')
      j += valued.includes(words[j] as string) ? 2 : 1;
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
export function inlineCode(cmd: { program: string; words: string[] }): string | null {
  const flags =
    SHELLS.has(cmd.program) || cmd.program === 'su' || cmd.program === 'python'
      ? ['c']
      : cmd.program === 'php'
        ? ['r']
        : ['e', 'p'];
  if (!SHELLS.has(cmd.program) && !INTERPRETERS.has(cmd.program) && cmd.program !== 'su') return null;
  for (let i = 1; i < cmd.words.length; i++) {
    const w = cmd.words[i] as string;
    if (w === '--eval' || w === '--print' || w === '--command') return cmd.words[i + 1] ?? null;
    if (/^-[A-Za-z]+$/.test(w) && flags.includes(w[w.length - 1] as string)) return cmd.words[i + 1] ?? null;
    if (!w.startsWith('-') && cmd.program !== 'su') return null;
  }
  return null;
}

function splitPipelines(tokens: readonly ShellToken[]): ShellToken[][][] {
  const pipelines: ShellToken[][][] = [];
  let pipeline: ShellToken[][] = [];
  let command: ShellToken[] = [];
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

export interface ParseState {
  cwd: string;
  workingDir: string;
  /** Every command, nested ones included, in the order they were found. */
  all: SimpleCommand[];
}

export function parseLine(text: string, state: ParseState, depth: number): SimpleCommand[][] {
  if (depth > MAX_NESTING) return [];
  const out: SimpleCommand[][] = [];
  for (const raw of splitPipelines(lexShell(text))) {
    const pipeline: SimpleCommand[] = [];
    raw.forEach((tokens, stage) => {
      const cmd = buildCommand(tokens, stage, pipeline, state, depth);
      if (cmd) pipeline.push(cmd);
    });
    if (pipeline.length > 0) out.push(pipeline);
  }
  return out;
}

function buildCommand(
  tokens: readonly ShellToken[],
  stage: number,
  pipeline: SimpleCommand[],
  state: ParseState,
  depth: number,
): SimpleCommand | null {
  const words: string[] = [];
  const redirects: Redirect[] = [];
  const subs: string[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as ShellToken;
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
    bodies.push(
      printed.words
        .slice(1)
        .filter((w) => !w.startsWith('-'))
        .join(' '),
    );
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
