import { splitShellWords } from '@acs/core';
import { parseShellLine, resolveSandboxPath, shellMarker, type ExecRequest } from '@acs/core/ports';
import type { FakeExecHandler } from './fake-exec.js';
import type { FakeSpawnHandler } from './fake-process.js';
import { InputQueue } from './input-queue.js';

/** What the fake bash needs from the fake runtime. */
export interface FakeBashHost {
  /** The spec's working directory (where `cd` alone goes). */
  workingDir: string;
  /** The handler registered for this argv, or null. */
  handlerFor(argv: readonly string[]): FakeExecHandler | null;
}

/** The argv the persistent shell (openSandboxShell) spawns, on a terminal. */
export const isInteractiveBash = (argv: readonly string[]): boolean => argv[0] === 'bash' && argv.includes('-i');

interface Running {
  id: number;
  abort: AbortController;
  input: InputQueue;
}

/**
 * Plays the interactive bash the persistent shell spawns, over the fake runtime's exec
 * handlers, speaking the shell's line-and-marker protocol (core's shell-protocol.ts). What it does:
 *
 * - `cd [dir]`, `export NAME=value …`, `pwd` and `exit [n]` on their own are played here: it
 *   keeps the working directory and the exported variables itself (a `cd` always succeeds; no
 *   directory is checked). Every other command line goes to the handler matching
 *   `['bash', '-c', line]`, with the shell's cwd and environment (the spawn's `env` plus what
 *   was exported) as the request's `cwd` and `env`; unmatched lines exit 127.
 * - Output is the handler's stdout followed by its stderr, after the handler returns; a
 *   handler that throws prints what it threw and exits 1.
 * - Text written while a command runs reaches the handler through `context.input`; Ctrl-C
 *   (0x03) aborts `context.signal` and ends the command with exit code 130 at once, whatever
 *   the handler does afterwards. Killing the process aborts the running handler too.
 *
 * What it does not do: parse shell syntax (`cd a && make` goes to a handler as one line and
 * does not change the directory), run anything, or say its process id (so the shell never
 * probes it with `exec`).
 */
export function fakeBash(host: FakeBashHost): FakeSpawnHandler {
  return (request, context) => new FakeBashSession(host, request, context).run();
}

type SpawnRequestOf = Parameters<FakeSpawnHandler>[0];
type SpawnContext = Parameters<FakeSpawnHandler>[1];

/** One fake bash process: its directory and exported variables, the marker nonce, and the command in flight. */
class FakeBashSession {
  readonly #env: Record<string, string>;
  #cwd: string;
  #nonce: string | null = null;
  #lastId = 0;
  #lastExit = 0;
  #running: Running | null = null;
  /** What was typed and not yet taken as a line (or as a command's input). */
  #pending = '';

  constructor(
    private readonly host: FakeBashHost,
    request: SpawnRequestOf,
    private readonly context: SpawnContext,
  ) {
    this.#env = { ...request.env };
    this.#cwd = context.cwd;
    context.signal.addEventListener('abort', () => this.#running?.abort.abort(), { once: true });
  }

  /** Reads the terminal until it closes: lines while no command runs, a command's input while one does, Ctrl-C between. */
  async run(): Promise<void> {
    for await (const text of this.context.stdin) {
      for (const [i, part] of text.split('\x03').entries()) {
        if (i > 0) this.#interrupt();
        this.#pending += part;
        // Lines are bash's while no command runs; what is typed while one runs is its input.
        for (
          let newline = this.#pending.indexOf('\n');
          newline >= 0 && !this.#current();
          newline = this.#pending.indexOf('\n')
        ) {
          const typed = this.#pending.slice(0, newline);
          this.#pending = this.#pending.slice(newline + 1);
          this.#line(typed);
        }
        const command = this.#current();
        if (command && this.#pending !== '') {
          command.input.push(this.#pending);
          this.#pending = '';
        }
      }
    }
  }

  /** The command in flight, if any (a method, so the compiler does not narrow it across the calls that change it). */
  #current(): Running | null {
    return this.#running;
  }

  #mark(id: number, exitCode: number): void {
    this.#lastExit = exitCode;
    if (this.#nonce !== null) this.context.stdout.write(shellMarker(this.#nonce, id, exitCode, this.#cwd));
  }

  #interrupt(): void {
    const running = this.#running;
    if (running) {
      running.abort.abort();
      this.#running = null;
      this.#mark(running.id, 130);
    } else {
      this.#pending = '';
      this.#mark(this.#lastId, 130);
    }
  }

