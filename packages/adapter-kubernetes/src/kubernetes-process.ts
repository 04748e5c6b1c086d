import { randomBytes } from 'node:crypto';
import { killArgv, spawnArgv, spawnedPid } from '@acs/core';
import { ProcessOutputChannel, type SandboxProcess } from '@acs/core/ports';
import type { ExecChannel } from './exec-channel.js';

/** A process that could not be started; the runtime turns it into a `failed` error. */
export class ProcessStartFailure extends Error {}

/** How long the program has to say it started (the wrapper's first line). */
const START_TIMEOUT_MS = 15_000;
/** After SIGTERM, how long the process group has before SIGKILL. */
const KILL_GRACE_MS = 2_000;
/** How long kill() waits for the session to end after the kill exec before cutting it. */
const STREAM_END_WAIT_MS = 3_000;

export interface KubernetesProcessOptions {
  sandboxId: string;
  command: readonly string[];
  tty: boolean;
  /** Opens an exec session in the sandbox's container (argv, with stdin or not). */
  open(argv: readonly string[], stdin: boolean, tty: boolean): Promise<ExecChannel>;
  /** The wrapper's argv before the nonce and the command (changes directory and sets the environment). */
  prefix: readonly string[];
}

/**
 * Starts `command` over an interactive `pods/exec` session (stdin open; with `tty`, on a
 * terminal). Resolves once the program has been found and started; one that does not exist or
 * is not executable rejects with ProcessStartFailure, saying so.
 */
export async function startKubernetesProcess(options: KubernetesProcessOptions): Promise<SandboxProcess> {
  const nonce = randomBytes(8).toString('hex');
  const channel = await options.open([...options.prefix, ...spawnArgv(nonce, options.command)], true, options.tty);
  const spawned = new KubernetesProcess(options, channel, nonce);
  await spawned.started();
  return spawned;
}

class KubernetesProcess implements SandboxProcess {
  readonly exited: Promise<{ exit_code: number | null }>;
  readonly #stdout = new ProcessOutputChannel();
  readonly #stderr = new ProcessOutputChannel();
  /** Before the wrapper's line: what stdout has said so far. */
  #preamble: Buffer | null = Buffer.alloc(0);
  #startupErrors = '';
  #pid: number | null = null;
  #ended = false;
  #killing: Promise<void> | null = null;
  readonly #startup: Promise<void>;
  #startupSettled = false;
  #startupResolve: () => void = () => {};
  #startupReject: (error: Error) => void = () => {};

  constructor(
    private readonly options: KubernetesProcessOptions,
    private readonly channel: ExecChannel,
    private readonly nonce: string,
  ) {
    this.#startup = new Promise<void>((resolve, reject) => {
      this.#startupResolve = resolve;
      this.#startupReject = reject;
    });
    channel.onStdout((chunk) => this.#onStdout(chunk));
    channel.onStderr((chunk) => this.#onStderr(chunk));
    this.exited = channel.ended.then((end) => {
      this.#ended = true;
      if (!this.#startupSettled) {
        const said = this.#startupErrors.trim();
        const why =
          end.exitCode === 127 && said.endsWith('program not found')
            ? 'program not found'
            : end.exitCode === 126 && said.endsWith('not an executable file')
              ? 'not an executable file'
              : `it ended before it started (exit code ${end.exitCode ?? 'unknown'})${said ? `; it said: ${said.slice(-500)}` : end.message ? `; ${end.message}` : ''}`;
        this.#failStartup(new ProcessStartFailure(`cannot start ${this.#what()}: ${why}`));
      }
      return { exit_code: end.exitCode };
    });
  }

  /** Resolves when the wrapper has handed over to the program; rejects when it could not. */
  async started(): Promise<void> {
    const timer = setTimeout(() => {
      this.#failStartup(new ProcessStartFailure(`${this.#what()} did not start within ${START_TIMEOUT_MS / 1000} s`));
    }, START_TIMEOUT_MS);
    try {
      await this.#startup;
    } finally {
      clearTimeout(timer);
    }
  }

  write(data: Uint8Array | string): Promise<void> {
    if (this.#ended || this.#killing)
      return Promise.reject(new Error(`${this.#what()} has ended; its stdin is closed`));
    return this.channel.write(typeof data === 'string' ? Buffer.from(data, 'utf8') : data).catch((error: unknown) => {
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
    if (this.#pid !== null) await this.#signalGroup(this.#pid).catch(() => undefined);
    if (!this.#ended)
      await Promise.race([this.exited, new Promise((resolve) => setTimeout(resolve, STREAM_END_WAIT_MS))]);
    // Something outside the group may still hold the session's output open; the process is gone either way.
    this.channel.destroy();
    await this.exited;
  }

  /** Runs the killer script in a second exec beside the process, and waits for it. */
  async #signalGroup(pid: number): Promise<void> {
    const killer = await this.options.open(killArgv(pid, KILL_GRACE_MS), false, false);
    const timer = setTimeout(() => killer.destroy(), KILL_GRACE_MS + 5_000);
    await killer.ended;
    clearTimeout(timer);
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
      if (seen.length > 256)
        this.#failStartup(
          new ProcessStartFailure(
            `cannot start ${this.#what()}: unexpected output ${JSON.stringify(seen.subarray(0, 200).toString('utf8'))}`,
          ),
        );
      return;
    }
    const pid = spawnedPid(seen.subarray(0, newline).toString('utf8'), this.nonce);
    if (pid === null) {
      this.#failStartup(
        new ProcessStartFailure(`cannot start ${this.#what()}: ${seen.toString('utf8').trim().slice(0, 500)}`),
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

  #failStartup(error: Error) {
    if (this.#startupSettled) return;
    this.#startupSettled = true;
    this.#startupReject(error);
    if (!this.#ended) this.channel.destroy();
  }

  #what(): string {
    return `"${this.options.command[0] ?? ''}" in sandbox ${this.options.sandboxId}`;
  }
}
