// Why this file is over 400 lines: it is the persistent shell, one state machine (typing lines,
// soft timeouts, input while a command runs, the interrupt races, output bounds and spill files)
// whose parts share the command in flight. What it types and reads is in shell-protocol.ts, how
// it reads the terminal in shell-terminal.ts, the output buffer in shell-capture.ts, the probes
// it runs beside itself in shell-probes.ts, and how its calls fail in shell-failures.ts.
// Why its timers are real time and not the Clock port: they bound waits for a real process's
// output (a command's soft timeout, the shell's answer to Ctrl-C). A manual clock's sleep ends at
// once, which would make every command "still running" the moment it starts; the domain's own
// time (records, ages, idle pausing) goes through the Clock.
import { randomBytes } from 'node:crypto';
import { err, ok, ResultAsync, type Result } from 'neverthrow';
import { resultAsync } from '../result.js';
import type { SandboxProcess, SandboxRuntime, SandboxRuntimeError } from './runtime.js';
import {
  clipShellOutput,
  DEFAULT_SHELL_MAX_OUTPUT_CHARS,
  DEFAULT_SHELL_SOFT_TIMEOUT_MS,
  type OpenShellOptions,
  type SandboxShell,
  type ShellOutput,
} from './shell.js';
import { ShellCapture } from './shell-capture.js';
import { closedShell, fail, notRunning, refusal, ShellFailure, toRuntimeError, whyEnded } from './shell-failures.js';
import { ShellProbes } from './shell-probes.js';
import { shellCommandLine, shellFileCommandLine, shellSetupLine, shellSyncLine } from './shell-protocol.js';
import { ESCAPE_SEQUENCE, ShellTerminal } from './shell-terminal.js';

/** How long the shell may take to answer its set-up line. */
const READY_TIMEOUT_MS = 15_000;
/** How long interrupt() waits for the shell to come back after Ctrl-C. */
const INTERRUPT_WAIT_MS = 5_000;
/** After Ctrl-C, how often interrupt() looks whether a race lost it (see interrupt). */
const REPAIR_EVERY_MS = 500;
/** How long a sync line waits for its marker before it is typed again (see #sync), and how long the sync may take. */
const SYNC_RETRY_MS = 1_000;
const SYNC_WAIT_MS = 10_000;
/** Longer command lines go through a file: a terminal in canonical mode keeps at most 4095 characters of a typed line. */
const MAX_TYPED_LINE = 3_000;
/** How long close() gives the shell to hang up before the process is killed. */
const HANGUP_WAIT_MS = 2_000;

/**
 * Opens a persistent shell in a sandbox, built only on the runtime port: `spawn` (with a
 * terminal) runs `bash --noprofile --norc --noediting -i`, `exec` runs small probes beside it,
 * `writeFile` passes long command lines and keeps cut output, `inspect` says why a command
 * cannot run. Every runtime gets the same shell. How it works:
 *
 * - Completion and exit codes come from a marker, not from guessing at prompts: PS1 and PS2
 *   are empty, the terminal does not echo, and `PROMPT_COMMAND` prints a marker with a random
 *   per-shell nonce, the command's id, its exit code and the working directory on /dev/tty
 *   before every prompt (so `exec >file` in a command does not hide it). shell-protocol.ts has
 *   the lines and markers.
 * - A command line is typed as `__acs_id=<n>; eval $'<command, quoted>'`: printable ASCII only
 *   (no tab completion, control characters or history expansion get in the way), and an
 *   incomplete command (an unclosed quote) is a syntax error with exit code 2 rather than a
 *   shell waiting at PS2. `cd`, `export`, functions and aliases persist: eval runs in the shell
 *   itself. Lines longer than 3,000 characters go through a file in /tmp.
 * - Without readline (`--noediting`) the terminal stays in canonical mode: a typed line reaches
 *   bash whole or, when Ctrl-C flushes it, not at all. (Bash itself can still be caught by a
 *   Ctrl-C halfway through parsing one; see the sync below.)
 * - The terminal merges stdout and stderr; `\r` and bracketed-paste sequences are removed.
 *   Output is bounded per call (head and tail); the full output of the command goes to
 *   /tmp/acs-shell-output-<shell>-<n>.log in the sandbox, named in `spilled_to`.
 * - Ctrl-C is the byte 0x03 written to the terminal; the terminal signals its foreground
 *   process group, and bash reports 130. If the shell is not back after 0.5 s, a probe beside
 *   the shell repairs two races (see interrupt). After an interrupt, the next command waits for
 *   a sync line's marker (see #sync): what bash still held of the race is cleared first. A
 *   command that ignores Ctrl-C is still running after 5 s; interrupting it again kills the
 *   terminal's foreground process group (SIGKILL, exit code 137).
 *
 * Limits: a command that replaces the shell (`exec bash`), changes `PROMPT_COMMAND`, or takes
 * over the terminal for good (a full-screen editor) never reports completion; interrupt it.
 * Input sent with sendInput is not echoed, and a single line of it is limited to 4095
 * characters by the terminal. Output from background jobs that arrives between commands is
 * shown with the next command's output.
 */
