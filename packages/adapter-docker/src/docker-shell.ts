// Why this file is over 400 lines: the persistent shell (one bash per conversation, commands
// framed by markers, soft timeouts, input while a command runs, output clipping) written against
// Docker's attach stream. It is written a second time for the fake runtime; making it one shell
// over the runtime's spawn, shared by every runtime, is the open part of issue 14 (item 8).
import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type Docker from 'dockerode';
import { errAsync, ResultAsync } from 'neverthrow';
import { clipShellOutput, DEFAULT_SHELL_MAX_OUTPUT_CHARS, DEFAULT_SHELL_SOFT_TIMEOUT_MS } from '@acs/core';
import type { SandboxRuntimeError, SandboxShell, ShellOutput } from '@acs/core/ports';
import { untilStreamEnds } from './stream-end.js';

/** What a Docker shell needs from its runtime. */
export interface DockerShellOptions {
  container: Docker.Container;
  sandboxId: string;
  /** The resolved, absolute directory the shell starts in. */
  cwd: string;
  env: Readonly<Record<string, string>>;
  maxOutputChars?: number;
  /** Where cut output is saved (the runtime's writeFile for this sandbox). */
  writeFile(path: string, content: Uint8Array): ResultAsync<void, SandboxRuntimeError>;
  /** Maps an engine error to the runtime's error shape. */
  toError(operation: string, error: unknown): SandboxRuntimeError;
}

/** How long the shell may take to answer its set-up line. */
const READY_TIMEOUT_MS = 15_000;
/** How long interrupt() waits for the shell to come back after Ctrl-C. */
const INTERRUPT_WAIT_MS = 5_000;
/** After Ctrl-C, how long before interrupt() looks whether bash lost the command line (see interrupt). */
const NUDGE_AFTER_MS = 500;
/** Longer command lines go through a file: a terminal in canonical mode keeps at most 4095 characters of a typed line. */
const MAX_TYPED_LINE = 3_000;
/** At most this much of one command's output is kept in memory (and in its spill file); beyond it only the tail. */
const MAX_CAPTURE_CHARS = 16 * 1024 * 1024;

/**
 * Opens a persistent shell in a container: one long-lived `docker exec` of an interactive
 * bash on a TTY (`bash --noprofile --norc --noediting -i`). How it works:
 *
 * - Completion and exit codes come from a marker, not from guessing at prompts: PS1 and PS2
 *   are empty, the terminal does not echo (`stty -echo`), and `PROMPT_COMMAND` writes
 *   `__ACS_<nonce>_DONE_<command id>_<exit code>_<base64 of $PWD>__` on a line of its own to
 *   /dev/tty before every prompt (so `exec >file` in a command does not hide it). The nonce is
 *   random per shell and never typed into the terminal: the set-up line assembles the marker
 *   with printf from pieces, so neither its echo nor command output can fake a marker.
 * - A command line is typed as `__acs_id=<n>; eval $'<command, quoted>'`: the quoted form is
 *   printable ASCII only (no tab completion, control characters or history expansion get in
 *   the way), and an incomplete command (an unclosed quote) is a syntax error with exit code 2
 *   rather than a shell waiting at PS2. `cd`, `export`, functions and aliases persist: eval runs
 *   in the shell itself. Lines longer than 3,000 characters go through a file in /tmp.
 * - Without readline (`--noediting`) the terminal stays in canonical mode: a typed line reaches
 *   bash whole or, when Ctrl-C flushes it, not at all, never in part. With readline a Ctrl-C
 *   right after a line was typed could be swallowed or leave half a line to run.
 * - The TTY merges stdout and stderr as a terminal would; `\r` and bracketed-paste sequences
 *   are removed. Output is bounded per call (head and tail); the full output of the command
 *   goes to /tmp/acs-shell-output-<shell>-<n>.log in the sandbox, named in `spilled_to`.
 * - Ctrl-C is the byte 0x03 written to the TTY; the terminal driver signals the foreground
 *   process group, and bash reports 130. If the shell is not back after 0.5 s, a probe beside
 *   the shell looks at the terminal's foreground process group to repair two races (see
 *   interrupt). A command that ignores Ctrl-C is still running after 5 s; interrupting it
 *   again kills the terminal's foreground process group (SIGKILL, exit code 137).
 *
 * Limits: a command that replaces the shell (`exec bash`), changes `PROMPT_COMMAND`, or takes
 * over the terminal for good (a full-screen editor) never reports completion; interrupt it.
 * Input sent with sendInput is not echoed, and a single line of it is limited to 4095
 * characters by the terminal. Output from background jobs that arrives between commands is
 * shown with the next command's output; job control messages ("[1] 123", "Done") appear as in
 * a terminal.
 */
