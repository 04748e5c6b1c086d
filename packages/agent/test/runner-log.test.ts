import { describe, expect, it } from 'vitest';
import { createAgentConversationService } from '@acs/core';
import type { ConversationEvent, ConversationEventDraft } from '@acs/core/schemas';
import { sequentialIdGenerator, type KnowledgeFile, type LlmRequest } from '@acs/core/ports';
import { expectOk } from '@acs/core/testing';
import { createMemoryPorts, type ScriptedTurn } from '@acs/testing';
import { condensedView } from '../src/condenser.js';
import { createAgent } from '../src/index.js';
import { detectStuck, STUCK_THRESHOLDS } from '../src/stuck.js';
import { metricsOf } from '../src/engine/index.js';
import { projectMessages } from '../src/prompt.js';
import { IncrementalProjection } from '../src/prompt.js';
import { isAgentCall } from '../src/engine/log-reading.js';
import { RunnerLog } from '../src/engine/runner-log.js';

/**
 * The runner's incremental copy of the log (issue 27) against the scans it replaces: after every
 * event of every kind, in every order the engine and foreign logs produce, its prompt, metrics and
 * counts equal a full recomputation.
 */

const ts = '2026-01-01T00:00:00.000Z';

/** A small deterministic random source, so a failing sequence can be run again. */
function random(seed: number) {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

const knowledge: KnowledgeFile[] = [
  { path: '.openhands/microagents/deploy.md', name: 'deploy', triggers: ['deploy'], content: 'How we deploy.' },
  { path: '.openhands/microagents/tests.md', name: 'tests', triggers: ['pytest'], content: 'Run pytest -q.' },
];

/** A log of `length` events of every kind the engine writes (and some only a foreign log holds), with ids 1…n. */
function randomLog(seed: number, length: number): ConversationEvent[] {
  const next = random(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const events: ConversationEvent[] = [];
  const open: string[] = [];
  const called: string[] = [];
  let response = 0;
  let call = 0;
  const add = (draft: ConversationEventDraft) => events.push({ ...draft, id: events.length + 1 });
  add({ kind: 'message', source: 'user', timestamp: ts, text: 'please deploy the app', image_urls: [] });
  while (events.length < length) {
    const r = next();
    if (r < 0.3) {
      // One model response: an llm_call and 1–3 actions (sometimes reusing a call id, as some servers do).
      response++;
      const cost = next() < 0.2 ? null : Math.round(next() * 1e4) / 1e6;
      add({
        kind: 'llm_call',
        source: 'environment',
        timestamp: ts,
        response_id: `r${response}`,
        model: pick(['m1', 'm2']),
        prompt_tokens: Math.floor(next() * 1000),
        completion_tokens: Math.floor(next() * 100),
        cached_prompt_tokens: Math.floor(next() * 10),
        cost_usd: cost,
        latency_ms: 1,
        attempts: 1,
        purpose: next() < 0.1 ? 'condenser' : 'agent',
      });
      const calls = 1 + Math.floor(next() * 3);
      for (let i = 0; i < calls; i++) {
        const id = next() < 0.05 && called.length > 0 ? pick(called) : `c${++call}`;
        called.push(id);
        open.push(id);
        const raw = next() < 0.1 ? 'not json' : JSON.stringify({ command: `echo ${call}` });
        add({
          kind: 'action',
          source: 'agent',
          timestamp: ts,
          tool_call_id: id,
          tool_name: 'execute_bash',
          arguments: raw === 'not json' ? null : { command: `echo ${call}` },
          raw_arguments: raw,
          thought: i === 0 && next() < 0.5 ? `thinking ${response}` : null,
          response_id: `r${response}`,
        });
      }
    } else if (r < 0.6 && open.length > 0) {
      // A result, usually for the oldest open call, sometimes out of order or twice.
      const id = next() < 0.8 ? open.shift()! : open.splice(Math.floor(next() * open.length), 1)[0]!;
      add({
        kind: 'observation',
        source: 'environment',
        timestamp: ts,
        tool_call_id: id,
        tool_name: 'execute_bash',
        content: `output of ${id}`,
        is_error: next() < 0.2,
        exit_code: 0,
        details: {},
      });
      if (next() < 0.05)
        add({
          kind: 'observation',
          source: 'environment',
          timestamp: ts,
          tool_call_id: id,
          tool_name: 'execute_bash',
          content: `again ${id}`,
          is_error: false,
          exit_code: 0,
          details: {},
        });
    } else if (r < 0.65) {
      add({
        kind: 'observation',
        source: 'environment',
        timestamp: ts,
        tool_call_id: `orphan${events.length}`,
        tool_name: 'think',
        content: 'a result without a call',
        is_error: false,
        exit_code: null,
        details: {},
      });
    } else if (r < 0.75) {
      const text = pick(['run pytest please', 'and deploy it', 'thanks', 'deploy again with pytest']);
      add({
        kind: 'message',
        source: 'user',
        timestamp: ts,
        text,
        image_urls: next() < 0.1 ? ['data:image/png;base64,AAAA'] : [],
      });
    } else if (r < 0.8) {
      add({
        kind: 'message',
        source: pick(['agent', 'environment'] as const),
        timestamp: ts,
        text: `note ${events.length}`,
        image_urls: [],
      });
    } else if (r < 0.85) {
      add({ kind: 'status', source: 'environment', timestamp: ts, execution_status: 'running', reason: null });
    } else if (r < 0.9) {
      add({
        kind: 'error',
        source: 'environment',
        timestamp: ts,
        code: pick(['stuck', 'budget_unenforceable', 'internal_error'] as const),
        message: 'an error',
        fatal: false,
      });
    } else if (r < 0.93) {
      add({
        kind: 'confirmation',
        source: 'user',
        timestamp: ts,
        accept: next() < 0.5,
        reason: null,
        tool_call_ids: open.slice(0, 1),
      });
    } else if (r < 0.97 && events.length > 10) {
      // A condensation: the head kept, events up to a recent one forgotten.
      const keptHeadThrough = 1 + Math.floor(next() * 3);
      const forgottenThrough = keptHeadThrough + 1 + Math.floor(next() * (events.length - keptHeadThrough - 1));
      add({
        kind: 'condensation',
        source: 'environment',
        timestamp: ts,
        summary: `summary at ${events.length}`,
        kept_head_through: keptHeadThrough,
        forgotten_through: forgottenThrough,
        forgotten_events: forgottenThrough - keptHeadThrough,
        reason: 'test',
      });
    }
  }
  return events;
}

/** What the engine read off the whole log before issue 27, each a scan. */
function scans(events: readonly ConversationEvent[], budget: number | null) {
  let lastUser = -1;
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (e.kind === 'message' && e.source === 'user') {
      lastUser = i;
      break;
    }
  }
  let lastKnownCost = 0;
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (e.kind === 'llm_call' && e.cost_usd !== null) {
      lastKnownCost = e.cost_usd;
      break;
    }
  }
  return {
    prompt: projectMessages(condensedView(events).events, knowledge),
    metrics: metricsOf(events, budget),
    lastKnownCost,
    agentCalls: events.slice(lastUser + 1).filter(isAgentCall).length,
    lastUserMessageId: lastUser >= 0 ? events[lastUser]!.id : 0,
    condensation: condensedView(events).condensation,
  };
}

