/**
 * What one agent step costs the server, against the model server it talks to (issue 27).
 *
 *   npm run bench:steps
 *   BENCH_STEPS_STORAGE=memory BENCH_STEPS_CONCURRENT=50 npm run bench:steps   # smaller, memory only
 *
 * The stub model server (@acs/testing's fake chat-completions server, answering at once with
 * scripted tool calls: editor create / view, `echo`, then finish) runs in a child process, so
 * its CPU time is its own (process.cpuUsage there, asked over IPC). This process composes the
 * service as the example server does (its storage from `openStorage`, the OpenAI adapter, the
 * fake sandbox runtime, the agent with the example's options), without the HTTP router: the
 * conversations are created through the service, so the only client work is the agent's.
 * The storages are memory, SQLite (the embedded default, no fsync per commit; `sqlite-full` with one)
 * and PGlite; BENCH_STEPS_STORAGE picks others.
 *
 * 1. CPU per step: one conversation of STEPS_LONG model calls, default condenser on; this
 *    process's CPU per model call against the stub's CPU per call, per storage, and each
 *    storage against memory. Variants alternate, ROUNDS times, medians.
 *    Before it (part `engine`), the same conversation with the model in this process: the engine and
 *    the storage alone, no HTTP (what to profile: BENCH_STEPS_PARTS=engine node --cpu-prof …).
 *    BENCH_STEPS_STREAM=false has the users ask for whole answers (streaming is on by default; its
 *    own costs are bench:streaming's).
 *    BENCH_MODEL_WAIT=immediate|timer makes that model answer after a turn of the event loop or a
 *    1 ms timer: what going idle between steps costs (caches cold after other processes ran).
 * 2. Growth with the log, condenser off: one conversation of STEPS_GROWTH steps. The engine's
 *    CPU between two model calls, and the CPU inside a model call (the OpenAI SDK builds the
 *    request and reads the answer) less the prompt's own serialisation (JSON.stringify of the
 *    messages, timed separately), at event ~100 against event ~2,000.
 * 3. Concurrency: CONCURRENT conversations of STEPS_CONC tool steps created at once, against one
 *    such conversation alone (run SINGLE_RUNS times): step latency (between two model requests
 *    of a conversation, as the stub sees them) p50/p99 and throughput (model calls / wall).
 *
 * Each figure is printed beside the figure measured before issue 27's changes (BEFORE, same
 * machine, same command) and the target. Numbers, not assertions.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { ok, okAsync, ResultAsync, type Result } from 'neverthrow';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import type { LlmClient, LlmError, LlmMessage, LlmRequest, LlmResponse } from '@acs/core/ports';
import { StaticSandboxSpecCatalog } from '@acs/adapter-memory';
import { createOpenAiLlmClient } from '@acs/adapter-openai';
import { BUILTIN_TOOLS, Toolset } from '../packages/agent/src/toolset.js';
import { createAgent } from '@acs/agent';
import { systemPrompt } from '../packages/agent/src/prompt.js';
import { completion, FakeSandboxRuntime, startFakeOpenAi, textOf } from '@acs/testing';
import { loadConfig } from '../examples/standalone-server/src/config.js';
import { openStorage, type Storage } from '../examples/standalone-server/src/storage.js';
import { runCleanups } from './cleanup.js';
import { printTable as printRows } from './report.js';
import { percentile, positiveInt } from './stats.js';

// ---- configuration ----

/**
 * The storages measured; memory is the reference the others are compared with. `sqlite` as the
 * example server opens it (fsync at checkpoints), `sqlite-full` fsyncs every commit (ACS_SQLITE_SYNCHRONOUS=full).
 */
const STORAGES = (process.env.BENCH_STEPS_STORAGE || 'memory,sqlite,sqlite-full,pglite')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
const STEPS_LONG = positiveInt('BENCH_STEPS_LONG', 600);
const ROUNDS = positiveInt('BENCH_STEPS_ROUNDS', 3);
const STEPS_GROWTH = positiveInt('BENCH_STEPS_GROWTH', 700);
const GROWTH_WINDOW = 40;
/** Part 2 is cheap (~1 s a run) and noisy on a busy machine: more runs. */
const GROWTH_ROUNDS = positiveInt('BENCH_STEPS_GROWTH_ROUNDS', 7);
const CONCURRENT = positiveInt('BENCH_STEPS_CONCURRENT', 200);
const STEPS_CONC = positiveInt('BENCH_STEPS_CONC_STEPS', 20);
const SINGLE_RUNS = positiveInt('BENCH_STEPS_SINGLE_RUNS', 5);
const USERS = 10;
/** Model latencies (ms) the concurrency part runs at: at once (the stub's CPU against the server's), and one like a fast real model's. */
const LATENCIES = (process.env.BENCH_STEPS_LATENCIES || '0,50').split(',').map((s) => Number(s.trim()));

/**
 * Measured before issue 27's changes: `npm run bench:steps` of this file with packages/ as at commit
 * 286f8a0, on the 2-core machine the changes were made on, run between two runs of the changed
 * code. The machine was busy with other work (CPU pressure 80-90%), so each figure is a ratio
 * within one run, and the wall-clock ones (p99, throughput) move by ±50% between runs.
 */
