/**
 * Agent benchmark, two parts, each against a baseline measured in the same run.
 *
 *   npm run bench:agent
 *   BENCH_CONVERSATIONS=50 BENCH_AGENT_STORAGE=memory npm run bench:agent   # smaller, memory only
 *
 * 1. Engine overhead per step, in this process: conversations of str_replace_editor create /
 *    view and execute_bash `echo` steps (then finish) through createAgentConversationService
 *    with in-memory ports, a scripted model that answers at once and the fake sandbox runtime;
 *    against the same work without the engine: the scripted model called in a loop, the same
 *    runtime operations (readFile / writeFile / listDirectory / a shell's run) and the same
 *    number of events appended to a MemoryEventStore. Rounds alternate, so both share the
 *    machine's noise. Then one long conversation shows how a step's cost grows with the
 *    history (the prompt is kept up to date as events arrive; the condenser run also serialises it each call), with the single
 *    operations that scan the history timed at both ends.
 * 2. The example server (examples/standalone-server, ACS_SANDBOXES=fake) in a child process,
 *    with its real OpenAI adapter pointed at a fake chat-completions server on 127.0.0.1 that
 *    this process runs and that answers at once with scripted tool calls (think, execute_bash
 *    echo, editor create / view, then finish). BENCH_CONVERSATIONS conversations are created at
 *    once through the V0 HTTP API; against one conversation alone (run several times, pooled).
 *    A step is one model call; its latency is the time between two consecutive model requests
 *    of the same conversation, as the fake server sees them. Memory is the child's, after a GC.
 *
 * Network: 127.0.0.1 only. Numbers, not assertions: nothing here fails on timing.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Result } from 'neverthrow';
import { createAgentConversationService, EventLog, openSandboxShell } from '@acs/core';
import { toNewEvent, type ConversationEvent, type ConversationEventDraft, type SandboxSpec } from '@acs/core/schemas';
import type { LlmClient, LlmCredentials, LlmMessage, LlmRequest, NewEvent } from '@acs/core/ports';
import { DEFAULT_MEMORY_SPEC, MemoryEventStore } from '@acs/adapter-memory';
import { createMemoryPorts, FakeSandboxRuntime, ScriptedLlm, type ScriptedTurn } from '@acs/testing';
import { loadConfig } from '../examples/standalone-server/src/config.js';
import { createStandaloneServer } from '../examples/standalone-server/src/server.js';
import { percentile, positiveInt } from './stats.js';
import { runCleanups } from './cleanup.js';
import { callApi, printTable as printRows } from './report.js';
import { createAgent } from '@acs/agent';
import { BUILTIN_TOOLS, Toolset } from '../packages/agent/src/toolset.js';
import { detectStuck } from '../packages/agent/src/stuck.js';
import { metricsOf } from '../packages/agent/src/engine/index.js';
import { projectMessages, systemPrompt } from '../packages/agent/src/prompt.js';
import { completion, startFakeOpenAi } from '@acs/testing';
import { RunnerLog } from '../packages/agent/src/engine/runner-log.js';

// ---- configuration ----

/** Part 1: conversations per round and variant, tool steps per conversation (then finish), rounds (the first is a warm-up). */
const ENGINE_CONVERSATIONS = positiveInt('BENCH_ENGINE_CONVERSATIONS', 40);
const ENGINE_STEPS = positiveInt('BENCH_ENGINE_STEPS', 30);
const ENGINE_ROUNDS = positiveInt('BENCH_ENGINE_ROUNDS', 6);
/** Part 1: tool steps of the long conversation, and how many times it runs (pooled). */
const LONG_STEPS = positiveInt('BENCH_LONG_STEPS', 500);
const LONG_RUNS = positiveInt('BENCH_LONG_RUNS', 3);
const WINDOW = 50;
/** Part 2: concurrent conversations, tool steps each (then finish), users they are spread over, single runs for the baseline. */
const CONVERSATIONS = positiveInt('BENCH_CONVERSATIONS', 200);
const SERVER_STEPS = positiveInt('BENCH_STEPS', 10);
const USERS = positiveInt('BENCH_USERS', 10);
const SINGLE_RUNS = positiveInt('BENCH_SINGLE_RUNS', 5);
const WARMUP_CONVERSATIONS = 10;
/** Part 2 backends: memory and/or pglite (embedded, on disk in a temporary directory). */
const STORAGES = (process.env.BENCH_AGENT_STORAGE || 'memory,pglite')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
const FINISH_TIMEOUT_MS = positiveInt('BENCH_FINISH_TIMEOUT_MS', 90_000);

const USER = 'bench';
const WORKDIR = DEFAULT_MEMORY_SPEC.working_dir;
const CREDENTIALS: LlmCredentials = { model: 'openai/gpt-4o', api_key: 'sk-bench', base_url: null };

// ---- small helpers ----

