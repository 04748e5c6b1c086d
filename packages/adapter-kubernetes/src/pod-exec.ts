/**
 * Commands in a sandbox's pod through `pods/exec`: a session opened (a refusal explained from
 * the sandbox's state), a command run to its end with its output bounded, and the `sh` prefix
 * that gives exec the working directory and environment it has none of.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { execOutputs, execResult, RuntimeFailure, type ExecResult, type RuntimeObservation } from '@acs/core/ports';
import { ExecOpenFailure, openExec, type ExecChannel } from './exec-channel.js';
import { CONTAINER } from './manifest.js';

export interface PodExecDeps {
  kubeConfig: KubeConfig;
  namespace: string;
  podName(sandboxId: string): string;
  /** What the sandbox is now: says why an exec could not be opened. */
  observe(sandboxId: string): Promise<RuntimeObservation>;
}

interface PodRunOptions {
  /** When the runtime stops waiting and cuts the session. */
  hostDeadlineMs: number;
  /** The command's own time limit (what counts as timed out). */
  timeoutMs: number;
  maxOutputBytes?: number | undefined;
}

export interface PodExec {
  /** Opens an exec session in the sandbox's pod; a pod that is not there or not running is explained from its state. */
  open(sandboxId: string, argv: readonly string[], stdin: boolean, tty: boolean): Promise<ExecChannel>;
  /** Runs argv to its end with stdout and stderr kept apart; bounded in time and size. */
  run(sandboxId: string, argv: readonly string[], options: PodRunOptions): Promise<ExecResult>;
}

export function podExec(deps: PodExecDeps): PodExec {
  const open: PodExec['open'] = async (sandboxId, argv, stdin, tty) => {
    try {
      return await openExec(
        deps.kubeConfig,
        { namespace: deps.namespace, pod: deps.podName(sandboxId), container: CONTAINER },
        argv,
        { stdin, tty },
      );
    } catch (error) {
      if (!(error instanceof ExecOpenFailure)) throw error;
      if (error.status === 0) throw error;
      throw refusal(sandboxId, error, await deps.observe(sandboxId).catch(() => null));
    }
  };
  const run: PodExec['run'] = async (sandboxId, argv, options) => {
    const started = Date.now();
    const channel = await open(sandboxId, argv, false, false);
    const { stdout, stderr } = execOutputs(options.maxOutputBytes);
    channel.onStdout((chunk) => stdout.push(chunk));
    channel.onStderr((chunk) => stderr.push(chunk));
    let hostTimeout = false;
    const timer = setTimeout(() => {
      hostTimeout = true;
      channel.destroy();
    }, options.hostDeadlineMs);
    const end = await channel.ended.finally(() => clearTimeout(timer));
    const result = execResult({
      exitCode: end.exitCode,
      hostTimeout,
      durationMs: Date.now() - started,
      timeoutMs: options.timeoutMs,
      stdout,
      stderr,
    });
    if (!hostTimeout && result.exit_code === null && !result.timed_out)
      throw new RuntimeFailure(
        `the command in sandbox ${sandboxId} ended without an exit code: ${end.message ?? 'unknown'}`,
      );
    return result;
  };
  return { open, run };
}

/** Why the API refused an exec, from what the sandbox is now (null: it could not be read). */
function refusal(sandboxId: string, error: ExecOpenFailure, observed: RuntimeObservation | null): RuntimeFailure {
  if (observed?.state === 'missing')
    return new RuntimeFailure(`sandbox ${sandboxId} does not exist (${observed.detail ?? 'no pod'})`, 'not_found');
  if (observed?.state === 'paused') return new RuntimeFailure(`sandbox ${sandboxId} is paused; resume it first`);
  const state = observed ? ` (${observed.state}${observed.detail ? `: ${observed.detail}` : ''})` : '';
  return new RuntimeFailure(`cannot run a command in sandbox ${sandboxId}${state}: ${error.message}`);
}

/** Exec has no working directory or environment of its own: a small `sh` prefix sets them, then execs the command (same pid). */
export function commandPrefix(cwd: string, env: Readonly<Record<string, string>>): string[] {
  const variables = Object.entries(env).map(([key, value]) => `${key}=${value}`);
  return [
    'sh',
    '-c',
    'cd -- "$1" || exit 126; shift; exec "$@"',
    'acs-exec',
    cwd,
    ...(variables.length > 0 ? ['env', ...variables] : []),
  ];
}
