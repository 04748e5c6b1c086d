/**
 * What `exec` is the same on every engine: the command wrapped so it dies on time, the output
 * kept to `maxOutputBytes` a stream, and the ExecResult made of how it ended. A runtime adapter
 * runs the argv through its engine, pushes the output here and says how it ended.
 */
import { clippedOutputNote, DEFAULT_EXEC_MAX_OUTPUT_BYTES, type ExecRequest, type ExecResult } from './runtime.js';

/** How long a command may run when the request does not say. */
const DEFAULT_EXEC_TIMEOUT_MS = 120_000;
/** How long past its timeout the runtime waits for a command's session before it cuts it. */
const HOST_DEADLINE_MARGIN_MS = 10_000;

/** Keeps at most `limit` bytes, noting how much was dropped. */
export class BoundedOutput {
  readonly #chunks: Buffer[] = [];
  readonly #limit: number;
  #size = 0;
  #dropped = 0;

  constructor(limit: number) {
    this.#limit = limit;
  }

  push(chunk: Buffer): void {
    const room = this.#limit - this.#size;
    if (room > 0) this.#chunks.push(chunk.subarray(0, room));
    this.#size += Math.min(room, chunk.length);
    this.#dropped += Math.max(0, chunk.length - Math.max(0, room));
  }

  text(): string {
    const text = Buffer.concat(this.#chunks).toString('utf8');
    return this.#dropped > 0 ? `${text}${clippedOutputNote(this.#dropped)}` : text;
  }
}

/** A stdout and a stderr, each kept to the request's `maxOutputBytes` (default DEFAULT_EXEC_MAX_OUTPUT_BYTES). */
export function execOutputs(maxOutputBytes: number | undefined): { stdout: BoundedOutput; stderr: BoundedOutput } {
  const keep = Math.max(0, Math.floor(maxOutputBytes ?? DEFAULT_EXEC_MAX_OUTPUT_BYTES));
  return { stdout: new BoundedOutput(keep), stderr: new BoundedOutput(keep) };
}

/**
 * The argv that runs the request's command under `timeout -s KILL` (coreutils and busybox
 * `timeout` both kill the command's whole process group when time is up), its timeout, and how
 * long the runtime waits for the session before it cuts it.
 */
export function timedCommand(request: ExecRequest): { argv: string[]; timeoutMs: number; hostDeadlineMs: number } {
  const timeoutMs = request.timeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS;
  return {
    argv: ['timeout', '-s', 'KILL', String(Math.max(1, Math.ceil(timeoutMs / 1000))), ...request.command],
    timeoutMs,
    hostDeadlineMs: timeoutMs + HOST_DEADLINE_MARGIN_MS,
  };
}

/** How a command run through an engine ended, as the runtime saw it. */
export interface ExecEnding {
  /** The engine's exit code; null when it did not say (or the session was cut). */
  exitCode: number | null;
  /** The runtime cut the session at its host deadline. */
  hostTimeout: boolean;
  durationMs: number;
  timeoutMs: number;
  stdout: BoundedOutput;
  stderr: BoundedOutput;
}

/** The result of a command: one that ran out its time and was killed (137, or no code) has no exit code. */
export function execResult(ending: ExecEnding): ExecResult {
  const timedOut = ending.hostTimeout || ending.durationMs >= ending.timeoutMs;
  return {
    exit_code: timedOut && (ending.exitCode === 137 || ending.exitCode === null) ? null : ending.exitCode,
    stdout: ending.stdout.text(),
    stderr: ending.stderr.text(),
    timed_out: timedOut,
    duration_ms: ending.durationMs,
  };
}
