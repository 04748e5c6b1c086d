import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clippedOutputNote, splitClippedOutput, type SandboxRuntime } from '../sandbox/runtime.js';
import { expectOk, type StoreFactory } from './stores.js';
import { contractSandboxes, type SandboxRuntimeContractOptions } from './runtime.js';

/**
 * Contract for runtimes that run real commands (Docker and the like; the memory fake
 * answers from registered handlers instead). `spec` must name an image with bash and coreutils.
 */
export function describeSandboxExecContract(
  name: string,
  make: StoreFactory<SandboxRuntime>,
  options: SandboxRuntimeContractOptions = {},
): void {
  const { spec, nextId, untilStarted, startSandbox } = contractSandboxes('exec', options);

  describe(`SandboxRuntime exec contract: ${name}`, { timeout: options.testTimeoutMs ?? 180_000 }, () => {
    let runtime: SandboxRuntime;
    let id: string;
    const bash = (script: string, extra: Partial<Parameters<SandboxRuntime['exec']>[1]> = {}) =>
      expectOk(runtime.exec(id, { command: ['bash', '-c', script], ...extra }));

    beforeAll(async () => {
      runtime = await make();
      id = nextId();
      await startSandbox(runtime, id, { FROM_SPEC: 'spec-value' });
    });
    afterAll(async () => {
      await runtime.delete(id);
    });

    it('returns the exit code and keeps stdout and stderr apart', async () => {
      const result = await bash('echo to-out; echo to-err >&2; printf "ünïcode"; exit 3');
      expect(result).toMatchObject({ exit_code: 3, stdout: 'to-out\nünïcode', stderr: 'to-err\n', timed_out: false });
      expect((await expectOk(runtime.exec(id, { command: ['true'] }))).exit_code).toBe(0);
    });

    it('runs in the working directory by default, or in cwd, with the sandbox and request environment', async () => {
      expect((await bash('pwd')).stdout.trim()).toBe(spec.working_dir);
      await bash('mkdir -p sub/dir');
      expect((await bash('pwd', { cwd: 'sub/dir' })).stdout.trim()).toBe(`${spec.working_dir}/sub/dir`);
      expect(
        (await bash('echo "$FROM_SPEC $FROM_REQUEST"', { env: { FROM_REQUEST: 'request-value' } })).stdout.trim(),
      ).toBe('spec-value request-value');
    });

    it('kills the whole process group on timeout and says so', async () => {
      const result = await bash('(sleep 300; echo late > /tmp/child-survived) & echo started; sleep 300', {
        timeoutMs: 1_500,
      });
      expect(result.timed_out).toBe(true);
      expect(result.exit_code).toBeNull();
      expect(result.stdout).toBe('started\n');
      const survivors = await bash('ps -eo pid,args | grep "[s]leep 300" || true');
      expect(survivors.stdout).toBe('');
    });

    it('reports a command that does not exist', async () => {
      const result = await expectOk(runtime.exec(id, { command: ['definitely-not-a-command-xyz'] }));
      expect(result.exit_code).not.toBe(0);
      expect(result.exit_code).not.toBeNull();
    });

    it('sees files written through the file API, and the file API sees files made by commands', async () => {
      await expectOk(runtime.writeFile(id, 'from-api.txt', new TextEncoder().encode('api')));
      expect((await bash('cat from-api.txt')).stdout).toBe('api');
      await bash('printf "\\x00\\x01\\xff" > from-cmd.bin');
      expect([...(await expectOk(runtime.readFile(id, 'from-cmd.bin'))).bytes]).toEqual([0, 1, 255]);
    });

    it("keeps at most maxOutputBytes of stdout and of stderr, ending a cut stream with the port's note", async () => {
      const result = await bash('head -c 5000 /dev/zero | tr "\\0" a; head -c 30 /dev/zero | tr "\\0" e >&2', {
        maxOutputBytes: 1000,
      });
      expect(result).toMatchObject({
        exit_code: 0,
        stdout: `${'a'.repeat(1000)}${clippedOutputNote(4000)}`,
        stderr: 'e'.repeat(30),
      });
      expect(splitClippedOutput(result.stdout)).toEqual({ text: 'a'.repeat(1000), droppedBytes: 4000 });
    });

    if ((options.pauseKeeps ?? 'processes') === 'processes') {
      it('freezes a paused sandbox and carries on after resume', async () => {
        await bash(
          "nohup bash -c 'i=0; while true; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.1; done' >/dev/null 2>&1 &",
        );
        await new Promise((r) => setTimeout(r, 500));
        await expectOk(runtime.pause(id));
        const frozen = new TextDecoder().decode(await readWhenRunning(runtime, id, '/tmp/counter'));
        await new Promise((r) => setTimeout(r, 1_000));
        await expectOk(runtime.resume(id));
        const afterResume = Number((await bash('cat /tmp/counter')).stdout);
        expect(afterResume - Number(frozen)).toBeLessThanOrEqual(3);
        await new Promise((r) => setTimeout(r, 600));
        expect(Number((await bash('cat /tmp/counter')).stdout)).toBeGreaterThan(afterResume);
      });
    } else {
      it('keeps the working directory over a pause and resume; the processes end with the pause', async () => {
        await bash('printf kept > kept-over-pause.txt; nohup sleep 600 >/dev/null 2>&1 &');
        expect((await bash('ps -eo args | grep -c "[s]leep 600"')).stdout.trim()).toBe('1');
        expect((await expectOk(runtime.pause(id))).state).toBe('paused');
        expect((await expectOk(runtime.inspect(id))).state).toBe('paused');
        expect(['starting', 'running']).toContain((await expectOk(runtime.resume(id))).state);
        expect((await untilStarted(runtime, id)).state).toBe('running');
        expect((await bash('cat kept-over-pause.txt')).stdout).toBe('kept');
        expect((await expectOk(runtime.readFile(id, 'kept-over-pause.txt'))).bytes).toEqual(
          new TextEncoder().encode('kept'),
        );
        expect((await bash('ps -eo args | grep "[s]leep 600" || true')).stdout).toBe('');
      });
    }
  });
}

/** Reads a file right after resuming (a paused sandbox cannot be read), then pauses again. */
async function readWhenRunning(runtime: SandboxRuntime, id: string, path: string): Promise<Uint8Array> {
  await expectOk(runtime.resume(id));
  const content = await expectOk(runtime.readFile(id, path));
  await expectOk(runtime.pause(id));
  return content.bytes;
}
