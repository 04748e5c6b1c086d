import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../clock.js';
import type { IdGenerator } from '../ids.js';
import type { RuntimeObservation, SandboxRuntime } from '../sandbox/runtime.js';
import type { SandboxSpec } from '../sandbox/schema.js';
import { specFixture } from './fixtures.js';
import { expectOk, type StoreFactory } from './stores.js';

export interface SandboxRuntimeContractOptions {
  /** The spec sandboxes are created from (a real runtime needs an image it has). */
  spec?: SandboxSpec;
  /** How long a sandbox may take to become running (default 30 s). */
  startTimeoutMs?: number;
  /** Per-test timeout for vitest (default 60 s). */
  testTimeoutMs?: number;
  /** Ids for the sandboxes the suite creates; they are deleted at the end of each test. */
  ids?: IdGenerator;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function untilNot(runtime: SandboxRuntime, id: string, state: RuntimeObservation['state'], timeoutMs: number): Promise<RuntimeObservation> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const observation = await expectOk(runtime.inspect(id));
    if (observation.state !== state || Date.now() > deadline) return observation;
    await sleep(50);
  }
}

/** Contract every SandboxRuntime must meet: lifecycle, idempotence, and unknown ids. */
export function describeSandboxRuntimeContract(name: string, make: StoreFactory<SandboxRuntime>, options: SandboxRuntimeContractOptions = {}): void {
  const spec = options.spec ?? specFixture();
  const startTimeoutMs = options.startTimeoutMs ?? 30_000;
  let n = 0;
  const nextId = () => options.ids?.next() ?? `contract${process.pid.toString(16)}${Date.now().toString(16)}${(n++).toString(16)}`.padEnd(32, '0').slice(0, 32);

  describe(`SandboxRuntime contract: ${name}`, { timeout: options.testTimeoutMs ?? 60_000 }, () => {
    it('declares the port version it implements', async () => {
      const runtime = await make();
      expect(runtime.specificationVersion).toBe('v1');
    });

    it('creates a sandbox that becomes running, pauses and resumes idempotently, and deletes it', async () => {
      const runtime = await make();
      const id = nextId();
      try {
        const created = await expectOk(runtime.create({ sandbox_id: id, user_id: 'alice', spec, env: { ...spec.initial_env, ACS_CONTRACT: '1' } }));
        expect(['starting', 'running']).toContain(created.state);
        expect((await untilNot(runtime, id, 'starting', startTimeoutMs)).state).toBe('running');

        expect((await expectOk(runtime.pause(id))).state).toBe('paused');
        expect((await expectOk(runtime.inspect(id))).state).toBe('paused');
        expect((await expectOk(runtime.pause(id))).state).toBe('paused');

        expect(['starting', 'running']).toContain((await expectOk(runtime.resume(id))).state);
        expect((await untilNot(runtime, id, 'starting', startTimeoutMs)).state).toBe('running');
        expect(['starting', 'running']).toContain((await expectOk(runtime.resume(id))).state);

        await expectOk(runtime.delete(id));
        expect((await expectOk(runtime.inspect(id))).state).toBe('missing');
      } finally {
        await runtime.delete(id);
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
        await expectOk(runtime.create({ sandbox_id: id, user_id: 'alice', spec, env: { ...spec.initial_env } }));
        expect((await untilNot(runtime, id, 'starting', startTimeoutMs)).state).toBe('running');
        const bytes = new Uint8Array(256 * 4).map((_, i) => i % 256);
        await expectOk(runtime.writeFile(id, 'nested/deeper/all-bytes.bin', bytes));
        expect(Buffer.from(await expectOk(runtime.readFile(id, `${spec.working_dir}/nested/deeper/all-bytes.bin`))).equals(Buffer.from(bytes))).toBe(true);
        await expectOk(runtime.writeFile(id, `${spec.working_dir}/nested/notes ü.txt`, new TextEncoder().encode('héllo\n')));
        await expectOk(runtime.writeFile(id, 'nested/notes ü.txt', new TextEncoder().encode('second')));
        expect(new TextDecoder().decode(await expectOk(runtime.readFile(id, 'nested/./deeper/../notes ü.txt')))).toBe('second');
        const listed = await expectOk(runtime.listDirectory(id, 'nested'));
        expect(listed.map((e) => [e.name, e.type])).toEqual([
          ['deeper', 'directory'],
          ['notes ü.txt', 'file'],
        ]);
        expect(listed[1]).toMatchObject({ path: `${spec.working_dir}/nested/notes ü.txt`, size: 6 });
        const missing = await runtime.readFile(id, 'nested/nope.txt');
        expect(missing.isErr() && missing.error.kind).toBe('not_found');
        const missingDir = await runtime.listDirectory(id, 'no/such/dir');
        expect(missingDir.isErr() && missingDir.error.kind).toBe('not_found');
      } finally {
        await runtime.delete(id);
      }
    });

    it('refuses to pause or resume a sandbox it does not have, with a message', async () => {
      const runtime = await make();
      const id = nextId();
      const paused = await runtime.pause(id);
      const resumed = await runtime.resume(id);
      expect(paused.isErr() && paused.error.message.length > 0).toBe(true);
      expect(resumed.isErr() && resumed.error.message.length > 0).toBe(true);
    });
  });
}

