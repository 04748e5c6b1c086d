import { errAsync, type ResultAsync } from 'neverthrow';
import type { DomainErrorOf } from '../errors.js';
import type { ExposedUrl, SandboxSpec } from './schema.js';
import type { SandboxRuntimeError } from './runtime-error.js';

export type { SandboxRuntimeError } from './runtime-error.js';

/** What the runtime reports about one sandbox. */
export interface RuntimeObservation {
  state: 'starting' | 'running' | 'paused' | 'error' | 'missing';
  /** Why it is in error or missing, or what it is doing; null when there is nothing to say. */
  detail: string | null;
  exposed_urls: ExposedUrl[];
  /**
   * Where the sandbox runs, for runtimes that spread sandboxes over several engines (the
   * engine's name); the record keeps it. Absent for a runtime with one place.
   */
  location?: string;
}

export interface RuntimeCreateRequest {
  sandbox_id: string;
  user_id: string;
  /** The installation that owns the sandbox (InstallationStore); the runtime labels the sandbox with it, and `list` filters on it. */
  installation_id: string;
  spec: SandboxSpec;
  /** The spec's initial_env merged with what the service adds. */
  env: Record<string, string>;
  /** Multiplies the runtime's configured CPU, memory and pids limits (the user's remote_runtime_resource_factor). Default 1. */
  resource_factor?: number;
}

/** A command to run in a sandbox: an argv, run without a shell (use ['bash', '-lc', script] for one). */
export interface ExecRequest {
  command: readonly string[];
  /** Absolute, or relative to the spec's working directory. Default: the working directory. */
  cwd?: string;
  env?: Readonly<Record<string, string>>;
  /** After this the command's whole process group is killed. Default 120 s. */
  timeoutMs?: number;
  /**
   * The most bytes of stdout, and as many of stderr, the result keeps (default
   * DEFAULT_EXEC_MAX_OUTPUT_BYTES, 16 MiB). What a command writes beyond that is read and dropped,
   * so the command runs to its end and the caller holds no more than this; a stream that was cut
   * ends with `clippedOutputNote(dropped)` (`splitClippedOutput` takes it off again).
   */
  maxOutputBytes?: number;
}

/** How much of each output stream `exec` keeps when the request does not say. */
export const DEFAULT_EXEC_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;

/** What ends an exec output stream that was cut at `maxOutputBytes`: every runtime writes exactly this. */
export const clippedOutputNote = (droppedBytes: number): string => `\n[… ${droppedBytes} more bytes not kept]`;

/** An exec output stream without the note a cut left at its end, and how many bytes were dropped (0 when it was whole). */
export function splitClippedOutput(output: string): { text: string; droppedBytes: number } {
  const note = /\n\[… (\d+) more bytes not kept\]$/.exec(output);
  return note
    ? { text: output.slice(0, note.index), droppedBytes: Number(note[1]) }
    : { text: output, droppedBytes: 0 };
}

/** What `readFile` may be told. */
export interface ReadFileOptions {
  /**
   * The most bytes of the file's content to return (default DEFAULT_READ_FILE_MAX_BYTES, 16 MiB;
   * 0 returns none, only the size). A runtime holds no more than this of the file in memory,
   * however large the file is: it stops reading there.
   */
  maxBytes?: number;
}

/** How much of a file `readFile` returns when the caller does not say: no caller buffers a file of any size by accident. */
export const DEFAULT_READ_FILE_MAX_BYTES = 16 * 1024 * 1024;

/** How many symbolic links, one after another, `readFile` follows before it takes the path for a loop. */
export const MAX_SYMLINK_HOPS = 8;

/** A file as `readFile` read it: its first bytes and its whole size. */
export interface FileContent {
  /** The file's first `min(size, maxBytes)` bytes. */
  bytes: Uint8Array;
  /** The whole file's size in bytes. */
  size: number;
  /** `bytes` holds less than the whole file (`size > bytes.length`). */
  truncated: boolean;
}

export interface ExecResult {
  /** null when the command was killed before it could exit by itself. */
  exit_code: number | null;
  stdout: string;
  stderr: string;
  timed_out: boolean;
  duration_ms: number;
}

