/**
 * The lines the persistent shell types into bash, and the markers bash prints back. The shell
 * (persistent-shell.ts) is the only writer; a runtime that plays bash without running it (a test
 * double) reads the lines with `parseShellLine` and answers with `shellMarker`.
 *
 * - Set-up: one line that silences the terminal, empties the prompts, stores the nonce in
 *   `__acs_n` and installs `PROMPT_COMMAND`, which prints before every prompt, on /dev/tty:
 *   `\n__ACS_<nonce>_DONE_<command id>_<exit code>_<base64 of $PWD>__\n`. The line ends by
 *   printing `\n__ACS_<nonce>_PID_<bash's pid>__\n`. The nonce is never typed whole in a marker's
 *   shape: printf assembles the marker from pieces, so no echo or output can fake one.
 * - A command: `__acs_id=<n>; eval $'<the command, quoted>'`, or, for a long one written to a file
 *   first, `__acs_id=<n>; __acs_cmd="$(< <path>)"; command rm -f <path>; eval "$__acs_cmd"`.
 * - An empty line: bash prints the prompt (and so the marker) again.
 * - A sync line, `__acs_id=<n>`: runs nothing; its marker (exit code 0) says bash has read
 *   everything typed before it. The shell types one after an interrupted command.
 */

/** The set-up line for a shell with this nonce (hex). */
export function shellSetupLine(nonce: string): string {
  return [
    'stty -echo rows 50 cols 200 2>/dev/null',
    'set +H',
    'set +o history',
    'unset HISTFILE',
    "PS1=''",
    "PS2=''",
    "PS0=''",
    `__acs_n=${nonce}`,
    '__acs_id=0',
    `__acs_mark() { printf '\\n__ACS_%s_DONE_%s_%s_%s__\\n' "$__acs_n" "$__acs_id" "$1" "$(printf %s "$PWD" | base64 -w0)" >/dev/tty; }`,
    "PROMPT_COMMAND='__acs_mark $?'",
    `printf '\\n__ACS_%s_PID_%s__\\n' "$__acs_n" "$$" >/dev/tty`,
  ].join('; ');
}

/** The line that runs `command` as command number `id`. */
export function shellCommandLine(id: number, command: string): string {
  return `__acs_id=${id}; eval ${ansiCQuote(command)}`;
}

/** The line that runs the command stored in the file at `path` (removed as it is read) as number `id`. */
export function shellFileCommandLine(id: number, path: string): string {
  return `__acs_id=${id}; __acs_cmd="$(< ${path})"; command rm -f ${path}; eval "$__acs_cmd"`;
}

/** The line that only moves the marker to `id`: once its marker is back, nothing typed before it is pending. */
export function shellSyncLine(id: number): string {
  return `__acs_id=${id}`;
}

/** A line the shell typed, as a bash player sees it. */
export type ShellLine =
  | { kind: 'setup'; nonce: string }
  | { kind: 'command'; id: number; command: string }
  | { kind: 'command-file'; id: number; path: string }
  | { kind: 'empty' }
  | { kind: 'sync'; id: number }
  | { kind: 'other'; line: string };

/** What a typed line asks for (for runtimes that play bash rather than run it). */
export function parseShellLine(line: string): ShellLine {
  if (line.trim() === '') return { kind: 'empty' };
  const sync = /^__acs_id=(\d+)$/.exec(line);
  if (sync?.[1]) return { kind: 'sync', id: Number(sync[1]) };
  const setup = /(?:^|; )__acs_n=([0-9a-f]+);/.exec(line);
  if (setup?.[1] && line.includes('PROMPT_COMMAND=')) return { kind: 'setup', nonce: setup[1] };
  const command = /^__acs_id=(\d+); eval (\$'.*')$/.exec(line);
  if (command?.[1] && command[2]) {
    const unquoted = ansiCUnquote(command[2]);
    if (unquoted !== null) return { kind: 'command', id: Number(command[1]), command: unquoted };
  }
  const file = /^__acs_id=(\d+); __acs_cmd="\$\(< (\S+)\)"; command rm -f \S+; eval "\$__acs_cmd"$/.exec(line);
  if (file?.[1] && file[2]) return { kind: 'command-file', id: Number(file[1]), path: file[2] };
  return { kind: 'other', line };
}

/** The marker bash prints before a prompt: command `id` ended with `exitCode` in `cwd`. */
export function shellMarker(nonce: string, id: number, exitCode: number, cwd: string): string {
  return `\n__ACS_${nonce}_DONE_${id}_${exitCode}_${toBase64(cwd)}__\n`;
}

/** Matches one marker of the shell with this nonce: groups 1-3 a DONE marker's id, exit code and cwd (base64), group 4 a PID marker's pid. */
export function shellMarkerPattern(nonce: string): RegExp {
  return new RegExp(`\\n__ACS_${nonce}_(?:DONE_(\\d+)_(\\d+)_([A-Za-z0-9+/=]*)|PID_(\\d+))__\\n`);
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function toBase64(text: string): string {
  let binary = '';
  for (const byte of encoder.encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary);
}

export function fromBase64(base64: string): string {
  try {
    return decoder.decode(Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)));
  } catch {
    return '';
  }
}

/** Bash's $'…' quoting with only printable ASCII inside: every other byte as \xHH (NUL dropped). */
function ansiCQuote(text: string): string {
  let quoted = "$'";
  for (const byte of encoder.encode(text)) {
    if (byte === 0x5c) quoted += '\\\\';
    else if (byte === 0x27) quoted += "\\'";
    else if (byte >= 0x20 && byte < 0x7f) quoted += String.fromCharCode(byte);
    else if (byte !== 0) quoted += `\\x${byte.toString(16).padStart(2, '0')}`;
  }
  return `${quoted}'`;
}

/** The inverse of ansiCQuote (only the escapes it writes); null for anything else. */
function ansiCUnquote(quoted: string): string | null {
  if (!quoted.startsWith("$'") || !quoted.endsWith("'")) return null;
  const body = quoted.slice(2, -1);
  const bytes: number[] = [];
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i);
    if (c !== 0x5c) {
      if (c === 0x27) return null;
      bytes.push(c);
      continue;
    }
    const next = body[i + 1];
    if (next === '\\' || next === "'") {
      bytes.push(next.charCodeAt(0));
      i += 1;
    } else if (next === 'x' && /^[0-9a-f]{2}$/.test(body.slice(i + 2, i + 4))) {
      bytes.push(parseInt(body.slice(i + 2, i + 4), 16));
      i += 3;
    } else return null;
  }
  return decoder.decode(new Uint8Array(bytes));
}
