import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { Writable } from 'node:stream';
import type Docker from 'dockerode';
import { killArgv, spawnArgv, spawnedPid } from '@acs/core';
import { ProcessOutputChannel, type SandboxProcess } from '@acs/core/ports';
import { untilStreamEnds } from './stream-end.js';

/** What a spawned process needs from its runtime. */
export interface DockerProcessOptions {
  docker: Docker;
  container: Docker.Container;
  sandboxId: string;
  command: readonly string[];
  /** The resolved, absolute directory the process starts in. */
  cwd: string;
  env: Readonly<Record<string, string>>;
  /** On a terminal: one raw stream, stdout and stderr merged. */
  tty?: boolean;
}

/** A process that could not be started; the runtime turns it into a `failed` error. */
export class ProcessStartFailure extends Error {}

/** How long the program has to say it started (the wrapper's first line). */
const START_TIMEOUT_MS = 15_000;
/** After SIGTERM, how long the process group has before SIGKILL. */
const KILL_GRACE_MS = 2_000;
/** How long kill() waits for the stream to end after the kill exec before cutting it. */
const STREAM_END_WAIT_MS = 3_000;

/**
 * Starts `command` in the container over an interactive, non-TTY, hijacked `docker exec`,
 * stdout and stderr demultiplexed. Resolves once the program has been found and started;
 * a program that does not exist or is not executable rejects with ProcessStartFailure
 * (its message says so), as does any other start that ends before the program runs.
 */
export async function startDockerProcess(options: DockerProcessOptions): Promise<SandboxProcess> {
  const nonce = randomBytes(8).toString('hex');
  const exec = await options.container.exec({
    Cmd: spawnArgv(nonce, options.command),
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Tty: options.tty ?? false,
    WorkingDir: options.cwd,
    Env: Object.entries(options.env).map(([k, v]) => `${k}=${v}`),
  });
  const stream = await exec.start({ hijack: true, stdin: true, Tty: options.tty ?? false });
  const spawned = new DockerProcess(options, exec, stream, nonce);
  await spawned.started();
  return spawned;
}

class DockerProcess implements SandboxProcess {
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
  #resolveExited: (value: { exit_code: number | null }) => void = () => {};
  #startupResolve: () => void = () => {};
  #startupReject: (error: Error) => void = () => {};

  constructor(
    private readonly options: DockerProcessOptions,
    private readonly exec: Docker.Exec,
    private readonly stream: Duplex,
    private readonly nonce: string,
  ) {
    this.exited = new Promise((resolve) => (this.#resolveExited = resolve));
    this.#startup = new Promise<void>((resolve, reject) => {
      this.#startupResolve = resolve;
      this.#startupReject = reject;
    });
    const sink = (onChunk: (chunk: Buffer) => void) =>
      new Writable({
        write(chunk: Buffer, _encoding, callback) {
          onChunk(chunk);
          callback();
        },
      });
    // A terminal's stream is raw (one stream, nothing to take apart).
    if (options.tty) stream.on('data', (chunk: Buffer) => this.#onStdout(chunk));
    else {
      options.docker.modem.demuxStream(
        stream,
        sink((chunk) => this.#onStdout(chunk)),
        sink((chunk) => this.#onStderr(chunk)),
      );
    }
    const end = () => void this.#onEnd();
    stream.on('end', end);
    stream.on('close', end);
    stream.on('error', end);
  }

  /** Resolves when the wrapper has handed over to the program; rejects when it could not. */
  async started(): Promise<void> {
    const timer = setTimeout(() => {
      this.#failStartup(new ProcessStartFailure(`${this.#what()} did not start within ${START_TIMEOUT_MS / 1000} s`));
      this.stream.destroy();
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
    return new Promise((resolve, reject) => {
      this.stream.write(typeof data === 'string' ? Buffer.from(data, 'utf8') : data, (error) => {
        if (error) reject(new Error(`cannot write to ${this.#what()}: ${error.message}`));
        else resolve();
      });
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
    if (!this.#ended) {
      await Promise.race([this.exited, new Promise((resolve) => setTimeout(resolve, STREAM_END_WAIT_MS))]);
    }
    // Something outside the group may still hold the exec's output open; the process is gone either way.
    this.stream.destroy();
    await this.exited;
  }

  /** Runs the killer script in a second exec beside the process, and waits for it. */
  async #signalGroup(pid: number): Promise<void> {
    const exec = await this.options.container.exec({
      Cmd: killArgv(pid, KILL_GRACE_MS),
      AttachStdout: true,
      AttachStderr: true,
      AttachStdin: false,
      Tty: false,
    });
    const stream = await exec.start({ hijack: true, stdin: false });
    stream.resume();
    await untilStreamEnds(stream, KILL_GRACE_MS + 5_000);
    stream.destroy();
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

  async #onEnd() {
    if (this.#ended) return;
    this.#ended = true;
    const exitCode = await this.#exitCode();
    if (!this.#startupSettled) {
      const said = this.#startupErrors.trim();
      const why =
        exitCode === 127 && said.endsWith('program not found')
          ? 'program not found'
          : exitCode === 126 && said.endsWith('not an executable file')
            ? 'not an executable file'
            : `it ended before it started (exit code ${exitCode ?? 'unknown'})${said ? `; it said: ${said.slice(-500)}` : ''}`;
      this.#failStartup(new ProcessStartFailure(`cannot start ${this.#what()}: ${why}`));
    }
    this.#resolveExited({ exit_code: exitCode });
  }

  /** The exec's exit code; the engine may record it a moment after the stream ends. */
  async #exitCode(): Promise<number | null> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const info = await this.exec.inspect().catch(() => null);
      if (!info) return null;
      if (!info.Running) return info.ExitCode ?? null;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return null;
  }

  #failStartup(error: Error) {
    if (this.#startupSettled) return;
    this.#startupSettled = true;
    this.#startupReject(error);
    if (!this.#ended) this.stream.destroy();
  }

  #what(): string {
    const program = this.options.command[0] ?? '';
    return `"${program}" in sandbox ${this.options.sandboxId}`;
  }
}