/** Contract for Clock implementations. */
export function describeClockContract(name: string, make: StoreFactory<Clock>): void {
  describe(`Clock contract: ${name}`, () => {
    it('tells time as ISO-8601 UTC with milliseconds, never going back', async () => {
      const clock = await make();
      let previous = '';
      for (let i = 0; i < 50; i++) {
        const now = clock.now();
        expect(now).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
        expect(now >= previous).toBe(true);
        previous = now;
      }
    });

    it('sleeps and can be woken by an abort signal', async () => {
      const clock = await make();
      await clock.sleep(1);
      const abort = new AbortController();
      const sleeping = clock.sleep(60_000, abort.signal);
      abort.abort();
      await expect(sleeping).resolves.toBeUndefined();
    });
  });
}

/** Contract for IdGenerator implementations. */
export function describeIdGeneratorContract(name: string, make: StoreFactory<IdGenerator>): void {
  describe(`IdGenerator contract: ${name}`, () => {
    it('produces distinct 32-character lowercase hex ids', async () => {
      const ids = await make();
      const seen = new Set<string>();
      for (let i = 0; i < 2000; i++) {
        const id = ids.next();
        expect(id).toMatch(/^[0-9a-f]{32}$/);
        seen.add(id);
      }
      expect(seen.size).toBe(2000);
    });
  });
}

/**
 * Contract for runtimes that run real commands (Docker and the like; the memory fake
 * answers from registered handlers instead). `spec` must name an image with bash and coreutils.
 */
export function describeSandboxExecContract(name: string, make: StoreFactory<SandboxRuntime>, options: SandboxRuntimeContractOptions = {}): void {
  const spec = options.spec ?? specFixture();
  const startTimeoutMs = options.startTimeoutMs ?? 30_000;
  let n = 0;
  const nextId = () => `exec${process.pid.toString(16)}${Date.now().toString(16)}${(n++).toString(16)}`.padEnd(32, '0').slice(0, 32);

  describe(`SandboxRuntime exec contract: ${name}`, { timeout: options.testTimeoutMs ?? 60_000 }, () => {
    let runtime: SandboxRuntime;
    let id: string;
    const bash = (script: string, extra: Partial<Parameters<SandboxRuntime['exec']>[1]> = {}) => expectOk(runtime.exec(id, { command: ['bash', '-c', script], ...extra }));

    beforeAll(async () => {
      runtime = await make();
      id = nextId();
      await expectOk(runtime.create({ sandbox_id: id, user_id: 'alice', spec, env: { ...spec.initial_env, FROM_SPEC: 'spec-value' } }));
      expect((await untilNot(runtime, id, 'starting', startTimeoutMs)).state).toBe('running');
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
      expect((await bash('echo "$FROM_SPEC $FROM_REQUEST"', { env: { FROM_REQUEST: 'request-value' } })).stdout.trim()).toBe('spec-value request-value');
    });

    it('kills the whole process group on timeout and says so', async () => {
      const started = Date.now();
      const result = await bash('(sleep 300; echo late > /tmp/child-survived) & echo started; sleep 300', { timeoutMs: 1_500 });
      expect(result.timed_out).toBe(true);
      expect(result.exit_code).toBeNull();
      expect(result.stdout).toBe('started\n');
      expect(Date.now() - started).toBeLessThan(15_000);
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
      expect([...(await expectOk(runtime.readFile(id, 'from-cmd.bin')))]).toEqual([0, 1, 255]);
    });

    it('freezes a paused sandbox and carries on after resume', async () => {
      await bash('nohup bash -c \'i=0; while true; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.1; done\' >/dev/null 2>&1 &');
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
  });
}

/** Reads a file right after resuming (a paused sandbox cannot be read), then pauses again. */
async function readWhenRunning(runtime: SandboxRuntime, id: string, path: string): Promise<Uint8Array> {
  await expectOk(runtime.resume(id));
  const content = await expectOk(runtime.readFile(id, path));
  await expectOk(runtime.pause(id));
  return content;
}