function incremental(log: RunnerLog, budget: number | null) {
  return {
    prompt: log.prompt(knowledge),
    metrics: log.metrics(budget),
    lastKnownCost: log.lastKnownCost,
    agentCalls: log.agentCallsSinceUserMessage,
    lastUserMessageId: log.lastUserMessageId,
    condensation: log.condensation,
  };
}

describe('RunnerLog: incremental prompt projection, running metrics, counts', () => {
  it('equals a full recomputation after every event of every kind, condensations included', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const events = randomLog(seed, 160);
      const log = new RunnerLog();
      for (let n = 1; n <= events.length; n++) {
        log.add([events[n - 1]!]);
        const prefix = events.slice(0, n);
        expect(incremental(log, 1), `seed ${seed}, after event ${n} (${events[n - 1]!.kind})`).toEqual(
          scans(prefix, 1),
        );
        const last = events[n - 1]!;
        if (last.kind === 'action') expect(log.hasAction(last.tool_call_id)).toBe(true);
        if (last.kind === 'error') expect(log.hasError(last.code)).toBe(true);
      }
      expect(log.hasAction('never-called')).toBe(false);
    }
  });

  it('covers condensations and duplicate results in the generated logs', () => {
    const all = Array.from({ length: 40 }, (_, i) => randomLog(i + 1, 160)).flat();
    expect(all.filter((e) => e.kind === 'condensation').length).toBeGreaterThan(20);
    expect(
      all.filter((e) => e.kind === 'message' && e.source === 'user' && e.text.includes('deploy')).length,
    ).toBeGreaterThan(20);
  });

  it('gives the same answers when the log arrives in batches, is read again after a restart, or is projected only now and then', () => {
    for (let seed = 100; seed < 120; seed++) {
      const events = randomLog(seed, 200);
      const next = random(seed);
      // A runner that catches up in batches (some overlapping what it holds, as a re-read after a restart does) and builds prompts only sometimes.
      const batched = new RunnerLog();
      let at = 0;
      while (at < events.length) {
        const from = Math.max(0, at - Math.floor(next() * 5));
        const to = Math.min(events.length, at + 1 + Math.floor(next() * 8));
        batched.add(events.slice(from, to));
        at = to;
        expect(batched.lastId).toBe(to);
        if (next() < 0.3) expect(batched.prompt(knowledge)).toEqual(scans(events.slice(0, to), null).prompt);
      }
      // A process that starts on the finished log reads it all at once.
      const restarted = new RunnerLog();
      restarted.add(events);
      expect(incremental(restarted, null)).toEqual(scans(events, null));
      expect(incremental(batched, null)).toEqual(scans(events, null));
    }
  });

  it('makes a new projection when the knowledge files change, and none when equal copies come back', () => {
    const events = randomLog(7, 80);
    const log = new RunnerLog();
    log.add(events);
    expect(log.prompt([])).toEqual(projectMessages(condensedView(events).events, []));
    expect(log.prompt(knowledge)).toEqual(projectMessages(condensedView(events).events, knowledge));
    expect(log.prompt(structuredClone(knowledge))).toEqual(projectMessages(condensedView(events).events, knowledge));
  });

  it('returns prompts a caller may change without changing the next one', () => {
    const log = new RunnerLog();
    const events = randomLog(3, 60);
    log.add(events);
    const first = log.prompt(knowledge);
    first.push({ role: 'user', content: 'added by the caller' });
    first.splice(0, 1);
    expect(log.prompt(knowledge)).toEqual(projectMessages(condensedView(events).events, knowledge));
  });
});

