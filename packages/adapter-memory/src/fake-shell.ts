import { errAsync, okAsync, ResultAsync } from 'neverthrow';
import { clipShellOutput, DEFAULT_SHELL_MAX_OUTPUT_CHARS, DEFAULT_SHELL_SOFT_TIMEOUT_MS, splitShellWords } from '@acs/core';
import { resolveSandboxPath, type ExecRequest, type ExecResult, type OpenShellOptions, type SandboxRuntimeError, type SandboxShell, type ShellOutput } from '@acs/core/ports';
import type { FakeExecHandler } from './fake-exec.js';
import { InputQueue } from './input-queue.js';

/** What a fake shell needs from the fake runtime. */
export interface FakeShellHost {
  sandboxId: string;
  /** The spec's working directory. */
  workingDir: string;
  /** The sandbox's files (cut output is spilled here). */
  files: Map<string, Uint8Array>;
  /** null while the sandbox can run commands; else why not. */
  unusable(): SandboxRuntimeError | null;
  /** The handler registered for this argv, or null. */
  handlerFor(argv: readonly string[]): FakeExecHandler | null;
}

interface Running {
  id: number;
  command: string;
  abort: AbortController;
  input: InputQueue;
  /** Settles once the handler has; never rejects. */
  settled: Promise<void>;
  done: { output: string; exit_code: number } | { error: SandboxRuntimeError } | null;
  /** The outcome has been handed to a caller. */
  reported: boolean;
}

let shells = 0;

/**
 * A shell emulated over the fake runtime's exec handlers, for tests of code that drives a
 * shell. What it does:
 *
 * - `cd [dir]`, `export NAME=value …` and `pwd` on their own are handled by the emulation: it
 *   keeps the working directory and the exported variables itself (a `cd` always succeeds; no
 *   directory is checked). Every other command line goes to the handler matching
 *   `['bash', '-c', line]`, with the shell's cwd and environment (openShell's `env` plus what
 *   was exported) as the request's `cwd` and `env`; unmatched lines exit 127.
 * - Output is the handler's stdout followed by its stderr: nothing appears before the handler
 *   returns (a running command reports ''), and the two streams are never interleaved.
 * - A handler that has not returned within the soft timeout is still running; `wait` waits
 *   for it. `sendInput` text reaches the handler through `context.input`. `interrupt` aborts
 *   `context.signal` and reports exit code 130 at once, whatever the handler does afterwards.
 * - Output longer than maxOutputChars is cut like a real shell's and the whole of it written to
 *   /tmp/acs-shell-output-<shell>-<n>.log in the sandbox's files.
 *
 * What it does not do: parse shell syntax (`cd a && make` goes to a handler as one line and
 * does not change the directory), run anything, or notice a `cd` into a missing directory.
 */
export function openFakeShell(host: FakeShellHost, options: OpenShellOptions = {}): SandboxShell {
  return new FakeShell(host, options);
}

class FakeShell implements SandboxShell {
  readonly #shellNo = ++shells;
  readonly #maxOutput: number;
  #cwd: string;
  readonly #env: Record<string, string>;
  #current: Running | null = null;
  #last: { exit_code: number | null; cwd: string };
  #seq = 0;
  #closed = false;

  constructor(
    private readonly host: FakeShellHost,
    options: OpenShellOptions,
  ) {
    this.#maxOutput = Math.max(200, options.maxOutputChars ?? DEFAULT_SHELL_MAX_OUTPUT_CHARS);
    this.#cwd = resolveSandboxPath(host.workingDir, options.cwd ?? '.') ?? host.workingDir;
    this.#env = { ...options.env };
    this.#last = { exit_code: 0, cwd: this.#cwd };
  }