export function openSandboxShell(
  runtime: SandboxRuntime,
  sandboxId: string,
  options: OpenShellOptions = {},
): ResultAsync<SandboxShell, SandboxRuntimeError> {
  return resultAsync(openShell(runtime, sandboxId, options));
}

async function openShell(
  runtime: SandboxRuntime,
  sandboxId: string,
  options: OpenShellOptions,
): Promise<Result<SandboxShell, SandboxRuntimeError>> {
  const spawned = await runtime.spawn(sandboxId, {
    command: ['bash', '--noprofile', '--norc', '--noediting', '-i'],
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    env: { TERM: 'dumb', PAGER: 'cat', GIT_PAGER: 'cat', ...options.env },
    tty: true,
  });
  if (spawned.isErr()) return err(spawned.error);
  const shell = new PersistentShell(runtime, sandboxId, spawned.value, options);
  const failed = await shell.ready().then(() => null, toRuntimeError);
  if (failed === null) return ok(shell);
  await spawned.value.kill();
  return err(failed);
}

interface Command {
  id: number;
  line: string;
  capture: ShellCapture;
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

class PersistentShell implements SandboxShell {
  readonly #nonce = randomBytes(12).toString('hex');
  readonly #terminal: ShellTerminal;
  readonly #probes: ShellProbes;
  readonly #maxOutput: number;
  #isReady = false;
  #readyCwd: string | null = null;
  #pid: number | null = null;
  /** Output that arrived while no command ran (background jobs); it goes with the next command's output. */
  #idle = '';
  #preReady = '';
  #current: Command | null = null;
  #last: { exit_code: number | null; cwd: string | null } = { exit_code: null, cwd: null };
  #seq = 0;
  /** A Ctrl-C was sent, or input a command may leave unread: the next run first makes sure bash has nothing pending (see #sync). */
  #unsettled = false;
  /** The sync line in flight and whether its marker is back. */
  #syncing: { id: number; back: boolean } | null = null;
  /** How many DONE markers bash has printed. */
  #markersSeen = 0;
  #busy = false;
  /** Set once the shell's process has ended: why a call cannot be made any more. */
  #ended: SandboxRuntimeError | null = null;
  /** Set while #onEnd asks the runtime why the shell's process ended (#ended says only that it did until then). */
  #explaining: Promise<void> | null = null;
  #closed = false;
  readonly #listeners = new Set<() => void>();

