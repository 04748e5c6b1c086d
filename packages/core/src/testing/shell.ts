import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxRuntime } from '../sandbox/runtime.js';
import { isShellEnded, type OpenShellOptions, type SandboxShell, type ShellOutput } from '../sandbox/shell.js';
import { openSandboxShell } from '../sandbox/persistent-shell.js';
import { contractSandboxes, type SandboxRuntimeContractOptions } from './runtime.js';
import { expectOk, type StoreFactory } from './stores.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Contract for the persistent shell (openSandboxShell) over a runtime that runs real commands
 * (Docker and the like; the memory fake plays bash over its handlers and has its own tests).
 * What the runtime must give it: spawn with `tty`, exec, writeFile, inspect. `spec` must
 * name an image with bash and coreutils. One sandbox serves the whole suite.
 */
export function describeSandboxShellContract(
  name: string,
  make: StoreFactory<SandboxRuntime>,
  options: SandboxRuntimeContractOptions = {},
): void {
  const { spec, nextId, untilStarted, startSandbox } = contractSandboxes('shell', options);

  describe(`SandboxShell contract: ${name}`, { timeout: options.testTimeoutMs ?? 180_000 }, () => {
    let runtime: SandboxRuntime;
    let id: string;
    const shells: SandboxShell[] = [];
    const open = async (shellOptions: OpenShellOptions = {}) => {
      const shell = await expectOk(openSandboxShell(runtime, id, shellOptions));
      shells.push(shell);
      return shell;
    };
    /** Runs a command that must finish within the soft timeout. */
    const finished = async (shell: SandboxShell, command: string, softTimeoutMs = 15_000): Promise<ShellOutput> => {
      const result = await expectOk(shell.run(command, { softTimeoutMs }));
      expect(result, `"${command}" should have finished`).toMatchObject({ still_running: false });
      return result;
    };

    beforeAll(async () => {
      runtime = await make();
      id = nextId();
      await startSandbox(runtime, id, { FROM_SPEC: 'spec-value' });
    });
    afterAll(async () => {
      await Promise.all(shells.map((shell) => shell.close()));
      await runtime.delete(id);
    });

    it('starts in the working directory, or in cwd, with the sandbox and shell environment', async () => {
      const shell = await open();
      expect(await finished(shell, 'pwd; echo "$FROM_SPEC"')).toEqual({
        output: `${spec.working_dir}\nspec-value\n`,
        exit_code: 0,
        still_running: false,
        cwd: spec.working_dir,
        spilled_to: null,
      });
      await finished(shell, 'mkdir -p "start here"');
      const elsewhere = await open({ cwd: 'start here', env: { FROM_SHELL: 'shell-value' } });
      expect(await finished(elsewhere, 'pwd; echo "$FROM_SPEC $FROM_SHELL"')).toMatchObject({
        output: `${spec.working_dir}/start here\nspec-value shell-value\n`,
        cwd: `${spec.working_dir}/start here`,
      });
    });

    it('keeps cd, export and shell variables between commands', async () => {
      const shell = await open();
      expect(await finished(shell, 'mkdir -p /tmp/shell-cd/inner && cd /tmp/shell-cd')).toMatchObject({
        exit_code: 0,
        cwd: '/tmp/shell-cd',
        output: '',
      });
      await finished(shell, 'export ACS_EXPORTED="forty two"; plain=kept; greet() { echo "hi $1"; }');
      await finished(shell, 'cd inner');
      expect(
        await finished(
          shell,
          'pwd; echo "$ACS_EXPORTED/$plain"; bash -c \'echo "child sees $ACS_EXPORTED"\'; greet you',
        ),
      ).toMatchObject({
        output: '/tmp/shell-cd/inner\nforty two/kept\nchild sees forty two\nhi you\n',
        exit_code: 0,
        cwd: '/tmp/shell-cd/inner',
      });
    });

    it('reports the exit code of the last command, and survives an incomplete command', async () => {
      const shell = await open();
      expect((await finished(shell, 'false')).exit_code).toBe(1);
      expect((await finished(shell, 'true; (exit 7)')).exit_code).toBe(7);
      expect((await finished(shell, 'bash -c "exit 42"')).exit_code).toBe(42);
      expect((await finished(shell, 'definitely-not-a-command-xyz')).exit_code).toBe(127);
      expect((await finished(shell, 'false; true')).exit_code).toBe(0);
      const unclosed = await finished(shell, 'echo "unclosed');
      expect(unclosed.exit_code).not.toBe(0);
      expect(unclosed.output).toMatch(/unexpected EOF|unexpected end of file/);
      expect(await finished(shell, 'echo still here')).toMatchObject({ output: 'still here\n', exit_code: 0 });
    });

    it('shows stdout and stderr together, in order, and passes any text through intact', async () => {
      const shell = await open();
      expect(
        await finished(shell, 'echo to-out; echo to-err >&2; echo out-again; printf "ünïcode, no newline"'),
      ).toMatchObject({
        output: 'to-out\nto-err\nout-again\nünïcode, no newline',
        exit_code: 0,
      });
      const script = "cat <<'EOF'\ntab\there 'single' \"double\" back\\slash $HOME `tick` !bang\nEOF";
      expect((await finished(shell, script)).output).toBe(
        'tab\there \'single\' "double" back\\slash $HOME `tick` !bang\n',
      );
      const long = 'x'.repeat(10_000);
      expect((await finished(shell, `echo ${long} | wc -c`)).output.trim()).toBe('10001');
    });

    it('returns a slow command as still running, refuses another, and gets the shell back with interrupt', async () => {
      const shell = await open();
      // The command sleeps 10 minutes: 'still running' with only its first line is the soft timeout answering.
      const slow = await expectOk(shell.run('echo started; sleep 600; echo done', { softTimeoutMs: 1_000 }));
      expect(slow).toMatchObject({ still_running: true, exit_code: null, cwd: null, output: 'started\n' });
      const refused = await shell.run('echo meanwhile');
      expect(refused.isErr() && refused.error.type).toBe('failed');
      expect(refused.isErr() && refused.error.message).toMatch(/still running/);
      const interrupted = await expectOk(shell.interrupt());
      expect(interrupted).toMatchObject({ still_running: false, exit_code: 130, cwd: spec.working_dir });
      expect(interrupted.output).not.toContain('done');
      expect(await finished(shell, 'echo after')).toMatchObject({ output: 'after\n', exit_code: 0 });
      const idle = await shell.wait(100);
      expect(idle.isErr() && idle.error.message).toMatch(/no command is running/);
    });

    it('interrupts a command while run() is still waiting for it, even right after it was started', async () => {
      const shell = await open();
      // Exit code 130 and no 'done': the interrupt ended a 10-minute sleep, it was not waited for.
      const pending = shell.run('sleep 600; echo done', { softTimeoutMs: 20_000 });
      await sleep(500);
      const interrupted = await expectOk(shell.interrupt());
      const ran = await expectOk(pending);
      for (const result of [interrupted, ran]) expect(result).toMatchObject({ still_running: false, exit_code: 130 });
      expect(interrupted.output + ran.output).not.toContain('done');

      const early = shell.run('sleep 600; echo done', { softTimeoutMs: 20_000 });
      const cancelled = await expectOk(shell.interrupt());
      expect(await expectOk(early)).toMatchObject({ still_running: false, exit_code: 130 });
      expect(cancelled).toMatchObject({ still_running: false, exit_code: 130 });
      expect(await finished(shell, 'echo next')).toMatchObject({ output: 'next\n', exit_code: 0 });
    });

    it('never loses an interrupt that races with the start of a command', async () => {
      const shell = await open();
      for (let i = 0; i < 30; i++) {
        const pending = shell.run('sleep 30; echo done', { softTimeoutMs: 20_000 });
        await sleep(i % 10);
        const interrupted = await expectOk(shell.interrupt());
        expect(interrupted, `attempt ${i}`).toMatchObject({ still_running: false, exit_code: 130 });
        expect(await expectOk(pending)).toMatchObject({ still_running: false, exit_code: 130 });
        expect(await finished(shell, 'echo ok')).toMatchObject({ output: 'ok\n', exit_code: 0 });
      }
    });

    it('kills a command that ignores Ctrl-C when interrupted a second time', async () => {
      const shell = await open();
      expect(
        (await expectOk(shell.run('bash -c "trap \'\' INT; sleep 60"', { softTimeoutMs: 500 }))).still_running,
      ).toBe(true);
      expect((await expectOk(shell.interrupt())).still_running).toBe(true);
      expect(await expectOk(shell.interrupt())).toMatchObject({ still_running: false, exit_code: 137 });
      expect(await finished(shell, 'echo back')).toMatchObject({ output: 'back\n', exit_code: 0 });
    });

    it('passes input to a command that reads it', async () => {
      const shell = await open();
      const waiting = await expectOk(shell.run('read x; echo "got $x"', { softTimeoutMs: 500 }));
      expect(waiting).toMatchObject({ still_running: true, output: '' });
      const answered = await expectOk(shell.sendInput('hello\n', 5_000));
      expect(answered).toMatchObject({ still_running: false, exit_code: 0 });
      expect(answered.output).toContain('got hello');
      const refused = await shell.sendInput('nobody reads this\n');
      expect(refused.isErr() && refused.error.message).toMatch(/no command is running/);
    });

    it('runs the next command after input the last one left unread, even half a quoted string', async () => {
      const shell = await open();
      expect((await expectOk(shell.run('sleep 1', { softTimeoutMs: 100 }))).still_running).toBe(true);
      // Unread by sleep, this reaches bash once sleep ends: an open quote that swallows the lines after it.
      await expectOk(shell.sendInput("echo $'never closed\n", 50));
      expect(await expectOk(shell.wait(5_000))).toMatchObject({ still_running: false, exit_code: 0 });
      expect(await finished(shell, 'echo after')).toMatchObject({ output: 'after\n', exit_code: 0 });
    });

    it('gives the output of a slow command bit by bit through wait', async () => {
      const shell = await open();
      const first = await expectOk(shell.run('for i in 1 2 3; do echo $i; sleep 1; done', { softTimeoutMs: 500 }));
      expect(first.still_running).toBe(true);
      const parts = [first.output];
      let last = first;
      while (last.still_running) {
        last = await expectOk(shell.wait(10_000));
        parts.push(last.output);
      }
      expect(parts.length).toBeGreaterThanOrEqual(2);
      expect(parts.join('')).toBe('1\n2\n3\n');
      expect(last).toMatchObject({ exit_code: 0, cwd: spec.working_dir });
    });

    it('bounds huge output to head and tail and spills all of it to a file in the sandbox', async () => {
      const shell = await open({ maxOutputChars: 10_000 });
      const result = await finished(shell, 'seq 1 200000', 60_000);
      expect(result.exit_code).toBe(0);
      expect(result.output.length).toBeLessThanOrEqual(10_000);
      expect(result.output.length).toBeGreaterThan(9_000);
      expect(result.output.startsWith('1\n2\n3\n4\n')).toBe(true);
      expect(result.output.endsWith('199998\n199999\n200000\n')).toBe(true);
      expect(result.spilled_to).toMatch(/^\//);
      expect(result.output).toContain(`characters omitted; full output in ${result.spilled_to}`);
      const head = result.output.slice(0, result.output.indexOf('\n[…'));
      expect(head.split('\n').length).toBeGreaterThan(500);
      const full = new TextDecoder().decode((await expectOk(runtime.readFile(id, result.spilled_to as string))).bytes);
      const lines = full.split('\n').filter(Boolean);
      expect(lines).toHaveLength(200_000);
      expect(lines.every((line, i) => line === String(i + 1))).toBe(true);
      expect(await finished(shell, 'echo small')).toMatchObject({ output: 'small\n', spilled_to: null });
    });

    it('keeps two shells of one sandbox independent', async () => {
      const a = await open();
      const b = await open();
      await finished(a, 'cd /tmp && export ONLY_A=1');
      expect((await expectOk(a.run('sleep 20', { softTimeoutMs: 200 }))).still_running).toBe(true);
      expect(await finished(b, 'pwd; echo "[$ONLY_A]"')).toMatchObject({
        output: `${spec.working_dir}\n[]\n`,
        cwd: spec.working_dir,
      });
      expect((await expectOk(a.interrupt())).exit_code).toBe(130);
      expect(await finished(a, 'pwd; echo "[$ONLY_A]"')).toMatchObject({ output: '/tmp\n[1]\n', cwd: '/tmp' });
    });

    it('reports a shell that exited, and a closed shell ends what it ran', async () => {
      const exiting = await open();
      expect(await finished(exiting, 'exit 3')).toMatchObject({ exit_code: 3, still_running: false });
      const dead = await exiting.run('echo anyone');
      expect(dead.isErr() && dead.error.message).toMatch(/exited/);
      expect(dead.isErr() && isShellEnded(dead.error)).toBe(true);

      const closing = await open();
      expect((await expectOk(closing.run('sleep 321', { softTimeoutMs: 200 }))).still_running).toBe(true);
      await closing.close();
      const closed = await closing.run('echo anyone');
      expect(closed.isErr() && closed.error.message).toMatch(/closed/);
      expect(closed.isErr() && isShellEnded(closed.error)).toBe(true);
      let survivors = '';
      for (let i = 0; i < 20; i++) {
        survivors = (
          await expectOk(runtime.exec(id, { command: ['bash', '-c', 'ps -eo args | grep "[s]leep 321" || true'] }))
        ).stdout;
        if (survivors === '') break;
        await sleep(100);
      }
      expect(survivors).toBe('');
    });

    it('refuses a shell in a sandbox that is paused or does not exist', async () => {
      const missing = await openSandboxShell(runtime, nextId());
      expect(missing.isErr() && missing.error.type).toBe('not_found');
      const shell = await open();
      await expectOk(runtime.pause(id));
      try {
        const paused = await openSandboxShell(runtime, id);
        expect(paused.isErr() && paused.error.message).toMatch(/paused/);
        const run = await shell.run('echo hi');
        expect(run.isErr() && run.error.message).toMatch(/paused/);
      } finally {
        await expectOk(runtime.resume(id));
      }
      if ((options.pauseKeeps ?? 'processes') === 'processes') {
        expect(await finished(shell, 'echo resumed')).toMatchObject({ output: 'resumed\n' });
      } else {
        // The pause ended the shell's process; the shell says so, and a new one works once the sandbox is back.
        await untilStarted(runtime, id);
        const stale = await shell.run('echo resumed');
        expect(stale.isErr() && stale.error.message).toMatch(/open a new one/);
        expect(stale.isErr() && isShellEnded(stale.error)).toBe(true);
        expect(await finished(await open(), 'echo resumed')).toMatchObject({ output: 'resumed\n' });
      }
    });
  });
}
