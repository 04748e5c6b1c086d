import { afterEach, describe, expect, it } from 'vitest';
import { okAsync } from 'neverthrow';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import type { ConversationEvent } from '@acs/core/schemas';
import type { ConversationLease, ConversationLeaseStore, HeldLease } from '@acs/core/ports';
import { expectOk } from '@acs/core/testing';
import { createMemoryPorts, type ScriptedTurn } from '@acs/testing';
import { createAgent } from '../src/index.js';
import { conversationOf, eventsOf } from './conversation-reads.js';

/**
 * Several services on one set of stores with conversation leases: what replicas on one database
 * do, in one process. Short lease timings so takeovers happen within the test.
 */
const TIMINGS = { pollIntervalMs: 1, leaseTtlMs: 400, leaseRenewMs: 50, takeoverScanMs: 50 };
const LLM = { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test-key' };
const think = (thought: string, delayMs = 0): ScriptedTurn => ({
  tool_calls: [{ name: 'think', arguments: { thought } }],
  delayMs,
});

/** A lease store whose renewals can be frozen: the process believes it still holds its leases, the store lets them expire (a paused or partitioned replica). */
function freezable(store: ConversationLeaseStore) {
  const granted = new Map<string, HeldLease>();
  let frozen = false;
  const wrapped: ConversationLeaseStore = {
    acquire: (userId, conversationId, owner, ttlMs) =>
      store.acquire(userId, conversationId, owner, ttlMs).map((lease) => {
        if (lease) granted.set(`${userId}/${conversationId}`, { ...lease, stop_requested: false });
        return lease;
      }),
    renew: (owner, ttlMs) => (frozen ? okAsync([...granted.values()]) : store.renew(owner, ttlMs)),
    release: (owner, lease: ConversationLease) => store.release(owner, lease),
    request: (userId, conversationId, what) => store.request(userId, conversationId, what),
    holders: (keys) => store.holders(keys),
    forget: (userId, conversationId) => store.forget(userId, conversationId),
  };
  return { store: wrapped, freeze: () => (frozen = true) };
}

/** Waits for `condition`, failing with what it waited for after `timeoutMs`. */
async function waitUntil(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`gave up after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const services: AgentConversationService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.close()));
});

function replica(
  ports: ReturnType<typeof createMemoryPorts>,
  leases: ConversationLeaseStore = ports.conversationLeases!,
) {
  const service = createAgentConversationService(
    { agent: createAgent(), ...ports, conversationLeases: leases },
    TIMINGS,
  );
  services.push(service);
  return service;
}

const texts = (events: ConversationEvent[]) =>
  events.flatMap((e) => (e.kind === 'message' && e.source === 'agent' ? [e.text] : []));

describe('replicas on shared stores (conversation leases)', () => {
  it('takes over a conversation whose replica stopped renewing, and refuses that replica’s late writes', async () => {
    const ports = createMemoryPorts({ leases: true });
    const frozen = freezable(ports.conversationLeases!);
    const a = replica(ports, frozen.store);
    const b = replica(ports);
    await expectOk(b.recover());
    await expectOk(a.settings.store('alice', LLM));
    // A's second model call outlives its lease: B answers the third.
    ports.llm.push(
      think('first step'),
      { content: 'late answer from A', delayMs: 2_000 },
      { content: 'answer from B' },
    );
    const { conversation_id: id } = await expectOk(a.conversations.create('alice', { initial_user_msg: 'go' }));
    await waitUntil(() => ports.llm.calls >= 2, 'A to start its second model call');
    frozen.freeze();

    await waitUntil(
      async () => (await conversationOf(b, id)).record.execution_status === 'finished',
      'B to take over and finish the conversation',
      60_000,
    );
    await waitUntil(() => a.agent.activeLoops() === 0, "A's loop to stop once its late write was refused", 60_000);
    const events = await eventsOf(b, id);
    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
    expect(texts(events)).toEqual(['answer from B']);
    expect(events.filter((e) => e.kind === 'status' && e.execution_status === 'finished')).toHaveLength(1);
    expect((await conversationOf(a, id)).record.execution_status).toBe('finished');
  });

  it('stops, from one replica, the agent another replica runs', async () => {
    const ports = createMemoryPorts({ leases: true });
    const a = replica(ports);
    const b = replica(ports);
    await expectOk(a.settings.store('alice', LLM));
    // A 20-minute model call: only an abort ends it.
    ports.llm.push(think('slow', 1_200_000));
    const { conversation_id: id } = await expectOk(a.conversations.create('alice', { initial_user_msg: 'go' }));
    await waitUntil(() => ports.llm.calls >= 1, 'A to call the model');
    expect(a.agent.activeLoops()).toBe(1);

    const started = Date.now();
    await expectOk(b.conversations.stop('alice', id));
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(a.agent.activeLoops()).toBe(0);
    expect((await conversationOf(b, id)).record.execution_status).toBe('paused');
    const events = await eventsOf(b, id);
    expect(events.filter((e) => e.kind === 'status').map((e) => e.kind === 'status' && e.execution_status)).toEqual([
      'running',
      'paused',
    ]);
  });

  it('runs a message sent through one replica while another holds the conversation, once', async () => {
    const ports = createMemoryPorts({ leases: true });
    const a = replica(ports);
    const b = replica(ports);
    await expectOk(a.settings.store('alice', LLM));
    ports.llm.push({ content: 'first answer', delayMs: 600 }, { content: 'second answer' });
    const { conversation_id: id } = await expectOk(a.conversations.create('alice', { initial_user_msg: 'go' }));
    await waitUntil(() => ports.llm.calls >= 1, 'A to call the model');
    await expectOk(
      b.conversations.sendMessage('alice', id, {
        role: 'user',
        content: [{ type: 'text', text: 'and then?' }],
        run: true,
      }),
    );

    await waitUntil(
      async () => texts(await eventsOf(b, id)).length === 2 && a.agent.activeLoops() + b.agent.activeLoops() === 0,
      'both answers',
      60_000,
    );
    const events = await eventsOf(b, id);
    expect(texts(events)).toEqual(['first answer', 'second answer']);
    expect(ports.llm.calls).toBe(2);
    expect((await conversationOf(b, id)).record.execution_status).toBe('finished');
  });
});