const BEFORE: Record<string, number | null> = {
  'cpu/step memory': 1.34,
  'cpu/step pglite': 3.96,
  'cpu ratio memory': 4.96,
  'cpu ratio pglite': 13.93,
  'storage ratio pglite': 2.81,
  'adapter alone': 0.66,
  'growth step': 3.0,
  'growth step min': 4.76,
  'store calls': 5.91,
  'p99 ratio memory 0': 39.21,
  'p99 ratio pglite 0': 111.45,
  'p99 ratio memory 50': 4.08,
  'p99 ratio pglite 50': 16.62,
  'throughput ratio memory 0': 1.48,
  'throughput ratio pglite 0': 1.08,
  'throughput ratio memory 50': 72.88,
  'throughput ratio pglite 50': 15.62,
};

const TAG = /bench-steps ([\w-]+) steps=(\d+)/;
const WORKDIR = '/workspace';

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
const p = (values: readonly number[], q: number) =>
  percentile(
    [...values].sort((a, b) => a - b),
    q,
  );
const fixed = (digits: number) => (value: number | null | undefined) =>
  value !== null && value !== undefined && Number.isFinite(value) ? value.toFixed(digits) : '–';
const f2 = fixed(2);
const f1 = fixed(1);
const x = (value: number | null | undefined) =>
  value !== null && value !== undefined && Number.isFinite(value) ? `${value.toFixed(2)}×` : '–';
const cpuNowUs = () => {
  const c = process.cpuUsage();
  return c.user + c.system;
};

// =====================================================================================
// The stub model server (child process)
// =====================================================================================

/** Tool step k of a conversation of `steps` tool steps: create, view, echo, over and over, then finish. Arguments differ every step, so nothing looks stuck. */
function turn(tag: string, k: number, steps: number): { name: string; args: Record<string, unknown> } {
  if (k >= steps) return { name: 'finish', args: { message: `conversation ${tag} is done` } };
  const n = Math.floor(k / 3);
  switch (k % 3) {
    case 0:
      return {
        name: 'str_replace_editor',
        args: { command: 'create', path: `${WORKDIR}/f${n}.txt`, file_text: `line ${n} of the benchmark\n` },
      };
    case 1:
      return { name: 'str_replace_editor', args: { command: 'view', path: `${WORKDIR}/f${n}.txt` } };
    default:
      return { name: 'execute_bash', args: { command: `echo hi-${n}` } };
  }
}

type StubRequest =
  { type: 'cpu' } | { type: 'arrivals'; prefix: string } | { type: 'latency'; ms: number } | { type: 'close' };
type ToStub = StubRequest & { id: number };
type FromStub =
  | { type: 'ready'; baseUrl: string }
  | { type: 'reply'; id: number; cpuUs?: number; calls?: number; arrivals?: Record<string, number[]> };

async function runStub(): Promise<void> {
  const fake = await startFakeOpenAi({ keepRequests: false });
  const traces = new Map<string, { k: number; arrivals: number[] }>();
  let calls = 0;
  /** How long the model takes to answer (0: at once). */
  let latencyMs = 0;
  fake.script((request) => {
    const at = performance.timeOrigin + performance.now();
    calls++;
    const usage = {
      prompt_tokens: Math.ceil(request.text.length / 4),
      completion_tokens: 30,
      total_tokens: Math.ceil(request.text.length / 4) + 30,
    };
    // The condenser's summary request comes without tools (and without the task's message).
    if (!request.body.tools?.length) {
      return {
        status: 200,
        body: completion({
          id: `sum-${calls}`,
          model: 'bench-model',
          content: 'USER_CONTEXT: a benchmark task. COMPLETED: steps. PENDING: more steps.',
          usage,
        }),
      };
    }
    const first = request.body.messages?.find((m) => m.role === 'user');
    const match = TAG.exec(textOf(first?.content));
    if (!match) return { status: 400, body: { error: { message: 'no bench-steps tag in the first user message' } } };
    const [, tag, steps] = match as unknown as [string, string, string];
    let trace = traces.get(tag);
    if (!trace) traces.set(tag, (trace = { k: 0, arrivals: [] }));
    trace.arrivals.push(at);
    const k = trace.k++;
    const t = turn(tag, k, Number(steps));
    return {
      status: 200,
      ...(latencyMs > 0 ? { delayMs: latencyMs } : {}),
      body: completion({
        id: `chatcmpl-${tag}-${k}`,
        model: 'bench-model',
        content: null,
        tool_calls: [
          { id: `call_${tag}_${k}`, type: 'function', function: { name: t.name, arguments: JSON.stringify(t.args) } },
        ],
        usage,
      }),
    };
  });
  const send = (message: FromStub) => process.send?.(message);
  process.on('disconnect', () => process.exit(0));
  process.on('message', (received) => {
    const message = received as ToStub;
    if (message.type === 'cpu') send({ type: 'reply', id: message.id, cpuUs: cpuNowUs(), calls });
    else if (message.type === 'arrivals') {
      const arrivals: Record<string, number[]> = {};
      for (const [tag, trace] of traces) {
        if (!tag.startsWith(message.prefix)) continue;
        arrivals[tag] = trace.arrivals;
        traces.delete(tag);
      }
      send({ type: 'reply', id: message.id, arrivals });
    } else if (message.type === 'latency') {
      latencyMs = message.ms;
      send({ type: 'reply', id: message.id });
    } else {
      void fake.close().then(() => {
        send({ type: 'reply', id: message.id });
        process.disconnect();
      });
    }
  });
  send({ type: 'ready', baseUrl: fake.baseUrl });
}