/** A long-running process to start in a sandbox, spoken to over its stdin and stdout (e.g. a stdio MCP server). */
export interface SpawnRequest {
  /** An argv, run without a shell. */
  command: readonly string[];
  /** Absolute, or relative to the spec's working directory. Default: the working directory. */
  cwd?: string;
  env?: Readonly<Record<string, string>>;
  /**
   * Run it on a terminal: stdout and stderr arrive merged on stdout, as a terminal shows them
   * (line ends as \r\n); what is written goes through the terminal's line discipline, so the
   * byte 0x03 (Ctrl-C) sends SIGINT to the terminal's foreground process group. The process
   * leads its own session with the terminal as its controlling terminal. The persistent shell
   * (openSandboxShell) needs this. Default false: plain pipes.
   */
  tty?: boolean;
}

/**
 * A process running in a sandbox. Output arrives as it is written, stdout and stderr kept
 * apart (stderr is for logs; a protocol reads stdout only). Listeners added after output
 * arrived do not see that output, so add them right after `spawn` resolves.
 */
export interface SandboxProcess {
  /** Writes to the process's stdin; rejects once the process has ended. */
  write(data: Uint8Array | string): Promise<void>;
  onStdout(listener: (chunk: Uint8Array) => void): void;
  onStderr(listener: (chunk: Uint8Array) => void): void;
  /** Resolves once, when the process has ended (exited, was killed, or its stream was lost); exit_code null when unknown. */
  readonly exited: Promise<{ exit_code: number | null }>;
  /** Ends the process (and what it started); resolves when it has ended. Idempotent. */
  kill(): Promise<void>;
}

export interface DirectoryEntry {
  name: string;
  /** Absolute path inside the sandbox. */
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
}

/** A sandbox the runtime holds, as its labels describe it (for adopting it after a restart). */
export interface RuntimeSandboxSummary {
  sandbox_id: string;
  user_id: string;
  spec_id: string;
  image: string;
  working_dir: string;
  created_at: string;
}

/**
 * Where sandboxes actually run (a container engine, a VM service, a fake).
 * `create` returns promptly, usually in `starting`; the service polls `inspect`
 * until `running`. Pause and resume must be idempotent. `delete` of an unknown
 * sandbox succeeds. Errors say what went wrong in words a user can act on.
 */
