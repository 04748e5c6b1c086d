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
 * Adding a storage kind (sqlite) is one entry in STORAGES below (or BENCH_STEPS_STORAGE).
 *
 * 1. CPU per step: one conversation of STEPS_LONG model calls, default condenser on; this
 *    process's CPU per model call against the stub's CPU per call, per storage, and each
 *    storage against memory. Variants alternate, ROUNDS times, medians.
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
import type { Result } from 'neverthrow';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import type { LlmClient, LlmRequest } from '@acs/core/ports';
import { StaticSandboxSpecCatalog } from '@acs/adapter-memory';
import { createOpenAiLlmClient } from '@acs/adapter-openai';
import { createAgent } from '@acs/agent';
import { completion, FakeSandboxRuntime, startFakeOpenAi, textOf } from '@acs/testing';
import { loadConfig } from '../examples/standalone-server/src/config.js';
import { openStorage, type Storage } from '../examples/standalone-server/src/storage.js';
import { runCleanups } from './cleanup.js';
import { printTable as printRows } from './report.js';
import { percentile, positiveInt } from './stats.js';

// ---- configuration ----

/** The storages measured; memory is the reference the others are compared with. Add `sqlite` here once it exists. */
const STORAGES = (process.env.BENCH_STEPS_STORAGE || 'memory,pglite').split(',').map((s) => s.trim()).filter(Boolean);
const STEPS_LONG = positiveInt('BENCH_STEPS_LONG', 600);
const ROUNDS = positiveInt('BENCH_STEPS_ROUNDS', 3);
const STEPS_GROWTH = positiveInt('BENCH_STEPS_GROWTH', 700);
const GROWTH_WINDOW = 40;
const CONCURRENT = positiveInt('BENCH_STEPS_CONCURRENT', 200);
const STEPS_CONC = positiveInt('BENCH_STEPS_CONC_STEPS', 20);
const SINGLE_RUNS = positiveInt('BENCH_STEPS_SINGLE_RUNS', 5);
const USERS = 10;

/** Measured before issue 27's changes (commit 286f8a0), `npm run bench:steps` on the 2-core CI machine; null where not measured. */
const BEFORE: Record<string, number | null> = {
  'cpu/step memory': null,
  'cpu/step pglite': null,
  'cpu ratio memory': null,
  'cpu ratio pglite': null,
  'storage ratio pglite': null,
  'growth engine': null,
  'growth call': null,
  'growth step': null,
  'p99 ratio memory': null,
  'p99 ratio pglite': null,
  'throughput ratio memory': null,
  'throughput ratio pglite': null,
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
const median = (values: readonly number[]) => percentile([...values].sort((a, b) => a - b), 50);
const p = (values: readonly number[], q: number) => percentile([...values].sort((a, b) => a - b), q);
const fixed = (digits: number) => (value: number | null | undefined) => (value !== null && value !== undefined && Number.isFinite(value) ? value.toFixed(digits) : '–');
const f2 = fixed(2);
const f1 = fixed(1);
const x = (value: number | null | undefined) => (value !== null && value !== undefined && Number.isFinite(value) ? `${value.toFixed(2)}×` : '–');
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
      return { name: 'str_replace_editor', args: { command: 'create', path: `${WORKDIR}/f${n}.txt`, file_text: `line ${n} of the benchmark\n` } };
    case 1:
      return { name: 'str_replace_editor', args: { command: 'view', path: `${WORKDIR}/f${n}.txt` } };
    default:
      return { name: 'execute_bash', args: { command: `echo hi-${n}` } };
  }
}

type ToStub = { id: number; type: 'cpu' } | { id: number; type: 'arrivals'; prefix: string } | { id: number; type: 'close' };
type FromStub = { type: 'ready'; baseUrl: string } | { type: 'reply'; id: number; cpuUs?: number; calls?: number; arrivals?: Record<string, number[]> };

