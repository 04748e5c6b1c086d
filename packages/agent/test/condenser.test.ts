/* eslint-disable @typescript-eslint/no-unsafe-assignment -- vitest's asymmetric matchers are typed any */
import { describe, expect, it } from 'vitest';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import type { ConversationEvent, SettingsInput } from '@acs/core/schemas';
import { sequentialIdGenerator, type LlmMessage, type LlmRequest } from '@acs/core/ports';
import { condensedView, planCondensation } from '../src/condenser.js';
import { createAgent } from '../src/index.js';
import { projectMessages } from '../src/prompt.js';
import { expectOk } from '@acs/core/testing';
import { createMemoryPorts, type ScriptedTurn } from '@acs/testing';
import { conversationOf } from './conversation-reads.js';

const LLM: SettingsInput = { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test-key' };

/** A model that runs `steps` bash steps (two calls in one response every third step), then finishes; summaries are numbered. */
function longTask(steps: number, extra: (request: LlmRequest, agentCall: number) => ScriptedTurn | null = () => null) {
  let agentCalls = 0;
  let summaries = 0;
  return (request: LlmRequest): ScriptedTurn => {
    if (request.tools.length === 0) return { content: `SUMMARY-${++summaries}: the agent ran steps so far.` };
    const n = agentCalls++;
    const special = extra(request, n);
    if (special) return special;
    if (n >= steps) return { tool_calls: [{ name: 'finish', arguments: { message: 'all steps done' } }] };
    const calls = [{ name: 'execute_bash', arguments: { command: `echo step ${n}` } }];
    if (n % 3 === 2) calls.push({ name: 'execute_bash', arguments: { command: `echo step ${n} again` } });
    return { content: `Step ${n}.`, tool_calls: calls };
  };
}

async function run(settings: SettingsInput, responder: (request: LlmRequest) => ScriptedTurn | Promise<ScriptedTurn>) {
  const ports = createMemoryPorts();
  ports.llm.respondWith(responder);
  ports.runtime.onExec(
    (argv) => argv[0] === 'bash',
    (request) => ({ stdout: `${request.command[2]}\n${'x'.repeat(200)}\n`, exit_code: 0 }),
  );
  const service = createAgentConversationService(
    { agent: createAgent(), ...ports, ids: sequentialIdGenerator() },
    { pollIntervalMs: 1 },
  );
  await expectOk(service.settings.store('alice', { ...LLM, ...settings }));
  const created = await expectOk(
    service.conversations.create('alice', { initial_user_msg: 'run the steps one by one' }),
  );
  await service.idle();
  return { service, llm: ports.llm, id: created.conversation_id };
}

async function allEvents(service: AgentConversationService, id: string): Promise<ConversationEvent[]> {
  return (await expectOk(service.conversations.searchEvents('alice', id, { after: 0, kinds: null, limit: 10_000 })))
    .items;
}

/** Every tool message answers a call of the assistant message before it, and every call is answered. */
function expectPairedCalls(messages: readonly LlmMessage[]) {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    if (m.role !== 'assistant' || m.tool_calls.length === 0) {
      expect(m.role, `message ${i} is a tool result without its call`).not.toBe('tool');
      continue;
    }
    const results = messages.slice(i + 1, i + 1 + m.tool_calls.length);
    expect(results.map((r) => (r.role === 'tool' ? r.tool_call_id : r.role))).toEqual(m.tool_calls.map((c) => c.id));
    i += m.tool_calls.length;
  }
}

const promptChars = (request: LlmRequest) => JSON.stringify(request.messages).length;

