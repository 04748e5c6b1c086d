import { describe, expect, it } from 'vitest';
import { openSandboxShell } from '@acs/core';
import type { ExecRequest, SandboxRuntimeError } from '@acs/core/ports';
import { expectOk, specFixture } from '@acs/core/testing';
import { FakeSandboxRuntime, type FakeExecContext } from '@acs/testing';

const spec = specFixture({ working_dir: '/workspace' });

async function sandbox(runtime = new FakeSandboxRuntime()) {
  await expectOk(runtime.create({ sandbox_id: 'box', user_id: 'alice', installation_id: 'acs-tests', spec, env: {} }));
  return runtime;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function expectErr<T>(result: { isErr(): boolean; error?: SandboxRuntimeError; value?: T }): SandboxRuntimeError {
  expect(result.isErr()).toBe(true);
  return result.error as SandboxRuntimeError;
}

describe('the persistent shell over the FakeSandboxRuntime (fake bash)', () => {
  it('keeps cd and export itself and hands other lines to the handler with that cwd and env', async () => {
    const seen: { request: ExecRequest; cwd: string }[] = [];
    const runtime = (await sandbox()).onExec('bash', (request, context) => {
      seen.push({ request, cwd: context.cwd });
      return { stdout: 'ran\n' };
    });
    const shell = await expectOk(openSandboxShell(runtime, 'box', { cwd: 'sub', env: { FROM_OPEN: '1' } }));
    expect(await expectOk(shell.run('pwd'))).toEqual({
      output: '/workspace/sub\n',
      exit_code: 0,
      still_running: false,
      cwd: '/workspace/sub',
      spilled_to: null,
    });
    expect(await expectOk(shell.run('cd ../other/dir'))).toMatchObject({
      output: '',
      exit_code: 0,
      cwd: '/workspace/other/dir',
    });
    expect(await expectOk(shell.run('export GREETING="hello world" N=2'))).toMatchObject({
      exit_code: 0,
      cwd: '/workspace/other/dir',
    });
    expect(await expectOk(shell.run('make test'))).toMatchObject({
      output: 'ran\n',
      exit_code: 0,
      cwd: '/workspace/other/dir',
    });
    expect(await expectOk(shell.run('cd'))).toMatchObject({ cwd: '/workspace' });
    await expectOk(shell.run('cd /tmp && make'));
    expect(seen).toEqual([
      {
        request: {
          command: ['bash', '-c', 'make test'],
          cwd: '/workspace/other/dir',
          env: { TERM: 'dumb', PAGER: 'cat', GIT_PAGER: 'cat', FROM_OPEN: '1', GREETING: 'hello world', N: '2' },
        },
        cwd: '/workspace/other/dir',
      },
      {
        request: {
          command: ['bash', '-c', 'cd /tmp && make'],
          cwd: '/workspace',
          env: { TERM: 'dumb', PAGER: 'cat', GIT_PAGER: 'cat', FROM_OPEN: '1', GREETING: 'hello world', N: '2' },
        },
        cwd: '/workspace',
      },
    ]);
    expect((await expectOk(shell.run('pwd'))).output).toBe('/workspace\n');
    expect(await expectOk(shell.run('export 1BAD=x'))).toMatchObject({ exit_code: 1 });
  });

  it('reports the exit code, stdout then stderr, and 127 for a line no handler takes', async () => {
    const runtime = (await sandbox()).onExec(/^bash -c build/, () => ({
      stdout: 'compiling\n',
      stderr: 'warning: x\n',
      exit_code: 2,
    }));
    const shell = await expectOk(openSandboxShell(runtime, 'box'));
    expect(await expectOk(shell.run('build all'))).toEqual({
      output: 'compiling\nwarning: x\n',
      exit_code: 2,
      still_running: false,
      cwd: '/workspace',
      spilled_to: null,
    });
    const unknown = await expectOk(shell.run('frobnicate'));
    expect(unknown.exit_code).toBe(127);
    expect(unknown.output).toMatch(/no handler for "bash -c frobnicate"/);
  });

  it('returns a slow handler as still running, refuses another command, and waits for it', async () => {
    let finish: (value: { stdout: string; exit_code: number }) => void = () => {};
    const runtime = (await sandbox())
      .onExec(/^bash -c slow/, () => new Promise((resolve) => (finish = resolve)))
      .onExec(/^bash -c quick/, () => ({ stdout: 'q\n' }));
    const shell = await expectOk(openSandboxShell(runtime, 'box'));
    // The handler is held until finish() below: still_running is the shell's own 30 ms timer answering.
    expect(await expectOk(shell.run('slow', { softTimeoutMs: 30 }))).toEqual({
      output: '',
      exit_code: null,
      still_running: true,
      cwd: null,
      spilled_to: null,
    });
    const refused = expectErr(await shell.run('quick'));
    expect(refused).toMatchObject({ type: 'failed' });
    expect(refused.message).toMatch(/still running \(slow\)/);
    expect((await expectOk(shell.wait(20))).still_running).toBe(true);
    setTimeout(() => finish({ stdout: 'slow done\n', exit_code: 3 }), 20);
    expect(await expectOk(shell.wait(60_000))).toEqual({
      output: 'slow done\n',
      exit_code: 3,
      still_running: false,
      cwd: '/workspace',
      spilled_to: null,
    });
    expect(expectErr(await shell.wait(10)).message).toMatch(
      /no command is running \(the last one ended with exit code 3\)/,
    );
    expect((await expectOk(shell.run('quick'))).output).toBe('q\n');
  });

  it('interrupts a running handler: its signal aborts, exit code 130, and what it returns later is dropped', async () => {
    let aborted = false;
    const runtime = (await sandbox()).onExec(/^bash -c serve/, (_request, context) => {
      return new Promise((resolve) =>
        context.signal.addEventListener('abort', () => {
          aborted = true;
          setTimeout(() => resolve({ stdout: 'too late\n', exit_code: 0 }), 5);
        }),
      );
    });
    const shell = await expectOk(openSandboxShell(runtime, 'box'));
    expect((await expectOk(shell.run('serve', { softTimeoutMs: 10 }))).still_running).toBe(true);
    expect(await expectOk(shell.interrupt())).toEqual({
      output: '',
      exit_code: 130,
      still_running: false,
      cwd: '/workspace',
      spilled_to: null,
    });
    expect(aborted).toBe(true);
    await sleep(20);
    expect(await expectOk(shell.run('pwd'))).toMatchObject({ output: '/workspace\n', exit_code: 0 });
    expect(await expectOk(shell.interrupt())).toMatchObject({ output: '', exit_code: 0, still_running: false });
  });

  it('passes sendInput text to the handler through context.input', async () => {
    const runtime = (await sandbox()).onExec(/^bash -c read/, async (_request, context: FakeExecContext) => {
      let received = '';
      for await (const chunk of context.input ?? []) {
        received += chunk;
        if (received.includes('\n')) break;
      }
      return { stdout: `got ${received.trim()}\n` };
    });
    const shell = await expectOk(openSandboxShell(runtime, 'box'));
    expect(await expectOk(shell.run('read x; echo "got $x"', { softTimeoutMs: 20 }))).toMatchObject({
      still_running: true,
      output: '',
    });
    expect(await expectOk(shell.sendInput('hel', 20))).toMatchObject({ still_running: true });
    expect(await expectOk(shell.sendInput('lo\n'))).toEqual({
      output: 'got hello\n',
      exit_code: 0,
      still_running: false,
      cwd: '/workspace',
      spilled_to: null,
    });
    expect(expectErr(await shell.sendInput('y\n')).message).toMatch(/no command is running/);
  });

  it('gives exec handlers no input', async () => {
    let input: unknown = 'unset';
    const runtime = (await sandbox()).onExec('true', (_request, context) => {
      input = context.input;
      return {};
    });
    await expectOk(runtime.exec('box', { command: ['true'] }));
    expect(input).toBeUndefined();
  });

  it('bounds long output to head and tail and spills all of it to a file in the sandbox', async () => {
    const lines = Array.from({ length: 20_000 }, (_, i) => String(i + 1));
    const runtime = (await sandbox()).onExec(/^bash -c seq/, () => ({ stdout: `${lines.join('\n')}\n` }));
    const shell = await expectOk(openSandboxShell(runtime, 'box', { maxOutputChars: 2_000 }));
    const result = await expectOk(shell.run('seq 1 20000'));
    expect(result.output.length).toBeLessThanOrEqual(2_000);
    expect(result.output.length).toBeGreaterThan(1_700);
    expect(result.output.startsWith('1\n2\n3\n')).toBe(true);
    expect(result.output.endsWith('19999\n20000\n')).toBe(true);
    expect(result.spilled_to).toMatch(/^\/tmp\/acs-shell-output-[0-9a-f]{8}-\d+\.log$/);
    expect(result.output).toMatch(
      /\n\[… \d+ characters omitted; full output in \/tmp\/acs-shell-output-[0-9a-f]{8}-\d+\.log …\]\n/,
    );
    const spilled = new TextDecoder().decode(
      (await expectOk(runtime.readFile('box', result.spilled_to as string))).bytes,
    );
    expect(spilled).toBe(`${lines.join('\n')}\n`);
  });

  it('reports a handler that throws as a command that printed the error and exited 1, and carries on', async () => {
    const runtime = (await sandbox()).onExec(/^bash -c boom/, () => {
      throw new Error('kaboom');
    });
    const shell = await expectOk(openSandboxShell(runtime, 'box'));
    expect(await expectOk(shell.run('boom'))).toMatchObject({
      output: 'fake runtime: the exec handler for "boom" threw: kaboom\n',
      exit_code: 1,
      still_running: false,
    });
    expect((await expectOk(shell.run('pwd'))).exit_code).toBe(0);
  });

  it('keeps two shells apart', async () => {
    const runtime = await sandbox();
    const a = await expectOk(openSandboxShell(runtime, 'box'));
    const b = await expectOk(openSandboxShell(runtime, 'box'));
    await expectOk(a.run('cd /tmp'));
    expect((await expectOk(b.run('pwd'))).output).toBe('/workspace\n');
    expect((await expectOk(a.run('pwd'))).output).toBe('/tmp\n');
  });

  it('refuses shells and commands in a sandbox that is paused, missing or unreachable, and after close', async () => {
    const runtime = await sandbox();
    let aborted = false;
    runtime.onExec(
      /^bash -c sleep/,
      (_request, context) =>
        new Promise((resolve) =>
          context.signal.addEventListener('abort', () => {
            aborted = true;
            resolve({});
          }),
        ),
    );
    const shell = await expectOk(openSandboxShell(runtime, 'box'));
    expect(expectErr(await openSandboxShell(runtime, 'nope')).type).toBe('not_found');
    await expectOk(runtime.pause('box'));
    expect(expectErr(await openSandboxShell(runtime, 'box')).message).toMatch(/paused/);
    expect(expectErr(await shell.run('pwd')).message).toMatch(/paused/);
    await expectOk(runtime.resume('box'));
    expect((await expectOk(shell.run('pwd'))).exit_code).toBe(0);
    runtime.setUnavailable('engine down');
    expect(expectErr(await shell.run('pwd'))).toEqual({ type: 'unavailable', message: 'engine down' });
    expect(expectErr(await openSandboxShell(runtime, 'box')).type).toBe('unavailable');
    runtime.setUnavailable(null);
    runtime.failNext('spawn', { message: 'injected' });
    expect(expectErr(await openSandboxShell(runtime, 'box')).message).toBe('injected');
    expect((await expectOk(shell.run('sleep 100', { softTimeoutMs: 5 }))).still_running).toBe(true);
    await shell.close();
    expect(aborted).toBe(true);
    expect(expectErr(await shell.run('pwd')).message).toMatch(/closed/);
    const other = await expectOk(openSandboxShell(runtime, 'box'));
    await expectOk(runtime.delete('box'));
    expect(expectErr(await other.run('pwd')).type).toBe('not_found');
  });
});