  constructor(
    private readonly runtime: SandboxRuntime,
    private readonly sandboxId: string,
    private readonly process: SandboxProcess,
    options: OpenShellOptions,
  ) {
    this.#maxOutput = Math.max(200, options.maxOutputChars ?? DEFAULT_SHELL_MAX_OUTPUT_CHARS);
    this.#terminal = new ShellTerminal(this.#nonce, {
      text: (text) => this.#onText(text),
      marker: (id, exitCode, cwd) => this.#onMarker(id, exitCode, cwd),
      pid: (pid) => (this.#pid = pid),
    });
    this.#probes = new ShellProbes(runtime, sandboxId);
    // A terminal merges the two; a runtime that kept them apart gets them in arrival order.
    process.onStdout((chunk) => this.#onData(chunk));
    process.onStderr((chunk) => this.#onData(chunk));
    void process.exited.then(({ exit_code }) => this.#onEnd(exit_code));
  }

  /** Types the set-up line and waits for the first marker. */
  async ready(): Promise<void> {
    await this.#write(`${shellSetupLine(this.#nonce)}\n`);
    const started = Date.now();
    await this.#until(() => this.#isReady || this.#ended !== null, READY_TIMEOUT_MS);
    if (!this.#isReady) {
      const said = this.#preReady.replace(ESCAPE_SEQUENCE, '').trim().slice(-500);
      const why = this.#ended?.message ?? `no answer within ${Math.round((Date.now() - started) / 1000)} s`;
      throw fail(`cannot open a shell in sandbox ${this.sandboxId}: ${why}${said ? `; it said: ${said}` : ''}`);
    }
    this.#last = { exit_code: 0, cwd: this.#readyCwd };
  }

  run(command: string, options: { softTimeoutMs?: number } = {}): ResultAsync<ShellOutput, SandboxRuntimeError> {
    // The shell's process has just ended and why is being asked of the runtime: answer with that.
    const explaining = this.#explaining;
    if (explaining) return ResultAsync.fromSafePromise(explaining).andThen(() => this.run(command, options));
    const refused = this.#refuseIfUnusable() ?? (this.#busy ? 'another call on this shell is still in progress' : null);
    if (refused) return refusal(refused);
    const running = this.#current && !this.#current.done ? this.#current : null;
    if (running) {
      return refusal(
        `a command is still running (${abbreviate(running.line)}); wait for it, send it input, or interrupt it before running another`,
      );
    }
    const id = ++this.#seq;
    const cmd: Command = {
      id,
      line: command,
      capture: new ShellCapture(this.#maxOutput),
      taken: 0,
      done: null,
      doneReported: false,
      spillPath: null,
      interrupted: false,
      typed: false,
    };
    // Current at once, so that an interrupt from now on cancels it.
    this.#current = cmd;
    return this.#exclusive(async () => {
      let line = shellCommandLine(id, command);
      try {
        await this.#checkSandbox();
        if (line.length > MAX_TYPED_LINE) {
          const path = `/tmp/acs-shell-command-${this.#nonce.slice(0, 8)}-${id}.sh`;
          const written = await this.runtime.writeFile(this.sandboxId, path, new TextEncoder().encode(command));
          if (written.isErr()) throw fail(`cannot pass the command to the shell: ${written.error.message}`);
          line = shellFileCommandLine(id, path);
        }
      } catch (error) {
        if (this.#current === cmd) this.#current = null;
        throw error;
      }
      if (this.#unsettled && !cmd.done) await this.#sync();
      if (!cmd.done) {
        cmd.capture.append(this.#idle);
        this.#idle = '';
        cmd.typed = true;
        await this.#write(`${line}\n`);
        await this.#waitFor(cmd, options.softTimeoutMs ?? DEFAULT_SHELL_SOFT_TIMEOUT_MS);
      }
      return this.#report(cmd);
    });
  }

  wait(ms: number): ResultAsync<ShellOutput, SandboxRuntimeError> {
    const cmd = this.#current;
    if (!cmd || cmd.doneReported) return refusal(this.#nothingRunning());
    if (this.#busy) return refusal('another call on this shell is still in progress');
    return this.#exclusive(async () => {
      await this.#waitFor(cmd, ms);
      return this.#report(cmd);
    });
  }

  sendInput(text: string, waitMs = 1_000): ResultAsync<ShellOutput, SandboxRuntimeError> {
    const cmd = this.#current;
    if (!cmd || cmd.done) return refusal(this.#nothingRunning());
    const refused = this.#refuseIfUnusable() ?? (this.#busy ? 'another call on this shell is still in progress' : null);
    if (refused) return refusal(refused);
    return this.#exclusive(async () => {
      // Input the command leaves unread is read by bash once the command ends: sync before the next one.
      this.#unsettled = true;
      await this.#write(text);
      await this.#waitFor(cmd, waitMs);
      return this.#report(cmd);
    });
  }

  interrupt(): ResultAsync<ShellOutput, SandboxRuntimeError> {
    const cmd = this.#current;
    if (!cmd || cmd.doneReported) {
      const refused = this.#refuseIfUnusable();
      if (refused) return refusal(refused);
      // Nothing to interrupt: say how the shell stands.
      return ResultAsync.fromSafePromise(
        Promise.resolve({ output: '', ...this.#last, still_running: false, spilled_to: null }),
      );
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
          const deadline = Date.now() + INTERRUPT_WAIT_MS;
          if (cmd.interrupted) await this.#probes.killForeground(this.#pid);
          else {
            cmd.interrupted = true;
            this.#unsettled = true;
            await this.#write('\x03');
            // Ctrl-C can get lost in a race with bash reading the line: (1) it arrives before bash
            // reads the line, the terminal drops the line, and bash may wait for input without a
            // new prompt, or even with half the line parsed (inside a quote it never closes); a
            // Ctrl-C with bash in the foreground brings the prompt (and its marker) back. (2) bash
            // takes the signal as it starts the command, and the command runs anyway; one that
            // would die of SIGINT (it neither ignores nor handles it) is sent SIGINT beside the
            // shell. Whatever bash still holds of the race afterwards, the next run's sync clears.
            while (!cmd.done && Date.now() + REPAIR_EVERY_MS < deadline) {
              await this.#waitFor(cmd, REPAIR_EVERY_MS);
              if (cmd.done || this.#ended !== null) break;
              const foreground = await this.#probes.repairInterrupt(this.#pid).catch(() => null);
              if (foreground === 'shell' && !cmd.done) await this.#write('\x03');
            }
          }
          await this.#waitFor(cmd, deadline - Date.now());
        }
        return this.#report(cmd);
      })(),
      toRuntimeError,
    );
  }

  /**
   * After an interrupt, bash can still hold something of the race: a Ctrl-C it takes later (and
   * with it the next line typed), half a line it parsed before the Ctrl-C (a quote left open
   * swallows every line after it, silently: PS2 is empty). A sync line (no quotes, a marker and
   * nothing else) is typed until its marker comes back, with a Ctrl-C before each retry to
   * clear whatever bash was in the middle of, so the next command is read by a settled bash.
   */
  async #sync(): Promise<void> {
    const deadline = Date.now() + SYNC_WAIT_MS;
    const sync = { id: ++this.#seq, back: false };
    this.#syncing = sync;
    try {
      for (let attempt = 0; !sync.back && this.#ended === null && Date.now() < deadline; attempt++) {
        if (attempt > 0) {
          const seen = this.#markersSeen;
          await this.#write('\x03');
          await this.#until(
            () => this.#markersSeen > seen || this.#ended !== null,
            Math.min(SYNC_RETRY_MS, deadline - Date.now()),
          );
        }
        await this.#write(`${shellSyncLine(sync.id)}\n`);
        await this.#until(() => sync.back || this.#ended !== null, Math.min(SYNC_RETRY_MS, deadline - Date.now()));
      }
      if (sync.back) this.#unsettled = false;
      // What the Ctrl-Cs made bash print (new lines) is nobody's output.
      if (this.#idle.trim() === '') this.#idle = '';
    } finally {
      this.#syncing = null;
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ended === null && this.#pid !== null) {
      // SIGHUP makes bash hang up its jobs and exit; the kill runs beside the shell, so it works while a command runs.
      await this.#probes.hangUp(this.#pid);
    }
    // Whatever is left of the shell and its jobs.
    await Promise.race([this.process.kill(), new Promise((resolve) => setTimeout(resolve, HANGUP_WAIT_MS + 5_000))]);
  }

  #write(data: string): Promise<void> {
    return this.process.write(data).catch((error: unknown) => {
      throw fail(
        `cannot write to the shell in sandbox ${this.sandboxId}: ${error instanceof Error ? error.message : String(error)}`,
      );
    });
  }

  #exclusive(work: () => Promise<ShellOutput>): ResultAsync<ShellOutput, SandboxRuntimeError> {
    this.#busy = true;
    return ResultAsync.fromPromise(
      work().finally(() => {
        this.#busy = false;
      }),
      toRuntimeError,
    );
  }

  #refuseIfUnusable(): SandboxRuntimeError | null {
    if (this.#closed) return closedShell();
    if (this.#ended !== null) return this.#ended;
    return null;
  }

  #nothingRunning(): SandboxRuntimeError {
    return (
      this.#refuseIfUnusable() ?? {
        type: 'failed',
        message: `no command is running (the last one ended with exit code ${this.#last.exit_code ?? 'unknown'}); use run`,
      }
    );
  }

