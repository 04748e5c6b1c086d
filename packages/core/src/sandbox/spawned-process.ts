/**
 * A process a runtime adapter started under the spawn protocol (spawn-protocol.ts), the same on
 * every engine: the wrapper's first line read for the pid, a start that fails explained, output
 * held until the first listener, stdin, and kill (the killer beside it, then the session cut).
 * The adapter opens the session over its engine and hands its bytes and its end to a SpawnFeed.
 */
import { randomBytes } from 'node:crypto';
import { ProcessOutputChannel } from './process-output.js';
import { RuntimeFailure } from './runtime-error.js';
import type { SandboxProcess } from './runtime.js';
import { killArgv, spawnArgv, spawnedPid } from './spawn-protocol.js';

/** How long the program has to say it started (the wrapper's first line). */
const START_TIMEOUT_MS = 15_000;
/** After SIGTERM, how long the process group has before SIGKILL. */
const KILL_GRACE_MS = 2_000;
/** How long the killer may take beyond the grace period before its session is cut. */
const KILLER_MARGIN_MS = 5_000;
/** How long kill() waits for the session to end after the killer before cutting it. */
const SESSION_END_WAIT_MS = 3_000;
/** What the wrapper's line may be preceded by before the start is taken for a failure. */
const MAX_PREAMBLE_BYTES = 256;

/** How a spawned process's session ended: its exit code (null when the engine did not say), and what the engine said of it. */
export interface SpawnEnd {
  exitCode: number | null;
  message?: string | null;
}

/** Where an adapter hands what its engine's session delivers. */
export interface SpawnFeed {
  readonly stdout: (chunk: Buffer) => void;
  readonly stderr: (chunk: Buffer) => void;
  /** The session ended; a promise when the engine tells the exit code a moment later. Only the first call counts. */
  readonly ended: (end: SpawnEnd | Promise<SpawnEnd>) => void;
}

/** One session of the engine's exec, with its stdin open, running the process. */
export interface SpawnSession {
  /** Writes to the process's stdin; rejects with the engine's reason when it cannot. */
  write(data: Uint8Array): Promise<void>;
  /** Cuts the session (the process may go on in the sandbox: the killer ends it). */
  destroy(): void;
  /** Runs `argv` in the sandbox beside the process, to its end or for `deadlineMs` at most. */
  runBeside(argv: string[], deadlineMs: number): Promise<void>;
}

export interface StartSpawnedOptions {
  sandboxId: string;
  command: readonly string[];
  /** Opens the session running `argv` (the wrapper and the command) with stdin open, its output and end handed to `feed`. */
  open(argv: string[], feed: SpawnFeed): Promise<SpawnSession>;
}

/** A command a process cannot be started with. */
export function checkSpawnCommand(command: readonly string[]): void {
  if (command.length === 0 || command[0] === '')
    throw new RuntimeFailure('cannot start a process: the command is empty');
}

/**
 * Starts `command` under the spawn wrapper. Resolves once the program has been found and
 * started; a program that does not exist or is not executable rejects with a RuntimeFailure
 * that says so, as does any other start that ends before the program runs.
 */
export async function startSpawnedProcess(options: StartSpawnedOptions): Promise<SandboxProcess> {
  const nonce = randomBytes(8).toString('hex');
  const spawned = new SpawnedProcess(options, nonce);
  spawned.attach(await options.open(spawnArgv(nonce, options.command), spawned.feed));
  await spawned.started();
  return spawned;
}

class SpawnedProcess implements SandboxProcess {
  readonly exited: Promise<{ exit_code: number | null }>;
  readonly feed: SpawnFeed;
  readonly #stdout = new ProcessOutputChannel();
  readonly #stderr = new ProcessOutputChannel();
  readonly #options: StartSpawnedOptions;
  readonly #nonce: string;
  #session: SpawnSession | null = null;
  /** Before the wrapper's line: what stdout has said so far. */
  #preamble: Buffer | null = Buffer.alloc(0);
  #startupErrors = '';
  #pid: number | null = null;
  #ended = false;
  #killing: Promise<void> | null = null;
  readonly #startup: Promise<void>;
  #startupSettled = false;
  #startupFailed = false;
  #resolveExited: (value: { exit_code: number | null }) => void = () => {};
  #startupResolve: () => void = () => {};
  #startupReject: (error: Error) => void = () => {};

  constructor(options: StartSpawnedOptions, nonce: string) {
    this.#options = options;
    this.#nonce = nonce;
    this.exited = new Promise((resolve) => (this.#resolveExited = resolve));
    this.#startup = new Promise<void>((resolve, reject) => {
      this.#startupResolve = resolve;
      this.#startupReject = reject;
    });
    // A start that fails while the session is still being opened is reported by `open`'s own error.
    this.#startup.catch(() => undefined);
    this.feed = {
      stdout: (chunk) => this.#onStdout(chunk),
      stderr: (chunk) => this.#onStderr(chunk),
      ended: (end) => void this.#onEnd(end),
    };
  }