async function must<T, E>(result: PromiseLike<Result<T, E>>, what: string): Promise<T> {
  const r = await result;
  if (r.isErr()) throw new Error(`${what}: ${JSON.stringify(r.error)}`);
  return r.value;
}

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);
const mean = (values: readonly number[]) => (values.length === 0 ? Number.NaN : sum(values) / values.length);
const median = (values: readonly number[]) =>
  percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}×`;
const fixed = (digits: number) => (value: number) => (Number.isFinite(value) ? value.toFixed(digits) : '–');
const f0 = fixed(0);
const f1 = fixed(1);
const f2 = fixed(2);
const MiB = 1024 * 1024;

/** Times `fn` over enough calls to last ~`budgetMs`; µs per call. */
function microbench(fn: () => unknown, budgetMs = 60): number {
  for (let i = 0; i < 20; i++) fn();
  let calls = 0;
  const started = performance.now();
  let elapsed: number;
  do {
    for (let i = 0; i < 10; i++) fn();
    calls += 10;
    elapsed = performance.now() - started;
  } while (elapsed < budgetMs);
  return (elapsed * 1000) / calls;
}

// =====================================================================================
// Part 1: the engine in this process
// =====================================================================================

/** Tool step k of a part-1 conversation (create, view, echo, over and over), finish after `steps`. Arguments differ every step, so nothing looks stuck. */
function engineTurn(k: number, steps: number): ScriptedTurn {
  const call = (name: string, args: Record<string, unknown>): ScriptedTurn => ({
    tool_calls: [{ name, arguments: args }],
  });
  if (k >= steps) return call('finish', { message: 'done' });
  const n = Math.floor(k / 3);
  switch (k % 3) {
    case 0:
      return call('str_replace_editor', {
        command: 'create',
        path: `${WORKDIR}/f${n}.txt`,
        file_text: `line ${n} of the benchmark\n`,
      });
    case 1:
      return call('str_replace_editor', { command: 'view', path: `${WORKDIR}/f${n}.txt` });
    default:
      return call('execute_bash', { command: `echo hi-${n}` });
  }
}

/** `echo …` in the fake runtime (the only command the scripts run). */
function answerEcho(runtime: FakeSandboxRuntime): void {
  runtime.onExec(
    (argv) => argv[0] === 'bash',
    (request) => ({ stdout: `${(request.command[2] ?? '').replace(/^echo\s+/, '')}\n`, exit_code: 0 }),
  );
}

/** The model port, recording when each call started and how long until its answer was there. */
class TimedLlm implements LlmClient {
  readonly starts: number[] = [];
  inside = 0;
  constructor(private readonly inner: LlmClient) {}
  complete(request: LlmRequest) {
    const started = performance.now();
    this.starts.push(started);
    return this.inner.complete(request).map((answer) => {
      this.inside += performance.now() - started;
      return answer;
    });
  }
}

interface Round {
  steps: number;
  ms: number;
  /** Sum over conversations of (last model call − first model call). */
  steadyMs: number;
  intervals: number;
  llmMs: number;
}

/** Part 1, engine variant: `conversations` conversations one after another, each `steps` tool steps and finish. */
async function engineRound(conversations: number, steps: number, keepStarts?: number[][]): Promise<Round> {
  const ports = createMemoryPorts();
  answerEcho(ports.runtime);
  let k = 0;
  ports.llm.forgetRequests().respondWith(() => engineTurn(k++, steps));
  const llm = new TimedLlm(ports.llm);
  const service = createAgentConversationService(
    { ...ports, llm, agent: createAgent({ defaultMaxIterations: steps + 10 }) },
    { pollIntervalMs: 1 },
  );
  // The condenser is off: this measures the engine's own overhead against the same work without it.
  await must(
    service.settings.store(USER, {
      llm_model: CREDENTIALS.model,
      llm_api_key: CREDENTIALS.api_key,
      enable_default_condenser: false,
    }),
    'store settings',
  );
  const round: Round = { steps: 0, ms: 0, steadyMs: 0, intervals: 0, llmMs: 0 };
  try {
    for (let c = 0; c < conversations; c++) {
      k = 0;
      llm.starts.length = 0;
      llm.inside = 0;
      const started = performance.now();
      const created = await must(
        service.conversations.create(USER, { initial_user_msg: `benchmark task ${c}` }),
        'create conversation',
      );
      await service.idle();
      round.ms += performance.now() - started;
      const [record] = await must(service.conversations.getMany(USER, [created.conversation_id]), 'read conversation');
      if (record?.record.execution_status !== 'finished' || llm.starts.length !== steps + 1) {
        const events = await must(
          service.conversations.searchEvents(USER, created.conversation_id, { after: 0, kinds: ['error'], limit: 5 }),
          'read events',
        );
        throw new Error(
          `engine conversation ended ${record?.record.execution_status ?? 'missing'} after ${llm.starts.length} model calls: ${JSON.stringify(events.items)}`,
        );
      }
      round.steps += llm.starts.length;
      round.steadyMs += (llm.starts.at(-1) as number) - (llm.starts[0] as number);
      round.intervals += llm.starts.length - 1;
      round.llmMs += llm.inside;
      keepStarts?.push([...llm.starts]);
    }
  } finally {
    await service.close();
  }
  return round;
}

const toolset = new Toolset(BUILTIN_TOOLS);
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Part 1, baseline: the same model answers, runtime operations and event appends, without the engine. */
async function baselineRound(conversations: number, steps: number, keepStarts?: number[][]): Promise<Round> {
  const runtime = new FakeSandboxRuntime();
  answerEcho(runtime);
  const store = new MemoryEventStore();
  let k = 0;
  const llm = new TimedLlm(new ScriptedLlm().forgetRequests().respondWith(() => engineTurn(k++, steps)));
  const spec: SandboxSpec = {
    ...DEFAULT_MEMORY_SPEC,
    command: null,
    initial_env: {},
    description: null,
    created_at: new Date().toISOString(),
  };
  const messages: LlmMessage[] = [
    {
      role: 'system',
      content: systemPrompt({ workingDir: WORKDIR, instructions: null, startedAt: new Date().toISOString() }),
    },
    { role: 'user', content: 'benchmark task' },
  ];
  const tools = toolset.definitions;
  const now = () => new Date().toISOString();
  const round: Round = { steps: 0, ms: 0, steadyMs: 0, intervals: 0, llmMs: 0 };
  for (let c = 0; c < conversations; c++) {
    k = 0;
    llm.starts.length = 0;
    llm.inside = 0;
    const started = performance.now();
    const sandboxId = `baseline-${c}`;
    const conversationId = `conversation-${c}`;
    await must(
      runtime.create({ sandbox_id: sandboxId, user_id: USER, installation_id: 'acs-bench', spec, env: {} }),
      'create sandbox',
    );
    const append = (drafts: ConversationEventDraft[]) =>
      must(store.append(USER, conversationId, drafts.map(toNewEvent)), 'append');
    await append([{ kind: 'message', source: 'user', timestamp: now(), text: 'benchmark task', image_urls: [] }]);
    await append([
      { kind: 'status', source: 'environment', timestamp: now(), execution_status: 'running', reason: null },
    ]);
    const openShell = () => must(openSandboxShell(runtime, sandboxId), 'open shell');
    let shell: Awaited<ReturnType<typeof openShell>> | null = null;
    for (;;) {
      const answer = await must(llm.complete({ credentials: CREDENTIALS, messages, tools }), 'model call');
      const call = answer.tool_calls[0];
      if (!call) throw new Error('the scripted model answered without a tool call');
      const args = JSON.parse(call.arguments) as Record<string, string>;
      await append([
        {
          kind: 'llm_call',
          source: 'environment',
          timestamp: now(),
          response_id: answer.id ?? '',
          model: answer.model,
          prompt_tokens: answer.usage.prompt_tokens,
          completion_tokens: answer.usage.completion_tokens,
          cached_prompt_tokens: 0,
          cost_usd: null,
          latency_ms: 0,
          attempts: 1,
        },
        {
          kind: 'action',
          source: 'agent',
          timestamp: now(),
          tool_call_id: call.id,
          tool_name: call.name,
          arguments: args,
          raw_arguments: call.arguments,
          thought: null,
          response_id: answer.id ?? '',
        },
      ]);
      let content = 'The task is marked as finished.';
      if (call.name === 'str_replace_editor' && args.command === 'create') {
        const path = args.path as string;
        if ((await runtime.readFile(sandboxId, path)).isOk()) throw new Error(`${path} exists already`);
        await must(runtime.writeFile(sandboxId, path, encoder.encode(args.file_text)), 'write file');
        content = `File created successfully at: ${path}`;
      } else if (call.name === 'str_replace_editor') {
        const path = args.path as string;
        if ((await runtime.listDirectory(sandboxId, path)).isOk()) throw new Error(`${path} is a directory`);
        content = decoder.decode((await must(runtime.readFile(sandboxId, path), 'read file')).bytes);
      } else if (call.name === 'execute_bash') {
        shell ??= await openShell();
        content = (await must(shell.run(args.command as string), 'run')).output;
      }
      await append([
        {
          kind: 'observation',
          source: 'environment',
          timestamp: now(),
          tool_call_id: call.id,
          tool_name: call.name,
          content,
          is_error: false,
          exit_code: null,
          details: {},
        },
      ]);
      if (call.name === 'finish') break;
    }
    await append([
      { kind: 'status', source: 'environment', timestamp: now(), execution_status: 'finished', reason: null },
    ]);
    await shell?.close();
    round.ms += performance.now() - started;
    round.steps += llm.starts.length;
    round.steadyMs += (llm.starts.at(-1) as number) - (llm.starts[0] as number);
    round.intervals += llm.starts.length - 1;
    round.llmMs += llm.inside;
    keepStarts?.push([...llm.starts]);
  }
  return round;
}

interface EngineOverhead {
  engine: Round[];
  baseline: Round[];
}

async function measureEngineOverhead(): Promise<EngineOverhead> {
  const result: EngineOverhead = { engine: [], baseline: [] };
  for (let round = 0; round < ENGINE_ROUNDS; round++) {
    // Alternate which goes first; round 0 warms both up and is not kept.
    const order = round % 2 === 0 ? (['engine', 'baseline'] as const) : (['baseline', 'engine'] as const);
    for (const variant of order) {
      const r =
        variant === 'engine'
          ? await engineRound(ENGINE_CONVERSATIONS, ENGINE_STEPS)
          : await baselineRound(ENGINE_CONVERSATIONS, ENGINE_STEPS);
      if (round > 0) result[variant].push(r);
    }
  }
  return result;
}

function printEngineOverhead({ engine, baseline }: EngineOverhead): void {
  const summary = (rounds: Round[]) => ({
    stepsPerSecond: median(rounds.map((r) => r.steps / (r.ms / 1000))),
    steadyUs: median(rounds.map((r) => (r.steadyMs * 1000) / r.intervals)),
    allInUs: median(rounds.map((r) => (r.ms * 1000) / r.steps)),
    llmUs: median(rounds.map((r) => (r.llmMs * 1000) / r.steps)),
    /** What is not between the first and the last model call: creating the conversation, its start, the finish. */
    fixedUs: median(rounds.map((r) => ((r.ms - r.steadyMs) * 1000) / ENGINE_CONVERSATIONS)),
  });
  const e = summary(engine);
  const b = summary(baseline);
  const row = (name: string, s: typeof e, isBaseline: boolean) => [
    name,
    f0(s.stepsPerSecond),
    f1(s.steadyUs),
    f1(s.allInUs),
    f1(s.llmUs),
    f0(s.fixedUs),
    isBaseline ? '' : ratio(b.stepsPerSecond, s.stepsPerSecond),
    isBaseline ? '' : ratio(s.steadyUs, b.steadyUs),
  ];
  printTable(
    `Engine overhead per step: ${ENGINE_CONVERSATIONS} conversations × (${ENGINE_STEPS} tool steps + finish), one after another, zero-latency model; median of ${engine.length} rounds`,
    [
      'variant',
      'steps/s',
      'µs/step between model calls',
      'µs/step incl. start + finish',
      'µs/step in llm.complete',
      'µs/conv outside the steps',
      'time per step vs baseline',
      'between calls vs baseline',
    ],
    [row('no engine (baseline)', b, true), row('engine (createAgentConversationService)', e, false)],
  );
  console.log(
    `the engine adds ${f1(e.steadyUs - b.steadyUs)} µs per step between model calls, ${f1(e.allInUs - b.allInUs)} µs per step all in; ` +
      `"outside the steps" is creating the conversation (sandbox, start task, first status) and recording the finish`,
  );
}

interface LongRun {
  engine: number[][];
  baseline: number[][];
  events: ConversationEvent[];
  condenser: CondenserRun[];
}

/** One long conversation with the default condenser on or off: the prompt and step time of each agent call. */
interface CondenserRun {
  on: boolean;
  promptChars: number[];
  promptMessages: number[];
  starts: number[];
  summaries: number;
}

async function condenserRun(on: boolean): Promise<CondenserRun> {
  const ports = createMemoryPorts();
  answerEcho(ports.runtime);
  const run: CondenserRun = { on, promptChars: [], promptMessages: [], starts: [], summaries: 0 };
  let k = 0;
  ports.llm.forgetRequests().respondWith((request) => {
    if (request.tools.length === 0) {
      run.summaries++;
      return { content: 'USER_CONTEXT: a long benchmark task. COMPLETED: echo steps. PENDING: more echo steps.' };
    }
    run.starts.push(performance.now());
    run.promptChars.push(JSON.stringify(request.messages).length);
    run.promptMessages.push(request.messages.length);
    return engineTurn(k++, LONG_STEPS);
  });
  const service = createAgentConversationService(
    { ...ports, agent: createAgent({ defaultMaxIterations: LONG_STEPS + 10 }) },
    { pollIntervalMs: 1 },
  );
  await must(
    service.settings.store(USER, {
      llm_model: CREDENTIALS.model,
      llm_api_key: CREDENTIALS.api_key,
      enable_default_condenser: on,
    }),
    'store settings',
  );
  await must(service.conversations.create(USER, { initial_user_msg: 'a long benchmark task' }), 'create conversation');
  await service.idle();
  await service.close();
  return run;
}

/** One conversation of LONG_STEPS tool steps, LONG_RUNS times per variant; keeps the model-call times and one log. */
async function measureLongConversation(): Promise<LongRun> {
  const engine: number[][] = [];
  const baseline: number[][] = [];
  for (let run = 0; run < LONG_RUNS; run++) {
    await engineRound(1, LONG_STEPS, engine);
    await baselineRound(1, LONG_STEPS, baseline);
  }
  // One long log, for timing the operations that scan it.
  const ports = createMemoryPorts();
  answerEcho(ports.runtime);
  let k = 0;
  ports.llm.forgetRequests().respondWith(() => engineTurn(k++, LONG_STEPS));
  const service = createAgentConversationService(
    { ...ports, agent: createAgent({ defaultMaxIterations: LONG_STEPS + 10 }) },
    { pollIntervalMs: 1 },
  );
  // The condenser is off: this measures the engine's own overhead against the same work without it.
  await must(
    service.settings.store(USER, {
      llm_model: CREDENTIALS.model,
      llm_api_key: CREDENTIALS.api_key,
      enable_default_condenser: false,
    }),
    'store settings',
  );
  const created = await must(
    service.conversations.create(USER, { initial_user_msg: 'a long benchmark task' }),
    'create conversation',
  );
  await service.idle();
  const events = await must(new EventLog(ports.events).readAll(USER, created.conversation_id), 'read the log');
  await service.close();
  const condenser: CondenserRun[] = [];
  for (let run = 0; run < LONG_RUNS; run++) condenser.push(await condenserRun(false), await condenserRun(true));
  return { engine, baseline, events, condenser };
}

/** The default condenser over the same long conversation: prompt size and step time, late against early. */
function printCondenser(runs: readonly CondenserRun[]): void {
  const rows = [false, true].map((on) => {
    const mine = runs.filter((r) => r.on === on);
    const at = (pick: (r: CondenserRun) => number[], i: number) => mean(mine.map((r) => pick(r).at(i) as number));
    const step = (r: CondenserRun, from: number, to: number) =>
      mean(r.starts.slice(from, to).map((t, i) => (r.starts[from + i + 1]! - t) * 1000));
    const early = mean(mine.map((r) => step(r, 1, WINDOW)));
    const late = mean(mine.map((r) => step(r, r.starts.length - WINDOW - 1, r.starts.length - 2)));
    return [
      on ? 'on (default, 120 events)' : 'off',
      String(Math.round(at((r) => r.promptMessages, -1))),
      String(Math.round(at((r) => r.promptChars, WINDOW))),
      String(Math.round(at((r) => r.promptChars, -1))),
      ratio(
        at((r) => r.promptChars, -1),
        at((r) => r.promptChars, WINDOW),
      ),
      String(Math.round(mean(mine.map((r) => r.summaries)))),
      f1(early),
      f1(late),
      ratio(late, early),
    ];
  });
  printTable(
    `The default condenser on a conversation of ${LONG_STEPS} tool steps (${LONG_RUNS} runs each): prompt at the last call and step time (µs), late against early`,
    [
      'condenser',
      'messages, last call',
      `prompt chars, call ${WINDOW}`,
      'prompt chars, last call',
      'prompt growth',
      'summaries',
      `step µs, first ${WINDOW}`,
      `step µs, last ${WINDOW}`,
      'step growth',
    ],
    rows,
  );
}

function printLongConversation({ engine, baseline, events }: LongRun): void {
  /** Step i (1-based) lasts from model call i to model call i+1. */
  const stepTimes = (runs: number[][], from: number, to: number) =>
    runs.flatMap((starts) => {
      const out: number[] = [];
      for (let i = from; i <= to && i < starts.length; i++)
        out.push(((starts[i] as number) - (starts[i - 1] as number)) * 1000);
      return out;
    });
  const windows = [
    [1, WINDOW],
    [Math.floor(LONG_STEPS / 2) - WINDOW / 2 + 1, Math.floor(LONG_STEPS / 2) + WINDOW / 2],
    [LONG_STEPS - WINDOW + 1, LONG_STEPS],
  ].filter(([from]) => (from as number) >= 1) as [number, number][];
  const first = windows[0] as [number, number];
  const firstEngine = mean(stepTimes(engine, ...first));
  const firstBaseline = mean(stepTimes(baseline, ...first));
  const rows = windows.map(([from, to]) => {
    const e = stepTimes(engine, from, to);
    const b = stepTimes(baseline, from, to);
    return [
      `${from}–${to}`,
      // A step starts with 2 + 3 (k − 1) events in the log: the user message, a status, then llm_call + action + observation per step.
      String(2 + 3 * (from - 1)),
      f1(median(e)),
      f1(mean(e)),
      f1(mean(b)),
      ratio(mean(e), mean(b)),
      ratio(mean(e), firstEngine),
      ratio(mean(b), firstBaseline),
    ];
  });
  printTable(
    `Per-step cost as the history grows: one conversation of ${LONG_STEPS} tool steps + finish, ${LONG_RUNS} runs pooled (µs per step, model call to model call)`,
    [
      'steps',
      'events in log',
      'engine p50',
      'engine mean',
      'baseline mean',
      'engine vs baseline',
      'engine vs first steps',
      'baseline vs first steps',
    ],
    rows,
  );

  // The operations that walk the history, timed alone on the same log cut at both ends.
  const cutAt = (step: number) => events.slice(0, 2 + 3 * (step - 1));
  const early = cutAt(first[0] + WINDOW / 2);
  const late = cutAt(LONG_STEPS);
  const system = systemPrompt({ workingDir: WORKDIR, instructions: null, startedAt: new Date().toISOString() });
  const promptOf = (log: ConversationEvent[]): LlmMessage[] => [
    { role: 'system', content: system },
    ...projectMessages(log),
  ];
  const storeOf = (log: ConversationEvent[]) => {
    const store = new MemoryEventStore();
    void store.append(
      USER,
      'c',
      log.map((e) => toNewEvent(e)),
    );
    return store;
  };
  const oneEvent: NewEvent = toNewEvent({
    kind: 'message',
    source: 'environment',
    timestamp: new Date().toISOString(),
    text: 'x',
    image_urls: [],
  });
  const operations: [string, (log: ConversationEvent[]) => () => unknown][] = [
    [
      'prompt: systemPrompt + projectMessages (a full projection; no longer made each step)',
      (log) => () => promptOf(log),
    ],
    [
      'what a step does now: RunnerLog prompt, kept up to date (system prompt + the copy)',
      (log) => {
        const kept = new RunnerLog();
        kept.add(log);
        return () => [{ role: 'system', content: system }, ...kept.prompt([])];
      },
    ],
    ['detectStuck', (log) => () => detectStuck(log)],
    ['metricsOf (a scan of the log; no longer made each step)', (log) => () => metricsOf(log, null)],
    [
      'what a step does now: RunnerLog metrics with the new call (running totals)',
      (log) => {
        const kept = new RunnerLog();
        kept.add(log);
        return () =>
          kept.metricsWith(
            { model: 'm', prompt_tokens: 1, completion_tokens: 1, cached_prompt_tokens: 0, cost_usd: null },
            null,
          );
      },
    ],
    [
      "ScriptedLlm prompt-token estimate (the contents' lengths summed, no longer joined)",
      (log) => {
        const prompt = promptOf(log);
        return () =>
          prompt.reduce(
            (n, m) => n + (typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? '')).length,
            0,
          );
      },
    ],
    [
      'MemoryEventStore.append of 1 event',
      (log) => {
        // Each call appends to a fresh store of this size, so the log does not grow while timed.
        const stores = Array.from({ length: 64 }, () => storeOf(log));
        let i = 0;
        return () => (stores[i++ % stores.length] as MemoryEventStore).append(USER, 'c', [oneEvent]);
      },
    ],
    [
      'MemoryEventStore.readAfter(last id) (catch-up, nothing new)',
      (log) => {
        const store = storeOf(log);
        return () => store.readAfter(USER, 'c', log.length, 500);
      },
    ],
  ];
  const opRows = operations.map(([name, make]) => {
    const a = microbench(make(early));
    const b = microbench(make(late));
    return [name, f1(a), f1(b), ratio(b, a)];
  });
  printTable(
    `Operations of a step that walk the history, alone (µs per call), on the log of the same conversation at ${early.length} and ${late.length} events`,
    ['operation', `${early.length} events`, `${late.length} events`, 'growth'],
    opRows,
  );
}

// =====================================================================================
// Part 2: the example server in a child process, a fake OpenAI-compatible model here
// =====================================================================================

interface Trace {
  /** performance.now() at each model request of the conversation. */
  arrivals: number[];
  finishedAt: number | null;
}

interface FakeModel {
  baseUrl: string;
  traces: Map<string, Trace>;
  close(): Promise<void>;
}

/** Tool step k of a part-2 conversation; finish after SERVER_STEPS. */
function serverTurn(tag: string, k: number): { name: string; args: Record<string, unknown> } {
  if (k >= SERVER_STEPS) return { name: 'finish', args: { message: `conversation ${tag} is done` } };
  switch (k % 4) {
    case 0:
      return { name: 'think', args: { thought: `step ${k}: look at the files first` } };
    case 1:
      return { name: 'execute_bash', args: { command: `echo step-${k}` } };
    case 2:
      return {
        name: 'str_replace_editor',
        args: { command: 'create', path: `${WORKDIR}/step-${k}.txt`, file_text: `written at step ${k}\n` },
      };
    default:
      return { name: 'str_replace_editor', args: { command: 'view', path: `${WORKDIR}/step-${k - 1}.txt` } };
  }
}

/** The shared fake chat-completions server (@acs/testing), answering every request at once: step k is the number of assistant messages in the prompt. */
async function startFakeModel(): Promise<FakeModel> {
  const traces = new Map<string, Trace>();
  const fake = await startFakeOpenAi({ keepRequests: false });
  fake.script((request) => {
    const arrived = performance.now();
    const firstUser = request.body.messages?.find((m) => m.role === 'user')?.content;
    const tag = typeof firstUser === 'string' ? /bench conversation ([\w-]+)/.exec(firstUser)?.[1] : undefined;
    if (!tag)
      return { status: 400, body: { error: { message: 'no benchmark conversation tag in the first user message' } } };
    const k = request.turn;
    let trace = traces.get(tag);
    if (!trace) traces.set(tag, (trace = { arrivals: [], finishedAt: null }));
    trace.arrivals.push(arrived);
    const turn = serverTurn(tag, k);
    if (turn.name === 'finish') trace.finishedAt = arrived;
    const promptTokens = Math.ceil(request.text.length / 4);
    return {
      status: 200,
      body: completion({
        id: `chatcmpl-${tag}-${k}`,
        model: 'bench-model',
        content: null,
        tool_calls: [
          {
            id: `call_${tag}_${k}`,
            type: 'function',
            function: { name: turn.name, arguments: JSON.stringify(turn.args) },
          },
        ],
        usage: { prompt_tokens: promptTokens, completion_tokens: 30, total_tokens: promptTokens + 30 },
      }),
    };
  });
  return { baseUrl: fake.baseUrl, traces, close: () => fake.close() };
}

// ---- the child process ----

interface MemorySample {
  rss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  /** User + system CPU time of the child so far, µs. */
  cpuUs: number;
}

type ToChild = { type: 'memory' | 'cpu' | 'close'; id: number };
type FromChild = { type: 'ready'; url: string } | { type: 'reply'; id: number; memory?: MemorySample; cpuUs?: number };

/** In the child: the example server from the environment, answering the parent over IPC. */
async function runServerRole(): Promise<void> {
  const server = await createStandaloneServer(loadConfig(process.env));
  const url = await server.listen();
  const send = (message: FromChild) => process.send?.(message);
  process.on('disconnect', () => process.exit(0));
  process.on('message', (received) => {
    const message = received as ToChild;
    void (async () => {
      if (message.type === 'cpu') {
        const cpu = process.cpuUsage();
        send({ type: 'reply', id: message.id, cpuUs: cpu.user + cpu.system });
      } else if (message.type === 'memory') {
        for (let i = 0; i < 3; i++) {
          globalThis.gc?.();
          await sleep(10);
        }
        const m = process.memoryUsage();
        const cpu = process.cpuUsage();
        send({
          type: 'reply',
          id: message.id,
          memory: {
            rss: m.rss,
            heapUsed: m.heapUsed,
            external: m.external,
            arrayBuffers: m.arrayBuffers,
            cpuUs: cpu.user + cpu.system,
          },
        });
      } else {
        await server.close();
        send({ type: 'reply', id: message.id });
        process.disconnect();
      }
    })();
  });
  send({ type: 'ready', url });
}

interface ServerProcess {
  url: string;
  child: ChildProcess;
  memory(): Promise<MemorySample>;
  /** CPU time of the server process so far (user + system), µs; no GC first. */
  cpu(): Promise<number>;
  /** Resident set size now, from /proc (null elsewhere); read from outside, so the server does not notice. */
  rssNow(): number | null;
  close(): Promise<void>;
  output(): string;
}

interface User {
  id: string;
  key: string;
}
const users: User[] = Array.from({ length: USERS }, (_, i) => ({
  id: `user-${i}`,
  key: `bench-agent-key-${String(i).padStart(4, '0')}`,
}));

async function startServerProcess(storage: string, cleanups: (() => Promise<void>)[]): Promise<ServerProcess> {
  const dataDir = await mkdtemp(join(tmpdir(), 'acs-bench-agent-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const child = fork(fileURLToPath(import.meta.url), [], {
    // BENCH_SERVER_NODE_ARGS adds flags for the server process, e.g. "--cpu-prof --cpu-prof-dir=/tmp/acs-prof" to see where its time goes.
    execArgv: [
      '--conditions=@acs/source',
      '--import',
      'tsx',
      '--expose-gc',
      ...(process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean),
    ],
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      BENCH_AGENT_ROLE: 'server',
      PORT: '0',
      HOST: '127.0.0.1',
      ACS_API_KEYS: users.map((u) => `${u.id}:${u.key}`).join(','),
      SESSION_API_KEY: 'bench-agent-default-key-0001',
      ACS_STORAGE: storage,
      DATA_DIR: dataDir,
      ACS_SANDBOXES: 'fake',
      ACS_MAX_RUNNING_SANDBOXES: '1000',
      ACS_SANDBOX_IDLE_MINUTES: '0',
      ACS_MAX_ITERATIONS: String(SERVER_STEPS + 10),
      ACS_LLM_MAX_RETRIES: '0',
      ACS_LLM_TIMEOUT_SECONDS: '60',
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  const collect = (chunk: Buffer) => {
    if (output.length < 20_000) output += chunk.toString();
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });

  let nextId = 0;
  const pending = new Map<number, (message: FromChild & { type: 'reply' }) => void>();
  let readyUrl: ((url: string) => void) | null = null;
  child.on('message', (received) => {
    const message = received as FromChild;
    if (message.type === 'ready') readyUrl?.(message.url);
    else pending.get(message.id)?.(message);
  });
  const request = (type: ToChild['type']) =>
    new Promise<FromChild & { type: 'reply' }>((resolve, reject) => {
      const id = ++nextId;
      pending.set(id, (m) => {
        pending.delete(id);
        resolve(m);
      });
      child.send({ type, id } satisfies ToChild, (error) => error && reject(error));
    });

  const url = await Promise.race([
    new Promise<string>((resolve) => (readyUrl = resolve)),
    exited.then(() => Promise.reject(new Error(`the server process exited before it listened:\n${output}`))),
    sleep(60_000, undefined, { ref: false }).then(() =>
      Promise.reject(new Error(`the server process did not start within 60 s:\n${output}`)),
    ),
  ]);
  return {
    url,
    child,
    output: () => output,
    memory: async () => {
      const reply = await request('memory');
      if (!reply.memory) throw new Error('the server process sent no memory sample');
      return reply.memory;
    },
    cpu: async () => {
      const reply = await request('cpu');
      if (reply.cpuUs === undefined) throw new Error('the server process sent no CPU time');
      return reply.cpuUs;
    },
    rssNow: () => {
      try {
        const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1];
        return kb ? Number(kb) * 1024 : null;
      } catch {
        return null;
      }
    },
    close: async () => {
      // Timers that do not keep this process alive once everything else is done.
      await Promise.race([request('close'), sleep(15_000, undefined, { ref: false })]);
      await Promise.race([exited, sleep(5_000, undefined, { ref: false })]);
    },
  };
}

// ---- the client side ----

function printTable(
  title: string,
  header: readonly string[],
  rows: readonly (readonly string[])[],
  leftColumns = 1,
): void {
  console.log();
  console.log(title);
  printRows(header, rows, leftColumns);
}

/** Calls fn(0..count-1) with at most `limit` in flight. */
async function inParallel<T>(count: number, limit: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const results = new Array<T>(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      results[i] = await fn(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, worker));
  return results;
}

interface Batch {
  conversations: number;
  modelCalls: number;
  /** From sending the first create request until the last conversation's finished status (event timestamps), ms. */
  wallMs: number;
  /** Time between consecutive model requests of the same conversation, ms. */
  stepLatencies: number[];
  /** From sending the create request to the conversation's first model request, ms. */
  firstStepLatencies: number[];
  /** Per conversation: first model request to finish, ms. */
  conversationMs: number[];
  /** From the first model request of the batch to its last one, ms. */
  modelSpanMs: number;
  cpuMs: number;
}

let batchNo = 0;

/** Creates `count` conversations at once through the V0 API and waits until every one has finished. */
async function runBatch(server: ServerProcess, model: FakeModel, count: number, onTick?: () => void): Promise<Batch> {
  const batch = ++batchNo;
  const tags = Array.from({ length: count }, (_, i) => `b${batch}-c${i}`);
  const sentAt = new Map<string, number>();
  const cpuBefore = await server.cpu();
  const wallStart = Date.now();
  const ids = await Promise.all(
    tags.map(async (tag, i) => {
      sentAt.set(tag, performance.now());
      const created = (await callApi(server.url, users[i % USERS] as User, 'POST', '/api/conversations', {
        initial_user_msg: `bench conversation ${tag}: do the task`,
      })) as {
        conversation_id: string;
      };
      return created.conversation_id;
    }),
  );
  const deadline = performance.now() + FINISH_TIMEOUT_MS;
  while (tags.some((tag) => !model.traces.get(tag)?.finishedAt)) {
    if (performance.now() > deadline) {
      const stalled = tags.flatMap((tag, i) => (model.traces.get(tag)?.finishedAt ? [] : [i]));
      const first = stalled[0] as number;
      const events = await callApi(
        server.url,
        users[first % USERS] as User,
        'GET',
        `/api/v1/app-conversations/${ids[first]}/events?limit=100`,
      ).catch((error: unknown) => String(error));
      throw new Error(
        `${stalled.length} of ${count} conversations did not call finish within ${FINISH_TIMEOUT_MS / 1000} s; ` +
          `the first one (${model.traces.get(tags[first] as string)?.arrivals.length ?? 0} model calls) logged ${JSON.stringify(events).slice(0, 2000)}; server output:\n${server.output()}`,
      );
    }
    onTick?.();
    await sleep(5);
  }
  const cpuAfter = await server.cpu();
  // The server records the finish after answering it: read each log to the end, until it says finished.
  const logs = await inParallel(count, 16, async (i) => {
    const user = users[i % USERS] as User;
    for (let attempt = 0; ; attempt++) {
      const events: { kind: string; timestamp: string; execution_status?: string; code?: string; message?: string }[] =
        [];
      for (let after = 0; ;) {
        const page = (await callApi(
          server.url,
          user,
          'GET',
          `/api/v1/app-conversations/${ids[i]}/events?after=${after}&limit=100`,
        )) as {
          items: typeof events;
          next_after: number | null;
        };
        events.push(...page.items);
        if (page.next_after === null) break;
        after = page.next_after;
      }
      if (events.some((e) => e.kind === 'status' && e.execution_status === 'finished')) return events;
      if (attempt > 500)
        throw new Error(
          `conversation ${ids[i]} did not finish: ${JSON.stringify(events.filter((e) => e.kind === 'error' || e.kind === 'status'))}`,
        );
      await sleep(10);
    }
  });
  let modelCalls = 0;
  let lastFinished = 0;
  for (const events of logs) {
    const fatal = events.find((e) => e.kind === 'error');
    if (fatal) throw new Error(`a conversation recorded an error: ${fatal.code}: ${fatal.message}`);
    modelCalls += events.filter((e) => e.kind === 'llm_call').length;
    const finished = events.find((e) => e.kind === 'status' && e.execution_status === 'finished');
    lastFinished = Math.max(lastFinished, Date.parse(finished?.timestamp ?? ''));
  }
  if (modelCalls !== count * (SERVER_STEPS + 1))
    throw new Error(`expected ${count * (SERVER_STEPS + 1)} model calls, the logs hold ${modelCalls}`);
  const stepLatencies: number[] = [];
  const firstStepLatencies: number[] = [];
  const conversationMs: number[] = [];
  for (const tag of tags) {
    const { arrivals } = model.traces.get(tag) as Trace;
    for (let i = 1; i < arrivals.length; i++) stepLatencies.push((arrivals[i] as number) - (arrivals[i - 1] as number));
    firstStepLatencies.push((arrivals[0] as number) - (sentAt.get(tag) as number));
    conversationMs.push((arrivals.at(-1) as number) - (arrivals[0] as number));
  }
  const arrivals = tags.flatMap((tag) => (model.traces.get(tag) as Trace).arrivals);
  const modelSpanMs = Math.max(...arrivals) - Math.min(...arrivals);
  return {
    conversations: count,
    modelCalls,
    wallMs: lastFinished - wallStart,
    stepLatencies,
    firstStepLatencies,
    conversationMs,
    modelSpanMs,
    cpuMs: (cpuAfter - cpuBefore) / 1000,
  };
}

interface ServerResult {
  storage: string;
  single: Batch[];
  many: Batch;
  before: MemorySample;
  after: MemorySample;
  peakRss: number | null;
}

async function measureServer(storage: string, model: FakeModel): Promise<ServerResult> {
  const cleanups: (() => Promise<void>)[] = [];
  try {
    const started = performance.now();
    const server = await startServerProcess(storage, cleanups);
    await Promise.all(
      users.map((user) =>
        callApi(server.url, user, 'POST', '/api/settings', {
          llm_model: 'openai/bench-model',
          llm_api_key: 'sk-bench-fake',
          llm_base_url: model.baseUrl,
        }),
      ),
    );
    await runBatch(server, model, WARMUP_CONVERSATIONS);
    const single: Batch[] = [];
    for (let i = 0; i < SINGLE_RUNS; i++) single.push(await runBatch(server, model, 1));
    const before = await server.memory();
    let peakRss = server.rssNow();
    const many = await runBatch(server, model, CONVERSATIONS, () => {
      const rss = server.rssNow();
      if (rss !== null && peakRss !== null) peakRss = Math.max(peakRss, rss);
    });
    const after = await server.memory();
    await server.close();
    console.log(`${storage}: done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    return { storage, single, many, before, after, peakRss };
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup();
  }
}

