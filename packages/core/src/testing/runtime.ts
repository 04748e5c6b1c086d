import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IdGenerator } from '../ids.js';
import { DEFAULT_READ_FILE_MAX_BYTES, type RuntimeObservation, type SandboxRuntime } from '../sandbox/runtime.js';
import type { SandboxSpec } from '../sandbox/schema.js';
import { specFixture } from './fixtures.js';
import { expectOk, type StoreFactory } from './stores.js';
import { describeSpawnCases } from './runtime-spawn.js';
import { sleep } from './waits.js';

export interface SandboxRuntimeContractOptions {
  /** The spec sandboxes are created from (a real runtime needs an image it has). */
  spec?: SandboxSpec;
  /** How long a sandbox may take to become running (default 120 s). */
  startTimeoutMs?: number;
  /** Per-test timeout for vitest (default 180 s). */
  testTimeoutMs?: number;
  /** Ids for the sandboxes the suite creates; they are deleted at the end of each test. */
  ids?: IdGenerator;
  /**
   * What a pause keeps (exec and shell contracts): `processes` (default) for a runtime that freezes the
   * sandbox (Docker's pause: memory, processes and files as they were); `workspace` for one that
   * stops it and keeps only its working directory (Kubernetes' scale to zero: a new pod on the
   * same claim, so processes and files outside the working directory are gone after a resume).
   */
  pauseKeeps?: 'processes' | 'workspace';
}

/** Inspects the sandbox until it leaves `state` or the time is up; the last observation. */
async function untilNot(
  runtime: SandboxRuntime,
  id: string,
  state: RuntimeObservation['state'],
  timeoutMs: number,
): Promise<RuntimeObservation> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const observation = await expectOk(runtime.inspect(id));
    if (observation.state !== state || Date.now() > deadline) return observation;
    await sleep(50);
  }
}

/**
 * What each sandbox contract suite starts from: the spec, ids for its sandboxes (`options.ids`,
 * else made from `prefix`, the process and the time), and how it waits for a sandbox to start.
 */
export function contractSandboxes(prefix: string, options: SandboxRuntimeContractOptions) {
  const spec = options.spec ?? specFixture();
  const startTimeoutMs = options.startTimeoutMs ?? 120_000;
  let n = 0;
  const nextId = () =>
    options.ids?.next() ??
    `${prefix}${process.pid.toString(16)}${Date.now().toString(16)}${(n++).toString(16)}`.padEnd(32, '0').slice(0, 32);
  /** The sandbox's state once it is no longer starting (or the start timeout passed). */
  const untilStarted = (runtime: SandboxRuntime, id: string) => untilNot(runtime, id, 'starting', startTimeoutMs);
  /** Creates a sandbox of the spec, its environment with `env` added, and waits until it runs. */
  const startSandbox = async (runtime: SandboxRuntime, id: string, env: Record<string, string> = {}) => {
    await expectOk(
      runtime.create({
        sandbox_id: id,
        user_id: 'alice',
        installation_id: 'acs-tests',
        spec,
        env: { ...spec.initial_env, ...env },
      }),
    );
    expect((await untilStarted(runtime, id)).state).toBe('running');
  };
  return { spec, nextId, untilStarted, startSandbox };
}

/**
 * Contract every SandboxRuntime must meet: lifecycle, idempotence, unknown ids, files (a read
 * limit, directories, symbolic links), and spawned processes. The file cases make symbolic links
 * with the argv `ln -s TARGET LINK` through exec: a fake must play it (FakeSandboxRuntime does).
 */
