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
  return async (request, context) => {
    const env: Record<string, string> = { ...request.env };
    let cwd = context.cwd;
    let nonce: string | null = null;
    let lastId = 0;
    let lastExit = 0;
    let running: Running | null = null;
    let pending = '';
    const mark = (id: number, exitCode: number) => {
      lastExit = exitCode;
      if (nonce !== null) context.stdout.write(shellMarker(nonce, id, exitCode, cwd));
    };
    const interrupt = () => {
      if (running) {
        running.abort.abort();
        const { id } = running;
        running = null;
        mark(id, 130);
      } else {
        pending = '';
        mark(lastId, 130);
      }
    };
    context.signal.addEventListener('abort', () => running?.abort.abort(), { once: true });

    /** `cd`, `export`, `pwd` and `exit` on their own; null for anything else. */
    const builtin = (line: string): { output: string; exit_code: number } | null => {
      const words = splitShellWords(line);
      if (!words || words.length === 0) return null;
      if (/[;&|<>`$()]/.test(line.replace(/'[^']*'|"[^"$`]*"/g, ''))) return null;
      const [name, ...args] = words;
      if (name === 'cd' && args.length <= 1) {
        const target = args[0] === undefined || args[0] === '~' ? host.workingDir : resolveSandboxPath(cwd, args[0]);
        if (!target) return { output: `bash: cd: ${args[0]}: No such file or directory\n`, exit_code: 1 };
        cwd = target;
        return { output: '', exit_code: 0 };
      }
      if (name === 'export') {
        for (const arg of args) {
          const eq = arg.indexOf('=');
          if (eq <= 0) continue;
          const key = arg.slice(0, eq);
          if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) return { output: `bash: export: \`${arg}': not a valid identifier\n`, exit_code: 1 };
          env[key] = arg.slice(eq + 1);
        }
        return { output: '', exit_code: 0 };
      }
      if (name === 'pwd' && args.length === 0) return { output: `${cwd}\n`, exit_code: 0 };
      if (name === 'exit' && args.length <= 1 && (args[0] === undefined || /^\d+$/.test(args[0]))) {
        context.exit(args[0] === undefined ? lastExit : Number(args[0]) & 255);
        return { output: '', exit_code: lastExit };
      }
      return null;
    };

    const start = (id: number, command: string) => {
      const played = builtin(command.trim());
      if (played) {
        context.stdout.write(played.output);
        mark(id, played.exit_code);
        return;
      }
      const execRequest: ExecRequest = { command: ['bash', '-c', command], cwd, env: { ...env } };
      const handler = host.handlerFor(execRequest.command);
      const abort = new AbortController();
      const input = new InputQueue(abort.signal);
      const self: Running = { id, abort, input };
      running = self;
      const outcome: Promise<Awaited<ReturnType<FakeExecHandler>>> = handler
        ? Promise.resolve().then(() => handler(execRequest, { sandboxId: context.sandboxId, cwd, files: context.files, signal: abort.signal, input }))
        : Promise.resolve({ exit_code: 127, stderr: `fake runtime: no handler for "${execRequest.command.join(' ')}" (register one with onExec)\n` });
      void outcome
        .then(
          (result) => ({ output: `${result.stdout ?? ''}${result.stderr ?? ''}`, exit_code: result.exit_code ?? 0 }),
          (error: unknown) => ({ output: `fake runtime: the exec handler for "${command}" threw: ${error instanceof Error ? error.message : String(error)}\n`, exit_code: 1 }),
        )
        .then((result) => {
          input.end();
          if (running !== self) return;
          running = null;
          context.stdout.write(result.output);
          mark(id, result.exit_code);
        });
    };

    const line = (text: string) => {
      const parsed = parseShellLine(text);
      if (parsed.kind === 'setup') {
        nonce = parsed.nonce;
        mark(0, 0);
      } else if (parsed.kind === 'empty') mark(lastId, lastExit);
      else if (parsed.kind === 'sync') {
        lastId = parsed.id;
        mark(parsed.id, 0);
      }
      else if (parsed.kind === 'command') {
        lastId = parsed.id;
        start(parsed.id, parsed.command);
      } else if (parsed.kind === 'command-file') {
        lastId = parsed.id;
        const content = context.files.get(parsed.path);
        context.files.delete(parsed.path);
        start(parsed.id, content ? new TextDecoder().decode(content) : '');
      } else {
        context.stdout.write(`fake bash: cannot play ${JSON.stringify(parsed.line.slice(0, 200))}\n`);
        mark(lastId, 2);
      }
    };

    /** The command in flight, if any (a function, so the compiler does not narrow it across the calls that change it). */
    const current = (): Running | null => running;
    for await (const text of context.stdin) {
      for (const [i, part] of text.split('\x03').entries()) {
        if (i > 0) interrupt();
        pending += part;
        // Lines are bash's while no command runs; what is typed while one runs is its input.
        for (let newline = pending.indexOf('\n'); newline >= 0 && !current(); newline = pending.indexOf('\n')) {
          const typed = pending.slice(0, newline);
          pending = pending.slice(newline + 1);
          line(typed);
        }
        const command = current();
        if (command && pending !== '') {
          command.input.push(pending);
          pending = '';
        }
      }
    }
  };
}
