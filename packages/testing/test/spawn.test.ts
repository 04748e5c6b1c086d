import { describe, expect, it } from 'vitest';
import type { SpawnRequest } from '@acs/core/ports';
import { collectProcessOutput, expectOk, specFixture } from '@acs/core/testing';
import { FakeSandboxRuntime, type FakeSpawnContext } from '@acs/testing';

const spec = specFixture({ working_dir: '/workspace' });

async function sandbox(runtime = new FakeSandboxRuntime()) {
  await expectOk(runtime.create({ sandbox_id: 'box', user_id: 'alice', installation_id: 'acs-tests', spec, env: {} }));
  return runtime;
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

describe('FakeSandboxRuntime spawn', () => {
  it('plays a line-based JSON server: the handler reads stdin and writes stdout', async () => {
    const runtime = (await sandbox()).onSpawn('mcp-server', async (_request, { stdin, stdout }) => {
      let pending = '';
      for await (const text of stdin) {
        pending += text;
        for (let newline = pending.indexOf('\n'); newline >= 0; newline = pending.indexOf('\n')) {
          const request = JSON.parse(pending.slice(0, newline)) as { id: number; method: string };
          pending = pending.slice(newline + 1);
          stdout.write(`${JSON.stringify({ id: request.id, result: request.method })}\n`);
        }
      }
    });
    const child = await expectOk(runtime.spawn('box', { command: ['mcp-server', '--stdio'] }));
    const output = collectProcessOutput(child);
    await child.write('{"id":1,"method":"initialize"}\n{"id":2,');
    await child.write(new TextEncoder().encode('"method":"tools/list"}\n'));
    await tick();
    expect(output.stdout()).toBe('{"id":1,"result":"initialize"}\n{"id":2,"result":"tools/list"}\n');
    await child.kill();
    expect(await child.exited).toEqual({ exit_code: null });
    expect(runtime.calls.filter((c) => c.operation === 'spawn')).toEqual([{ operation: 'spawn', sandboxId: 'box' }]);
  });

  it('gives the handler the request, the resolved cwd and the sandbox files', async () => {
    const seen: { request: SpawnRequest; cwd: string; file: string | undefined }[] = [];
    const runtime = (await sandbox()).onSpawn(/^node server\.js/, (request, { cwd, files }) => {
      seen.push({ request, cwd, file: files.has('/workspace/app/server.js') ? 'present' : undefined });
      return 0;
    });
    await expectOk(runtime.writeFile('box', 'app/server.js', new TextEncoder().encode('// server')));
    const child = await expectOk(
      runtime.spawn('box', { command: ['node', 'server.js'], cwd: 'app', env: { PORT: '1' } }),
    );
    expect(await child.exited).toEqual({ exit_code: 0 });
    expect(seen).toEqual([
      {
        request: { command: ['node', 'server.js'], cwd: 'app', env: { PORT: '1' } },
        cwd: '/workspace/app',
        file: 'present',
      },
    ]);
  });

  it('holds output written before the first listener, for every listener added at once', async () => {
    const runtime = (await sandbox()).onSpawn('chatty', (_request, { stdout, stderr }) => {
      stdout.write('early\n');
      stderr.write('log line\n');
      return new Promise<never>(() => {});
    });
    const child = await expectOk(runtime.spawn('box', { command: ['chatty'] }));
    await tick();
    const first = collectProcessOutput(child);
    const second = collectProcessOutput(child);
    await tick();
    expect([first.stdout(), second.stdout(), first.stderr()]).toEqual(['early\n', 'early\n', 'log line\n']);
    await child.kill();
  });

  it('ends with exit(code), with what the handler returns, or with exit code 1 when it throws', async () => {
    const runtime = (await sandbox())
      .onSpawn('exits', (_request, { exit, stdout }) => {
        stdout.write('bye');
        exit(4);
        stdout.write('never seen');
        return new Promise<never>(() => {});
      })
      .onSpawn('returns', () => 7)
      .onSpawn('throws', () => {
        throw new Error('boom');
      });
    const exits = await expectOk(runtime.spawn('box', { command: ['exits'] }));
    const output = collectProcessOutput(exits);
    expect(await exits.exited).toEqual({ exit_code: 4 });
    expect(output.stdout()).toBe('bye');
    await expect(exits.write('x')).rejects.toThrow(/has ended/);
    expect(await (await expectOk(runtime.spawn('box', { command: ['returns'] }))).exited).toEqual({ exit_code: 7 });
    const throws = await expectOk(runtime.spawn('box', { command: ['throws'] }));
    const thrown = collectProcessOutput(throws);
    expect(await throws.exited).toEqual({ exit_code: 1 });
    expect(thrown.stderr()).toBe('boom\n');
  });

  it('kill() aborts the signal and ends stdin; later registrations win', async () => {
    let context: FakeSpawnContext | undefined;
    const runtime = (await sandbox())
      .onSpawn('server', () => 0)
      .onSpawn('server', (_request, ctx) => {
        context = ctx;
        return new Promise<never>(() => {});
      });
    const child = await expectOk(runtime.spawn('box', { command: ['server'] }));
    const reading = (async () => {
      const chunks: string[] = [];
      for await (const text of context!.stdin) chunks.push(text);
      return chunks;
    })();
    await child.write('a');
    await Promise.all([child.kill(), child.kill()]);
    expect(context!.signal.aborted).toBe(true);
    expect(await reading).toEqual(['a']);
    expect(await child.exited).toEqual({ exit_code: null });
  });

  it('refuses unknown programs, empty commands, injected failures, and sandboxes that are not running', async () => {
    const runtime = (await sandbox()).onSpawn('cat', () => new Promise<never>(() => {}));
    const unknown = await runtime.spawn('box', { command: ['frobnicate', '--now'] });
    expect(unknown.isErr() && unknown.error).toMatchObject({
      type: 'failed',
      message: expect.stringMatching(/"frobnicate".*program not found.*onSpawn/) as unknown,
    });
    const empty = await runtime.spawn('box', { command: [] });
    expect(empty.isErr() && empty.error.type).toBe('failed');
    runtime.failNext('spawn', { type: 'unavailable', message: 'engine down' });
    expect((await runtime.spawn('box', { command: ['cat'] }))._unsafeUnwrapErr()).toEqual({
      type: 'unavailable',
      message: 'engine down',
    });
    await expectOk(runtime.pause('box'));
    expect((await runtime.spawn('box', { command: ['cat'] }))._unsafeUnwrapErr()).toMatchObject({
      type: 'failed',
      message: expect.stringMatching(/paused/) as unknown,
    });
    expect((await runtime.spawn('nope', { command: ['cat'] }))._unsafeUnwrapErr().type).toBe('not_found');
  });

  it('ends the processes of a sandbox that is deleted, vanishes or crashes', async () => {
    const runtime = (await sandbox()).onSpawn('cat', () => new Promise<never>(() => {}));
    await expectOk(
      runtime.create({ sandbox_id: 'other', user_id: 'alice', installation_id: 'acs-tests', spec, env: {} }),
    );
    await expectOk(
      runtime.create({ sandbox_id: 'third', user_id: 'alice', installation_id: 'acs-tests', spec, env: {} }),
    );
    const [a, b, c] = await Promise.all(
      ['box', 'other', 'third'].map((id) => expectOk(runtime.spawn(id, { command: ['cat'] }))),
    );
    await expectOk(runtime.delete('box'));
    runtime.vanish('other');
    runtime.crash('third');
    expect(await Promise.all([a!.exited, b!.exited, c!.exited])).toEqual([
      { exit_code: null },
      { exit_code: null },
      { exit_code: null },
    ]);
  });
});
