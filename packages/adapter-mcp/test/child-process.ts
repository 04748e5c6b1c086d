import { spawn } from 'node:child_process';
import type { SandboxProcess, SandboxRuntimeError } from '@acs/core/ports';
import { err, errAsync, ok, ResultAsync } from 'neverthrow';

export interface HostProcess extends SandboxProcess {
  readonly pid: number;
}

/** A SandboxProcess over a host child process (what a sandbox runtime's `spawn` gives, minus the sandbox). */
export function spawnHostProcess(
  command: readonly string[],
  options: { env?: Record<string, string>; cwd?: string } = {},
): ResultAsync<HostProcess, SandboxRuntimeError> {
  const [program, ...args] = command;
  if (program === undefined) return errAsync({ type: 'failed', message: 'empty command' });
  const child = spawn(program, args, {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const started = new Promise<HostProcess | SandboxRuntimeError>((resolve) => {
    child.once('error', (error) =>
      resolve({ type: 'failed', message: `could not start ${program}: ${error.message}` }),
    );
    child.once('spawn', () => {
      const exited = new Promise<{ exit_code: number | null }>((done) =>
        child.once('close', (code) => done({ exit_code: code })),
      );
      child.stdin.on('error', () => undefined);
      resolve({
        pid: child.pid ?? -1,
        write: (data) =>
          new Promise<void>((ok, fail) => {
            if (child.exitCode !== null || child.signalCode !== null || child.stdin.destroyed) {
              fail(new Error('the process has ended'));
              return;
            }
            child.stdin.write(data, (error) => (error ? fail(error) : ok()));
          }),
        onStdout: (listener) => child.stdout.on('data', (chunk: Buffer) => listener(chunk)),
        onStderr: (listener) => child.stderr.on('data', (chunk: Buffer) => listener(chunk)),
        exited,
        kill: async () => {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
          await exited;
        },
      });
    });
  });
  return new ResultAsync(started.then((outcome) => ('type' in outcome ? err(outcome) : ok(outcome))));
}

/** Whether a pid is still running. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