  /** A paused or vanished sandbox is an error up front, rather than a command that silently never starts. */
  async #checkSandbox(): Promise<void> {
    const observed = await this.runtime.inspect(this.sandboxId);
    const refused = observed.isErr() ? observed.error : notRunning(this.sandboxId, observed.value);
    if (refused) throw new ShellFailure(refused);
  }

  async #report(cmd: Command): Promise<ShellOutput> {
    const done = cmd.done;
    if (!done && this.#current === cmd && this.#terminal.releaseHeldNewline()) cmd.capture.append('\n');
    let output = cmd.capture.since(cmd.taken);
    cmd.taken = cmd.capture.total;
    if (done) {
      cmd.doneReported = true;
      this.#last = done;
    }
    let spilledTo: string | null = null;
    if (output.length > this.#maxOutput) {
      const path = (cmd.spillPath ??= `/tmp/acs-shell-output-${this.#nonce.slice(0, 8)}-${cmd.id}.log`);
      const saved = await this.runtime.writeFile(this.sandboxId, path, new TextEncoder().encode(cmd.capture.full()));
      output = clipShellOutput(output, this.#maxOutput, saved.isOk() ? { path } : { error: saved.error.message });
      if (saved.isOk()) spilledTo = path;
    }
    return {
      output,
      exit_code: done?.exit_code ?? null,
      still_running: done === null,
      cwd: done?.cwd ?? null,
      spilled_to: spilledTo,
    };
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

  #onData(chunk: Uint8Array) {
    this.#terminal.push(chunk);
    this.#notify();
  }

  /** Output goes to the command it belongs to: before the shell is ready, to the reason it may not become so; between commands, to the next one. */
  #onText(text: string) {
    if (!this.#isReady) this.#preReady = (this.#preReady + text).slice(-4_000);
    else if (this.#current && !this.#current.done && this.#current.typed) this.#current.capture.append(text);
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
    this.#markersSeen++;
    if (this.#syncing?.id === id) {
      this.#syncing.back = true;
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

  /** The shell's process ended: says why from now on, and ends the command in flight. */
  async #onEnd(exitCode: number | null) {
    this.#terminal.end();
    const cmd = this.#current && !this.#current.done ? this.#current : null;
    this.#ended = { type: 'failed', message: this.#closed ? 'this shell is closed' : 'the shell has exited' };
    if (!this.#closed) {
      let explained = () => {};
      this.#explaining = new Promise<void>((resolve) => (explained = resolve));
      const observed = await this.runtime.inspect(this.sandboxId);
      this.#explaining = null;
      explained();
      this.#ended = whyEnded(this.sandboxId, observed, exitCode);
    }
    this.#last = { exit_code: exitCode, cwd: null };
    if (cmd) cmd.done = { exit_code: exitCode, cwd: null };
    this.#notify();
  }
}

function abbreviate(command: string): string {
  const line = command.replace(/\s+/g, ' ').trim();
  return line.length > 60 ? `${line.slice(0, 57)}…` : line;
}