export interface SandboxRuntime {
  readonly specificationVersion: 'v1';
  /** Resolves when the runtime can be reached (cheap; called before each start and delete). */
  ping(): ResultAsync<void, SandboxRuntimeError>;
  /**
   * For runtimes with a capacity (a pool of engines): resolves when a new sandbox would be
   * taken now, or fails as `unavailable` saying why not. Called before each start instead of
   * `ping`, so a full runtime refuses the start at once (503) rather than failing the sandbox later.
   */
  admit?(): ResultAsync<void, SandboxRuntimeError>;
  /**
   * Every sandbox this runtime holds for this installation, whatever its state. Sandboxes of
   * other installations (created with another `installation_id`, or by a version that did not
   * label them) are never listed.
   */
  list(installationId: string): ResultAsync<RuntimeSandboxSummary[], SandboxRuntimeError>;
  /**
   * Creates and starts the sandbox. May take long when something must be prepared first (an
   * image built, say); it then reports what it is doing through `onProgress`, in words for the
   * user (they become the sandbox's status detail and its start task's detail).
   */
  create(
    request: RuntimeCreateRequest,
    onProgress?: (detail: string) => void,
  ): ResultAsync<RuntimeObservation, SandboxRuntimeError>;
  inspect(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError>;
  pause(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError>;
  resume(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError>;
  delete(sandboxId: string): ResultAsync<void, SandboxRuntimeError>;
  /**
   * For runtimes that can change a running sandbox's limits (Docker: `docker update`): applies
   * `resourceFactor` to the CPU, memory and pids limits, as `create` does with the request's.
   * A pooled sandbox is made with factor 1; a claim by a user with another factor needs this,
   * and without it such a user gets a new sandbox instead of a pooled one.
   */
  resize?(sandboxId: string, resourceFactor: number): ResultAsync<void, SandboxRuntimeError>;
  /** Runs a command in a running sandbox; stdout and stderr are kept apart. */
  exec(sandboxId: string, request: ExecRequest): ResultAsync<ExecResult, SandboxRuntimeError>;
  /**
   * A regular file's first bytes, at most `options.maxBytes` (default 16 MiB), and its whole size
   * (absolute path, or relative to the working directory). A runtime never reads more of the
   * file than that into memory. Symbolic links are followed inside the sandbox, each target
   * resolved against its link's directory, up to MAX_SYMLINK_HOPS links in a row. Fails
   * `not_found` when the path does not exist or its links lead nowhere (dangling, or a loop),
   * `is_directory` for a directory (list it instead), `failed` for anything else that is not a
   * regular file (a device, a socket).
   */
  readFile(sandboxId: string, path: string, options?: ReadFileOptions): ResultAsync<FileContent, SandboxRuntimeError>;
  /** Writes bytes to a file, creating parent directories. */
  writeFile(sandboxId: string, path: string, content: Uint8Array): ResultAsync<void, SandboxRuntimeError>;
  /** The entries of a directory, sorted by name. */
  listDirectory(sandboxId: string, path: string): ResultAsync<DirectoryEntry[], SandboxRuntimeError>;
  /**
   * Starts a long-running process in a running sandbox, with its stdin open; fails if the
   * program cannot be started. With `tty` it runs on a terminal; the persistent shell every
   * runtime gets (openSandboxShell) is built on that, `exec`, `writeFile` and `inspect`.
   */
  spawn(sandboxId: string, request: SpawnRequest): ResultAsync<SandboxProcess, SandboxRuntimeError>;
  /**
   * For runtimes over several engines: where the stored record says this sandbox was last seen
   * (`RuntimeObservation.location`), so the runtime need not look for it, and can say which
   * engine is down when that one does not answer. Called before the service acts on a record.
   */
  locate?(sandboxId: string, location: string): void;
}

/**
 * A runtime error as the service reports it for `operation` on a sandbox: an engine that cannot
 * be reached is SandboxesUnavailable, anything else SandboxRuntimeFailed.
 */
export const runtimeFailure =
  (sandboxId: string, operation: string) =>
  (e: SandboxRuntimeError): DomainErrorOf<'SandboxesUnavailable' | 'SandboxRuntimeFailed'> =>
    e.type === 'unavailable'
      ? { type: 'SandboxesUnavailable', reason: e.message }
      : { type: 'SandboxRuntimeFailed', sandboxId, operation, message: e.message };

/**
 * The labels every runtime puts on what it makes for a sandbox (container, StatefulSet, pod,
 * volume), so a restarted service finds its sandboxes and an installation sees only its own.
 */
export const SANDBOX_LABELS = {
  managed: 'io.acs.managed',
  /** The installation that owns the sandbox; `list` sees only its own. */
  installation: 'io.acs.installation-id',
  sandbox: 'io.acs.sandbox-id',
  user: 'io.acs.user-id',
  spec: 'io.acs.sandbox-spec-id',
} as const;

/**
 * The Linux capabilities a sandbox's process keeps, on every engine: what a dev shell needs;
 * everything else (NET_RAW, MKNOD, SYS_ADMIN, …) is dropped.
 */
export const SANDBOX_CAPABILITIES = [
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'SETGID',
  'SETUID',
  'NET_BIND_SERVICE',
  'SYS_CHROOT',
  'AUDIT_WRITE',
] as const;

/**
 * A path inside a sandbox, resolved against its working directory and normalised.
 * Paths always name the sandbox's own filesystem; null for what cannot be a path.
 */
export function resolveSandboxPath(workingDir: string, path: string): string | null {
  if (path === '' || path.includes('\0') || path.length > 4096) return null;
  const joined = path.startsWith('/') ? path : `${workingDir.replace(/\/+$/, '')}/${path}`;
  const parts: string[] = [];
  for (const part of joined.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return `/${parts.join('/')}`;
}

/**
 * A runtime for a host without sandboxes (no engine answered at start-up): every call
 * fails as `unavailable` with the reason, so sandbox routes answer 503 saying why.
 */
export function unavailableSandboxRuntime(reason: string): SandboxRuntime {
  const fail = <T>() => errAsync<T, SandboxRuntimeError>({ type: 'unavailable', message: reason });
  return {
    specificationVersion: 'v1',
    ping: () => fail(),
    list: () => fail(),
    create: () => fail(),
    inspect: () => fail(),
    pause: () => fail(),
    resume: () => fail(),
    delete: () => fail(),
    exec: () => fail(),
    readFile: () => fail(),
    writeFile: () => fail(),
    listDirectory: () => fail(),
    spawn: () => fail(),
  };
}
