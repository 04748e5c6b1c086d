import { describe, expect, it } from 'vitest';
import { createAgentConversationService } from '../src/index.js';
import { manualClock, unavailableSandboxRuntime } from '../src/ports.js';
import { expectOk } from '../src/testing/index.js';
import { createMemoryPorts } from '@acs/testing';
import { createAgent } from '@acs/agent';

describe('sandbox limits and maintenance (memory adapters)', () => {
  it('counts starting and running sandboxes against the per-user limit, not paused or other users’ ones', async () => {
    const ports = createMemoryPorts();
    const service = createAgentConversationService(
      { ...ports, agent: createAgent() },
      { pollIntervalMs: 1, maxRunningSandboxesPerUser: 2 },
    );
    const a = await expectOk(service.sandboxes.start('alice'));
    await expectOk(service.sandboxes.start('alice'));
    // Sandboxes without a conversation are never paused for another.
    expect((await service.sandboxes.start('alice'))._unsafeUnwrapErr()).toEqual({
      type: 'SandboxCapReached',
      limit: 2,
      why: 'none_at_rest',
    });
    await expectOk(service.sandboxes.start('bob'));
    await service.idle();
    await expectOk(service.sandboxes.pause('alice', a.id));
    const third = await expectOk(service.sandboxes.start('alice'));
    expect((await service.sandboxes.resume('alice', a.id))._unsafeUnwrapErr().type).toBe('SandboxCapReached');
    await expectOk(service.sandboxes.delete('alice', third.id));
    await expectOk(service.sandboxes.resume('alice', a.id));
    await service.close();
  });

  it('lets concurrent starts of one user never exceed the limit', async () => {
    const service = createAgentConversationService(
      { ...createMemoryPorts(), agent: createAgent() },
      { pollIntervalMs: 1, maxRunningSandboxesPerUser: 3 },
    );
    const results = await Promise.all(Array.from({ length: 10 }, () => service.sandboxes.start('alice')));
    expect(results.filter((r) => r.isOk())).toHaveLength(3);
    expect(results.filter((r) => r.isErr() && r.error.type === 'SandboxCapReached')).toHaveLength(7);
    await service.close();
  });

  it('refuses a conversation when its sandbox would exceed the limit, storing nothing', async () => {
    const ports = createMemoryPorts();
    const service = createAgentConversationService(
      { ...ports, agent: createAgent() },
      { pollIntervalMs: 1, maxRunningSandboxesPerUser: 1 },
    );
    await expectOk(service.settings.store('alice', { llm_model: 'openai/gpt-4o', llm_api_key: 'k' }));
    await expectOk(service.conversations.create('alice', { initial_user_msg: 'one' }));
    const refused = await service.conversations.create('alice', { initial_user_msg: 'two' });
    expect(refused._unsafeUnwrapErr().type).toBe('SandboxCapReached');
    expect(await expectOk(service.conversations.count('alice', {}))).toBe(1);
    await service.close();
  });

  it('with pause_oldest, a failed pause of the oldest is a refusal at the limit, never an error about that other sandbox', async () => {
    const ports = createMemoryPorts();
    const service = createAgentConversationService(
      { ...ports, agent: createAgent() },
      { pollIntervalMs: 1, maxRunningSandboxesPerUser: 1, atSandboxLimit: 'pause_oldest' },
    );
    const oldest = await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    ports.runtime.failNext('pause', { message: 'the engine refused to freeze it' });
    expect((await service.sandboxes.start('alice'))._unsafeUnwrapErr()).toEqual({
      type: 'SandboxCapReached',
      limit: 1,
    });
    expect((await expectOk(service.sandboxes.get('alice', oldest.id))).status).toBe('RUNNING');
    // Once the pause works, the start makes room as configured.
    await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    expect((await expectOk(service.sandboxes.get('alice', oldest.id))).status).toBe('PAUSED');
    await service.close();
  });

  it('answers 503-style SandboxesUnavailable at once when the runtime cannot take work, storing nothing', async () => {
    const ports = createMemoryPorts();
    const service = createAgentConversationService({
      agent: createAgent(),
      ...ports,
      runtime: unavailableSandboxRuntime('no engine here'),
    });
    expect((await service.sandboxes.start('alice'))._unsafeUnwrapErr()).toEqual({
      type: 'SandboxesUnavailable',
      reason: 'no engine here',
    });
    expect((await expectOk(service.sandboxes.search('alice', { limit: 10, after: null }))).items).toEqual([]);
  });

  it('pauses running sandboxes idle longer than the limit, leaving recently used ones (time from the clock port)', async () => {
    const ports = createMemoryPorts();
    const clock = manualClock();
    const service = createAgentConversationService(
      { agent: createAgent(), ...ports, clock },
      { pollIntervalMs: 1, idlePauseAfterMs: 10 * 60_000, maintenanceIntervalMs: 24 * 3_600_000 },
    );
    const idle = await expectOk(service.sandboxes.start('alice'));
    const busy = await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    clock.advance(9 * 60_000);
    expect(await service.sandboxes.pauseIdle()).toBe(0);
    service.sandboxes.touch('alice', busy.id);
    clock.advance(2 * 60_000);
    expect(await service.sandboxes.pauseIdle()).toBe(1);
    expect((await expectOk(service.sandboxes.get('alice', idle.id))).status).toBe('PAUSED');
    expect((await expectOk(service.sandboxes.get('alice', busy.id))).status).toBe('RUNNING');
    await service.close();
  });

  it('runs idle pausing on the clock’s timer, and stops it on close', async () => {
    const ports = createMemoryPorts();
    const clock = manualClock();
    const service = createAgentConversationService(
      { agent: createAgent(), ...ports, clock },
      { pollIntervalMs: 1, idlePauseAfterMs: 60_000, maintenanceIntervalMs: 15_000 },
    );
    const box = await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    clock.advance(45_000);
    await service.idle();
    expect((await expectOk(service.sandboxes.get('alice', box.id))).status).toBe('RUNNING');
    clock.advance(30_000); // the check at 75 s finds it idle for more than a minute
    await service.idle();
    expect((await expectOk(service.sandboxes.get('alice', box.id))).status).toBe('PAUSED');

    await expectOk(service.sandboxes.resume('alice', box.id));
    await service.idle();
    await service.close();
    clock.advance(10 * 60_000);
    expect(ports.runtime.peek(box.id)?.state).toBe('running');
  });

  it('uses the user’s remote_runtime_resource_factor when creating a sandbox, up to the operator’s cap', async () => {
    const ports = createMemoryPorts();
    const service = createAgentConversationService(
      { ...ports, agent: createAgent() },
      { pollIntervalMs: 1, userSettingLimits: { maxResourceFactor: 8 } },
    );
    await expectOk(service.settings.store('alice', { remote_runtime_resource_factor: 4 }));
    const box = await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    expect(ports.runtime.peek(box.id)?.request.resource_factor).toBe(4);
    const other = await expectOk(service.sandboxes.start('bob'));
    await service.idle();
    expect(ports.runtime.peek(other.id)?.request.resource_factor).toBe(1);
    await expectOk(service.settings.store('carol', { remote_runtime_resource_factor: 64 }));
    const carols = await expectOk(service.sandboxes.start('carol'));
    await service.idle();
    expect(ports.runtime.peek(carols.id)?.request.resource_factor).toBe(8);
  });

  it('applies no resource factor above 1 unless the operator allows it, and the settings say what is applied', async () => {
    const ports = createMemoryPorts();
    const service = createAgentConversationService({ ...ports, agent: createAgent() }, { pollIntervalMs: 1 });
    await expectOk(service.settings.store('alice', { remote_runtime_resource_factor: 64 }));
    expect((await expectOk(service.settings.load('alice'))).remote_runtime_resource_factor).toBe(1);
    const box = await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    expect(ports.runtime.peek(box.id)?.request.resource_factor).toBe(1);
    // What the user sent is kept: an operator who raises the cap later gives it to them.
    expect((await expectOk(ports.settings.get('alice')))?.remote_runtime_resource_factor).toBe(64);
    const raised = createAgentConversationService(
      { ...ports, agent: createAgent() },
      { pollIntervalMs: 1, userSettingLimits: { maxResourceFactor: 4 } },
    );
    expect((await expectOk(raised.settings.load('alice'))).remote_runtime_resource_factor).toBe(4);
    await service.close();
    await raised.close();
  });
});