interface Stub {
  baseUrl: string;
  cpu(): Promise<{ cpuUs: number; calls: number }>;
  arrivals(prefix: string): Promise<Record<string, number[]>>;
  setLatency(ms: number): Promise<void>;
  close(): Promise<void>;
}

async function startStub(cleanups: (() => Promise<void>)[]): Promise<Stub> {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), [], {
    execArgv: [
      '--conditions=@acs/source',
      '--import',
      'tsx',
      ...(process.env.BENCH_STUB_NODE_ARGS ?? '').split(' ').filter(Boolean),
    ],
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', BENCH_STEPS_ROLE: 'stub' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  let nextId = 0;
  const pending = new Map<number, (m: FromStub & { type: 'reply' }) => void>();
  let ready: ((url: string) => void) | null = null;
  child.on('message', (received) => {
    const m = received as FromStub;
    if (m.type === 'ready') ready?.(m.baseUrl);
    else pending.get(m.id)?.(m);
  });
  const request = (message: StubRequest) =>
    new Promise<FromStub & { type: 'reply' }>((resolve, reject) => {
      const id = ++nextId;
      pending.set(id, (m) => {
        pending.delete(id);
        resolve(m);
      });
      child.send({ ...message, id } satisfies ToStub, (error) => error && reject(error));
    });
  const baseUrl = await Promise.race([
    new Promise<string>((resolve) => (ready = resolve)),
    exited.then(() => Promise.reject(new Error('the stub model server exited before it listened'))),
  ]);
  return {
    baseUrl,
    cpu: async () => {
      const r = await request({ type: 'cpu' });
      return { cpuUs: r.cpuUs ?? Number.NaN, calls: r.calls ?? 0 };
    },
    arrivals: async (prefix) => (await request({ type: 'arrivals', prefix })).arrivals ?? {},
    setLatency: async (ms) => {
      await request({ type: 'latency', ms });
    },
    close: async () => {
      await Promise.race([request({ type: 'close' }), sleep(5_000, undefined, { ref: false })]);
      await Promise.race([exited, sleep(5_000, undefined, { ref: false })]);
    },
  };
}

// =====================================================================================
// The server (this process)
// =====================================================================================

/**
 * The model in this process, for part 2: the stub's script answered at once, with no HTTP and no
 * serialisation, so a step's CPU is the engine's and the storage's alone (a real client's
 * serialisation, and the garbage it leaves, would grow with the prompt). It samples this
 * process's CPU time as each agent call starts, and keeps every 10th prompt to time its
 * serialisation afterwards.
 */
class InProcessModel implements LlmClient {
  startsUs: number[] = [];
  /** The prompt of agent call k, for k a multiple of 10. */
  prompts = new Map<number, readonly LlmMessage[]>();
  /** Every call, summaries included. */
  calls = 0;
  readonly #turns = new Map<string, number>();
  /** Forgets the samples so far (after a warm-up). */
  reset(): void {
    this.startsUs = [];
    this.prompts = new Map();
  }
  complete(request: LlmRequest) {
    this.calls++;
    const summary = request.tools.length === 0;
    if (!summary) {
      if (this.startsUs.length % 10 === 0) this.prompts.set(this.startsUs.length, request.messages);
      this.startsUs.push(cpuNowUs());
    }
    const first = request.messages.find((m) => m.role === 'user');
    const [, tag = '', steps = '0'] = TAG.exec(typeof first?.content === 'string' ? first.content : '') ?? [];
    const k = this.#turns.get(tag) ?? 0;
    if (!summary) this.#turns.set(tag, k + 1);
    const t = turn(tag, k, Number(steps));
    const value: LlmResponse = {
      id: `direct-${tag}-${k}`,
      model: 'bench-model',
      content: summary ? 'USER_CONTEXT: a benchmark task. COMPLETED: steps. PENDING: more steps.' : null,
      tool_calls: summary ? [] : [{ id: `call_${tag}_${k}`, name: t.name, arguments: JSON.stringify(t.args) }],
      finish_reason: summary ? 'stop' : 'tool_calls',
      usage: { prompt_tokens: 100 + k, completion_tokens: 30, cached_prompt_tokens: 0, cost_usd: null },
      latency_ms: 0,
      attempts: 1,
    };
    const wait = process.env.BENCH_MODEL_WAIT;
    if (wait === 'immediate')
      return new ResultAsync(
        new Promise<Result<LlmResponse, LlmError>>((resolve) => setImmediate(() => resolve(ok(value)))),
      );
    if (wait === 'timer')
      return new ResultAsync(
        new Promise<Result<LlmResponse, LlmError>>((resolve) => setTimeout(() => resolve(ok(value)), 1)),
      );
    return okAsync<LlmResponse, LlmError>(value);
  }
}