function printServerResults(results: readonly ServerResult[]): void {
  const rows: string[][] = [];
  for (const r of results) {
    const pooled = (pick: (b: Batch) => number[]) => r.single.flatMap(pick).sort((a, b) => a - b);
    const singleSteps = pooled((b) => b.stepLatencies);
    const singleFirst = pooled((b) => b.firstStepLatencies);
    const singleRate = median(r.single.map((b) => b.modelCalls / (b.wallMs / 1000)));
    const singleCpu = sum(r.single.map((b) => b.cpuMs)) / sum(r.single.map((b) => b.modelCalls));
    const many = [...r.many.stepLatencies].sort((a, b) => a - b);
    const manyFirst = [...r.many.firstStepLatencies].sort((a, b) => a - b);
    const manyRate = r.many.modelCalls / (r.many.wallMs / 1000);
    const manyCpu = r.many.cpuMs / r.many.modelCalls;
    rows.push([
      r.storage,
      `1 alone (${r.single.length} runs)`,
      String(r.single[0]?.modelCalls ?? 0),
      f0(median(r.single.map((b) => b.wallMs))),
      f0(singleRate),
      f2(percentile(singleSteps, 50)),
      f2(percentile(singleSteps, 99)),
      f2(percentile(singleFirst, 50)),
      f2(singleCpu),
      '1.0',
    ]);
    rows.push([
      r.storage,
      `${CONVERSATIONS} concurrent`,
      String(r.many.modelCalls),
      f0(r.many.wallMs),
      f0(manyRate),
      f2(percentile(many, 50)),
      f2(percentile(many, 99)),
      f2(percentile(manyFirst, 50)),
      f2(manyCpu),
      // Conversation-time over the span with model calls: how many ran side by side on average.
      f1(sum(r.many.conversationMs) / r.many.modelSpanMs),
    ]);
    rows.push([
      r.storage,
      `${CONVERSATIONS} vs 1`,
      '',
      '',
      ratio(manyRate, singleRate),
      ratio(percentile(many, 50), percentile(singleSteps, 50)),
      ratio(percentile(many, 99), percentile(singleSteps, 99)),
      ratio(percentile(manyFirst, 50), percentile(singleFirst, 50)),
      ratio(manyCpu, singleCpu),
      '',
    ]);
  }
  printTable(
    `Example server (child process, fake sandboxes, OpenAI adapter → fake model on 127.0.0.1): conversations of ${SERVER_STEPS} tool steps + finish, created at once over ${USERS} users`,
    [
      'storage',
      'run',
      'model calls',
      'wall ms',
      'steps/s',
      'step p50 ms',
      'step p99 ms',
      'first step p50 ms',
      'server CPU ms/step',
      'avg active',
    ],
    rows,
    2,
  );
  console.log(
    [
      'wall: first create request sent → last finished status; steps/s: model calls / wall',
      'step: model request → next model request of the same conversation (at the fake model); first step: create request sent → first model request',
      'server CPU ms/step: CPU time of the server process over the run (creating the conversations included) / model calls',
      'avg active: how many conversations were between their first and last model call, on average, while calls were made',
    ].join('\n'),
  );

  const memoryRows = results.map((r) => {
    // `+ 0` turns a rounded -0 into 0, so a change of nothing prints 0.0.
    const perConversation = (a: number, b: number) => f1(Math.round(((b - a) / CONVERSATIONS / 1024) * 10) / 10 + 0);
    return [
      r.storage,
      f1(r.before.heapUsed / MiB),
      f1(r.after.heapUsed / MiB),
      perConversation(r.before.heapUsed, r.after.heapUsed),
      perConversation(r.before.external, r.after.external),
      f1(r.before.rss / MiB),
      f1(r.after.rss / MiB),
      perConversation(r.before.rss, r.after.rss),
      r.peakRss === null ? '–' : f1(r.peakRss / MiB),
      r.peakRss === null ? '–' : perConversation(r.before.rss, r.peakRss),
    ];
  });
  printTable(
    `Server memory around the ${CONVERSATIONS} conversations (after a full GC; the finished conversations stay in memory / in the database)`,
    [
      'storage',
      'heap before MiB',
      'heap after MiB',
      'heap KiB/conv',
      'external KiB/conv',
      'RSS before MiB',
      'RSS after MiB',
      'RSS KiB/conv',
      'peak RSS MiB',
      'peak KiB/conv',
    ],
    memoryRows,
  );
}

