/**
 * The SandboxRuntime methods that are the same on every engine (exec, readFile, writeFile,
 * listDirectory), built on the little an engine does itself: run an argv, archive a path, write
 * a file. A runtime adapter gives that (a SandboxEngine) and takes these methods as its own.
 */
import type { ResultAsync } from 'neverthrow';
import { timedCommand } from './exec-output.js';
import { RuntimeFailure, type SandboxRuntimeError } from './runtime-error.js';
import { listDirectoryBy, readFollowingLinks, readLimit, type WorkingDirectories } from './runtime-files.js';
import type { ExecResult, SandboxRuntime } from './runtime.js';
import type { TarHead } from './tar.js';

export interface EngineRunOptions {
  /** The directory (absolute) and environment it runs in; absent for a command that names absolute paths only. */
  context?: { cwd: string; env: Readonly<Record<string, string>> };
  /** When the runtime stops waiting and cuts the session. */
  hostDeadlineMs: number;
  /** The command's own time limit (what counts as timed out). */
  timeoutMs: number;
  maxOutputBytes?: number | undefined;
}

/** What a runtime adapter's engine does, for the methods every engine shares. */
export interface SandboxEngine {
  /** Runs argv in the sandbox to its end, stdout and stderr apart, bounded in time and size (see execResult). */
  run(sandboxId: string, argv: readonly string[], options: EngineRunOptions): Promise<ExecResult>;
  /**
   * The first entry of the archive of `path` (see readFirstTarEntry), a file's content read to
   * `maxBytes` and no further; `asked` is the path the caller named, for messages.
   */
  firstArchiveEntry(sandboxId: string, where: { path: string; asked: string }, maxBytes: number): Promise<TarHead>;
  /** Writes `content` to the file at `path` (absolute, not /), making the missing parent directories. */
  writeFile(sandboxId: string, path: string, content: Uint8Array): Promise<void>;
}

export type EngineMethods = Pick<SandboxRuntime, 'exec' | 'readFile' | 'writeFile' | 'listDirectory'>;

/** An operation of the adapter, run as the port answers (see attemptRuntime). */
export type RuntimeAttempt = <T>(operation: string, work: () => Promise<T>) => ResultAsync<T, SandboxRuntimeError>;

export function engineMethods(deps: {
  engine: SandboxEngine;
  paths: WorkingDirectories;
  attempt: RuntimeAttempt;
}): EngineMethods {
  const { engine, paths, attempt } = deps;
  return {
    exec: (sandboxId, request) =>
      attempt('exec', async () => {
        const cwd = await paths.resolve(sandboxId, request.cwd ?? '.');
        const timed = timedCommand(request);
        return engine.run(sandboxId, timed.argv, {
          context: { cwd, env: request.env ?? {} },
          hostDeadlineMs: timed.hostDeadlineMs,
          timeoutMs: timed.timeoutMs,
          maxOutputBytes: request.maxOutputBytes,
        });
      }),
    // A symbolic link comes back from the engine as itself: its target is read in turn, here.
    readFile: (sandboxId, path, options = {}) => {
      const maxBytes = readLimit(options);
      return attempt('readFile', async () => {
        const asked = await paths.resolve(sandboxId, path);
        return readFollowingLinks(asked, (target) =>
          engine.firstArchiveEntry(sandboxId, { path: target, asked }, maxBytes),
        );
      });
    },
    writeFile: (sandboxId, path, content) =>
      attempt('writeFile', async () => {
        const resolved = await paths.resolve(sandboxId, path);
        if (resolved === '/') throw new RuntimeFailure('cannot write to /');
        await engine.writeFile(sandboxId, resolved, content);
      }),
    listDirectory: (sandboxId, path) =>
      attempt('listDirectory', async () =>
        listDirectoryBy(await paths.resolve(sandboxId, path), (argv, timeoutMs) =>
          engine.run(sandboxId, argv, { hostDeadlineMs: timeoutMs, timeoutMs }),
        ),
      ),
  };
}