export function describeSandboxRuntimeContract(
  name: string,
  make: StoreFactory<SandboxRuntime>,
  options: SandboxRuntimeContractOptions = {},
): void {
  const { spec, nextId, untilStarted, startSandbox } = contractSandboxes('contract', options);
  /** A new runtime with one sandbox of the spec, running. */
  const runningSandbox = async (): Promise<{ runtime: SandboxRuntime; id: string }> => {
    const runtime = await make();
    const id = nextId();
    await startSandbox(runtime, id);
    return { runtime, id };
  };

  describe(`SandboxRuntime contract: ${name}`, { timeout: options.testTimeoutMs ?? 180_000 }, () => {
    it('declares the port version it implements', async () => {
      const runtime = await make();
      expect(runtime.specificationVersion).toBe('v1');
    });

    it('creates a sandbox that becomes running, pauses and resumes idempotently, and deletes it', async () => {
      const runtime = await make();
      const id = nextId();
      try {
        const created = await expectOk(
          runtime.create({
            sandbox_id: id,
            user_id: 'alice',
            installation_id: 'acs-tests',
            spec,
            env: { ...spec.initial_env, ACS_CONTRACT: '1' },
          }),
        );
        expect(['starting', 'running']).toContain(created.state);
        expect((await untilStarted(runtime, id)).state).toBe('running');

        expect((await expectOk(runtime.pause(id))).state).toBe('paused');
        expect((await expectOk(runtime.inspect(id))).state).toBe('paused');
        expect((await expectOk(runtime.pause(id))).state).toBe('paused');

        expect(['starting', 'running']).toContain((await expectOk(runtime.resume(id))).state);
        expect((await untilStarted(runtime, id)).state).toBe('running');
        expect(['starting', 'running']).toContain((await expectOk(runtime.resume(id))).state);

        await expectOk(runtime.delete(id));
        expect((await expectOk(runtime.inspect(id))).state).toBe('missing');
      } finally {
        await runtime.delete(id);
      }
    });

    it('lists only the sandboxes of the installation asked about, with their owner and spec', async () => {
      const runtime = await make();
      const mine = nextId();
      const theirs = nextId();
      try {
        await expectOk(
          runtime.create({
            sandbox_id: mine,
            user_id: 'default',
            installation_id: 'acs-contract-a',
            spec,
            env: { ...spec.initial_env },
          }),
        );
        await expectOk(
          runtime.create({
            sandbox_id: theirs,
            user_id: 'default',
            installation_id: 'acs-contract-b',
            spec,
            env: { ...spec.initial_env },
          }),
        );
        const listedA = (await expectOk(runtime.list('acs-contract-a'))).filter(
          (s) => s.sandbox_id === mine || s.sandbox_id === theirs,
        );
        expect(listedA).toEqual([
          expect.objectContaining({
            sandbox_id: mine,
            user_id: 'default',
            spec_id: spec.id,
            image: spec.image,
            working_dir: spec.working_dir,
          }),
        ]);
        const listedB = (await expectOk(runtime.list('acs-contract-b'))).filter(
          (s) => s.sandbox_id === mine || s.sandbox_id === theirs,
        );
        expect(listedB.map((s) => s.sandbox_id)).toEqual([theirs]);
        expect(
          (await expectOk(runtime.list('acs-contract-none'))).filter(
            (s) => s.sandbox_id === mine || s.sandbox_id === theirs,
          ),
        ).toEqual([]);
      } finally {
        await runtime.delete(mine);
        await runtime.delete(theirs);
      }
    });

    it('reports an unknown sandbox as missing and deletes it without complaint', async () => {
      const runtime = await make();
      const id = nextId();
      expect((await expectOk(runtime.inspect(id))).state).toBe('missing');
      await expectOk(runtime.delete(id));
    });

    it('round-trips files byte for byte, creating parent directories, and lists directories', async () => {
      const runtime = await make();
      const id = nextId();
      try {
        await startSandbox(runtime, id);
        const bytes = new Uint8Array(256 * 4).map((_, i) => i % 256);
        await expectOk(runtime.writeFile(id, 'nested/deeper/all-bytes.bin', bytes));
        const read = await expectOk(runtime.readFile(id, `${spec.working_dir}/nested/deeper/all-bytes.bin`));
        expect(Buffer.from(read.bytes).equals(Buffer.from(bytes))).toBe(true);
        expect(read).toMatchObject({ size: bytes.length, truncated: false });
        await expectOk(
          runtime.writeFile(id, `${spec.working_dir}/nested/notes ü.txt`, new TextEncoder().encode('héllo\n')),
        );
        await expectOk(runtime.writeFile(id, 'nested/notes ü.txt', new TextEncoder().encode('second')));
        expect(
          new TextDecoder().decode((await expectOk(runtime.readFile(id, 'nested/./deeper/../notes ü.txt'))).bytes),
        ).toBe('second');
        const listed = await expectOk(runtime.listDirectory(id, 'nested'));
        expect(listed.map((e) => [e.name, e.type])).toEqual([
          ['deeper', 'directory'],
          ['notes ü.txt', 'file'],
        ]);
        expect(listed[1]).toMatchObject({ path: `${spec.working_dir}/nested/notes ü.txt`, size: 6 });
        const missing = await runtime.readFile(id, 'nested/nope.txt');
        expect(missing.isErr() && missing.error.type).toBe('not_found');
        const missingDir = await runtime.listDirectory(id, 'no/such/dir');
        expect(missingDir.isErr() && missingDir.error.type).toBe('not_found');
      } finally {
        await runtime.delete(id);
      }
    });

    describe('reading files: a limit, directories, symbolic links (made with `ln -s TARGET LINK` through exec)', () => {
      let runtime: SandboxRuntime;
      let id: string;
      const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
      const link = async (target: string, path: string) =>
        expect(await expectOk(runtime.exec(id, { command: ['ln', '-s', target, path] }))).toMatchObject({
          exit_code: 0,
        });
      const failure = async (path: string) => {
        const result = await runtime.readFile(id, path);
        return result.isErr() ? result.error : `read ${result.isOk() ? result.value.size : 0} bytes`;
      };

      beforeAll(async () => {
        ({ runtime, id } = await runningSandbox());
      });
      afterAll(async () => {
        await runtime.delete(id);
      });

      it('reads at most maxBytes of a file and says how large it is whole; 16 MiB when not told', async () => {
        const bytes = new Uint8Array(100_000).map((_, i) => 32 + (i % 90));
        await expectOk(runtime.writeFile(id, 'limit/hundred-k.txt', bytes));
        const head = await expectOk(runtime.readFile(id, 'limit/hundred-k.txt', { maxBytes: 1000 }));
        expect(head).toMatchObject({ size: 100_000, truncated: true });
        expect(Buffer.from(head.bytes).equals(Buffer.from(bytes.subarray(0, 1000)))).toBe(true);
        expect(await expectOk(runtime.readFile(id, 'limit/hundred-k.txt', { maxBytes: 0 }))).toMatchObject({
          bytes: new Uint8Array(0),
          size: 100_000,
          truncated: true,
        });
        const whole = await expectOk(runtime.readFile(id, 'limit/hundred-k.txt', { maxBytes: 100_000 }));
        expect(whole).toMatchObject({ size: 100_000, truncated: false });
        expect(whole.bytes.length).toBe(100_000);

        const large = new Uint8Array(DEFAULT_READ_FILE_MAX_BYTES + 4096).fill(120);
        await expectOk(runtime.writeFile(id, 'limit/large.bin', large));
        const unasked = await expectOk(runtime.readFile(id, 'limit/large.bin'));
        expect(unasked).toMatchObject({ size: large.length, truncated: true });
        expect(unasked.bytes.length).toBe(DEFAULT_READ_FILE_MAX_BYTES);
      });

      it('refuses a directory as is_directory, saying so', async () => {
        await expectOk(runtime.writeFile(id, 'a-dir/inner.txt', new TextEncoder().encode('inside')));
        for (const path of ['a-dir', `${spec.working_dir}/a-dir/`, spec.working_dir, '/']) {
          const error = await failure(path);
          expect(error, path).toMatchObject({ type: 'is_directory' });
          expect(typeof error === 'object' && error.message, path).toMatch(/directory/);
        }
      });

      it('follows symbolic links inside the sandbox: relative to the link, absolute, chained, through a linked directory', async () => {
        await expectOk(runtime.writeFile(id, 'links/target.txt', new TextEncoder().encode('linked')));
        await link('target.txt', 'links/relative');
        await link(`${spec.working_dir}/links/target.txt`, 'links/absolute');
        await link('relative', 'links/chain');
        await link('links', 'linked-dir');
        for (const path of [
          'links/relative',
          'links/absolute',
          'links/chain',
          'linked-dir/target.txt',
          'linked-dir/chain',
        ]) {
          const read = await expectOk(runtime.readFile(id, path));
          expect({ path, text: text(read.bytes), size: read.size }).toEqual({ path, text: 'linked', size: 6 });
        }
        expect(await expectOk(runtime.readFile(id, 'links/chain', { maxBytes: 2 }))).toMatchObject({
          size: 6,
          truncated: true,
          bytes: new TextEncoder().encode('li'),
        });
        expect(await failure('linked-dir')).toMatchObject({ type: 'is_directory' });
      });

      it('answers not_found for a dangling link and for a loop of links', async () => {
        await link('nowhere', 'links/dangling');
        await link('loop-b', 'links/loop-a');
        await link('loop-a', 'links/loop-b');
        for (const path of ['links/dangling', 'links/loop-a'])
          expect(await failure(path), path).toMatchObject({ type: 'not_found' });
      });
    });

    it('refuses to pause or resume a sandbox it does not have, with a message', async () => {
      const runtime = await make();
      const id = nextId();
      const paused = await runtime.pause(id);
      const resumed = await runtime.resume(id);
      expect(paused.isErr() && paused.error.message.length > 0).toBe(true);
      expect(resumed.isErr() && resumed.error.message.length > 0).toBe(true);
    });

    describeSpawnCases({ runningSandbox, nextId, untilStarted });
  });
}