  run(command: string, options: { softTimeoutMs?: number } = {}): ResultAsync<ShellOutput, SandboxRuntimeError> {
    const refused = this.#unusable();
    if (refused) return errAsync(refused);
    if (this.#current && !this.#current.done) {
      return errAsync({ type: 'failed', message: `a command is still running (${this.#current.command}); wait for it, send it input, or interrupt it before running another` });
    }
    const builtin = this.#builtin(command.trim());
    if (builtin) {
      this.#current = null;
      this.#last = { exit_code: builtin.exit_code, cwd: this.#cwd };
      return okAsync({ output: builtin.output, exit_code: builtin.exit_code, still_running: false, cwd: this.#cwd, spilled_to: null });
    }
    const running = this.#start(command);
    this.#current = running;
    return this.#waitAndReport(running, options.softTimeoutMs ?? DEFAULT_SHELL_SOFT_TIMEOUT_MS);
  }

  wait(ms: number): ResultAsync<ShellOutput, SandboxRuntimeError> {
    const running = this.#current;
    if (!running || running.reported) return errAsync(this.#nothingRunning());
    return this.#waitAndReport(running, ms);
  }

  sendInput(text: string, waitMs = 1_000): ResultAsync<ShellOutput, SandboxRuntimeError> {
    const running = this.#current;
    if (!running || running.done) return errAsync(this.#nothingRunning());
    running.input.push(text);
    return this.#waitAndReport(running, waitMs);
  }

  interrupt(): ResultAsync<ShellOutput, SandboxRuntimeError> {
    const running = this.#current;
    if (!running || running.reported) {
      const refused = this.#unusable();
      return refused ? errAsync(refused) : okAsync({ output: '', ...this.#last, still_running: false, spilled_to: null });
    }
    if (!running.done) this.#stop(running, { output: '', exit_code: 130 });
    return this.#waitAndReport(running, 0);
  }

  close(): Promise<void> {
    this.#closed = true;
    if (this.#current && !this.#current.done) this.#stop(this.#current, { output: '', exit_code: 129 });
    return Promise.resolve();
  }

  #unusable(): SandboxRuntimeError | null {
    if (this.#closed) return { type: 'failed', message: 'this shell is closed; open a new one' };
    return this.host.unusable();
  }

  #nothingRunning(): SandboxRuntimeError {
    return this.#unusable() ?? { type: 'failed', message: `no command is running (the last one ended with exit code ${this.#last.exit_code ?? 'unknown'}); use run` };
  }

  /** `cd`, `export` and `pwd` on their own; null for anything else. */
  #builtin(line: string): { output: string; exit_code: number } | null {
    const words = splitShellWords(line);
    if (!words || words.length === 0) return null;
    if (/[;&|<>`$()]/.test(line.replace(/'[^']*'|"[^"$`]*"/g, ''))) return null;
    const [name, ...args] = words;
    if (name === 'cd' && args.length <= 1) {
      const target = args[0] === undefined || args[0] === '~' ? this.host.workingDir : resolveSandboxPath(this.#cwd, args[0]);
      if (!target) return { output: `bash: cd: ${args[0]}: No such file or directory\n`, exit_code: 1 };
      this.#cwd = target;
      return { output: '', exit_code: 0 };
    }
    if (name === 'export') {
      for (const arg of args) {
        const eq = arg.indexOf('=');
        if (eq <= 0) continue;
        const key = arg.slice(0, eq);
        if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) return { output: `bash: export: \`${arg}': not a valid identifier\n`, exit_code: 1 };
        this.#env[key] = arg.slice(eq + 1);
      }
      return { output: '', exit_code: 0 };
    }
    if (name === 'pwd' && args.length === 0) return { output: `${this.#cwd}\n`, exit_code: 0 };
    return null;
  }

  #start(command: string): Running {
    const request: ExecRequest = { command: ['bash', '-c', command], cwd: this.#cwd, env: { ...this.#env } };
    const abort = new AbortController();
    const input = new InputQueue(abort.signal);
    const handler = this.host.handlerFor(request.command);
    const running: Running = { id: ++this.#seq, command, abort, input, settled: Promise.resolve(), done: null, reported: false };
    const outcome: Promise<Partial<Omit<ExecResult, 'duration_ms' | 'timed_out'>>> = handler
      ? Promise.resolve().then(() => handler(request, { sandboxId: this.host.sandboxId, cwd: this.#cwd, files: this.host.files, signal: abort.signal, input }))
      : Promise.resolve({ exit_code: 127, stderr: `fake runtime: no handler for "${request.command.join(' ')}" (register one with onExec)\n` });
    running.settled = outcome.then(
      (result) => {
        if (!running.done) running.done = { output: `${result.stdout ?? ''}${result.stderr ?? ''}`, exit_code: result.exit_code ?? 0 };
      },
      (error: unknown) => {
        if (!running.done) running.done = { error: { type: 'failed', message: `the fake exec handler for "${command}" threw: ${(error as Error)?.message ?? String(error)}` } };
      },
    );
    void running.settled.then(() => input.end());
    return running;
  }

  #stop(running: Running, done: { output: string; exit_code: number }) {
    running.done = done;
    running.abort.abort();
    running.input.end();
  }

  #waitAndReport(running: Running, ms: number): ResultAsync<ShellOutput, SandboxRuntimeError> {
    let timer: NodeJS.Timeout | undefined;
    const waited = Promise.race([running.settled, new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, ms))))]).then(() => {
      clearTimeout(timer);
      return this.#report(running);
    });
    return ResultAsync.fromSafePromise(waited).andThen((result) => result);
  }

  #report(running: Running): ResultAsync<ShellOutput, SandboxRuntimeError> {
    const done = running.done;
    if (!done) return okAsync({ output: '', exit_code: null, still_running: true, cwd: null, spilled_to: null });
    if (running.reported) return okAsync({ output: '', exit_code: 'error' in done ? null : done.exit_code, still_running: false, cwd: this.#cwd, spilled_to: null });
    running.reported = true;
    if ('error' in done) {
      this.#last = { exit_code: null, cwd: this.#cwd };
      return errAsync(done.error);
    }
    this.#last = { exit_code: done.exit_code, cwd: this.#cwd };
    let output = done.output;
    let spilledTo: string | null = null;
    if (output.length > this.#maxOutput) {
      spilledTo = `/tmp/acs-shell-output-${this.#shellNo}-${running.id}.log`;
      this.host.files.set(spilledTo, new TextEncoder().encode(output));
      output = clipShellOutput(output, this.#maxOutput, { path: spilledTo });
    }
    return okAsync({ output, exit_code: done.exit_code, still_running: false, cwd: this.#cwd, spilled_to: spilledTo });
  }
}
