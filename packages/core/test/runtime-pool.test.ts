import { describe, expect, it } from 'vitest';
import { okAsync } from 'neverthrow';
import { createAgentConversationService } from '../src/index.js';
import { createSandboxRuntimePool, type PooledRuntime } from '../src/ports.js';
import { expectOk } from '../src/testing/index.js';
import { createAgent } from '@acs/agent';
import { createMemoryPorts, FakeSandboxRuntime } from '@acs/testing';

const engine = (name: string, runtime: FakeSandboxRuntime, maxRunning = 10): PooledRuntime => ({
  name,
  runtime,
  maxRunning,
  running: () => okAsync(runtime.size),
});

describe('sandboxes over a pool of engines', () => {
  const setup = () => {
    const a = new FakeSandboxRuntime();
    const b = new FakeSandboxRuntime();
    const ports = createMemoryPorts();
    const runtime = createSandboxRuntimePool([engine('a', a, 2), engine('b', b, 2)]);
    const service = createAgentConversationService(
      { ...ports, runtime, agent: createAgent() },
      { pollIntervalMs: 1, reconcileIntervalMs: 0 },
    );
    return { a, b, ports, runtime, service };
  };

  it('puts each new sandbox on the engine with the most room, remembers the engine in the record, and says so when all are full', async () => {
    const { a, b, ports, service } = setup();
    const started = [];
    for (let i = 0; i < 4; i++) started.push(await expectOk(service.sandboxes.start('alice')));
    await service.idle();
    expect([a.size, b.size]).toEqual([2, 2]);
    const locations = await Promise.all(
      started.map(async (s) => (await expectOk(ports.sandboxes.get('alice', s.id)))?.location),
    );
    expect(locations.sort()).toEqual(['a', 'a', 'b', 'b']);
    const refused = (await service.sandboxes.start('alice'))._unsafeUnwrapErr();
    expect(refused).toMatchObject({ type: 'SandboxesUnavailable' });
    expect(refused.type === 'SandboxesUnavailable' && refused.reason).toContain(
      'every sandbox engine that answers is at its limit',
    );
    await service.close();
  });

  it('spreads concurrent starts over the engines (what this process is creating counts as taken)', async () => {
    const a = new FakeSandboxRuntime();
    const b = new FakeSandboxRuntime();
    const service = createAgentConversationService(
      {
        ...createMemoryPorts(),
        runtime: createSandboxRuntimePool([engine('a', a), engine('b', b)]),
        agent: createAgent(),
      },
      { pollIntervalMs: 1, reconcileIntervalMs: 0 },
    );
    // Eight users at once (one user's starts queue behind its lock; different users' do not).
    const started = await Promise.all(Array.from({ length: 8 }, (_, i) => service.sandboxes.start(`user-${i}`)));
    expect(started.every((r) => r.isOk())).toBe(true);
    await service.idle();
    expect([a.size, b.size]).toEqual([4, 4]);
    await service.close();
  });

  it('marks the sandboxes of an engine that stops answering ERROR with the reason, keeps the others working, and brings them back when it answers again', async () => {
    const { a, b, ports, runtime, service } = setup();
    const first = await expectOk(service.sandboxes.start('alice'));
    const second = await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    const onB = (await expectOk(ports.sandboxes.get('alice', first.id)))?.location === 'b' ? first : second;
    const onA = onB === first ? second : first;

    b.setUnavailable('connect ECONNREFUSED /run/engine-b.sock');
    const lost = await expectOk(service.sandboxes.get('alice', onB.id));
    expect(lost.status).toBe('ERROR');
    expect(lost.status_detail).toBe('sandbox engine "b" does not answer: connect ECONNREFUSED /run/engine-b.sock');
    // Engine a goes on: its sandbox runs commands, and new sandboxes go there.
    a.onExec(/^echo still-here$/, () => ({ stdout: 'still-here\n' }));
    expect((await expectOk(service.sandboxes.get('alice', onA.id))).status).toBe('RUNNING');
    expect((await expectOk(runtime.exec(onA.id, { command: ['echo', 'still-here'] }))).stdout).toBe('still-here\n');
    const third = await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    expect((await expectOk(ports.sandboxes.get('alice', third.id)))?.location).toBe('a');

    // Engine b answers again, its container still there: reconcile gives the record its status back.
    b.setUnavailable(null);
    const report = await expectOk(service.sandboxes.reconcile());
    expect(report.changed).toBeGreaterThanOrEqual(1);
    expect((await expectOk(service.sandboxes.get('alice', onB.id))).status).toBe('RUNNING');
    await service.close();
  });

  it('finds a sandbox after a restart from the location its record keeps, also while another engine is down', async () => {
    const a = new FakeSandboxRuntime();
    const b = new FakeSandboxRuntime();
    const ports = createMemoryPorts();
    const before = createAgentConversationService(
      { ...ports, runtime: createSandboxRuntimePool([engine('a', a), engine('b', b, 0)]), agent: createAgent() },
      { pollIntervalMs: 1, reconcileIntervalMs: 0 },
    );
    const box = await expectOk(before.sandboxes.start('alice'));
    await before.idle();
    await before.close();
    // A new process (a new pool knows nothing yet); engine b is down, a is not asked anything but where the record says.
    b.setUnavailable('engine b is being upgraded');
    const pool = createSandboxRuntimePool([engine('a', a), engine('b', b)]);
    const after = createAgentConversationService(
      { ...ports, runtime: pool, agent: createAgent() },
      { pollIntervalMs: 1, reconcileIntervalMs: 0 },
    );
    expect((await expectOk(after.sandboxes.get('alice', box.id))).status).toBe('RUNNING');
    await expectOk(after.sandboxes.pause('alice', box.id));
    expect(a.peek(box.id)?.state).toBe('paused');
    await after.close();
  });
});
