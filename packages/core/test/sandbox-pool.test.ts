import { describe, expect, it } from 'vitest';
import { okAsync } from 'neverthrow';
import { createAgentConversationService, type AgentConversationServiceOptions } from '../src/index.js';
import { createSandboxRuntimePool, InProcessLocks, manualClock } from '../src/ports.js';
import { POOLED_SANDBOX_OWNER } from '../src/schemas.js';
import { expectOk } from '../src/testing/index.js';
import { createMemoryPorts, FakeSandboxRuntime } from '@acs/testing';
import { createAgent } from '@acs/agent';

const OTHER_SPEC = { id: 'other', image: 'other:1', working_dir: '/workspace' };
const SPECS = [{ id: 'bookworm', image: 'acs-sandbox:bookworm', working_dir: '/workspace' }, OTHER_SPEC];

function compose(options: AgentConversationServiceOptions = {}, ports = createMemoryPorts({ specs: SPECS })) {
  const service = createAgentConversationService(
    { ...ports, agent: createAgent() },
    {
      pollIntervalMs: 1,
      sandboxPool: { bookworm: 1 },
      sandboxPoolRefillDelayMs: 0,
      // The operator lets users raise their limits (the default caps the factor at 1) and name images.
      userSettingLimits: { maxResourceFactor: 8 },
      sandboxImages: { allowed: null },
      ...options,
    },
  );
  return { ports, service };
}

const pooledRecords = async (ports: ReturnType<typeof createMemoryPorts>) =>
  expectOk(ports.sandboxes.listByStatus(POOLED_SANDBOX_OWNER, ['STARTING', 'RUNNING', 'PAUSED', 'ERROR', 'MISSING']));