// =====================================================================================
// main
// =====================================================================================

async function main(): Promise<void> {
  const cleanups: (() => Promise<void>)[] = [];
  let failed = false;
  const started = performance.now();
  try {
    const cpu = cpus();
    console.log(
      `machine: ${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version} (${process.platform}/${process.arch})`,
    );

    console.log(`part 1: engine overhead (${ENGINE_ROUNDS} rounds, the first a warm-up) …`);
    const overhead = await measureEngineOverhead();
    console.log(`part 1: a conversation of ${LONG_STEPS} steps, ${LONG_RUNS} runs per variant …`);
    const long = await measureLongConversation();
    printEngineOverhead(overhead);
    printLongConversation(long);
    printCondenser(long.condenser);

    console.log();
    console.log(
      `part 2: the example server, ${CONVERSATIONS} concurrent conversations vs 1, storage ${STORAGES.join(' and ')} …`,
    );
    const model = await startFakeModel();
    cleanups.push(() => model.close());
    const results: ServerResult[] = [];
    for (const storage of STORAGES) results.push(await measureServer(storage, model));
    printServerResults(results);
  } catch (error) {
    failed = true;
    console.error(error);
  } finally {
    if (!(await runCleanups(cleanups))) failed = true;
  }
  console.log(`\ntotal: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  process.exitCode = failed ? 1 : 0;
}

if (process.env.BENCH_AGENT_ROLE === 'server') await runServerRole();
else await main();