async function runStub(): Promise<void> {
  const fake = await startFakeOpenAi({ keepRequests: false });
  const traces = new Map<string, { k: number; arrivals: number[] }>();
  let calls = 0;
  fake.script((request) => {
    const at = performance.timeOrigin + performance.now();
    calls++;
    const usage = { prompt_tokens: Math.ceil(request.text.length / 4), completion_tokens: 30, total_tokens: Math.ceil(request.text.length / 4) + 30 };
    // The condenser's summary request comes without tools (and without the task's message).
    if (!request.body.tools?.length) {
      return { status: 200, body: completion({ id: `sum-${calls}`, model: 'bench-model', content: 'USER_CONTEXT: a benchmark task. COMPLETED: steps. PENDING: more steps.', usage }) };
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
      body: completion({
        id: `chatcmpl-${tag}-${k}`,
        model: 'bench-model',
        content: null,
        tool_calls: [{ id: `call_${tag}_${k}`, type: 'function', function: { name: t.name, arguments: JSON.stringify(t.args) } }],
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
  close(): Promise<void>;
}

async function startStub(cleanups: (() => Promise<void>)[]): Promise<Stub> {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), [], {
    execArgv: ['--conditions=@acs/source', '--import', 'tsx', ...(process.env.BENCH_STUB_NODE_ARGS ?? '').split(' ').filter(Boolean)],
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
  const request = (message: Omit<ToStub, 'id'>) =>
    new Promise<FromStub & { type: 'reply' }>((resolve, reject) => {
      const id = ++nextId;
      pending.set(id, (m) => {
        pending.delete(id);
        resolve(m);
      });
      child.send({ ...message, id } as ToStub, (error) => error && reject(error));
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
    close: async () => {
      await Promise.race([request({ type: 'close' }), sleep(5_000, undefined, { ref: false })]);
      await Promise.race([exited, sleep(5_000, undefined, { ref: false })]);
    },
  };
}

// =====================================================================================
// The server (this process)
// =====================================================================================

/** One model call seen from this process: CPU used before it (since the last one ended), inside it, and the prompt's serialisation. */
interface CallSample {
  startUs: number;
  endUs: number;
  /** CPU of JSON.stringify(messages) for this call's prompt (timed after the call, outside both windows). */
  serialiseUs: number;
  promptChars: number;
  agent: boolean;
}

/** The model port, sampling this process's CPU time at each call's start and end (only meaningful with one conversation running). */
class SampledLlm implements LlmClient {
  samples: CallSample[] = [];
  sampling = false;
  constructor(private readonly inner: LlmClient) {}
  complete(request: LlmRequest) {
    if (!this.sampling) return this.inner.complete(request);
    const startUs = cpuNowUs();
    return this.inner.complete(request).map((answer) => {
      const endUs = cpuNowUs();
      const s0 = cpuNowUs();
      const promptChars = JSON.stringify(request.messages).length;
      const serialiseUs = cpuNowUs() - s0;
      this.samples.push({ startUs, endUs, serialiseUs, promptChars, agent: request.tools.length > 0 });
      return answer;
    });
  }
}

interface Server {
  service: AgentConversationService;
  llm: SampledLlm;
  close(): Promise<void>;
}

async function openServer(kind: string, maxIterations: number): Promise<Server> {
  const dataDir = await mkdtemp(join(tmpdir(), 'acs-bench-steps-'));
  const config = loadConfig({
    ACS_STORAGE: kind,
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
    const llm = new SampledLlm(createOpenAiLlmClient({ timeoutMs: config.llm.timeoutMs, maxRetries: config.llm.maxRetries }));
    const service = createAgentConversationService(
      {
        ...storage.ports,
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
      llm,
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
      server.service.settings.store(userOf(i), { llm_model: 'openai/bench-model', llm_api_key: 'sk-bench-fake', llm_base_url: stub.baseUrl, enable_default_condenser: condenser }),
      'store settings',
    );
  }
}

let tagNo = 0;

/** Creates `count` conversations of `steps` tool steps at once and waits until the service is idle; the wall time (ms) and the tags. */
async function runConversations(server: Server, count: number, steps: number): Promise<{ wallMs: number; tags: string[]; prefix: string }> {
  const prefix = `t${++tagNo}x`;
  const tags = Array.from({ length: count }, (_, i) => `${prefix}${i}`);
  const started = performance.now();
  const ids = await Promise.all(
    tags.map((tag, i) => must(server.service.conversations.create(userOf(i), { initial_user_msg: `bench-steps ${tag} steps=${steps}: do the task` }), 'create')),
  );
  await server.service.idle();
  const wallMs = performance.now() - started;
  const records = await Promise.all(ids.map((c, i) => must(server.service.conversations.getMany(userOf(i), [c.conversation_id]), 'read')));
  const unfinished = records.filter(([r]) => r?.record.execution_status !== 'finished');
  if (unfinished.length > 0) {
    const [first] = unfinished[0]!;
    const errors = first ? await must(server.service.conversations.searchEvents(first.record.user_id, first.record.id, { after: 0, kinds: ['error'], limit: 5 }), 'errors') : null;
    throw new Error(`${unfinished.length} of ${count} conversations did not finish (first: ${first?.record.execution_status}, ${JSON.stringify(errors?.items)})`);
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
}

async function cpuRun(storage: string, stub: Stub): Promise<CpuRun> {
  const server = await openServer(storage, STEPS_LONG + 10);
  try {
    await configureUsers(server, stub, true);
    // A short warm-up conversation: JIT, the first sandbox, the storage's caches.
    await runConversations(server, 1, 30);
    const stubBefore = await stub.cpu();
    const before = cpuNowUs();
    await runConversations(server, 1, STEPS_LONG);
    const after = cpuNowUs();
    const stubAfter = await stub.cpu();
    const calls = stubAfter.calls - stubBefore.calls;
    return { storage, serverUsPerCall: (after - before) / calls, stubUsPerCall: (stubAfter.cpuUs - stubBefore.cpuUs) / calls };
  } finally {
    await server.close();
  }
}

// =====================================================================================
// Part 2: growth with the log, condenser off
// =====================================================================================

interface GrowthRun {
  samples: CallSample[];
}

async function growthRun(stub: Stub): Promise<GrowthRun> {
  const server = await openServer('memory', STEPS_GROWTH + 10);
  try {
    await configureUsers(server, stub, false);
    await runConversations(server, 1, 30);
    server.llm.sampling = true;
    server.llm.samples = [];
    await runConversations(server, 1, STEPS_GROWTH);
    server.llm.sampling = false;
    return { samples: server.llm.samples };
  } finally {
    await server.close();
  }
}

/** Step k's costs (µs): engine = CPU from the end of call k-1 to the start of call k; call = CPU inside call k less its prompt's serialisation. */
function stepCosts(samples: readonly CallSample[], from: number, to: number) {
  const engine: number[] = [];
  const call: number[] = [];
  const serialise: number[] = [];
  for (let k = Math.max(1, from); k < Math.min(samples.length, to); k++) {
    const prev = samples[k - 1]!;
    const s = samples[k]!;
    engine.push(s.startUs - (prev.endUs + prev.serialiseUs));
    call.push(s.endUs - s.startUs - s.serialiseUs);
    serialise.push(s.serialiseUs);
  }
  return { engine: mean(engine), call: mean(call), serialise: mean(serialise) };
}

// =====================================================================================
// Part 3: concurrency
// =====================================================================================

interface ConcurrencyRun {
  storage: string;
  single: { wallMs: number; calls: number; steps: number[] }[];
  many: { wallMs: number; calls: number; steps: number[] };
}

const stepLatencies = (arrivals: Record<string, number[]>) =>
  Object.values(arrivals).flatMap((a) => a.slice(1).map((t, i) => t - a[i]!));

async function concurrencyRun(storage: string, stub: Stub): Promise<ConcurrencyRun> {
  const server = await openServer(storage, STEPS_CONC + 10);
  try {
    await configureUsers(server, stub, true);
    await runConversations(server, 10, STEPS_CONC);
    const single: ConcurrencyRun['single'] = [];
    for (let i = 0; i < SINGLE_RUNS; i++) {
      const run = await runConversations(server, 1, STEPS_CONC);
      const arrivals = await stub.arrivals(run.prefix);
      single.push({ wallMs: run.wallMs, calls: sum(Object.values(arrivals).map((a) => a.length)), steps: stepLatencies(arrivals) });
    }
    const run = await runConversations(server, CONCURRENT, STEPS_CONC);
    const arrivals = await stub.arrivals(run.prefix);
    const many = { wallMs: run.wallMs, calls: sum(Object.values(arrivals).map((a) => a.length)), steps: stepLatencies(arrivals) };
    return { storage, single, many };
  } finally {
    await server.close();
  }
}

// =====================================================================================
// main
// =====================================================================================

function printTable(title: string, header: readonly string[], rows: readonly (readonly string[])[], leftColumns = 1): void {
  console.log();
  console.log(title);
  printRows(header, rows, leftColumns);
}

const PARTS = new Set((process.env.BENCH_STEPS_PARTS || 'cpu,growth,concurrency').split(',').map((s) => s.trim()));

async function main(): Promise<void> {
  const cleanups: (() => Promise<void>)[] = [];
  let failed = false;
  const started = performance.now();
  try {
    const cpu = cpus();
    console.log(`machine: ${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, node ${process.version}; storages ${STORAGES.join(', ')}`);
    const stub = await startStub(cleanups);
    cleanups.push(() => stub.close());

    if (PARTS.has('cpu')) {
      console.log(`part 1: one conversation of ${STEPS_LONG} steps, condenser on, ${ROUNDS} rounds × ${STORAGES.join('/')} alternating …`);
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
        ['storage', 'server ms/call', 'before', 'stub ms/call', 'server/stub', 'before', 'target', 'vs memory (server/stub)', 'before', 'target', 'vs memory (ms)'],
        rows,
      );
    }

    if (PARTS.has('growth')) {
      console.log(`part 2: one conversation of ${STEPS_GROWTH} steps, condenser off, memory …`);
      const run = await growthRun(stub);
      const events = (k: number) => 2 + 3 * k;
      const early = Math.max(1, Math.round((100 - 2) / 3));
      const late = Math.min(run.samples.length - GROWTH_WINDOW, Math.round((2000 - 2) / 3));
      const e = stepCosts(run.samples, early - GROWTH_WINDOW / 2, early + GROWTH_WINDOW / 2);
      const l = stepCosts(run.samples, late - GROWTH_WINDOW / 2, late + GROWTH_WINDOW / 2);
      const rows = [
        ['engine, between model calls', f1(e.engine), f1(l.engine), x(l.engine / e.engine), x(BEFORE['growth engine']), ''],
        ['inside the model call, less serialisation', f1(e.call), f1(l.call), x(l.call / e.call), x(BEFORE['growth call']), ''],
        ['step without serialisation', f1(e.engine + e.call), f1(l.engine + l.call), x((l.engine + l.call) / (e.engine + e.call)), x(BEFORE['growth step']), '≤ 1.30×'],
        ['prompt serialisation (JSON.stringify)', f1(e.serialise), f1(l.serialise), x(l.serialise / e.serialise), '', ''],
        ['prompt chars', String(run.samples[early]?.promptChars ?? '–'), String(run.samples[late]?.promptChars ?? '–'), x((run.samples[late]?.promptChars ?? 0) / (run.samples[early]?.promptChars ?? 1)), '', ''],
      ];
      printTable(
        `Step CPU as the log grows (condenser off, memory): µs per step, mean of ${GROWTH_WINDOW} steps around event ${events(early)} and event ${events(late)}`,
        ['part of a step', `event ~${events(early)}`, `event ~${events(late)}`, 'growth', 'before', 'target'],
        rows,
      );
    }

    if (PARTS.has('concurrency')) {
      const rows: string[][] = [];
      for (const storage of STORAGES) {
        console.log(`part 3: ${CONCURRENT} conversations of ${STEPS_CONC} steps at once vs 1 alone (${SINGLE_RUNS} runs), ${storage} …`);
        const r = await concurrencyRun(storage, stub);
        const singleSteps = r.single.flatMap((s) => s.steps);
        const singleRate = median(r.single.map((s) => s.calls / (s.wallMs / 1000)));
        const manyRate = r.many.calls / (r.many.wallMs / 1000);
        rows.push([storage, `1 alone (${SINGLE_RUNS} runs)`, f2(p(singleSteps, 50)), f2(p(singleSteps, 99)), f1(singleRate), '', '', '', '']);
        rows.push([storage, `${CONCURRENT} at once`, f2(p(r.many.steps, 50)), f2(p(r.many.steps, 99)), f1(manyRate), '', '', '', '']);
        rows.push([
          storage,
          `${CONCURRENT} vs 1`,
          x(p(r.many.steps, 50) / p(singleSteps, 50)),
          x(p(r.many.steps, 99) / p(singleSteps, 99)),
          x(manyRate / singleRate),
          x(BEFORE[`p99 ratio ${storage}`]),
          '≤ 5.00×',
          x(BEFORE[`throughput ratio ${storage}`]),
          '≥ 3.00×',
        ]);
      }
      printTable(
        `Concurrency: ${CONCURRENT} conversations of ${STEPS_CONC} tool steps + finish created at once (over ${USERS} users), against one alone; step = model request → next model request of the conversation, at the stub`,
        ['storage', 'run', 'step p50 ms', 'step p99 ms', 'model calls/s', 'p99 before', 'p99 target', 'throughput before', 'throughput target'],
        rows,
        2,
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