describe('default condenser', () => {
  it('keeps the prompt bounded over a long conversation, never splits a call from its result, and the conversation still ends', async () => {
    const steps = 150;
    const { service, llm, id } = await run({ condenser_max_size: 20, max_iterations: 500 }, longTask(steps));
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');

    const agentRequests = llm.requests.filter((r) => r.tools.length > 0);
    const summaryRequests = llm.requests.filter((r) => r.tools.length === 0);
    expect(agentRequests).toHaveLength(steps + 1);
    expect(summaryRequests.length).toBeGreaterThanOrEqual(10);
    for (const request of agentRequests) {
      // The system prompt, at most 20 events shown, the summary: ≤ 22 messages whatever the length of the conversation.
      expect(request.messages.length).toBeLessThanOrEqual(22);
      expectPairedCalls(request.messages);
      // The task stays in view as it was given.
      expect(request.messages[1]).toMatchObject({ role: 'user', content: 'run the steps one by one' });
    }
    // The prompt stops growing: the last requests are no longer than those before the first condensation.
    const maxEarly = Math.max(...agentRequests.slice(0, 12).map(promptChars));
    const maxLate = Math.max(...agentRequests.slice(-40).map(promptChars));
    expect(maxLate).toBeLessThan(maxEarly * 1.5);
    const last = agentRequests.at(-1)!.messages;
    expect(JSON.stringify(last)).toContain('<CONVERSATION_SUMMARY>');
    // Each summary carries the previous one forward.
    expect(JSON.stringify(summaryRequests[1]!.messages)).toContain('SUMMARY-1');

    const events = await allEvents(service, id);
    const condensations = events.filter((e) => e.kind === 'condensation');
    expect(condensations).toHaveLength(summaryRequests.length);
    expect(condensations[0]).toMatchObject({
      kept_head_through: expect.any(Number),
      summary: 'SUMMARY-1: the agent ran steps so far.',
      reason: expect.stringContaining('more than 20'),
    });
    // Summaries are model calls (cost counts) but not agent steps.
    const calls = events.filter((e) => e.kind === 'llm_call');
    expect(calls.filter((c) => c.purpose === 'condenser')).toHaveLength(summaryRequests.length);
    expect(calls.filter((c) => c.purpose === 'agent')).toHaveLength(steps + 1);
  });

  it('is off when enable_default_condenser is false: the prompt grows with the history', async () => {
    const { service, llm, id } = await run({ condenser_max_size: 20, enable_default_condenser: false }, longTask(30));
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
    expect(llm.requests.every((r) => r.tools.length > 0)).toBe(true);
    expect(llm.requests.at(-1)!.messages.length).toBeGreaterThan(60);
    expect((await allEvents(service, id)).some((e) => e.kind === 'condensation')).toBe(false);
  });

  it('condenses harder and retries once when the model says the prompt is too long', async () => {
    let refused = 0;
    const { service, id } = await run(
      { condenser_max_size: 40 },
      longTask(20, (_, n) =>
        n === 15 && refused++ === 0 ? { error: 'context_too_long', message: 'maximum context length exceeded' } : null,
      ),
    );
    const events = await allEvents(service, id);
    const forced = events.filter(
      (e) => e.kind === 'condensation' && e.reason === 'the model said the prompt was too long',
    );
    expect(forced).toHaveLength(1);
    expect(events.some((e) => e.kind === 'error')).toBe(false);
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
  });

  it('a second refusal after condensing stops the agent with llm_context_too_long', async () => {
    const { service, id } = await run(
      { condenser_max_size: 40 },
      longTask(20, (_, n) =>
        n >= 15 ? { error: 'context_too_long', message: 'maximum context length exceeded' } : null,
      ),
    );
    const events = await allEvents(service, id);
    expect(events.filter((e) => e.kind === 'error')).toEqual([
      expect.objectContaining({ code: 'llm_context_too_long', fatal: true }),
    ]);
    expect((await conversationOf(service, id)).record.execution_status).toBe('error');
  });

  it('a failed summary stops the agent with the model error', async () => {
    const ports = { n: 0 };
    const { service, id } = await run({ condenser_max_size: 20 }, (request) => {
      if (request.tools.length === 0) return { error: 'rate_limited', message: 'slow down' };
      return { tool_calls: [{ name: 'execute_bash', arguments: { command: `echo ${ports.n++}` } }] };
    });
    const events = await allEvents(service, id);
    expect(events.filter((e) => e.kind === 'error')).toEqual([
      expect.objectContaining({ code: 'llm_rate_limited', message: expect.stringContaining('Summarising') }),
    ]);
    expect((await conversationOf(service, id)).record.execution_status).toBe('error');
  });
});