describe('IncrementalProjection', () => {
  const action = (id: number, callId: string, response: string): ConversationEvent => ({
    id,
    timestamp: ts,
    kind: 'action',
    source: 'agent',
    tool_call_id: callId,
    tool_name: 'execute_bash',
    arguments: {},
    raw_arguments: '{}',
    thought: null,
    response_id: response,
  });
  const result = (id: number, callId: string): ConversationEvent => ({
    id,
    timestamp: ts,
    kind: 'observation',
    source: 'environment',
    tool_call_id: callId,
    tool_name: 'execute_bash',
    content: `out ${callId}`,
    is_error: false,
    exit_code: 0,
    details: {},
  });
  const user = (id: number, text: string): ConversationEvent => ({
    id,
    timestamp: ts,
    kind: 'message',
    source: 'user',
    text,
    image_urls: [],
  });

  it('waits for a response’s last call and its results before keeping its messages', () => {
    const logs = [
      [
        user(1, 'go'),
        action(2, 'a', 'r1'),
        user(3, 'also this'),
        action(4, 'b', 'r2'),
        action(5, 'c', 'r2'),
        result(6, 'a'),
        result(7, 'c'),
        user(8, 'more'),
        result(9, 'b'),
      ],
      // A foreign log with a result before its call: the call's response may still grow by another call.
      [user(1, 'go'), result(2, 'a'), action(3, 'a', 'r1'), action(4, 'b', 'r1'), result(5, 'b'), user(6, 'next')],
    ];
    for (const events of logs) {
      const projection = new IncrementalProjection();
      for (let n = 1; n <= events.length; n++) {
        projection.add(events[n - 1]!);
        expect(projection.messages(), `after event ${n}`).toEqual(projectMessages(events.slice(0, n)));
      }
    }
  });
});