  /** One line of the shell protocol: the setup, an empty line, a sync, a command (inline or in a file). */
  #line(text: string): void {
    const parsed = parseShellLine(text);
    if (parsed.kind === 'setup') {
      this.#nonce = parsed.nonce;
      this.#mark(0, 0);
    } else if (parsed.kind === 'empty') this.#mark(this.#lastId, this.#lastExit);
    else if (parsed.kind === 'sync') {
      this.#lastId = parsed.id;
      this.#mark(parsed.id, 0);
    } else if (parsed.kind === 'command') {
      this.#lastId = parsed.id;
      this.#start(parsed.id, parsed.command);
    } else if (parsed.kind === 'command-file') {
      this.#lastId = parsed.id;
      const content = this.context.files.get(parsed.path);
      this.context.files.delete(parsed.path);
      this.#start(parsed.id, content ? new TextDecoder().decode(content) : '');
    } else {
      this.context.stdout.write(`fake bash: cannot play ${JSON.stringify(parsed.line.slice(0, 200))}\n`);
      this.#mark(this.#lastId, 2);
    }
  }

  /** A builtin played here, or the command line's handler, run in the background until it answers (or Ctrl-C). */
  #start(id: number, command: string): void {
    const { context } = this;
    const played = this.#builtin(command.trim());
    if (played) {
      context.stdout.write(played.output);
      this.#mark(id, played.exit_code);
      return;
    }
    const execRequest: ExecRequest = { command: ['bash', '-c', command], cwd: this.#cwd, env: { ...this.#env } };
    const handler = this.host.handlerFor(execRequest.command);
    const abort = new AbortController();
    const input = new InputQueue(abort.signal);
    const self: Running = { id, abort, input };
    this.#running = self;
    const cwd = this.#cwd;
    const outcome: Promise<Awaited<ReturnType<FakeExecHandler>>> = handler
      ? Promise.resolve().then(() =>
          handler(execRequest, {
            sandboxId: context.sandboxId,
            cwd,
            files: context.files,
            signal: abort.signal,
            input,
          }),
        )
      : Promise.resolve({
          exit_code: 127,
          stderr: `fake runtime: no handler for "${execRequest.command.join(' ')}" (register one with onExec)\n`,
        });
    void outcome
      .then(
        (result) => ({ output: `${result.stdout ?? ''}${result.stderr ?? ''}`, exit_code: result.exit_code ?? 0 }),
        (error: unknown) => ({
          output: `fake runtime: the exec handler for "${command}" threw: ${error instanceof Error ? error.message : String(error)}\n`,
          exit_code: 1,
        }),
      )
      .then((result) => {
        input.end();
        if (this.#running !== self) return;
        this.#running = null;
        context.stdout.write(result.output);
        this.#mark(id, result.exit_code);
      });
  }

  /** `cd`, `export`, `pwd` and `exit` on their own; null for anything else. */
  #builtin(line: string): { output: string; exit_code: number } | null {
    const words = splitShellWords(line);
    if (!words || words.length === 0) return null;
    if (/[;&|<>`$()]/.test(line.replace(/'[^']*'|"[^"$`]*"/g, ''))) return null;
    const [name, ...args] = words;
    if (name === 'cd' && args.length <= 1) {
      const target =
        args[0] === undefined || args[0] === '~' ? this.host.workingDir : resolveSandboxPath(this.#cwd, args[0]);
      if (!target) return { output: `bash: cd: ${args[0]}: No such file or directory\n`, exit_code: 1 };
      this.#cwd = target;
      return { output: '', exit_code: 0 };
    }
    if (name === 'export') {
      for (const arg of args) {
        const eq = arg.indexOf('=');
        if (eq <= 0) continue;
        const key = arg.slice(0, eq);
        if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key))
          return { output: `bash: export: \`${arg}': not a valid identifier\n`, exit_code: 1 };
        this.#env[key] = arg.slice(eq + 1);
      }
      return { output: '', exit_code: 0 };
    }
    if (name === 'pwd' && args.length === 0) return { output: `${this.#cwd}\n`, exit_code: 0 };
    if (name === 'exit' && args.length <= 1 && (args[0] === undefined || /^\d+$/.test(args[0]))) {
      this.context.exit(args[0] === undefined ? this.#lastExit : Number(args[0]) & 255);
      return { output: '', exit_code: this.#lastExit };
    }
    return null;
  }
}