describe('warm sandbox pool (memory adapters, fake runtime)', () => {
  it('keeps a ready sandbox per pooled spec that belongs to no user: never listed, never counted', async () => {
    const { ports, service } = compose({ sandboxPool: { bookworm: 2 }, maxRunningSandboxesPerUser: 1 });
    await service.idle();
    const pooled = await pooledRecords(ports);
    expect(pooled.map((r) => [r.status, r.sandbox_spec_id])).toEqual([
      ['RUNNING', 'bookworm'],
      ['RUNNING', 'bookworm'],
    ]);
    // The runtime was asked for them on behalf of the pool, with the limits of factor 1.
    for (const r of pooled)
      expect(ports.runtime.peek(r.id)?.request).toMatchObject({ user_id: POOLED_SANDBOX_OWNER, resource_factor: 1 });
    expect(await expectOk(service.sandboxes.poolStatus())).toEqual({ bookworm: { size: 2, ready: 2, filling: 0 } });
    for (const user of ['alice', POOLED_SANDBOX_OWNER]) {
      expect((await expectOk(service.sandboxes.search(user, { limit: 100, after: null }))).items).toEqual(
        user === POOLED_SANDBOX_OWNER ? expect.any(Array) : [],
      );
    }
    expect(
      await expectOk(
        service.sandboxes.getMany(
          'alice',
          pooled.map((r) => r.id),
        ),
      ),
    ).toEqual([null, null]);
    expect((await service.sandboxes.get('alice', pooled[0]!.id))._unsafeUnwrapErr().type).toBe('SandboxNotFound');
    // Its exposed URLs lead nowhere while it is pooled.
    expect((await service.sandboxes.endpoint(pooled[0]!.id, 'AGENT_SERVER'))._unsafeUnwrapErr().type).toBe(
      'SandboxNotFound',
    );
    // Two pooled sandboxes and a limit of one: the user's count does not include the pool.
    const claimed = await expectOk(service.sandboxes.start('alice'));
    expect(claimed.status).toBe('RUNNING');
    expect((await service.sandboxes.start('alice'))._unsafeUnwrapErr()).toEqual({
      type: 'SandboxCapReached',
      limit: 1,
      why: 'none_at_rest',
    });
    await service.close();
  });

  it('claims a ready one for a start: RUNNING at once, the user’s from then on, and refills the pool in the background', async () => {
    const { ports, service } = compose();
    await service.idle();
    const [warm] = await pooledRecords(ports);
    const created = ports.runtime.calls.filter((c) => c.operation === 'create').length;
    const info = await expectOk(service.sandboxes.start('alice'));
    expect(info).toMatchObject({
      id: warm!.id,
      status: 'RUNNING',
      created_by_user_id: 'alice',
      sandbox_spec_id: 'bookworm',
    });
    const record = await expectOk(ports.sandboxes.get('alice', warm!.id));
    expect(record).toMatchObject({ user_id: 'alice', status: 'RUNNING', status_detail: warm!.status_detail });
    expect(record?.last_active_at).toBe(record?.updated_at);
    expect(await expectOk(ports.sandboxes.ownerOf(warm!.id))).toBe('alice');
    expect(
      (await expectOk(service.sandboxes.search('alice', { limit: 100, after: null }))).items.map((s) => s.id),
    ).toEqual([warm!.id]);
    expect((await expectOk(service.sandboxes.search('bob', { limit: 100, after: null }))).items).toEqual([]);
    await service.idle();
    // One create for the refill, none for alice's start.
    expect(ports.runtime.calls.filter((c) => c.operation === 'create').length).toBe(created + 1);
    const [refill] = await pooledRecords(ports);
    expect(refill!.id).not.toBe(warm!.id);
    expect(await expectOk(service.sandboxes.poolStatus())).toEqual({ bookworm: { size: 1, ready: 1, filling: 0 } });
    // The claimed sandbox works as any other: pause, resume, delete; and is never handed out again.
    await expectOk(service.sandboxes.pause('alice', warm!.id));
    await expectOk(service.sandboxes.resume('alice', warm!.id));
    await expectOk(service.sandboxes.delete('alice', warm!.id));
    const bobs = await expectOk(service.sandboxes.start('bob'));
    expect(bobs.id).toBe(refill!.id);
    await service.close();
  });

  it('creates as before when the pool is empty, for specs without a pool, for ad-hoc specs and with size 0', async () => {
    const { ports, service } = compose({ sandboxPool: { bookworm: 0 } });
    await service.idle();
    expect(await pooledRecords(ports)).toEqual([]);
    expect(await expectOk(service.sandboxes.poolStatus())).toEqual({});
    expect((await expectOk(service.sandboxes.start('alice'))).status).toBe('STARTING');
    await service.close();

    const pooled = compose();
    await pooled.service.idle();
    expect((await expectOk(pooled.service.sandboxes.start('alice', 'other'))).status).toBe('STARTING');
    const adHoc = await expectOk(pooled.service.sandboxes.specForImage('ghcr.io/acme/dev:1'));
    expect(adHoc.id).toBe('ghcr.io/acme/dev:1');
    expect((await expectOk(pooled.service.sandboxes.startFromSpec('alice', { ...adHoc, id: 'bookworm' }))).status).toBe(
      'STARTING',
    );
    expect((await pooledRecords(pooled.ports)).filter((r) => r.status === 'RUNNING')).toHaveLength(1);
    // Claimed while the refill is still starting: the next start creates.
    pooled.ports.runtime.hold();
    expect((await expectOk(pooled.service.sandboxes.start('alice'))).status).toBe('RUNNING');
    expect((await expectOk(pooled.service.sandboxes.start('alice'))).status).toBe('STARTING');
    expect(await expectOk(pooled.service.sandboxes.poolStatus())).toEqual({
      bookworm: { size: 1, ready: 0, filling: 1 },
    });
    pooled.ports.runtime.release();
    await pooled.service.close();
  });

  it('applies the user’s resource factor to a claimed sandbox, and skips the pool where the runtime cannot', async () => {
    const { ports, service } = compose();
    await expectOk(service.settings.store('alice', { remote_runtime_resource_factor: 2 }));
    await service.idle();
    const [warm] = await pooledRecords(ports);
    const info = await expectOk(service.sandboxes.start('alice'));
    expect(info.id).toBe(warm!.id);
    expect(ports.runtime.peek(warm!.id)?.request.resource_factor).toBe(2);
    await service.close();

    // A runtime that cannot change a running sandbox's limits: a user with a factor gets a new sandbox.
    const fixed = createMemoryPorts({ specs: SPECS });
    Object.defineProperty(fixed.runtime, 'resize', { value: undefined });
    const second = compose({}, fixed);
    await expectOk(second.service.settings.store('alice', { remote_runtime_resource_factor: 2 }));
    await second.service.idle();
    const made = await expectOk(second.service.sandboxes.start('alice'));
    expect(made.status).toBe('STARTING');
    await second.service.idle();
    expect(fixed.runtime.peek(made.id)?.request).toMatchObject({ user_id: 'alice', resource_factor: 2 });
    expect((await pooledRecords(fixed)).filter((r) => r.status === 'RUNNING')).toHaveLength(1);
    // A user of factor 1 still gets the pooled one.
    expect((await expectOk(second.service.sandboxes.start('bob'))).status).toBe('RUNNING');
    await second.service.close();
  });

  it('drops a claimed sandbox whose container is gone or cannot be resized, and creates one instead', async () => {
    const { ports, service } = compose({ sandboxPoolCheckIntervalMs: 0 });
    await service.idle();
    const [warm] = await pooledRecords(ports);
    ports.runtime.vanish(warm!.id);
    const info = await expectOk(service.sandboxes.start('alice'));
    expect(info.id).not.toBe(warm!.id);
    expect(info.status).toBe('STARTING');
    expect((await expectOk(ports.sandboxes.get('alice', warm!.id)))?.status).toBe('DELETED');
    await service.idle();

    await expectOk(service.settings.store('bob', { remote_runtime_resource_factor: 3 }));
    const [next] = (await pooledRecords(ports)).filter((r) => r.status === 'RUNNING');
    ports.runtime.failNext('resize', { message: 'the engine refused' });
    const bobs = await expectOk(service.sandboxes.start('bob'));
    expect(bobs.id).not.toBe(next!.id);
    expect((await expectOk(ports.sandboxes.get('bob', next!.id)))?.status).toBe('DELETED');
    await service.idle();
    expect(ports.runtime.peek(next!.id)).toBeUndefined();
    await service.close();
  });

  it('gives a new conversation a pooled sandbox (V1 start and V0 create)', async () => {
    const { ports, service } = compose({ sandboxPool: { bookworm: 2 } });
    await expectOk(service.settings.store('alice', { llm_model: 'openai/gpt-4o', llm_api_key: 'k' }));
    await service.idle();
    const warm = new Set((await pooledRecords(ports)).map((r) => r.id));
    const v0 = await expectOk(service.conversations.create('alice', { initial_user_msg: 'hello' }));
    const v0Record = await expectOk(ports.conversations.get('alice', v0.conversation_id));
    expect(warm.has(v0Record!.sandbox_id!)).toBe(true);
    // Refilled meanwhile: what is pooled now.
    await service.idle();
    const warmNow = new Set((await pooledRecords(ports)).map((r) => r.id));
    const task = await expectOk(service.conversations.startApp('alice', {}));
    await service.idle();
    const v1Task = await expectOk(ports.startTasks.get('alice', task.id));
    expect(v1Task?.sandbox_id && warmNow.has(v1Task.sandbox_id)).toBe(true);
    expect(v1Task?.sandbox_id).not.toBe(v0Record!.sandbox_id);
    await service.close();
  });

  it('never hands one pooled sandbox to two starts, also from two processes on one store', async () => {
    const ports = createMemoryPorts({ specs: SPECS });
    const locks = new InProcessLocks();
    const a = compose({ sandboxPool: { bookworm: 3 } }, { ...ports, locks });
    const b = compose({ sandboxPool: { bookworm: 3 } }, { ...ports, locks });
    await a.service.idle();
    await b.service.idle();
    // Both filled under one lock: three, not six.
    expect((await pooledRecords(ports)).filter((r) => r.status === 'RUNNING')).toHaveLength(3);
    const starts = await Promise.all(
      Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).service.sandboxes.start(`user-${i}`)),
    );
    const infos = starts.map((s) => s._unsafeUnwrap());
    expect(new Set(infos.map((s) => s.id)).size).toBe(8);
    expect(infos.filter((s) => s.status === 'RUNNING').length).toBeGreaterThanOrEqual(3);
    for (const [i, s] of infos.entries()) expect(await expectOk(ports.sandboxes.ownerOf(s.id))).toBe(`user-${i}`);
    await a.service.idle();
    await b.service.idle();
    expect((await pooledRecords(ports)).filter((r) => r.status === 'RUNNING')).toHaveLength(3);
    await a.service.close();
    await b.service.close();
  });

  it('after a restart: finds pooled sandboxes again, attributes claimed ones by the store, removes pooled leftovers without a record', async () => {
    const ports = createMemoryPorts({ specs: SPECS });
    const first = compose({}, ports);
    await first.service.idle();
    const claimed = await expectOk(first.service.sandboxes.start('alice'));
    await first.service.idle();
    const [waiting] = await pooledRecords(ports);
    await first.service.close();
    // A container labelled for the pool that no record knows (its record was lost).
    const installation = await expectOk(ports.installation.identity());
    await expectOk(
      ports.runtime.create({
        sandbox_id: 'stray',
        user_id: POOLED_SANDBOX_OWNER,
        installation_id: installation,
        spec: { ...waiting!.spec },
        env: {},
      }),
    );

    const second = compose({ sandboxPoolCheckIntervalMs: 0 }, ports);
    const report = await expectOk(second.service.sandboxes.reconcile());
    expect(report).toMatchObject({ adopted: 0, removed: 1 });
    expect(ports.runtime.peek('stray')).toBeUndefined();
    await second.service.idle();
    // The claimed one is still alice's (its label still names the pool), the waiting one still pooled.
    expect(await expectOk(ports.sandboxes.ownerOf(claimed.id))).toBe('alice');
    expect((await expectOk(second.service.sandboxes.get('alice', claimed.id))).status).toBe('RUNNING');
    expect((await pooledRecords(ports)).map((r) => r.id)).toEqual([waiting!.id]);
    expect((await expectOk(second.service.sandboxes.start('bob'))).id).toBe(waiting!.id);
    await second.service.close();
  });

  it('after a restart: a pooled sandbox that vanished is dropped and replaced', async () => {
    const ports = createMemoryPorts({ specs: SPECS });
    const first = compose({}, ports);
    await first.service.idle();
    const [gone] = await pooledRecords(ports);
    await first.service.close();
    ports.runtime.vanish(gone!.id);
    const second = compose({ sandboxPoolCheckIntervalMs: 0 }, ports);
    await expectOk(second.service.sandboxes.reconcile());
    await second.service.idle();
    const now = await pooledRecords(ports);
    expect(now.map((r) => r.status)).toEqual(['RUNNING']);
    expect(now[0]!.id).not.toBe(gone!.id);
    expect((await expectOk(ports.sandboxes.getMany(POOLED_SANDBOX_OWNER, [gone!.id])))[0]?.status).toBe('DELETED');
    await second.service.close();
  });

  it('after a restart with a smaller pool, or none: the extra pooled sandboxes are removed', async () => {
    const ports = createMemoryPorts({ specs: SPECS });
    const first = compose({ sandboxPool: { bookworm: 3 } }, ports);
    await first.service.idle();
    await first.service.close();
    const smaller = compose({ sandboxPool: { bookworm: 1 }, sandboxPoolCheckIntervalMs: 0 }, ports);
    await expectOk(smaller.service.sandboxes.reconcile());
    await smaller.service.idle();
    const kept = await pooledRecords(ports);
    expect(kept).toHaveLength(1);
    expect(ports.runtime.size).toBe(1);
    await smaller.service.close();
    const none = compose({ sandboxPool: {} }, ports);
    await none.service.idle();
    // Nothing happens until the records are reconciled (recover at start): then the pool is drained.
    expect(await pooledRecords(ports)).toHaveLength(1);
    await expectOk(none.service.sandboxes.reconcile());
    await none.service.idle();
    expect(await pooledRecords(ports)).toEqual([]);
    expect(ports.runtime.size).toBe(0);
    expect(await expectOk(none.service.sandboxes.poolStatus())).toEqual({});
    await none.service.close();
  });

  it('never idle-pauses pooled sandboxes; a claimed one’s idle time starts at the claim', async () => {
    const clock = manualClock();
    const ports = createMemoryPorts({ specs: SPECS });
    const service = createAgentConversationService(
      { ...ports, clock, agent: createAgent() },
      {
        pollIntervalMs: 1,
        sandboxPool: { bookworm: 2 },
        idlePauseAfterMs: 10 * 60_000,
        maintenanceIntervalMs: 24 * 3_600_000,
        sandboxPoolCheckIntervalMs: 0,
      },
    );
    await service.idle();
    clock.advance(60 * 60_000);
    expect(await service.sandboxes.pauseIdle()).toBe(0);
    const claimed = await expectOk(service.sandboxes.start('alice'));
    clock.advance(9 * 60_000);
    expect(await service.sandboxes.pauseIdle()).toBe(0);
    clock.advance(2 * 60_000);
    expect(await service.sandboxes.pauseIdle()).toBe(1);
    expect((await expectOk(service.sandboxes.get('alice', claimed.id))).status).toBe('PAUSED');
    expect((await pooledRecords(ports)).every((r) => r.status === 'RUNNING')).toBe(true);
    await service.close();
  });

  it('respects the engines’ capacity: fills only where there is room, and gives way to a user’s start of another spec', async () => {
    const fake = new FakeSandboxRuntime();
    const runtime = createSandboxRuntimePool([
      { name: 'only', runtime: fake, maxRunning: 2, running: () => okAsync(fake.size) },
    ]);
    const ports = { ...createMemoryPorts({ specs: SPECS }), runtime } as unknown as ReturnType<
      typeof createMemoryPorts
    >;
    const { service } = compose({ sandboxPool: { bookworm: 3 }, sandboxPoolCheckIntervalMs: 0 }, ports);
    await service.idle();
    // Room for two: the pool takes both places.
    expect(fake.size).toBe(2);
    expect(await expectOk(service.sandboxes.poolStatus())).toEqual({ bookworm: { size: 3, ready: 2, filling: 0 } });
    // Another spec's start: a pooled sandbox makes room for it.
    const other = await expectOk(service.sandboxes.start('alice', 'other'));
    expect(other.status).toBe('STARTING');
    await service.idle();
    expect((await expectOk(service.sandboxes.get('alice', other.id))).status).toBe('RUNNING');
    expect(fake.size).toBe(2);
    // At capacity the pooled one of the spec asked for is still claimed.
    expect((await expectOk(service.sandboxes.start('bob'))).status).toBe('RUNNING');
    await service.idle();
    // Full of users' sandboxes now: the pool waits, a further start is refused as before.
    expect(await expectOk(service.sandboxes.poolStatus())).toEqual({ bookworm: { size: 3, ready: 0, filling: 0 } });
    expect((await service.sandboxes.start('carol'))._unsafeUnwrapErr().type).toBe('SandboxesUnavailable');
    await service.close();
  });
});
