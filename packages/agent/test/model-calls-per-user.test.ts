/**
 * One user's many conversations take turns for the model instead of taking the server (issue 35,
 * "anything else"): at most `maxModelCallsPerUser` of a user's model calls are under way at once
 * in a process, the rest wait in order, and another user's call never waits behind them.
 */
import { describe, expect, it } from 'vitest';
import { ResultAsync } from 'neverthrow';
import { createAgentConversationService, KeyedSemaphore } from '@acs/core';
import type { LlmClient } from '@acs/core/ports';
import { expectOk } from '@acs/core/testing';
import { createMemoryPorts } from '@acs/testing';
import { createAgent } from '../src/index.js';

/** A model whose calls wait until the test lets them answer; counts the calls under way per API key. */
function gatedModel(ports: ReturnType<typeof createMemoryPorts>) {
  const underWay = new Map<string, number>();
  const most = new Map<string, number>();
  const waiting: (() => void)[] = [];
  const llm: LlmClient = {
    complete: (request) =>
      new ResultAsync(
        (async () => {
          const key = request.credentials.api_key ?? '';
          const now = (underWay.get(key) ?? 0) + 1;
          underWay.set(key, now);
          most.set(key, Math.max(most.get(key) ?? 0, now));
          await new Promise<void>((resolve) => waiting.push(resolve));
          underWay.set(key, (underWay.get(key) ?? 1) - 1);
          return ports.llm.complete(request);
        })(),
      ),
  };
  return { llm, underWay: (key: string) => underWay.get(key) ?? 0, most: (key: string) => most.get(key) ?? 0, waiting };
}

async function until(what: string, probe: () => boolean): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('model calls per user', () => {
  it('lets one user have at most the limit under way, the rest waiting in turn, while another user’s call goes at once', async () => {
    const ports = createMemoryPorts();
    const model = gatedModel(ports);
    const service = createAgentConversationService(
      { ...ports, llm: model.llm, agent: createAgent({ maxModelCallsPerUser: 2 }) },
      { pollIntervalMs: 1 },
    );
    await expectOk(service.settings.store('alice', { llm_model: 'openai/gpt-4o', llm_api_key: 'alice-key' }));
    await expectOk(service.settings.store('bob', { llm_model: 'openai/gpt-4o', llm_api_key: 'bob-key' }));
    for (let i = 0; i < 5; i++)
      await expectOk(service.conversations.create('alice', { initial_user_msg: `task ${i}` }));
    await until('two of alice’s calls under way', () => model.underWay('alice-key') === 2);
    await expectOk(service.conversations.create('bob', { initial_user_msg: 'my task' }));
    await until('bob’s call under way', () => model.underWay('bob-key') === 1);
    expect(model.underWay('alice-key')).toBe(2);

    // Answer everything as it comes until every conversation has had its turn.
    while (model.waiting.length > 0 || model.underWay('alice-key') + model.underWay('bob-key') > 0) {
      model.waiting.splice(0).forEach((answer) => answer());
      await new Promise((r) => setTimeout(r, 5));
    }
    await service.idle();
    expect(model.most('alice-key')).toBe(2);
    expect(ports.llm.calls).toBeGreaterThanOrEqual(6);
    await service.close();
  });
});

describe('KeyedSemaphore', () => {
  it('admits in arrival order as places free up, and lets a waiter that is stopped go without running', async () => {
    const gate = new KeyedSemaphore(1);
    const order: string[] = [];
    let release!: () => void;
    const first = gate.run('k', undefined, () => new Promise<void>((r) => (release = r)).then(() => order.push('a')));
    const stop = new AbortController();
    const second = gate.run('k', stop.signal, () => Promise.resolve(order.push('b')));
    const third = gate.run('k', undefined, () => Promise.resolve(order.push('c')));
    const other = await gate.run('j', undefined, () => Promise.resolve('other key at once'));
    expect(other).toBe('other key at once');
    expect(gate.pending('k')).toEqual({ running: 1, waiting: 2 });
    stop.abort();
    expect(await second).toBeNull();
    release();
    await first;
    await third;
    expect(order).toEqual(['a', 'c']);
    expect(gate.pending('k')).toEqual({ running: 0, waiting: 0 });
  });
});
