import { ProcessOutputChannel, type SandboxProcess, type SpawnRequest } from '@acs/core/ports';
import { InputQueue } from './input-queue.js';

/** One output stream of a fake process, as its handler sees it. */
export interface FakeProcessOutput {
  /** Sends text (as UTF-8) or bytes to the process's listeners; ignored once the process has ended. */
  write(data: string | Uint8Array): void;
}

/** What a registered spawn handler sees. */
export interface FakeSpawnContext {
  sandboxId: string;
  /** The working directory the process runs in (resolved). */
  cwd: string;
  /** The sandbox's files, shared with readFile/writeFile. */
  files: Map<string, Uint8Array>;
  /** What the client writes to stdin, decoded as UTF-8, one item per write; ends when the process ends. */
  stdin: AsyncIterable<string>;
  stdout: FakeProcessOutput;
  stderr: FakeProcessOutput;
  /** Ends the process with this exit code (default 0). */
  exit: (code?: number) => void;
  /** Aborted when the process ends: killed, exited, or its sandbox gone. */
  signal: AbortSignal;
}

/**
 * Plays a spawned program. The process ends when the handler calls `exit`, or when what it
 * returns settles: a number is the exit code, nothing is 0, a throw is exit code 1 with the
 * error's message on stderr. A handler that should keep running returns a promise that stays
 * pending (for example one that reads `stdin` until it ends). `kill()` ends the process at once
 * with exit code null, whatever the handler does.
 */
export type FakeSpawnHandler = (
  request: SpawnRequest,
  context: FakeSpawnContext,
) => void | number | Promise<void | number>;

const encoder = new TextEncoder();

/** A process of the fake runtime, played by a FakeSpawnHandler. */
export class FakeProcess implements SandboxProcess {
  readonly exited: Promise<{ exit_code: number | null }>;
  readonly #stdout = new ProcessOutputChannel();
  readonly #stderr = new ProcessOutputChannel();
  readonly #decoder = new TextDecoder();
  readonly #abort = new AbortController();
  readonly #stdin = new InputQueue(this.#abort.signal);
  #resolveExited: (value: { exit_code: number | null }) => void = () => {};
  #ended = false;

  constructor(
    private readonly description: string,
    private readonly onEnd: () => void,
  ) {
    this.exited = new Promise((resolve) => (this.#resolveExited = resolve));
  }

  /** Starts the handler; called once by the runtime. */
  run(
    request: SpawnRequest,
    handle: FakeSpawnHandler,
    context: Pick<FakeSpawnContext, 'sandboxId' | 'cwd' | 'files'>,
  ): void {
    const output = (channel: ProcessOutputChannel): FakeProcessOutput => ({
      write: (data) => {
        if (!this.#ended) channel.push(typeof data === 'string' ? encoder.encode(data) : new Uint8Array(data));
      },
    });
    const full: FakeSpawnContext = {
      ...context,
      stdin: this.#stdin,
      stdout: output(this.#stdout),
      stderr: output(this.#stderr),
      exit: (code = 0) => this.end(code),
      signal: this.#abort.signal,
    };
    let outcome: ReturnType<FakeSpawnHandler>;
    try {
      outcome = handle(request, full);
    } catch (error) {
      outcome = Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    Promise.resolve(outcome).then(
      (code) => this.end(typeof code === 'number' ? code : 0),
      (error: unknown) => {
        full.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
        this.end(1);
      },
    );
  }

  write(data: Uint8Array | string): Promise<void> {
    if (this.#ended) return Promise.reject(new Error(`${this.description} has ended; its stdin is closed`));
    this.#stdin.push(typeof data === 'string' ? data : this.#decoder.decode(data, { stream: true }));
    return Promise.resolve();
  }

  onStdout(listener: (chunk: Uint8Array) => void): void {
    this.#stdout.add(listener);
  }

  onStderr(listener: (chunk: Uint8Array) => void): void {
    this.#stderr.add(listener);
  }

  kill(): Promise<void> {
    this.end(null);
    return this.exited.then(() => undefined);
  }

  /** Ends the process with this exit code (null: killed); later calls change nothing. */
  end(exitCode: number | null): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#abort.abort();
    this.onEnd();
    this.#resolveExited({ exit_code: exitCode });
  }
}