interface Server {
  service: AgentConversationService;
  /** Calls made to each storage port method so far ("events.append" → n). */
  storeCalls: Map<string, number>;
  close(): Promise<void>;
}

/** The storage ports, each method call counted (how many store round trips a step makes). */
function counted<T extends object>(ports: T, calls: Map<string, number>): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, port] of Object.entries(ports)) {
    if (port === null || typeof port !== 'object') {
      wrapped[name] = port;
      continue;
    }
    wrapped[name] = new Proxy(port as object, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver) as unknown;
        if (typeof value !== 'function' || typeof property !== 'string') return value;
        const key = `${name}.${property}`;
        return (...args: unknown[]) => {
          calls.set(key, (calls.get(key) ?? 0) + 1);
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
  }
  return wrapped as T;
}

/** The service as the example server composes it, on storage `kind`; the model is the OpenAI adapter (to the stub) unless given. */
async function openServer(kind: string, maxIterations: number, model?: LlmClient): Promise<Server> {
  const dataDir = await mkdtemp(join(tmpdir(), 'acs-bench-steps-'));
  const config = loadConfig({
    // `sqlite-full`: SQLite with an fsync per commit (ACS_SQLITE_SYNCHRONOUS=full).
    ACS_STORAGE: kind === 'sqlite-full' ? 'sqlite' : kind,
    ACS_SQLITE_SYNCHRONOUS: kind === 'sqlite-full' ? 'full' : 'normal',
    DATA_DIR: dataDir,
    ACS_SANDBOXES: 'fake',
    SESSION_API_KEY: 'bench-steps-default-key-0001',
    ACS_MAX_RUNNING_SANDBOXES: '1000',
    ACS_SANDBOX_IDLE_MINUTES: '0',
    ACS_MAX_ITERATIONS: String(maxIterations),
    ACS_LLM_MAX_RETRIES: '0',
    ACS_LLM_TIMEOUT_SECONDS: '60',
    LOG_LEVEL: 'warn',
  });
  let storage: Storage | null = null;
  try {
    storage = await openStorage(config, () => {});
    const llm = model ?? createOpenAiLlmClient({ timeoutMs: config.llm.timeoutMs, maxRetries: config.llm.maxRetries });
    const storeCalls = new Map<string, number>();
    const service = createAgentConversationService(
      {
        ...counted(storage.ports, storeCalls),
        sandboxSpecs: new StaticSandboxSpecCatalog(config.sandboxes.specs),
        runtime: new FakeSandboxRuntime(),
        llm,
        agent: createAgent({ defaultMaxIterations: config.llm.defaultMaxIterations }),
      },
      { maxRunningSandboxesPerUser: config.sandboxes.maxRunningPerUser, atSandboxLimit: 'refuse' },
    );
    await must(service.recover(), 'recover');
    const opened = storage;
    return {
      service,
      storeCalls,
      close: async () => {
        await service.close();
        await opened.close();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await storage?.close();
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
}

const userOf = (i: number) => `user-${i % USERS}`;

async function configureUsers(server: Server, stub: Stub, condenser: boolean): Promise<void> {
  for (let i = 0; i < USERS; i++) {
    await must(
      server.service.settings.store(userOf(i), {
        llm_model: 'openai/bench-model',
        llm_api_key: 'sk-bench-fake',
        llm_base_url: stub.baseUrl,
        enable_default_condenser: condenser,
        // Streaming is on by default (issue 36); BENCH_STEPS_STREAM=false asks for whole answers, as before it.
        llm_stream: process.env.BENCH_STEPS_STREAM !== 'false',
      }),
      'store settings',
    );
  }
}

let tagNo = 0;

/** Creates `count` conversations of `steps` tool steps at once and waits until the service is idle; the wall time (ms) and the tags. */
async function runConversations(
  server: Server,
  count: number,
  steps: number,
): Promise<{ wallMs: number; tags: string[]; prefix: string }> {
  const prefix = `t${++tagNo}x`;
  const tags = Array.from({ length: count }, (_, i) => `${prefix}${i}`);
  const started = performance.now();
  const ids = await Promise.all(
    tags.map((tag, i) =>
      must(
        server.service.conversations.create(userOf(i), {
          initial_user_msg: `bench-steps ${tag} steps=${steps}: do the task`,
        }),
        'create',
      ),
    ),
  );
  await server.service.idle();
  const wallMs = performance.now() - started;
  const records = await Promise.all(
    ids.map((c, i) => must(server.service.conversations.getMany(userOf(i), [c.conversation_id]), 'read')),
  );
  const unfinished = records.filter(([r]) => r?.record.execution_status !== 'finished');
  if (unfinished.length > 0) {
    const [first] = unfinished[0]!;
    const errors = first
      ? await must(
          server.service.conversations.searchEvents(first.record.user_id, first.record.id, {
            after: 0,
            kinds: ['error'],
            limit: 5,
          }),
          'errors',
        )
      : null;
    throw new Error(
      `${unfinished.length} of ${count} conversations did not finish (first: ${first?.record.execution_status}, ${JSON.stringify(errors?.items)})`,
    );
  }
  return { wallMs, tags, prefix };
}

// =====================================================================================
// Part 1: CPU per step against the stub's CPU per call, condenser on
// =====================================================================================

interface CpuRun {
  storage: string;
  serverUsPerCall: number;
  stubUsPerCall: number;
  /** Store calls per model call, by port method. */
  storeCalls: Map<string, number>;
}

async function cpuRun(storage: string, stub: Stub): Promise<CpuRun> {
  const server = await openServer(storage, STEPS_LONG + 10);
  try {
    await configureUsers(server, stub, true);
    // A short warm-up conversation: JIT, the first sandbox, the storage's caches.
    await runConversations(server, 1, 30);
    const stubBefore = await stub.cpu();
    const storeBefore = new Map(server.storeCalls);
    const before = cpuNowUs();
    await runConversations(server, 1, STEPS_LONG);
    const after = cpuNowUs();
    const stubAfter = await stub.cpu();
    const calls = stubAfter.calls - stubBefore.calls;
    const storeCalls = new Map(
      [...server.storeCalls].map(([k, n]) => [k, (n - (storeBefore.get(k) ?? 0)) / calls] as const),
    );
    return {
      storage,
      serverUsPerCall: (after - before) / calls,
      stubUsPerCall: (stubAfter.cpuUs - stubBefore.cpuUs) / calls,
      storeCalls,
    };
  } finally {
    await server.close();
  }
}

/** The engine and the storage alone: part 1's conversation with the model in this process (no HTTP, nothing serialised); CPU per model call. */
async function engineAlone(storage: string, stub: Stub): Promise<number> {
  const model = new InProcessModel();
  const server = await openServer(storage, STEPS_LONG + 10, model);
  try {
    await configureUsers(server, stub, true);
    await runConversations(server, 1, 30);
    const calls = model.calls;
    const before = cpuNowUs();
    await runConversations(server, 1, STEPS_LONG);
    return (cpuNowUs() - before) / (model.calls - calls);
  } finally {
    await server.close();
  }
}

/**
 * The OpenAI adapter alone against the same stub, with a prompt of a condensed step's size and the
 * agent's tools: the client's side of the HTTP exchange, before any engine or storage work.
 */
async function adapterAlone(
  stub: Stub,
): Promise<{ serverUsPerCall: number; stubUsPerCall: number; promptChars: number }> {
  const llm = createOpenAiLlmClient({ maxRetries: 0 });
  const messages: LlmMessage[] = [
    {
      role: 'system',
      content: systemPrompt({ workingDir: WORKDIR, instructions: null, startedAt: new Date().toISOString() }),
    },
    { role: 'user', content: `bench-steps adapter steps=1000000: do the task` },
    ...Array.from({ length: 60 }, (_, i): LlmMessage[] => [
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: `call_${i}`, name: 'execute_bash', arguments: JSON.stringify({ command: `echo hi-${i}` }) }],
      },
      { role: 'tool', tool_call_id: `call_${i}`, content: `hi-${i}\n[The command completed with exit code 0.]` },
    ]).flat(),
  ];
  // With a signal, as the engine sends each call (its conversation's stop).
  const request = {
    credentials: { model: 'openai/bench-model', api_key: 'sk-bench-fake', base_url: stub.baseUrl },
    messages,
    tools: new Toolset(BUILTIN_TOOLS).definitions,
    signal: new AbortController().signal,
  };
  for (let i = 0; i < 200; i++) await must(llm.complete(request), 'adapter call');
  const calls = 1000;
  const stubBefore = await stub.cpu();
  const before = cpuNowUs();
  for (let i = 0; i < calls; i++) await must(llm.complete(request), 'adapter call');
  const after = cpuNowUs();
  const stubAfter = await stub.cpu();
  await stub.arrivals('adapter');
  return {
    serverUsPerCall: (after - before) / calls,
    stubUsPerCall: (stubAfter.cpuUs - stubBefore.cpuUs) / calls,
    promptChars: JSON.stringify(messages).length,
  };
}