describe('detectStuck reads a fixed window', () => {
  /** A log whose events before the last `window` throw when read. */
  const guarded = (events: ConversationEvent[], window: number) =>
    new Proxy(events, {
      get(target, property, receiver) {
        if (typeof property === 'string' && /^\d+$/.test(property) && Number(property) < target.length - window)
          throw new Error(`read event ${property}, outside the window`);
        return Reflect.get(target, property, receiver) as unknown;
      },
    });

  it('never reads before the last 20 events, however long the log', () => {
    for (const seed of [1, 2, 3]) {
      const events = randomLog(seed, 3_000);
      for (const n of [25, 400, 3_000]) {
        const prefix = events.slice(0, n);
        expect(() => detectStuck(guarded(prefix, STUCK_THRESHOLDS.window))).not.toThrow();
        expect(detectStuck(guarded(prefix, STUCK_THRESHOLDS.window))).toEqual(
          detectStuck(prefix.slice(-STUCK_THRESHOLDS.window)),
        );
      }
    }
  });

  it('still finds a loop inside the window at the end of a long log', () => {
    const events = randomLog(9, 1_000);
    let id = events.length;
    for (let i = 0; i < STUCK_THRESHOLDS.repeatedAction; i++) {
      events.push({
        id: ++id,
        timestamp: ts,
        kind: 'action',
        source: 'agent',
        tool_call_id: `loop${i}`,
        tool_name: 'execute_bash',
        arguments: { command: 'ls' },
        raw_arguments: '{"command":"ls"}',
        thought: null,
        response_id: `loop${i}`,
      });
      events.push({
        id: ++id,
        timestamp: ts,
        kind: 'observation',
        source: 'environment',
        tool_call_id: `loop${i}`,
        tool_name: 'execute_bash',
        content: 'same',
        is_error: false,
        exit_code: 0,
        details: {},
      });
    }
    expect(detectStuck(guarded(events, STUCK_THRESHOLDS.window)).kind).toBe('stuck');
  });
});

describe('the engine’s prompts', () => {
  it('are, at every model call, the full projection of the log up to that call (condensations and a mid-run message included)', async () => {
    const ports = createMemoryPorts();
    let agentCalls = 0;
    let summaries = 0;
    ports.llm.respondWith((request: LlmRequest): ScriptedTurn => {
      if (request.tools.length === 0) return { content: `SUMMARY-${++summaries}` };
      const n = agentCalls++;
      if (n >= 60) return { tool_calls: [{ name: 'finish', arguments: { message: 'done' } }] };
      const calls = [{ name: 'execute_bash', arguments: { command: `echo step ${n}` } }];
      if (n % 4 === 3) calls.push({ name: 'execute_bash', arguments: { command: `echo step ${n} again` } });
      return { content: `Step ${n}.`, tool_calls: calls };
    });
    ports.runtime.onExec(
      (argv) => argv[0] === 'bash',
      (request) => ({ stdout: `${request.command[2]}\n`, exit_code: 0 }),
    );
    const service = createAgentConversationService(
      { agent: createAgent(), ...ports, ids: sequentialIdGenerator() },
      { pollIntervalMs: 1 },
    );
    await expectOk(
      service.settings.store('alice', {
        llm_model: 'openai/gpt-4o',
        llm_api_key: 'sk-test-key',
        condenser_max_size: 24,
      }),
    );
    const created = await expectOk(
      service.conversations.create('alice', { initial_user_msg: 'run the steps, then deploy' }),
    );
    await service.idle();
    await expectOk(
      service.conversations.sendMessage('alice', created.conversation_id, {
        role: 'user',
        content: [{ type: 'text', text: 'and once more please' }],
        run: true,
      }),
    );
    await service.idle();
    const events = (
      await expectOk(
        service.conversations.searchEvents('alice', created.conversation_id, { after: 0, kinds: null, limit: 10_000 }),
      )
    ).items;
    const agentRequests = ports.llm.requests.filter((r) => r.tools.length > 0);
    const agentCallEvents = events.filter((e) => e.kind === 'llm_call' && e.purpose === 'agent');
    expect(events.some((e) => e.kind === 'condensation')).toBe(true);
    expect(agentRequests.length).toBe(agentCallEvents.length);
    agentCallEvents.forEach((call, i) => {
      const before = events.filter((e) => e.id < call.id);
      expect(agentRequests[i]!.messages.slice(1), `model call ${i + 1}`).toEqual(
        projectMessages(condensedView(before).events),
      );
    });
    await service.close();
  });
});
