import { errAsync } from 'neverthrow';
import { describe, expect, it } from 'vitest';
import { createAgentConversationService } from '../src/index.js';
import { storeUnavailable, type StartTaskStore, type StoreFailure } from '../src/ports.js';
import { expectOk } from '../src/testing/index.js';
import { createMemoryPorts } from '@acs/testing';
import { createAgent } from '@acs/agent';

describe('following a start task', () => {
  it('follows nothing when the task cannot be read: no listener call and no end after the error', async () => {
    const ports = createMemoryPorts();
    let refuse = false;
    const startTasks: StartTaskStore = new Proxy(ports.startTasks, {
      get(store, property) {
        if (property === 'get' && refuse)
          return () =>
            errAsync<never, StoreFailure>(
              storeUnavailable('get start task', new Error('connection reset')) as StoreFailure,
            );
        const value: unknown = Reflect.get(store, property, store);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(store) : value;
      },
    });
    const service = createAgentConversationService(
      { agent: createAgent(), ...ports, startTasks },
      { pollIntervalMs: 1 },
    );
    await expectOk(service.settings.store('alice', { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test' }));
    ports.runtime.hold();
    const task = await expectOk(service.conversations.startApp('alice', {}));

    const seen: string[] = [];
    refuse = true;
    const followed = await service.conversations.followStartTask(
      'alice',
      task.id,
      (t) => seen.push(t.status),
      (reason) => seen.push(`end: ${reason}`),
    );
    refuse = false;
    expect(followed.isErr() && followed.error.type).toBe('StoreUnavailable');

    // The task goes on to READY; what follows it here must not hear of it.
    ports.runtime.release();
    await service.idle();
    const [done] = await expectOk(service.conversations.getStartTasks('alice', [task.id]));
    expect(done?.status).toBe('READY');
    expect(seen).toEqual([]);
    await service.close();
  });
});