// =====================================================================================
// Part 2: growth with the log, condenser off
// =====================================================================================

/** One conversation of STEPS_GROWTH steps on memory with the in-process model, condenser off. */
async function growthRun(stub: Stub): Promise<InProcessModel> {
  const model = new InProcessModel();
  const server = await openServer('memory', STEPS_GROWTH + 10, model);
  try {
    await configureUsers(server, stub, false);
    // A warm-up conversation, so the early steps measured are not the first the JIT sees.
    await runConversations(server, 1, 200);
    model.reset();
    await runConversations(server, 1, STEPS_GROWTH);
    return model;
  } finally {
    await server.close();
  }
}

/** Mean CPU (µs) of steps [from, to), from one agent call's start to the next; the serialisation of the prompt at `from + to / 2`, timed alone. */
function stepCost(model: InProcessModel, from: number, to: number): { step: number; serialise: number; chars: number } {
  const steps: number[] = [];
  for (let k = Math.max(1, from); k < Math.min(model.startsUs.length, to); k++)
    steps.push(model.startsUs[k]! - model.startsUs[k - 1]!);
  const middle = Math.round((from + to) / 20) * 10;
  const prompt: readonly LlmMessage[] = model.prompts.get(middle) ?? [];
  const chars = JSON.stringify(prompt).length;
  return { step: mean(steps), serialise: microbenchUs(() => JSON.stringify(prompt)), chars };
}

