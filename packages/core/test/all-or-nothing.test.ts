import { errAsync, ResultAsync } from 'neverthrow';
import { describe, expect, it } from 'vitest';
import {
  createAgentConversationService,
  type AgentConversationServiceOptions,
  type AgentConversationServicePorts,
} from '../src/index.js';
import {
  storeUnavailable,
  type RuntimeCreateRequest,
  type RuntimeObservation,
  type SandboxRuntimeError,
  type StoreFailure,
} from '../src/ports.js';
import { expectOk } from '../src/testing/index.js';
import { createMemoryPorts, FakeSandboxRuntime } from '@acs/testing';
import { createAgent } from '@acs/agent';

/** A store failure, as a database that refuses a value answers. */
const refused = (operation: string) =>
  errAsync<never, StoreFailure>(storeUnavailable(operation, new Error('invalid byte sequence')) as StoreFailure);

/** The store with some methods replaced (a Proxy, so the store's private fields keep working). */
function overriding<T extends object>(target: T, overrides: { [K in keyof T]?: unknown }): T {
  return new Proxy(target, {
    get(store, property) {
      if (Object.hasOwn(overrides, property)) return overrides[property as keyof T];
      const value: unknown = Reflect.get(store, property, store);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(store) : value;
    },
  });
}

/** Memory ports with settings that let conversations start, and a service over them. */
async function setup(
  options: AgentConversationServiceOptions = {},
  tweak: (ports: ReturnType<typeof createMemoryPorts>) => Partial<AgentConversationServicePorts> = () => ({}),
) {
  const ports = createMemoryPorts();
  const service = createAgentConversationService(
    { agent: createAgent(), ...ports, ...tweak(ports) },
    { pollIntervalMs: 1, ...options },
  );
  await expectOk(service.settings.store('alice', { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test' }));
  return { ports, service };
}

/** What is left of a user's work: records, running sandboxes (store and runtime), tasks. */
async function leftovers({ ports, service }: Awaited<ReturnType<typeof setup>>) {
  await service.idle();
  return {
    conversations: await expectOk(service.conversations.count('alice', {})),
    tasks: await expectOk(service.conversations.countStartTasks('alice', {})),
    activeSandboxRecords: (await expectOk(ports.sandboxes.listByStatus('alice', ['STARTING', 'RUNNING', 'PAUSED'])))
      .length,
    runtimeSandboxes: ports.runtime.size,
  };
}

const nothing = { conversations: 0, tasks: 0, activeSandboxRecords: 0, runtimeSandboxes: 0 };

describe('a refused or failed create leaves nothing behind', () => {
  it.each([
    ['the conversation cannot be stored', 'conversations'],
    ['the first message cannot be stored', 'events'],
    ['the start task cannot be stored', 'startTasks'],
  ] as const)(
    'V1 create: when %s, no sandbox runs, no record stays, and the error is the storage error',
    async (_what, failing) => {
      const world = await setup({}, (ports) => ({
        [failing]:
          failing === 'conversations'
            ? overriding(ports.conversations, { insert: () => refused('insert conversation') })
            : failing === 'events'
              ? overriding(ports.events, { append: () => refused('append events') })
              : overriding(ports.startTasks, { insert: () => refused('insert start task') }),
      }));
      const result = await world.service.conversations.startApp('alice', {
        initial_message: { role: 'user', content: [{ type: 'text', text: 'hello' }], run: true },
      });
      expect(result._unsafeUnwrapErr().type).toBe('StoreUnavailable');
      expect(await leftovers(world)).toEqual(nothing);
      expect(world.ports.runtime.calls.filter((c) => c.operation === 'create')).toEqual([]);
      await world.service.close();
    },
  );

  it('V0 create: a failed start task store gives back the sandbox, so the user can start the conversation they are allowed', async () => {
    let failTask = true;
    const world = await setup({ maxRunningSandboxesPerUser: 1 }, (ports) => ({
      startTasks: overriding(ports.startTasks, {
        insert: (task: Parameters<typeof ports.startTasks.insert>[0]) =>
          failTask ? refused('insert start task') : ports.startTasks.insert(task),
      }),
    }));
    expect(
      (await world.service.conversations.create('alice', { initial_user_msg: 'one' }))._unsafeUnwrapErr().type,
    ).toBe('StoreUnavailable');
    expect(await leftovers(world)).toEqual(nothing);
    failTask = false;
    // Not refused at the limit of 1: the failed create counted for nothing.
    await expectOk(world.service.conversations.create('alice', { initial_user_msg: 'two' }));
    expect(await leftovers(world)).toEqual({
      conversations: 1,
      tasks: 1,
      activeSandboxRecords: 1,
      runtimeSandboxes: 1,
    });
    await world.service.close();
  });

  it('V0 start at the sandbox limit answers 429 and leaves the conversation STOPPED, without a task', async () => {
    const world = await setup({ maxRunningSandboxesPerUser: 1, atSandboxLimit: 'refuse' });
    const { service } = world;
    const first = await expectOk(service.conversations.create('alice', { initial_user_msg: 'one' }));
    await service.idle();
    await expectOk(service.conversations.stop('alice', first.conversation_id));
    await service.idle();
    // The first one's sandbox is paused, so a second conversation fits.
    const second = await expectOk(service.conversations.create('alice', { initial_user_msg: 'two' }));
    await service.idle();
    const tasksBefore = await expectOk(service.conversations.countStartTasks('alice', {}));

    const refusedStart = await service.conversations.start('alice', first.conversation_id);
    expect(refusedStart._unsafeUnwrapErr()).toEqual({ type: 'SandboxCapReached', limit: 1 });
    const info = await expectOk(service.conversations.get('alice', first.conversation_id));
    expect(info.status).toBe('STOPPED');
    expect(await expectOk(service.conversations.countStartTasks('alice', {}))).toBe(tasksBefore);
    expect((await expectOk(service.conversations.get('alice', second.conversation_id))).status).toBe('RUNNING');

    // Once there is room, the same start works.
    await expectOk(service.conversations.stop('alice', second.conversation_id));
    await service.idle();
    await expectOk(service.conversations.start('alice', first.conversation_id));
    await service.idle();
    expect((await expectOk(service.conversations.get('alice', first.conversation_id))).status).toBe('RUNNING');
    await service.close();
  });

  it('V0 start in a new sandbox (its old one was lost) at the limit answers 429, stores nothing and creates nothing', async () => {
    const world = await setup({ maxRunningSandboxesPerUser: 1 });
    const { service, ports } = world;
    const lost = await expectOk(service.conversations.create('alice', { initial_user_msg: 'one' }));
    await service.idle();
    const before = await expectOk(service.conversations.get('alice', lost.conversation_id));
    ports.runtime.vanish(before.record.sandbox_id!);
    expect((await expectOk(service.conversations.get('alice', lost.conversation_id))).status).toBe('STOPPED');
    await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    const creates = ports.runtime.calls.filter((c) => c.operation === 'create').length;

    expect((await service.conversations.start('alice', lost.conversation_id))._unsafeUnwrapErr().type).toBe(
      'SandboxCapReached',
    );
    const after = await expectOk(service.conversations.get('alice', lost.conversation_id));
    expect(after.status).toBe('STOPPED');
    expect(after.record.sandbox_id).toBe(before.record.sandbox_id);
    await service.idle();
    expect(ports.runtime.calls.filter((c) => c.operation === 'create')).toHaveLength(creates);
    await service.close();
  });

  it('V0 start whose start task cannot be stored puts the conversation back as it was and gives back its new sandbox', async () => {
    let failTask = false;
    const world = await setup({}, (ports) => ({
      startTasks: overriding(ports.startTasks, {
        insert: (task: Parameters<typeof ports.startTasks.insert>[0]) =>
          failTask ? refused('insert start task') : ports.startTasks.insert(task),
      }),
    }));
    const { service, ports } = world;
    const created = await expectOk(service.conversations.create('alice', { initial_user_msg: 'one' }));
    await service.idle();
    const before = await expectOk(service.conversations.get('alice', created.conversation_id));
    ports.runtime.vanish(before.record.sandbox_id!);
    await expectOk(service.conversations.get('alice', created.conversation_id));
    failTask = true;
    expect((await service.conversations.start('alice', created.conversation_id))._unsafeUnwrapErr().type).toBe(
      'StoreUnavailable',
    );
    const after = await expectOk(service.conversations.get('alice', created.conversation_id));
    expect({ status: after.status, sandbox_id: after.record.sandbox_id }).toEqual({
      status: 'STOPPED',
      sandbox_id: before.record.sandbox_id,
    });
    expect(await leftovers(world)).toEqual({
      conversations: 1,
      tasks: 1,
      activeSandboxRecords: 0,
      runtimeSandboxes: 0,
    });
    await service.close();
  });

  it('a client-chosen id that is taken gives back the sandbox reserved for it', async () => {
    const ports = createMemoryPorts();
    const service = createAgentConversationService(
      { ...ports, agent: createAgent() },
      { pollIntervalMs: 1, allowClientConversationIds: true, maxRunningSandboxesPerUser: 2 },
    );
    await expectOk(service.settings.store('alice', { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test' }));
    const id = 'a'.repeat(32);
    const results = await Promise.all(
      [1, 2].map(() => service.conversations.create('alice', { conversation_id: id, initial_user_msg: 'hi' })),
    );
    expect(results.filter((r) => r.isOk())).toHaveLength(1);
    expect(results.find((r) => r.isErr())?._unsafeUnwrapErr().type).toBe('ConversationIdTaken');
    await service.idle();
    expect(await expectOk(ports.sandboxes.listByStatus('alice', ['STARTING', 'RUNNING']))).toHaveLength(1);
    expect(ports.runtime.size).toBe(1);
    await service.close();
  });
});

/** A fake runtime whose creates wait until the test lets them finish. */
class GatedCreateRuntime extends FakeSandboxRuntime {
  #open!: () => void;
  readonly #gate = new Promise<void>((resolve) => (this.#open = resolve));
  creating = 0;
  open(): void {
    this.#open();
  }
  override create(request: RuntimeCreateRequest): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    this.creating++;
    return new ResultAsync(this.#gate.then(() => super.create(request)));
  }
}

describe('deleting a sandbox that is still starting', () => {
  it('wins while the runtime is still creating it: the record ends DELETED and the container is removed when it appears', async () => {
    const runtime = new GatedCreateRuntime();
    const ports = { ...createMemoryPorts(), runtime };
    const service = createAgentConversationService({ ...ports, agent: createAgent() }, { pollIntervalMs: 1 });
    const box = await expectOk(service.sandboxes.start('alice'));
    await new Promise((r) => setTimeout(r, 5));
    expect(runtime.creating).toBe(1);
    await expectOk(service.sandboxes.delete('alice', box.id));
    expect((await expectOk(ports.sandboxes.get('alice', box.id)))?.status).toBe('DELETED');
    runtime.open();
    await service.idle();
    expect((await expectOk(ports.sandboxes.get('alice', box.id)))?.status).toBe('DELETED');
    expect(runtime.peek(box.id)).toBeUndefined();
    expect((await service.sandboxes.get('alice', box.id))._unsafeUnwrapErr().type).toBe('SandboxNotFound');
    await service.close();
  });

  it('wins while the sandbox is coming up, also when the runtime refuses the first removal', async () => {
    const ports = createMemoryPorts({ runtime: { inspectionsUntilRunning: 1_000_000 } });
    const service = createAgentConversationService({ ...ports, agent: createAgent() }, { pollIntervalMs: 5 });
    const box = await expectOk(service.sandboxes.start('alice'));
    await new Promise((r) => setTimeout(r, 20));
    expect(ports.runtime.peek(box.id)?.state).toBe('starting');
    ports.runtime.failNext('delete', { message: 'removal of container is already in progress' });
    await expectOk(service.sandboxes.delete('alice', box.id));
    await service.idle();
    expect((await expectOk(ports.sandboxes.get('alice', box.id)))?.status).toBe('DELETED');
    expect(ports.runtime.peek(box.id)).toBeUndefined();
    await service.close();
  });

  it('is refused, changing nothing, only when the runtime cannot be reached', async () => {
    const ports = createMemoryPorts();
    const service = createAgentConversationService({ ...ports, agent: createAgent() }, { pollIntervalMs: 1 });
    const box = await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    ports.runtime.setUnavailable('the engine is down');
    expect((await service.sandboxes.delete('alice', box.id))._unsafeUnwrapErr().type).toBe('SandboxesUnavailable');
    expect((await expectOk(ports.sandboxes.get('alice', box.id)))?.status).toBe('RUNNING');
    await service.close();
  });
});
