import type { ResultAsync } from 'neverthrow';
import type { SandboxRuntimeError } from './runtime-error.js';

/** What one call on a shell reports. */
export interface ShellOutput {
  /** What the command printed (stdout and stderr merged, as a terminal shows them), bounded: head and tail kept. */
  output: string;
  /** null while the command is still running. */
  exit_code: number | null;
  still_running: boolean;
  /** The shell's working directory after the command finished; null while running. */
  cwd: string | null;
  /** When output was cut: the path of a file in the sandbox holding all of it; else null. */
  spilled_to: string | null;
}

export interface OpenShellOptions {
  /** Where the shell starts: absolute, or relative to the spec's working directory. Default: the working directory. */
  cwd?: string;
  /** Added to the sandbox's environment for this shell. */
  env?: Readonly<Record<string, string>>;
  /** The most characters one call returns (head and tail kept). Default 30,000. */
  maxOutputChars?: number;
}

/**
 * A long-lived shell in a sandbox: `cd` and `export` carry over between commands. One
 * command runs at a time; a command that outlives its soft timeout keeps running and
 * the caller can wait for it, send it input, or interrupt it.
 */
export interface SandboxShell {
  /** Runs a command line; returns when it finishes or after softTimeoutMs (default 10 s) with still_running: true. Refuses (type 'failed', message says so) while another command is still running. */
  run(command: string, options?: { softTimeoutMs?: number }): ResultAsync<ShellOutput, SandboxRuntimeError>;
  /** Waits up to ms more for the running command; output is what arrived since the last call. */
  wait(ms: number): ResultAsync<ShellOutput, SandboxRuntimeError>;
  /** Writes text (e.g. "y\n") to the running command's input, then waits briefly (≤ waitMs, default 1 s). */
  sendInput(text: string, waitMs?: number): ResultAsync<ShellOutput, SandboxRuntimeError>;
  /** Ctrl-C to the running command; returns when the shell is back (or after a few seconds, still_running). */
  interrupt(): ResultAsync<ShellOutput, SandboxRuntimeError>;
  close(): Promise<void>;
}

/**
 * What a call fails with on a shell that has ended while its sandbox is still there (it exited,
 * it was closed, or a pause of the sandbox ended its process): a new shell can run commands (once
 * the sandbox runs). A shell that ended with its sandbox fails as the runtime does (`not_found`).
 */
export interface ShellEnded extends SandboxRuntimeError {
  readonly type: 'failed';
  readonly shellEnded: true;
}

/** Whether a shell call failed because the shell has ended (see ShellEnded): open a new one. */
export function isShellEnded(error: SandboxRuntimeError): error is ShellEnded {
  return (error as Partial<ShellEnded>).shellEnded === true;
}

export const DEFAULT_SHELL_MAX_OUTPUT_CHARS = 30_000;
export const DEFAULT_SHELL_SOFT_TIMEOUT_MS = 10_000;

/**
 * Output longer than maxChars, cut to at most maxChars: the first 30 % and the last 70 %
 * of the room (at line ends where that loses little) around a line saying how much was
 * left out and where all of it is (or why it could not be kept). Text that fits is returned as is.
 */
export function clipShellOutput(text: string, maxChars: number, spill: { path: string } | { error: string }): string {
  if (text.length <= maxChars) return text;
  const notice = (omitted: number) =>
    'path' in spill
      ? `\n[… ${omitted} characters omitted; full output in ${spill.path} …]\n`
      : `\n[… ${omitted} characters omitted; the full output could not be saved: ${spill.error} …]\n`;
  const room = Math.max(0, maxChars - notice(text.length).length);
  const headRoom = Math.floor(room * 0.3);
  const tailRoom = room - headRoom;
  let head = text.slice(0, headRoom);
  const headCut = head.lastIndexOf('\n');
  if (headCut >= headRoom / 2) head = head.slice(0, headCut + 1);
  let tail = tailRoom > 0 ? text.slice(text.length - tailRoom) : '';
  const tailCut = tail.indexOf('\n');
  if (tailCut >= 0 && tailCut < tailRoom / 2 && tailCut < tail.length - 1) tail = tail.slice(tailCut + 1);
  const omitted = text.length - head.length - tail.length;
  return `${head.replace(/\n$/, '')}${notice(omitted)}${tail}`;
}