/** µs per call of `fn`, over ~50 ms. */
function microbenchUs(fn: () => unknown): number {
  for (let i = 0; i < 5; i++) fn();
  let calls = 0;
  const started = performance.now();
  while (performance.now() - started < 50) {
    fn();
    calls++;
  }
  return ((performance.now() - started) * 1000) / calls;
}

// =====================================================================================
// Part 3: concurrency
// =====================================================================================

interface Batch {
  wallMs: number;
  calls: number;
  steps: number[];
  serverCpuMs: number;
  stubCpuMs: number;
  /** Event-loop utilisation of this process over the batch: 1 when it never waited for anything. */
  elu: number;
}

interface ConcurrencyRun {
  storage: string;
  single: Batch[];
  many: Batch;
}

const stepLatencies = (arrivals: Record<string, number[]>) =>
  Object.values(arrivals).flatMap((a) => a.slice(1).map((t, i) => t - a[i]!));

/** `count` conversations at once: latencies at the stub, wall, the CPU both processes used. */
async function batch(server: Server, stub: Stub, count: number): Promise<Batch> {
  const stubBefore = await stub.cpu();
  const before = cpuNowUs();
  const eluBefore = performance.eventLoopUtilization();
  const run = await runConversations(server, count, STEPS_CONC);
  const elu = performance.eventLoopUtilization(eluBefore).utilization;
  const after = cpuNowUs();
  const stubAfter = await stub.cpu();
  const arrivals = await stub.arrivals(run.prefix);
  return {
    wallMs: run.wallMs,
    calls: sum(Object.values(arrivals).map((a) => a.length)),
    steps: stepLatencies(arrivals),
    serverCpuMs: (after - before) / 1000,
    stubCpuMs: (stubAfter.cpuUs - stubBefore.cpuUs) / 1000,
    elu,
  };
}

async function concurrencyRun(storage: string, stub: Stub): Promise<ConcurrencyRun> {
  const server = await openServer(storage, STEPS_CONC + 10);
  try {
    await configureUsers(server, stub, true);
    await runConversations(server, 10, STEPS_CONC);
    const single: Batch[] = [];
    for (let i = 0; i < SINGLE_RUNS; i++) single.push(await batch(server, stub, 1));
    const many = await batch(server, stub, CONCURRENT);
    return { storage, single, many };
  } finally {
    await server.close();
  }
}

// =====================================================================================
// main
// =====================================================================================

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

const PARTS = new Set(
  (process.env.BENCH_STEPS_PARTS || 'engine,cpu,growth,concurrency').split(',').map((s) => s.trim()),
);

