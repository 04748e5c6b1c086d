import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxProcess } from '@acs/core/ports';
import { collectProcessOutput, expectOk, fixtureId, waitUntil } from '@acs/core/testing';
import type { DockerSandboxRuntime } from '@acs/adapter-docker';
import { bookworm, dockerRuntime } from './engine.js';

/** Splits stdout into lines and hands them out one at a time. */
function lines(child: SandboxProcess) {
  const ready: string[] = [];
  let partial = '';
  let waiting: ((line: string) => void) | null = null;
  const decoder = new TextDecoder();
  child.onStdout((chunk) => {
    partial += decoder.decode(chunk, { stream: true });
    for (let newline = partial.indexOf('\n'); newline >= 0; newline = partial.indexOf('\n')) {
      const line = partial.slice(0, newline);
      partial = partial.slice(newline + 1);
      const wake = waiting;
      waiting = null;
      if (wake) wake(line);
      else ready.push(line);
    }
  });
  return (): Promise<string> => {
    const line = ready.shift();
    return line !== undefined ? Promise.resolve(line) : new Promise((resolve) => (waiting = resolve));
  };
}

describe('Docker sandbox runtime: spawn', () => {
  let runtime: DockerSandboxRuntime;
  const id = fixtureId();
  const started: SandboxProcess[] = [];
  const spawn = async (command: readonly string[], options: { cwd?: string; env?: Record<string, string> } = {}) => {
    const child = await expectOk(runtime.spawn(id, { command, ...options }));
    started.push(child);
    return child;
  };
  const sh = async (script: string) => (await expectOk(runtime.exec(id, { command: ['bash', '-c', script] }))).stdout;

  beforeAll(async () => {
    runtime = await dockerRuntime();
    await expectOk(
      runtime.create({
        sandbox_id: id,
        user_id: 'alice',
        installation_id: 'acs-tests',
        spec: bookworm,
        env: { ...bookworm.initial_env, FROM_SPEC: 'spec-value' },
      }),
    );
    const deadline = Date.now() + 120_000;
    while ((await expectOk(runtime.inspect(id))).state !== 'running' && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
  });
  afterAll(async () => {
    await Promise.all(started.map((child) => child.kill()));
    await runtime.delete(id);
  });

  it('runs in the working directory by default, or in cwd, with the sandbox and request environment', async () => {
    await sh('mkdir -p "/workspace/sub dir"');
    const here = await spawn(['sh', '-c', 'pwd; echo "$FROM_SPEC"']);
    const hereOut = collectProcessOutput(here);
    expect(await here.exited).toEqual({ exit_code: 0 });
    expect(hereOut.stdout()).toBe('/workspace\nspec-value\n');
    const there = await spawn(['sh', '-c', 'pwd; echo "$FROM_SPEC $GREETING"'], {
      cwd: 'sub dir',
      env: { GREETING: 'hello there' },
    });
    const thereOut = collectProcessOutput(there);
    expect(await there.exited).toEqual({ exit_code: 0 });
    expect(thereOut.stdout()).toBe('/workspace/sub dir\nspec-value hello there\n');
    const nowhere = await runtime.spawn(id, { command: ['cat'], cwd: '/no/such/dir' });
    expect(nowhere.isErr() && nowhere.error.type).toBe('failed');
  });

  it('keeps output written before a listener was added', async () => {
    const child = await spawn(['sh', '-c', 'echo early; echo early-err >&2; exec cat']);
    await new Promise((r) => setTimeout(r, 500));
    const output = collectProcessOutput(child);
    await waitUntil(() => output.stdout() === 'early\n' && output.stderr() === 'early-err\n');
    expect([output.stdout(), output.stderr()]).toEqual(['early\n', 'early-err\n']);
    await child.kill();
  });

  it('refuses a file that is not executable, saying so', async () => {
    const result = await runtime.spawn(id, { command: ['/etc/passwd'] });
    expect(result.isErr() && result.error).toMatchObject({
      type: 'failed',
      message: expect.stringMatching(/not an executable file/) as unknown,
    });
  });

  it('carries 1 MiB each way intact and in order', async () => {
    const generated = await spawn([
      'python3',
      '-c',
      'import sys\nsys.stdout.write("".join(f"{i:07d}\\n" for i in range(131072)))',
    ]);
    const generatedOut = collectProcessOutput(generated);
    expect(await generated.exited).toEqual({ exit_code: 0 });
    const expected = Array.from({ length: 131072 }, (_, i) => `${String(i).padStart(7, '0')}\n`).join('');
    expect(expected.length).toBe(1024 * 1024);
    expect(generatedOut.stdout() === expected).toBe(true);

    const echo = await spawn(['cat']);
    const echoOut = collectProcessOutput(echo);
    for (let offset = 0; offset < expected.length; offset += 64 * 1024)
      await echo.write(expected.slice(offset, offset + 64 * 1024));
    await waitUntil(() => echoOut.stdout().length >= expected.length);
    expect(echoOut.stdout() === expected).toBe(true);
    await echo.kill();
  });

  it('kill() ends the children too, those that ignore SIGTERM or made a process group of their own included', async () => {
    const child = await spawn([
      'bash',
      '-c',
      'sleep 1231 & (trap "" TERM; exec sleep 1232) & set -m; sleep 1233 & echo started; wait',
    ]);
    const output = collectProcessOutput(child);
    await waitUntil(() => output.stdout() === 'started\n');
    expect(await sh('ps -eo args | grep -c "^sleep 123[123]"')).toBe('3\n');
    await child.kill();
    expect((await child.exited).exit_code).not.toBe(0);
    expect(await sh('ps -eo args | grep "^sleep 123[123]" || echo none')).toBe('none\n');
  });

  it('speaks line-based JSON with a python3 program for 100 round trips', async () => {
    const server = [
      'import json, sys',
      'for line in sys.stdin:',
      '    message = json.loads(line)',
      '    sys.stdout.write(json.dumps({"id": message["id"], "result": message["params"]}) + "\\n")',
      '    sys.stdout.flush()',
    ].join('\n');
    const child = await spawn(['python3', '-c', server]);
    const next = lines(child);
    for (let i = 0; i < 100; i++) {
      await child.write(
        `${JSON.stringify({ jsonrpc: '2.0', id: i, method: 'echo', params: { text: `ping ${i} ü` } })}\n`,
      );
      expect(JSON.parse(await next())).toEqual({ id: i, result: { text: `ping ${i} ü` } });
    }
    await child.kill();
    await child.exited;
  });
});