describe('planCondensation', () => {
  const at = '2026-11-21T10:00:00.000Z';
  /** A log of `responses` responses of `width` parallel calls each, after one user message. */
  function log(responses: number, width: number): ConversationEvent[] {
    const events: ConversationEvent[] = [
      { id: 1, kind: 'message', source: 'user', timestamp: at, text: 'task', image_urls: [] },
    ];
    for (let r = 0; r < responses; r++) {
      const ids = Array.from({ length: width }, (_, i) => `c${r}_${i}`);
      for (const [i, call] of ids.entries()) {
        events.push({
          id: events.length + 1,
          kind: 'action',
          source: 'agent',
          timestamp: at,
          tool_call_id: call,
          tool_name: 'execute_bash',
          arguments: {},
          raw_arguments: '{}',
          thought: i === 0 ? 't' : null,
          response_id: `r${r}`,
        });
      }
      for (const call of ids) {
        events.push({
          id: events.length + 1,
          kind: 'observation',
          source: 'environment',
          timestamp: at,
          tool_call_id: call,
          tool_name: 'execute_bash',
          content: 'ok',
          is_error: false,
          exit_code: 0,
          details: {},
        });
      }
    }
    return events;
  }

  it.each([1, 2, 3, 5])('never separates a call from its result (%i calls per response), for any bound', (width) => {
    for (const maxEvents of [5, 8, 13, 21, 34]) {
      const events = log(30, width);
      const plan = planCondensation(events, { maxEvents, keepFirst: 2 });
      expect(plan, `maxEvents ${maxEvents}`).not.toBeNull();
      const withSummary: ConversationEvent[] = [
        ...events,
        {
          id: events.length + 1,
          kind: 'condensation',
          source: 'environment',
          timestamp: at,
          summary: 's',
          kept_head_through: plan!.keptHeadThrough,
          forgotten_through: plan!.forgottenThrough,
          forgotten_events: plan!.forgottenCount,
          reason: 'test',
        },
      ];
      const view = condensedView(withSummary).events;
      const calls = new Set(view.flatMap((e) => (e.kind === 'action' ? [e.tool_call_id] : [])));
      const results = new Set(view.flatMap((e) => (e.kind === 'observation' ? [e.tool_call_id] : [])));
      expect([...calls].sort()).toEqual([...results].sort());
      expectPairedCalls(projectMessages(view));
      // Within the bound whenever the bound leaves room for the head and one response.
      if (maxEvents >= 4 + 4 * width)
        expect(view.filter((e) => e.kind !== 'message' || e.source !== 'environment').length).toBeLessThanOrEqual(
          maxEvents,
        );
    }
  });

  it('keeps the user’s last message in view, however long it is', () => {
    const events = log(30, 1);
    const huge = 'please read all of this '.repeat(10_000);
    events.push({ id: events.length + 1, kind: 'message', source: 'user', timestamp: at, text: huge, image_urls: [] });
    const plan = planCondensation(events, { maxEvents: 1000, maxPromptChars: 100_000, keepFirst: 2 });
    expect(plan).not.toBeNull();
    expect(plan!.forgottenThrough).toBeLessThan(events.length);
    expect(plan!.toSummarise.some((e) => e.kind === 'message' && e.text === huge)).toBe(false);
  });

  it('is null while the view is within its bounds, and counts only what is shown', () => {
    expect(planCondensation(log(5, 1), { maxEvents: 11 })).toBeNull();
    expect(planCondensation(log(5, 1), { maxEvents: 10 })).not.toBeNull();
    expect(planCondensation(log(5, 1), { maxEvents: 1000, maxPromptChars: 5 })).toMatchObject({
      reason: expect.stringContaining('characters'),
    });
  });
});
