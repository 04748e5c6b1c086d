import { describe, expect, it } from 'vitest';
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
