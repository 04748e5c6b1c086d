import { errAsync, type ResultAsync } from 'neverthrow';
import type { RuntimeObservation, SandboxRuntimeError } from './runtime.js';
import type { ShellEnded, ShellOutput } from './shell.js';

/** How a call on the persistent shell fails: the runtime's errors, and the shell's own. */

/** Thrown inside the shell to end a call with this runtime error. */
export class ShellFailure extends Error {
  constructor(readonly error: SandboxRuntimeError) {
    super(error.message);
  }
}

/** A call's failure, `failed` with these words. */
export const fail = (message: string) => new ShellFailure({ type: 'failed', message });

/** What a call that threw fails with. */
export function toRuntimeError(error: unknown): SandboxRuntimeError {
  if (error instanceof ShellFailure) return error.error;
  return { type: 'failed', message: error instanceof Error ? error.message : String(error) };
}

/** A call refused before it started. */
export function refusal(error: SandboxRuntimeError | string): ResultAsync<ShellOutput, SandboxRuntimeError> {
  return errAsync(typeof error === 'string' ? { type: 'failed', message: error } : error);
}

const ended = (message: string): ShellEnded => ({ type: 'failed', message, shellEnded: true });

/** A call on a shell that was closed. */
export const closedShell = (): ShellEnded => ended('this shell is closed; open a new one');

/** Why a command cannot run in a sandbox that is not running; null when it runs. */
export function notRunning(sandboxId: string, observed: RuntimeObservation): SandboxRuntimeError | null {
  const { state, detail } = observed;
  if (state === 'running') return null;
  if (state === 'paused')
    return { type: 'failed', message: `sandbox ${sandboxId} is paused; resume it before running commands` };
  if (state === 'missing') return { type: 'not_found', message: `sandbox ${sandboxId} does not exist` };
  return {
    type: 'failed',
    message: `sandbox ${sandboxId} is not running (it is ${state}${detail ? `: ${detail}` : ''})`,
  };
}

/**
 * Why the shell's process ended by itself, from what the runtime says of its sandbox now: the
 * usual reason is that the sandbox went away, stopped or was paused (a pause that stops the
 * processes, as Kubernetes' scale to zero does).
 */
export function whyEnded(
  sandboxId: string,
  observed: Awaited<ResultAsync<RuntimeObservation, SandboxRuntimeError>>,
  exitCode: number | null,
): SandboxRuntimeError {
  if (observed.isErr()) return observed.error;
  const { state, detail } = observed.value;
  if (state === 'paused')
    return ended(`sandbox ${sandboxId} was paused, which ended this shell; open a new one once it runs again`);
  if (state === 'missing')
    return { type: 'not_found', message: `sandbox ${sandboxId} does not exist any more; the shell ended with it` };
  if (state === 'error')
    return {
      type: 'failed',
      message: `sandbox ${sandboxId} failed${detail ? `: ${detail}` : ''}; the shell ended with it`,
    };
  return ended(`the shell has exited${exitCode !== null ? ` (exit code ${exitCode})` : ''}; open a new one`);
}