async function main(): Promise<void> {
  const cleanups: (() => Promise<void>)[] = [];
  let failed = false;
  const started = performance.now();
  try {
    const cpu = cpus();
    console.log(
      `machine: ${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, node ${process.version}; storages ${STORAGES.join(', ')}`,
    );
    const stub = await startStub(cleanups);
    cleanups.push(() => stub.close());

    if (PARTS.has('engine')) {
      // The engine and each storage with the model in this process: what a profile of a step shows without HTTP in the way.
      for (const storage of STORAGES) {
        const values: number[] = [];
        for (let round = 0; round < ROUNDS; round++) values.push(await engineAlone(storage, stub));
        const us = median(values);
        console.log(
          `engine and ${storage} storage alone (the model in this process, condenser on): ${f2(us / 1000)} ms CPU per model call, median of ${ROUNDS}`,
        );
      }
    }

    if (PARTS.has('cpu')) {
      console.log(
        `part 1: one conversation of ${STEPS_LONG} steps, condenser on, ${ROUNDS} rounds × ${STORAGES.join('/')} alternating …`,
      );
      const runs: CpuRun[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 === 0 ? STORAGES : [...STORAGES].reverse();
        for (const storage of order) runs.push(await cpuRun(storage, stub));
      }
      const of = (storage: string) => runs.filter((r) => r.storage === storage);
      const memoryRatio = median(of('memory').map((r) => r.serverUsPerCall / r.stubUsPerCall));
      const memoryUs = median(of('memory').map((r) => r.serverUsPerCall));
      const rows = STORAGES.map((storage) => {
        const mine = of(storage);
        const serverUs = median(mine.map((r) => r.serverUsPerCall));
        const stubUs = median(mine.map((r) => r.stubUsPerCall));
        const ratio = median(mine.map((r) => r.serverUsPerCall / r.stubUsPerCall));
        return [
          storage,
          f2(serverUs / 1000),
          f2(BEFORE[`cpu/step ${storage}`]),
          f2(stubUs / 1000),
          x(ratio),
          x(BEFORE[`cpu ratio ${storage}`]),
          storage === 'memory' ? '≤ 2.00×' : '',
          storage === 'memory' ? '' : x(ratio / memoryRatio),
          storage === 'memory' ? '' : x(BEFORE[`storage ratio ${storage}`]),
          storage === 'memory' ? '' : '≤ 1.50×',
          storage === 'memory' ? '' : x(serverUs / memoryUs),
        ];
      });
      printTable(
        `CPU per model call: one conversation of ${STEPS_LONG} tool steps + finish (condenser on, its summary calls counted), median of ${ROUNDS} runs`,
        [
          'storage',
          'server ms/call',
          'before',
          'stub ms/call',
          'server/stub',
          'before',
          'target',
          'vs memory (server/stub)',
          'before',
          'target',
          'vs memory (ms)',
        ],
        rows,
      );
      const alone = await adapterAlone(stub);
      console.log(
        `the OpenAI adapter alone against the same stub (${alone.promptChars} prompt chars, the agent's tools): ${f2(alone.serverUsPerCall / 1000)} ms CPU per call here (before: ${f2(BEFORE['adapter alone'])}), ${f2(alone.stubUsPerCall / 1000)} ms in the stub (${x(alone.serverUsPerCall / alone.stubUsPerCall)}); ` +
          `so the engine and memory storage take about ${f2((memoryUs - alone.serverUsPerCall) / 1000)} ms of a step`,
      );
      const perCall = runs[0]!.storeCalls;
      const total = sum([...perCall.values()]);
      console.log(
        `store calls per model call: ${total.toFixed(2)} (${[...perCall]
          .filter(([, n]) => n >= 0.01)
          .sort((a, b) => b[1] - a[1])
          .map(([k, n]) => `${k} ${n.toFixed(2)}`)
          .join(', ')}); before: ${BEFORE['store calls'] ?? '–'}`,
      );
    }

    if (PARTS.has('growth')) {
      console.log(
        `part 2: one conversation of ${STEPS_GROWTH} steps, condenser off, memory, in-process model, ${GROWTH_ROUNDS} runs …`,
      );
      // Step k starts with 2 + 3k events in the log (the message, a status, then llm_call + action + observation per step).
      const stepAt = (events: number) => Math.round((events - 2) / 3);
      const early = Math.max(GROWTH_WINDOW / 2 + 1, stepAt(100));
      const late = Math.min(STEPS_GROWTH - GROWTH_WINDOW / 2, stepAt(2000));
      const runs: { early: ReturnType<typeof stepCost>; late: ReturnType<typeof stepCost> }[] = [];
      for (let round = 0; round < GROWTH_ROUNDS; round++) {
        const model = await growthRun(stub);
        runs.push({
          early: stepCost(model, early - GROWTH_WINDOW / 2, early + GROWTH_WINDOW / 2),
          late: stepCost(model, late - GROWTH_WINDOW / 2, late + GROWTH_WINDOW / 2),
        });
      }
      const med = (pick: (r: (typeof runs)[number]) => number) => median(runs.map(pick));
      const rows = [
        // Ratios of the medians (and of the least): a run's ratio swings with whichever window another process disturbed.
        [
          'step without serialisation (µs), median',
          f1(med((r) => r.early.step)),
          f1(med((r) => r.late.step)),
          x(med((r) => r.late.step) / med((r) => r.early.step)),
          x(BEFORE['growth step']),
          '≤ 1.30×',
        ],
        // The least disturbed run of each: on a busy machine other processes only ever add time.
        [
          'same, least of the runs',
          f1(Math.min(...runs.map((r) => r.early.step))),
          f1(Math.min(...runs.map((r) => r.late.step))),
          x(Math.min(...runs.map((r) => r.late.step)) / Math.min(...runs.map((r) => r.early.step))),
          x(BEFORE['growth step min']),
          '≤ 1.30×',
        ],
        [
          "the prompt's serialisation, JSON.stringify, timed alone (µs)",
          f1(med((r) => r.early.serialise)),
          f1(med((r) => r.late.serialise)),
          x(med((r) => r.late.serialise) / med((r) => r.early.serialise)),
          '',
          '',
        ],
        [
          'prompt chars',
          f1(med((r) => r.early.chars)),
          f1(med((r) => r.late.chars)),
          x(med((r) => r.late.chars / r.early.chars)),
          '',
          '',
        ],
      ];
      printTable(
        `Step CPU as the log grows (condenser off, memory, the model in this process, nothing serialised): mean of ${GROWTH_WINDOW} steps around event ${2 + 3 * early} and event ${2 + 3 * late}, median (and least) of ${GROWTH_ROUNDS} runs`,
        ['', `event ~${2 + 3 * early}`, `event ~${2 + 3 * late}`, 'growth', 'before', 'target'],
        rows,
      );
    }

    if (PARTS.has('concurrency')) {
      const rows: string[][] = [];
      const notes: string[] = [];
      for (const latency of LATENCIES)
        for (const storage of STORAGES) {
          console.log(
            `part 3: ${CONCURRENT} conversations of ${STEPS_CONC} steps at once vs 1 alone (${SINGLE_RUNS} runs), ${storage}, model ${latency} ms …`,
          );
          await stub.setLatency(latency);
          const r = await concurrencyRun(storage, stub);
          const what = `${storage}, model ${latency} ms`;
          const singleSteps = r.single.flatMap((s) => s.steps);
          const singleRate = median(r.single.map((s) => s.calls / (s.wallMs / 1000)));
          const manyRate = r.many.calls / (r.many.wallMs / 1000);
          const cpu = (b: readonly Batch[], pick: (b: Batch) => number) =>
            sum(b.map(pick)) / sum(b.map((x) => x.calls));
          const busy = (b: readonly Batch[], pick: (b: Batch) => number) =>
            `${Math.round((100 * sum(b.map(pick))) / sum(b.map((x) => x.wallMs)))}%`;
          const one = r.single;
          const many = [r.many];
          // Little's law: N conversations each always in a step or a model call take N / throughput per step, at least N × the server's CPU per step when it is the bottleneck.
          notes.push(
            `${storage}, model ${latency} ms: ${CONCURRENT} conversations × ${f2(cpu(many, (b) => b.serverCpuMs))} ms server CPU per call = ${f1(CONCURRENT * cpu(many, (b) => b.serverCpuMs))} ms of server CPU per round of steps (plus ${latency} ms of model), mean step measured ${f1(mean(r.many.steps))} ms`,
          );
          rows.push([
            what,
            `1 alone (${SINGLE_RUNS} runs)`,
            f2(p(singleSteps, 50)),
            f2(p(singleSteps, 99)),
            f1(singleRate),
            f2(cpu(one, (b) => b.serverCpuMs)),
            f2(cpu(one, (b) => b.stubCpuMs)),
            busy(one, (b) => b.serverCpuMs),
            busy(one, (b) => b.stubCpuMs),
            `${Math.round(100 * median(one.map((b) => b.elu)))}%`,
            '',
            '',
            '',
            '',
          ]);
          rows.push([
            what,
            `${CONCURRENT} at once`,
            f2(p(r.many.steps, 50)),
            f2(p(r.many.steps, 99)),
            f1(manyRate),
            f2(cpu(many, (b) => b.serverCpuMs)),
            f2(cpu(many, (b) => b.stubCpuMs)),
            busy(many, (b) => b.serverCpuMs),
            busy(many, (b) => b.stubCpuMs),
            `${Math.round(100 * r.many.elu)}%`,
            '',
            '',
            '',
            '',
          ]);
          rows.push([
            what,
            `${CONCURRENT} vs 1`,
            x(p(r.many.steps, 50) / p(singleSteps, 50)),
            x(p(r.many.steps, 99) / p(singleSteps, 99)),
            x(manyRate / singleRate),
            x(cpu(many, (b) => b.serverCpuMs) / cpu(one, (b) => b.serverCpuMs)),
            x(cpu(many, (b) => b.stubCpuMs) / cpu(one, (b) => b.stubCpuMs)),
            '',
            '',
            '',
            x(BEFORE[`p99 ratio ${storage} ${latency}`]),
            '≤ 5.00×',
            x(BEFORE[`throughput ratio ${storage} ${latency}`]),
            '≥ 3.00×',
          ]);
        }
      printTable(
        `Concurrency: ${CONCURRENT} conversations of ${STEPS_CONC} tool steps + finish created at once (over ${USERS} users), against one alone; step = model request → next model request of the conversation, at the stub`,
        [
          'storage, model latency',
          'run',
          'step p50 ms',
          'step p99 ms',
          'model calls/s',
          'server CPU ms/call',
          'stub CPU ms/call',
          'server CPU/wall',
          'stub CPU/wall',
          'server event loop busy',
          'p99 before',
          'p99 target',
          'throughput before',
          'throughput target',
        ],
        rows,
        2,
      );
      console.log(
        [
          'step: model request → next model request of the same conversation (at the stub); calls/s: model calls / wall (first create → all idle)',
          "server CPU/wall, stub CPU/wall: each process's CPU time over the wall time (on a busy machine a process may want more than it gets); server event loop busy: its event-loop utilisation",
          ...notes,
        ].join('\n'),
      );
    }
  } catch (error) {
    failed = true;
    console.error(error);
  } finally {
    if (!(await runCleanups(cleanups))) failed = true;
  }
  console.log(`\ntotal: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  process.exitCode = failed ? 1 : 0;
}

if (process.env.BENCH_STEPS_ROLE === 'stub') await runStub();
else await main();