export async function openDockerShell(options: DockerShellOptions): Promise<SandboxShell> {
  const exec = await options.container.exec({
    Cmd: ['bash', '--noprofile', '--norc', '--noediting', '-i'],
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Tty: true,
    WorkingDir: options.cwd,
    Env: Object.entries({ TERM: 'dumb', PAGER: 'cat', GIT_PAGER: 'cat', ...options.env }).map(([k, v]) => `${k}=${v}`),
  });
  const stream = await exec.start({ hijack: true, stdin: true, Tty: true });
  const shell = new DockerShell(exec, stream, options);
  try {
    await shell.ready();
  } catch (error) {
    stream.destroy();
    throw error;
  }
  return shell;
}

// Terminal control sequences: the escape character is what they are about.
// eslint-disable-next-line no-control-regex
const BRACKETED_PASTE = /\x1b\[\?2004[hl]/g;
// eslint-disable-next-line no-control-regex
const ESCAPE_SEQUENCE = /\x1b\[[0-9;?]*[A-Za-z]/g;

class ShellFailure extends Error {}

/** One command's output: all of it up to MAX_CAPTURE_CHARS, then only the tail. */
class Capture {
  #kept = '';
  #tail = '';
  total = 0;
  constructor(private readonly tailChars: number) {}

  append(text: string) {
    if (text === '') return;
    const room = MAX_CAPTURE_CHARS - this.#kept.length;
    if (room > 0) this.#kept += text.slice(0, room);
    if (text.length > room) this.#tail = (this.#tail + text.slice(Math.max(0, room))).slice(-this.tailChars);
    this.total += text.length;
  }

  /** The output from logical offset `from` to now. */
  since(from: number): string {
    if (this.total <= MAX_CAPTURE_CHARS) return this.#kept.slice(from);
    const tailStart = this.total - this.#tail.length;
    if (from >= tailStart) return this.#tail.slice(from - tailStart);
    const lost = tailStart - Math.max(from, MAX_CAPTURE_CHARS);
    return `${this.#kept.slice(from)}${lost > 0 ? `\n[… ${lost} characters were not kept …]\n` : ''}${this.#tail}`;
  }

  full(): string {
    return this.since(0);
  }
}

interface Command {
  id: number;
  line: string;
  capture: Capture;
  /** How much output callers have been given. */
  taken: number;
  done: { exit_code: number | null; cwd: string | null } | null;
  /** A caller has been told it finished. */
  doneReported: boolean;
  spillPath: string | null;
  /** Ctrl-C has been sent; a second interrupt kills the foreground process group. */
  interrupted: boolean;
  /** The command line has been written to the terminal. */
  typed: boolean;
}

class DockerShell implements SandboxShell {
  readonly #nonce = randomBytes(12).toString('hex');
  readonly #decoder = new StringDecoder('utf8');
  readonly #marker: RegExp;
  readonly #markerHead: string;
  readonly #maxOutput: number;
  #scan = '';
  /** How many characters at the start of #scan were already given out (a held-back newline, see #report). */
  #released = 0;
  #isReady = false;
  #readyCwd: string | null = null;
  #pid: number | null = null;
  /** Output that arrived while no command ran (background jobs); it goes with the next command's output. */
  #idle = '';
  #preReady = '';
  #current: Command | null = null;
  #last: { exit_code: number | null; cwd: string | null } = { exit_code: null, cwd: null };
  #seq = 0;
  #busy = false;
  #ended: string | null = null;
  #closed = false;
  readonly #listeners = new Set<() => void>();

  constructor(
    private readonly exec: Docker.Exec,
    private readonly stream: Duplex,
    private readonly options: DockerShellOptions,
  ) {
    this.#maxOutput = Math.max(200, options.maxOutputChars ?? DEFAULT_SHELL_MAX_OUTPUT_CHARS);
    this.#marker = new RegExp(`\\n__ACS_${this.#nonce}_(?:DONE_(\\d+)_(\\d+)_([A-Za-z0-9+/=]*)|PID_(\\d+))__\\n`);
    this.#markerHead = `\n__ACS_${this.#nonce}_`;
    stream.on('data', (chunk: Buffer | string) => this.#onData(typeof chunk === 'string' ? Buffer.from(chunk) : chunk));
    stream.on('end', () => this.#onEnd('the shell has exited'));
    stream.on('close', () => this.#onEnd('the shell has exited'));
    stream.on('error', (error: Error) => this.#onEnd(`the connection to the shell failed: ${error.message}`));
  }

  /** Types the set-up line and waits for the first marker. */
  async ready(): Promise<void> {
    await this.exec.resize({ h: 50, w: 200 }).catch(() => undefined);
    const setup = [
      'stty -echo 2>/dev/null',
      'set +H',
      'set +o history',
      'unset HISTFILE',
      "PS1=''",
      "PS2=''",
      "PS0=''",
      `__acs_n=${this.#nonce}`,
      '__acs_id=0',
      // The marker is assembled by printf, so the typed text never contains it.
      `__acs_mark() { printf '\\n__ACS_%s_DONE_%s_%s_%s__\\n' "$__acs_n" "$__acs_id" "$1" "$(printf %s "$PWD" | base64 -w0)" >/dev/tty; }`,
      "PROMPT_COMMAND='__acs_mark $?'",
      `printf '\\n__ACS_%s_PID_%s__\\n' "$__acs_n" "$$" >/dev/tty`,
    ].join('; ');
    this.stream.write(`${setup}\n`);
    const started = Date.now();
    await this.#until(() => this.#isReady || this.#ended !== null, READY_TIMEOUT_MS);
    if (!this.#isReady) {
      const said = this.#preReady.replace(ESCAPE_SEQUENCE, '').trim().slice(-500);
      const why = this.#ended ?? `no answer within ${Math.round((Date.now() - started) / 1000)} s`;
      throw new ShellFailure(`cannot open a shell in sandbox ${this.options.sandboxId}: ${why}${said ? `; it said: ${said}` : ''}`);
    }
    this.#last = { exit_code: 0, cwd: this.#readyCwd };
  }

  run(command: string, options: { softTimeoutMs?: number } = {}): ResultAsync<ShellOutput, SandboxRuntimeError> {
    const refused = this.#refuseIfUnusable() ?? (this.#busy ? 'another call on this shell is still in progress' : null);
    if (refused) return failed(refused);
    const running = this.#current && !this.#current.done ? this.#current : null;
    if (running) {
      return failed(
        `a command is still running (${abbreviate(running.line)}); wait for it, send it input, or interrupt it before running another`,
      );
    }
    const id = ++this.#seq;
    const cmd: Command = {
      id,
      line: command,
      capture: new Capture(this.#maxOutput),
      taken: 0,
      done: null,
      doneReported: false,
      spillPath: null,
      interrupted: false,
      typed: false,
    };
    // Current at once, so that an interrupt from now on cancels it.
    this.#current = cmd;
    return this.#exclusive('run', async () => {
      let line = `__acs_id=${id}; eval ${ansiCQuote(command)}`;
      try {
        await this.#checkContainer();
        if (line.length > MAX_TYPED_LINE) {
          const path = `/tmp/acs-shell-command-${this.#nonce.slice(0, 8)}-${id}.sh`;
          const written = await this.options.writeFile(path, Buffer.from(command, 'utf8'));
          if (written.isErr()) throw new ShellFailure(`cannot pass the command to the shell: ${written.error.message}`);
          line = `__acs_id=${id}; __acs_cmd="$(< ${path})"; command rm -f ${path}; eval "$__acs_cmd"`;
        }
      } catch (error) {
        if (this.#current === cmd) this.#current = null;
        throw error;
      }
      if (!cmd.done) {
        cmd.capture.append(this.#idle);
        this.#idle = '';
        cmd.typed = true;
        this.stream.write(`${line}\n`);
        await this.#waitFor(cmd, options.softTimeoutMs ?? DEFAULT_SHELL_SOFT_TIMEOUT_MS);
      }
      return this.#report(cmd);
    });
  }

  wait(ms: number): ResultAsync<ShellOutput, SandboxRuntimeError> {
    const cmd = this.#current;
    if (!cmd || cmd.doneReported) return failed(this.#nothingRunning());
    if (this.#busy) return failed('another call on this shell is still in progress');
    return this.#exclusive('wait', async () => {
      await this.#waitFor(cmd, ms);
      return this.#report(cmd);
    });
  }

  sendInput(text: string, waitMs = 1_000): ResultAsync<ShellOutput, SandboxRuntimeError> {
    const cmd = this.#current;
    if (!cmd || cmd.done) return failed(this.#nothingRunning());
    const refused = this.#refuseIfUnusable() ?? (this.#busy ? 'another call on this shell is still in progress' : null);
    if (refused) return failed(refused);
    return this.#exclusive('sendInput', async () => {
      this.stream.write(text);
      await this.#waitFor(cmd, waitMs);
      return this.#report(cmd);
    });
  }

  interrupt(): ResultAsync<ShellOutput, SandboxRuntimeError> {
    const cmd = this.#current;
    if (!cmd || cmd.doneReported) {
      const refused = this.#refuseIfUnusable();
      if (refused) return failed(refused);
      // Nothing to interrupt: say how the shell stands.
      return ResultAsync.fromSafePromise(Promise.resolve({ output: '', ...this.#last, still_running: false, spilled_to: null }));
    }
    // Allowed while another call waits: that call then sees the command end.
    return ResultAsync.fromPromise(
      (async () => {
        if (!cmd.done && !cmd.typed) {
          // Not yet typed into the shell: it never will be.
          cmd.interrupted = true;
          cmd.done = { exit_code: 130, cwd: this.#last.cwd };
          this.#notify();
        } else if (!cmd.done && this.#ended === null) {
          const started = Date.now();
          if (cmd.interrupted) await this.#killForeground();
          else {
            cmd.interrupted = true;
            this.stream.write('\x03');
            await this.#waitFor(cmd, NUDGE_AFTER_MS);
            // Ctrl-C can get lost in a race with bash reading the line: (1) it arrives before bash
            // reads the line, the terminal drops the line, and bash may wait for input without a
            // new prompt; an empty line brings the prompt (and its marker) back. (2) bash takes
            // the signal as it starts the command, and the command runs anyway; one that would
            // have died of SIGINT (it neither ignores nor handles it) is sent Ctrl-C again.
            const foreground = cmd.done ? null : await this.#foreground().catch(() => null);
            if (foreground?.isShell) this.stream.write('\n');
            else if (foreground?.defaultSigint && !cmd.done) this.stream.write('\x03');
          }
          await this.#waitFor(cmd, INTERRUPT_WAIT_MS - (Date.now() - started));
        }
        return this.#report(cmd);
      })(),
      (error) => this.options.toError('interrupt', error),
    );
  }

  /** Who is in the terminal's foreground: the shell itself, or a command that SIGINT would kill. */
  async #foreground(): Promise<{ isShell: boolean; defaultSigint: boolean } | null> {
    if (this.#pid === null) return null;
    const script = [
      `read -r _ _ _ _ _ _ _ fg _ < /proc/${this.#pid}/stat || exit 1`,
      'echo "fg $fg"',
      'while read -r key value; do case "$key" in SigIgn:|SigCgt:) echo "$key $value";; esac; done < /proc/"$fg"/status',
    ].join('; ');
    const said = await this.#beside(script);
    const fields: Record<string, string | undefined> = {};
    for (const line of said.split('\n')) {
      const [key, value] = line.trim().split(/\s+/);
      if (key) fields[key] = value;
    }
    const fg = Number(fields.fg);
    if (!Number.isInteger(fg) || fg <= 0) return null;
    // Bit 2 of the masks is SIGINT.
    const has = (mask: string | undefined) => mask !== undefined && (parseInt(mask.slice(-1), 16) & 2) !== 0;
    return { isShell: fg === this.#pid, defaultSigint: fields['SigIgn:'] !== undefined && !has(fields['SigIgn:']) && !has(fields['SigCgt:']) };
  }

  /** SIGKILL to the terminal's foreground process group, for a command that ignored Ctrl-C (never the shell itself). */
  async #killForeground(): Promise<void> {
    if (this.#pid === null) return;
    const pid = this.#pid;
    const script = `read -r _ _ _ _ _ _ _ fg _ < /proc/${pid}/stat && [ "$fg" -gt 0 ] && [ "$fg" != ${pid} ] && kill -KILL -"$fg"`;
    await this.#beside(script);
  }

  /** Runs a small sh script in the sandbox beside the shell (not through it); what it printed. */
  async #beside(script: string): Promise<string> {
    const exec = await this.options.container.exec({ Cmd: ['sh', '-c', script], AttachStdout: true, AttachStderr: false, Tty: true });
    const stream = await exec.start({ hijack: true, stdin: false, Tty: true });
    let said = '';
    stream.on('data', (chunk: Buffer) => (said += chunk.toString('utf8')));
    await untilStreamEnds(stream, 5_000);
    stream.destroy();
    return said;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ended === null && this.#pid !== null) {
      // SIGHUP makes bash hang up its jobs and exit; the kill runs beside the shell, so it works while a command runs.
      await this.#beside(`kill -HUP ${this.#pid}`).catch(() => undefined);
      await this.#until(() => this.#ended !== null, 2_000);
    }
    this.stream.destroy();
  }

  #exclusive(operation: string, work: () => Promise<ShellOutput>): ResultAsync<ShellOutput, SandboxRuntimeError> {
    this.#busy = true;
    return ResultAsync.fromPromise(
      work().finally(() => {
        this.#busy = false;
      }),
      (error) => (error instanceof ShellFailure ? { type: 'failed', message: error.message } : this.options.toError(operation, error)),
    );
  }

  #refuseIfUnusable(): string | null {
    if (this.#closed) return 'this shell is closed; open a new one';
    if (this.#ended !== null) return `${this.#ended}${this.#last.exit_code !== null ? ` (exit code ${this.#last.exit_code})` : ''}; open a new one`;
    return null;
  }

  #nothingRunning(): string {
    return this.#refuseIfUnusable() ?? `no command is running (the last one ended with exit code ${this.#last.exit_code ?? 'unknown'}); use run`;
  }

  /** A paused or vanished sandbox is an error up front, rather than a command that silently never starts. */
  async #checkContainer(): Promise<void> {
    const info = await this.options.container.inspect();
    if (info.State.Paused) throw new ShellFailure(`sandbox ${this.options.sandboxId} is paused; resume it before running commands`);
    if (!info.State.Running) throw new ShellFailure(`sandbox ${this.options.sandboxId} is not running (its container is ${info.State.Status})`);
  }

  async #report(cmd: Command): Promise<ShellOutput> {
    const done = cmd.done;
    if (!done && this.#current === cmd && this.#scan === '\n' && this.#released === 0) {
      // A final newline is held back in case it starts the marker; a running command's caller
      // gets it now (should the marker follow, the command's output just gains that newline).
      cmd.capture.append('\n');
      this.#released = 1;
    }
    let output = cmd.capture.since(cmd.taken);
    cmd.taken = cmd.capture.total;
    if (done) {
      cmd.doneReported = true;
      this.#last = done;
    }
    let spilledTo: string | null = null;
    if (output.length > this.#maxOutput) {
      const path = (cmd.spillPath ??= `/tmp/acs-shell-output-${this.#nonce.slice(0, 8)}-${cmd.id}.log`);
      const saved = await this.options.writeFile(path, Buffer.from(cmd.capture.full(), 'utf8'));
      output = clipShellOutput(output, this.#maxOutput, saved.isOk() ? { path } : { error: saved.error.message });
      if (saved.isOk()) spilledTo = path;
    }
    return { output, exit_code: done?.exit_code ?? null, still_running: done === null, cwd: done?.cwd ?? null, spilled_to: spilledTo };
  }

  #waitFor(cmd: Command, ms: number): Promise<void> {
    return this.#until(() => cmd.done !== null, ms);
  }

  #until(condition: () => boolean, ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (condition()) return resolve();
      const finish = () => {
        clearTimeout(timer);
        this.#listeners.delete(check);
        resolve();
      };
      const check = () => {
        if (condition()) finish();
      };
      const timer = setTimeout(finish, Math.max(0, ms));
      this.#listeners.add(check);
    });
  }

  #notify() {
    for (const listener of [...this.#listeners]) listener();
  }

  #onData(chunk: Buffer) {
    this.#scan += this.#decoder.write(chunk).replace(/\r/g, '');
    this.#drain();
  }

  /** Splits what the terminal printed into command output and markers. */
  #drain() {
    for (;;) {
      const match = this.#marker.exec(this.#scan);
      if (match) {
        this.#emit(this.#scan.slice(Math.min(this.#released, match.index), match.index));
        this.#scan = this.#scan.slice(match.index + match[0].length);
        this.#released = 0;
        if (match[4] !== undefined) this.#pid = Number(match[4]);
        else this.#onMarker(Number(match[1]), Number(match[2]), decodeCwd(match[3] ?? ''));
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
      break;
    }
    this.#notify();
  }

  #couldBeMarker(text: string): boolean {
    if (text.length <= this.#markerHead.length) return this.#markerHead.startsWith(text);
    return text.length < 16_384 && text.startsWith(this.#markerHead) && /^[A-Za-z0-9+/=_]*$/.test(text.slice(this.#markerHead.length));
  }

  #emit(raw: string) {
    if (raw === '') return;
    const text = raw.replace(BRACKETED_PASTE, '');
    if (!this.#isReady) this.#preReady = (this.#preReady + text).slice(-4_000);
    else if (this.#current && !this.#current.done) this.#current.capture.append(text);
    else this.#idle = (this.#idle + text).slice(-this.#maxOutput);
  }

  #onMarker(id: number, exitCode: number, cwd: string) {
    if (!this.#isReady) {
      if (id === 0) {
        this.#isReady = true;
        this.#readyCwd = cwd;
      }
      return;
    }
    const cmd = this.#current;
    if (!cmd || cmd.done) return;
    if (cmd.id === id) cmd.done = { exit_code: exitCode, cwd };
    // A prompt that still carries an earlier id after Ctrl-C: the Ctrl-C reached bash before it
    // had read the line, and the terminal dropped the line; the command never ran. Otherwise
    // such a marker (a Ctrl-C or an empty line at an idle prompt) is ignored.
    else if (cmd.interrupted && id < cmd.id) cmd.done = { exit_code: 130, cwd };
  }

  #onEnd(reason: string) {
    if (this.#ended !== null) return;
    this.#ended = this.#closed ? 'this shell is closed' : reason;
    this.#scan += this.#decoder.end().replace(/\r/g, '');
    this.#emit(this.#scan.slice(this.#released));
    this.#scan = '';
    this.#released = 0;
    const cmd = this.#current && !this.#current.done ? this.#current : null;
    void this.exec
      .inspect()
      .then((info) => info.ExitCode ?? null)
      .catch(() => null)
      .then((exitCode) => {
        this.#last = { exit_code: exitCode, cwd: null };
        if (cmd) cmd.done = { exit_code: exitCode, cwd: null };
        this.#notify();
      });
    this.#notify();
  }
}

function failed(message: string): ResultAsync<ShellOutput, SandboxRuntimeError> {
  return errAsync({ type: 'failed', message });
}

function abbreviate(command: string): string {
  const line = command.replace(/\s+/g, ' ').trim();
  return line.length > 60 ? `${line.slice(0, 57)}…` : line;
}

function decodeCwd(base64: string): string {
  return Buffer.from(base64, 'base64').toString('utf8');
}

/** Bash's $'…' quoting with only printable ASCII inside: every other byte as \xHH. */
function ansiCQuote(text: string): string {
  let quoted = "$'";
  for (const byte of Buffer.from(text, 'utf8')) {
    if (byte === 0x5c) quoted += '\\\\';
    else if (byte === 0x27) quoted += "\\'";
    else if (byte >= 0x20 && byte < 0x7f) quoted += String.fromCharCode(byte);
    else if (byte !== 0) quoted += `\\x${byte.toString(16).padStart(2, '0')}`;
  }
  return `${quoted}'`;
}