  attach(session: SpawnSession): void {
    this.#session = session;
    if (this.#startupFailed && !this.#ended) session.destroy();
  }

  /** Resolves when the wrapper has handed over to the program; rejects when it could not. */
  async started(): Promise<void> {
    const timer = setTimeout(() => {
      this.#failStartup(new RuntimeFailure(`${this.#what()} did not start within ${START_TIMEOUT_MS / 1000} s`));
    }, START_TIMEOUT_MS);
    try {
      await this.#startup;
    } finally {
      clearTimeout(timer);
    }
  }

  write(data: Uint8Array | string): Promise<void> {
    if (this.#ended || this.#killing || !this.#session)
      return Promise.reject(new Error(`${this.#what()} has ended; its stdin is closed`));
    return this.#session.write(typeof data === 'string' ? Buffer.from(data, 'utf8') : data).catch((error: unknown) => {
      throw new Error(`cannot write to ${this.#what()}: ${(error as Error).message}`);
    });
  }

  onStdout(listener: (chunk: Uint8Array) => void): void {
    this.#stdout.add(listener);
  }

  onStderr(listener: (chunk: Uint8Array) => void): void {
    this.#stderr.add(listener);
  }

  kill(): Promise<void> {
    this.#killing ??= this.#kill();
    return this.#killing;
  }

  async #kill(): Promise<void> {
    if (this.#ended) return;
    const session = this.#session;
    if (this.#pid !== null && session)
      await session
        .runBeside(killArgv(this.#pid, KILL_GRACE_MS), KILL_GRACE_MS + KILLER_MARGIN_MS)
        .catch(() => undefined);
    if (!this.#ended)
      await Promise.race([this.exited, new Promise((resolve) => setTimeout(resolve, SESSION_END_WAIT_MS))]);
    // Something outside the group may still hold the session's output open; the process is gone either way.
    session?.destroy();
    await this.exited;
  }

  #onStdout(chunk: Buffer) {
    if (this.#preamble === null) {
      this.#stdout.push(chunk);
      return;
    }
    const seen = Buffer.concat([this.#preamble, chunk]);
    const newline = seen.indexOf(0x0a);
    if (newline < 0) {
      this.#preamble = seen;
      if (seen.length > MAX_PREAMBLE_BYTES)
        this.#failStartup(
          new RuntimeFailure(
            `cannot start ${this.#what()}: unexpected output ${JSON.stringify(seen.subarray(0, 200).toString('utf8'))}`,
          ),
        );
      return;
    }
    const pid = spawnedPid(seen.subarray(0, newline).toString('utf8'), this.#nonce);
    if (pid === null) {
      this.#failStartup(
        new RuntimeFailure(`cannot start ${this.#what()}: ${seen.toString('utf8').trim().slice(0, 500)}`),
      );
      return;
    }
    this.#preamble = null;
    this.#pid = pid;
    this.#startupSettled = true;
    this.#startupResolve();
    this.#stdout.push(seen.subarray(newline + 1));
  }

  #onStderr(chunk: Buffer) {
    if (!this.#startupSettled) this.#startupErrors = (this.#startupErrors + chunk.toString('utf8')).slice(-4_000);
    this.#stderr.push(chunk);
  }

  async #onEnd(ending: SpawnEnd | Promise<SpawnEnd>) {
    if (this.#ended) return;
    this.#ended = true;
    const end = await ending;
    if (!this.#startupSettled)
      this.#failStartup(new RuntimeFailure(`cannot start ${this.#what()}: ${this.#whyNotStarted(end)}`));
    this.#resolveExited({ exit_code: end.exitCode });
  }

  /** Why a process ended before the wrapper handed over: the wrapper's own words, or what it and the engine said. */
  #whyNotStarted(end: SpawnEnd): string {
    const said = this.#startupErrors.trim();
    if (end.exitCode === 127 && said.endsWith('program not found')) return 'program not found';
    if (end.exitCode === 126 && said.endsWith('not an executable file')) return 'not an executable file';
    const detail = said ? `; it said: ${said.slice(-500)}` : end.message ? `; ${end.message}` : '';
    return `it ended before it started (exit code ${end.exitCode ?? 'unknown'})${detail}`;
  }

  #failStartup(error: Error) {
    if (this.#startupSettled) return;
    this.#startupSettled = true;
    this.#startupFailed = true;
    this.#startupReject(error);
    if (!this.#ended) this.#session?.destroy();
  }

  #what(): string {
    return `"${this.#options.command[0] ?? ''}" in sandbox ${this.#options.sandboxId}`;
  }
}
