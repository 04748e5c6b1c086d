import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RuntimeObservation, SandboxProcess, SandboxRuntime } from '../sandbox/runtime.js';
import { expectOk } from './stores.js';
import { waitUntil } from './waits.js';

/**
 * The programs the spawn cases of the runtime contract start. A runtime that runs real
 * programs needs `sh`, `cat` and `sleep` in the spec's image; a fake must play these argvs
 * as described (the memory adapter's tests show how).
 */
export const SPAWN_CONTRACT_PROGRAMS = {
  /** Copies stdin to stdout until killed. */
  echo: ['cat'],
  /** Writes `to-out` to stdout and `to-err` to stderr, then exits with code 3. */
  split: ['sh', '-c', 'printf to-out; printf to-err >&2; exit 3'],
  /** Prints `ready` and a newline, then ignores stdin and SIGTERM until killed. */
  deaf: ['sh', '-c', 'trap "" TERM INT HUP; echo ready; exec sleep 600'],
  /** A program that does not exist. */
  missing: ['acs-contract-no-such-program'],
  /**
   * Run on a terminal (`tty: true`): turns echo off, prints `ready`, reads a line and prints
   * `got <line>`, then `to-err` on stderr; on SIGINT (Ctrl-C at the terminal) prints
   * `interrupted` and exits with code 7.
   */
  terminal: [
    'sh',
    '-c',
    'stty -echo; echo ready; read line; echo "got $line"; trap "echo interrupted; exit 7" INT; echo to-err >&2; while :; do sleep 1; done',
  ],
} as const satisfies Record<string, readonly string[]>;

/** Collects a process's output from the moment it is called (right after spawn resolves). */
export function collectProcessOutput(child: SandboxProcess) {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.onStdout((chunk) => out.push(Buffer.from(chunk)));
  child.onStderr((chunk) => err.push(Buffer.from(chunk)));
  return { stdout: () => Buffer.concat(out).toString('utf8'), stderr: () => Buffer.concat(err).toString('utf8') };
}

/** What the spawn cases take from the runtime contract around them. */
interface SpawnCaseContext {
  /** A new runtime with one sandbox of the spec, running. */
  runningSandbox: () => Promise<{ runtime: SandboxRuntime; id: string }>;
  /** An id no sandbox has yet. */
  nextId: () => string;
  /** The sandbox's state once it is no longer starting. */
  untilStarted: (runtime: SandboxRuntime, id: string) => Promise<RuntimeObservation>;
}

/** The runtime contract's spawned-process cases, in one sandbox (programs: `SPAWN_CONTRACT_PROGRAMS`). */
export function describeSpawnCases({ runningSandbox, nextId, untilStarted }: SpawnCaseContext): void {
  describe('spawn (programs: SPAWN_CONTRACT_PROGRAMS)', () => {
    let runtime: SandboxRuntime;
    let id: string;
    const started: SandboxProcess[] = [];
    const spawn = async (command: readonly string[], tty = false) => {
      const child = await expectOk(runtime.spawn(id, { command, ...(tty ? { tty } : {}) }));
      started.push(child);
      return child;
    };

    beforeAll(async () => {
      ({ runtime, id } = await runningSandbox());
    });
    afterAll(async () => {
      await Promise.all(started.map((child) => child.kill()));
      await runtime.delete(id);
    });

    it('echoes what is written to stdin on stdout, in order', async () => {
      const child = await spawn(SPAWN_CONTRACT_PROGRAMS.echo);
      const output = collectProcessOutput(child);
      await child.write('hello\n');
      await child.write(new TextEncoder().encode('ünïcode wörld\n'));
      for (let i = 0; i < 20; i++) await child.write(`line ${i}\n`);
      const expected = `hello\nünïcode wörld\n${Array.from({ length: 20 }, (_, i) => `line ${i}\n`).join('')}`;
      await waitUntil(() => output.stdout() === expected);
      expect(output.stdout()).toBe(expected);
      expect(output.stderr()).toBe('');
      await child.kill();
      expect(await child.exited).toHaveProperty('exit_code');
    });

    it('keeps stderr apart from stdout and reports the exit code; a process that has ended takes no input', async () => {
      const child = await spawn(SPAWN_CONTRACT_PROGRAMS.split);
      const output = collectProcessOutput(child);
      expect(await child.exited).toEqual({ exit_code: 3 });
      expect(output.stdout()).toBe('to-out');
      expect(output.stderr()).toBe('to-err');
      await expect(child.write('too late\n')).rejects.toThrow();
      await child.kill();
    });

    it('kill() ends a process that ignores stdin and SIGTERM; kill is idempotent', async () => {
      const child = await spawn(SPAWN_CONTRACT_PROGRAMS.deaf);
      const output = collectProcessOutput(child);
      await waitUntil(() => output.stdout() === 'ready\n');
      expect(output.stdout()).toBe('ready\n');
      // It would sleep 10 minutes: ending within 60 s means kill() ended it.
      await Promise.all([child.kill(), child.kill()]);
      const ended = await Promise.race([
        child.exited.then(() => 'exited'),
        new Promise((r) => setTimeout(() => r('still running after 60 s'), 60_000).unref()),
      ]);
      expect(ended).toBe('exited');
      await child.kill();
      await expect(child.write('anyone?\n')).rejects.toThrow();
    });

    it('runs a process on a terminal: one merged stream, input through the line discipline, Ctrl-C as SIGINT', async () => {
      const child = await spawn(SPAWN_CONTRACT_PROGRAMS.terminal, true);
      const output = collectProcessOutput(child);
      // A terminal ends lines with \r\n; what matters here is what was said, and where.
      const said = () => output.stdout().replace(/\r/g, '');
      await waitUntil(() => said() === 'ready\n');
      expect(said()).toBe('ready\n');
      await child.write('hello\n');
      await waitUntil(() => said().endsWith('to-err\n'));
      expect(said()).toBe('ready\ngot hello\nto-err\n');
      await child.write('\x03');
      expect(await child.exited).toEqual({ exit_code: 7 });
      expect(said()).toBe('ready\ngot hello\nto-err\ninterrupted\n');
      expect(output.stderr()).toBe('');
    });

    it('refuses to start a program that does not exist, saying so', async () => {
      const result = await runtime.spawn(id, { command: SPAWN_CONTRACT_PROGRAMS.missing });
      expect(result.isErr() && result.error.type).toBe('failed');
      expect(result.isErr() && result.error.message).toMatch(/not found/i);
    });

    it('refuses to spawn in a paused sandbox or one it does not have', async () => {
      await expectOk(runtime.pause(id));
      try {
        const paused = await runtime.spawn(id, { command: SPAWN_CONTRACT_PROGRAMS.echo });
        expect(paused.isErr() && paused.error.type).toBe('failed');
        expect(paused.isErr() && paused.error.message).toMatch(/paused/);
      } finally {
        await expectOk(runtime.resume(id));
        expect((await untilStarted(runtime, id)).state).toBe('running');
      }
      const missing = await runtime.spawn(nextId(), { command: SPAWN_CONTRACT_PROGRAMS.echo });
      expect(missing.isErr() && missing.error.type).toBe('not_found');
    });
  });
}
