/**
 * Tokens as they come (issue 36): what streaming a model's answer to live clients costs, with
 * the example server as a process (SQLite, the embedded default; the fake sandbox runtime), a
 * model stub in a second process that streams its answers, and the SSE clients in this one.
 *
 *   npm run bench:streaming
 *   BENCH_STREAM_CONCURRENT=50 BENCH_STREAM_ROUNDS=3 npm run bench:streaming
 *
 * Every answer is 30 pieces of text (each carries the wall-clock time the stub wrote it) and a
 * tool call (`echo`), for STEPS steps, then a last message. Each conversation has one client on
 * `/api/v1/app-conversations/{id}/events/stream`; a delta's latency is the time it arrives there
 * less the time the stub wrote it (both processes read the same clock).
 *
 * 1. Latency alone: one conversation, pieces 20 ms apart (a model writing 50 tokens a second):
 *    delta latency p50/p95. Target p95 ≤ 50 ms.
 * 2. CPU: the server's CPU per step (utime + stime from /proc) for the same answers streamed
 *    (`llm_stream: true`) and whole (`llm_stream: false`), rounds alternating; the median of the
 *    per-round ratios. Target ≤ 1.3×. Twice: the 30 pieces written at once (they reach the
 *    server in a few reads), and spread over 50 ms (each piece a read of its own, as a real
 *    model's are).
 * 3. At once: CONCURRENT conversations (one user each), a 50 ms-per-step model (its 30 pieces
 *    spread over the 50 ms), against one such conversation alone: delta latency p99 (≤ 250 ms),
 *    step p99 against the lone one's (≤ 5×; a step: between two model requests of a
 *    conversation, as the stub sees them), and the server's peak RSS (≤ 300 MiB).
 *
 * Network: 127.0.0.1 only. Numbers, not assertions: nothing here fails on timing.
 */
import { fork, spawn, type ChildProcess, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sseMessages } from '@acs/testing';
import { callApi, printTable, type BenchUser } from './report.js';
import { percentile, positiveInt } from './stats.js';

const CONCURRENT = positiveInt('BENCH_STREAM_CONCURRENT', 200);
const STEPS = positiveInt('BENCH_STREAM_STEPS', 8);
const ROUNDS = positiveInt('BENCH_STREAM_ROUNDS', 5);
const CPU_CONVERSATIONS = positiveInt('BENCH_STREAM_CPU_CONVERSATIONS', 20);
const PIECES = 30;
const exampleDir = new URL('../examples/standalone-server/', import.meta.url).pathname;
const wallMs = () => performance.timeOrigin + performance.now();
const sorted = (values: readonly number[]) => [...values].sort((a, b) => a - b);
const pct = (values: readonly number[], q: number) => percentile(sorted(values), q);
const median = (values: readonly number[]) => pct(values, 50);
const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : '–');

// =====================================================================================
// The model stub (child process): streams 30 timed pieces and a tool call, or answers whole.
// =====================================================================================

interface StubState {
  /** The time an answer takes, its pieces spread over it (0: at once). */
  stepMs: number;
  /** Request arrival times per conversation tag. */
  arrivals: Map<string, number[]>;
}

type ChatBody = { stream?: boolean; messages?: { role: string; content?: unknown }[] };

/** The tag of a conversation (in its first user message) and the step it is at (assistant messages so far). */
function stepOf(body: ChatBody): { tag: string; step: number } {
  const first = body.messages?.find((m) => m.role === 'user');
  const text = typeof first?.content === 'string' ? first.content : JSON.stringify(first?.content ?? '');
  const tag = /bench-stream (\S+)/.exec(text)?.[1] ?? 'untagged';
  return { tag, step: (body.messages ?? []).filter((m) => m.role === 'assistant').length };
}

function answerOf(step: number, tag: string) {
  const done = step >= STEPS;
  const toolCall = { id: `call_${tag}_${step}`, type: 'function', function: { name: 'execute_bash', arguments: '' } };
  const args = JSON.stringify({ command: `echo step-${step}`, security_risk: 'LOW' });
  return { done, toolCall, args };
}

const usage = { prompt_tokens: 200, completion_tokens: PIECES, total_tokens: 200 + PIECES };

async function streamAnswer(res: ServerResponse, tag: string, step: number, stepMs: number): Promise<void> {
  const { done, toolCall, args } = answerOf(step, tag);
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  const chunk = (delta: unknown, finish: string | null = null, extra: object = {}) =>
    res.write(
      `data: ${JSON.stringify({ id: `c-${tag}-${step}`, object: 'chat.completion.chunk', model: 'bench-model', choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`,
    );
  const gap = stepMs / PIECES;
  const started = wallMs();
  for (let i = 0; i < PIECES; i++) {
    const due = started + gap * (i + 1);
    const wait = due - wallMs();
    if (wait > 0.5) await new Promise((resolve) => setTimeout(resolve, wait));
    chunk({ content: `‹${wallMs().toFixed(3)}› ` });
  }
  if (!done) {
    chunk({ tool_calls: [{ index: 0, ...toolCall }] });
    chunk({ tool_calls: [{ index: 0, function: { arguments: args } }] });
  }
  chunk({}, done ? 'stop' : 'tool_calls');
  res.write(
    `data: ${JSON.stringify({ id: `c-${tag}-${step}`, object: 'chat.completion.chunk', model: 'bench-model', choices: [], usage })}\n\n`,
  );
  res.end('data: [DONE]\n\n');
}

async function wholeAnswer(res: ServerResponse, tag: string, step: number, stepMs: number): Promise<void> {
  const { done, toolCall, args } = answerOf(step, tag);
  if (stepMs > 0) await new Promise((resolve) => setTimeout(resolve, stepMs));
  const content = Array.from({ length: PIECES }, () => `‹${wallMs().toFixed(3)}› `).join('');
  const message = {
    role: 'assistant',
    content,
    ...(done ? {} : { tool_calls: [{ ...toolCall, function: { ...toolCall.function, arguments: args } }] }),
  };
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end(
    JSON.stringify({
      id: `c-${tag}-${step}`,
      object: 'chat.completion',
      model: 'bench-model',
      choices: [{ index: 0, message, finish_reason: done ? 'stop' : 'tool_calls' }],
      usage,
    }),
  );
}

async function runStub(): Promise<void> {
  const state: StubState = { stepMs: 0, arrivals: new Map() };
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as ChatBody;
      const { tag, step } = stepOf(body);
      const list = state.arrivals.get(tag) ?? [];
      list.push(wallMs());
      state.arrivals.set(tag, list);
      const answered = body.stream
        ? streamAnswer(res, tag, step, state.stepMs)
        : wholeAnswer(res, tag, step, state.stepMs);
      answered.catch(() => res.destroy());
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no port');
  process.on('disconnect', () => process.exit(0));
  process.on('message', (message: { type: string; id: number; stepMs?: number; prefix?: string }) => {
    if (message.type === 'stepMs') state.stepMs = message.stepMs ?? 0;
    const arrivals: Record<string, number[]> = {};
    if (message.type === 'arrivals')
      for (const [tag, list] of state.arrivals)
        if (tag.startsWith(message.prefix ?? '')) {
          arrivals[tag] = list;
          state.arrivals.delete(tag);
        }
    process.send?.({ id: message.id, arrivals });
  });
  process.send?.({ ready: `http://127.0.0.1:${address.port}/v1` });
}

interface Stub {
  baseUrl: string;
  setStepMs(stepMs: number): Promise<void>;
  arrivals(prefix: string): Promise<Record<string, number[]>>;
  child: ChildProcess;
}

async function startStub(): Promise<Stub> {
  const child = fork(fileURLToPath(import.meta.url), [], {
    execArgv: ['--conditions=@acs/source', '--import', 'tsx'],
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', BENCH_STREAM_ROLE: 'stub' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let nextId = 0;
  const waiting = new Map<number, (m: { arrivals: Record<string, number[]> }) => void>();
  const ready = new Promise<string>((resolve, reject) => {
    child.on('message', (m: { ready?: string; id?: number; arrivals?: Record<string, number[]> }) => {
      if (m.ready) resolve(m.ready);
      else if (m.id !== undefined) waiting.get(m.id)?.({ arrivals: m.arrivals ?? {} });
    });
    child.once('exit', () => reject(new Error('the model stub exited before it listened')));
  });
  const ask = (message: object) =>
    new Promise<{ arrivals: Record<string, number[]> }>((resolve) => {
      const id = ++nextId;
      waiting.set(id, resolve);
      child.send({ ...message, id });
    });
  return {
    baseUrl: await ready,
    child,
    setStepMs: async (stepMs) => void (await ask({ type: 'stepMs', stepMs })),
    arrivals: async (prefix) => (await ask({ type: 'arrivals', prefix })).arrivals,
  };
}

// =====================================================================================
// The example server (child process)
// =====================================================================================

interface Server {
  child: ChildProcessWithoutNullStreams;
  url: string;
  dataDir: string;
  stderr: () => string;
}

function usersOf(count: number, prefix: string): BenchUser[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `${prefix}-${i}`,
    key: `bench-stream-key-${prefix}-${i}-0123456789`,
  }));
}

async function startServer(users: readonly BenchUser[]): Promise<Server> {
  const dataDir = mkdtempSync(join(tmpdir(), 'acs-bench-stream-'));
  const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, '--conditions=@acs/source', '--import', 'tsx', 'src/main.ts'], {
    cwd: exampleDir,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      PORT: '0',
      DATA_DIR: dataDir,
      ACS_SANDBOXES: 'fake',
      ACS_SANDBOX_IDLE_MINUTES: '0',
      ACS_API_KEYS: users.map((u) => `${u.id}:${u.key}`).join(','),
      SESSION_API_KEY: 'bench-stream-default-key-0123456789',
      ACS_MAX_RUNNING_SANDBOXES: '1000',
      ACS_MAX_ITERATIONS: String(STEPS + 10),
      ACS_LLM_MAX_RETRIES: '0',
      LOG_LEVEL: 'warn',
    },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-100_000)));
  child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-100_000)));
  const deadline = Date.now() + 120_000;
  for (;;) {
    // The banner names the address (the log's own line is below LOG_LEVEL=warn).
    const url = /Agent Conversation Service: (http:\/\/127\.0\.0\.1:\d+)/.exec(`${out}\n${err}`)?.[1];
    if (url) return { child, url, dataDir, stderr: () => err };
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`the example server did not start within 120 s:\n${err.slice(-3000)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function stopServer(server: Server): Promise<void> {
  if (server.child.exitCode === null) {
    server.child.kill('SIGTERM');
    const timer = setTimeout(() => server.child.kill('SIGKILL'), 30_000);
    await once(server.child, 'exit');
    clearTimeout(timer);
  }
  rmSync(server.dataDir, { recursive: true, force: true });
}

/** The server's CPU time so far (user + system), in ms, from /proc. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command name.
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

const statusKib = (pid: number, field: string) =>
  Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);

// =====================================================================================
// Conversations and their SSE clients (this process)
// =====================================================================================

interface Watched {
  /** Delta latencies seen (ms). */
  latencies: number[];
  /** Resolves when the conversation's last message is stored (the stream saw a `finish` or the agent's last message). */
  done: Promise<void>;
  close(): void;
}

/** One SSE client on a conversation's V1 stream: delta latencies from the times the stub wrote in the text. */
async function watch(server: Server, user: BenchUser, id: string): Promise<Watched> {
  const abort = new AbortController();
  const response = await fetch(`${server.url}/api/v1/app-conversations/${id}/events/stream`, {
    headers: { 'X-Session-API-Key': user.key },
    signal: abort.signal,
  });
  if (!response.ok || !response.body) throw new Error(`stream of ${id}: HTTP ${response.status}`);
  const latencies: number[] = [];
  let finished: () => void = () => {};
  const done = new Promise<void>((resolve) => (finished = resolve));
  const onMessage = (name: string | undefined, data: string) => {
    if (name === 'delta') {
      const at = wallMs();
      const content = (JSON.parse(data) as { content: string | null }).content ?? '';
      for (const [, written] of content.matchAll(/‹([\d.]+)›/g)) latencies.push(at - Number(written));
      return;
    }
    // The agent's last message (it answered without a tool call), or an error, ends the conversation's run.
    const event = JSON.parse(data) as { kind?: string; source?: string };
    if ((event.kind === 'message' && event.source === 'agent') || event.kind === 'error') finished();
  };
  void (async () => {
    try {
      for await (const { fields } of sseMessages(response.body!))
        if (fields['data'] !== undefined) onMessage(fields['event'], fields['data']);
    } catch {
      /* closed */
    }
  })();
  return { latencies, done, close: () => abort.abort() };
}

async function configure(server: Server, users: readonly BenchUser[], stub: Stub, stream: boolean): Promise<void> {
  await Promise.all(
    users.map((user) =>
      callApi(server.url, user, 'POST', '/api/settings', {
        llm_model: 'openai/bench-model',
        llm_api_key: 'sk-bench',
        llm_base_url: stub.baseUrl,
        llm_stream: stream,
        confirmation_mode: false,
        enable_default_condenser: false,
      }),
    ),
  );
}

let tagNo = 0;

/** Starts one conversation per user at once, each watched by one SSE client; resolves when all are done. */
async function runConversations(
  server: Server,
  users: readonly BenchUser[],
  prefix: string,
): Promise<{ latencies: number[]; wallMs: number }> {
  const started = wallMs();
  const watched = await Promise.all(
    users.map(async (user) => {
      const tag = `${prefix}-${++tagNo}`;
      // Created, then watched: the stub waits for its first request anyway, and the agent's
      // first step starts once the sandbox is up, after the client is on.
      const created = (await callApi(server.url, user, 'POST', '/api/conversations', {
        initial_user_msg: `bench-stream ${tag} run echo ${STEPS} times`,
      })) as { conversation_id: string };
      return watch(server, user, created.conversation_id);
    }),
  );
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`conversations not done within 600 s:\n${server.stderr().slice(-3000)}`)),
      600_000,
    );
  });
  await Promise.race([Promise.all(watched.map((w) => w.done)), late]);
  clearTimeout(timer);
  for (const w of watched) w.close();
  return { latencies: watched.flatMap((w) => w.latencies), wallMs: wallMs() - started };
}

/** Steps (ms between two model requests of one conversation) of the conversations whose tags start with `prefix`. */
async function steps(stub: Stub, prefix: string): Promise<number[]> {
  const arrivals = await stub.arrivals(prefix);
  return Object.values(arrivals).flatMap((times) => times.slice(1).map((t, i) => t - times[i]!));
}

// =====================================================================================
// The parts
// =====================================================================================

async function latencyAlone(stub: Stub): Promise<string[][]> {
  const users = usersOf(1, 'alone');
  const server = await startServer(users);
  try {
    await configure(server, users, stub, true);
    await stub.setStepMs(20 * PIECES);
    const { latencies } = await runConversations(server, users, 'alone');
    return [
      [
        '1. delta latency alone, pieces 20 ms apart',
        `p50 ${ms(pct(latencies, 50))} ms, p95 ${ms(pct(latencies, 95))} ms (${latencies.length} deltas)`,
        'p95 ≤ 50 ms',
      ],
    ];
  } finally {
    await stopServer(server);
  }
}

async function cpuRatio(stub: Stub, stepMs: number): Promise<string[][]> {
  const streamed = usersOf(CPU_CONVERSATIONS, 'cpu-s');
  const whole = usersOf(CPU_CONVERSATIONS, 'cpu-w');
  const server = await startServer([...streamed, ...whole]);
  const perStep: Record<'streamed' | 'whole', number[]> = { streamed: [], whole: [] };
  try {
    await configure(server, streamed, stub, true);
    await configure(server, whole, stub, false);
    await stub.setStepMs(stepMs);
    const pid = server.child.pid!;
    // A warm-up of each, not counted.
    await runConversations(server, streamed.slice(0, 2), 'warm-s');
    await runConversations(server, whole.slice(0, 2), 'warm-w');
    for (let round = 0; round < ROUNDS; round++) {
      for (const variant of round % 2 === 0 ? (['streamed', 'whole'] as const) : (['whole', 'streamed'] as const)) {
        const before = cpuMs(pid);
        await runConversations(server, variant === 'streamed' ? streamed : whole, `cpu-${variant}-${round}`);
        perStep[variant].push((cpuMs(pid) - before) / (CPU_CONVERSATIONS * (STEPS + 1)));
      }
    }
  } finally {
    await stopServer(server);
  }
  const ratios = perStep.streamed.map((s, i) => s / perStep.whole[i]!);
  return [
    [
      `2. server CPU per step, ${PIECES} pieces ${stepMs === 0 ? 'at once' : `over ${stepMs} ms`}, streamed / whole`,
      `${ms(median(perStep.streamed))} / ${ms(median(perStep.whole))} ms → ${median(ratios).toFixed(2)}× (median of ${ROUNDS})`,
      '≤ 1.3×',
    ],
  ];
}

async function atOnce(stub: Stub): Promise<string[][]> {
  const users = usersOf(CONCURRENT, 'many');
  const lone = usersOf(1, 'lone');
  const server = await startServer([...users, ...lone]);
  try {
    await configure(server, [...users, ...lone], stub, true);
    await stub.setStepMs(50);
    const pid = server.child.pid!;
    const loneSteps: number[] = [];
    for (let i = 0; i < 3; i++) {
      await runConversations(server, lone, `lone${i}`);
      loneSteps.push(...(await steps(stub, `lone${i}`)));
    }
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    const cpuOf = () => ({ server: cpuMs(pid), stub: cpuMs(stub.child.pid!), bench: process.cpuUsage() });
    const spent = (before: ReturnType<typeof cpuOf>) => {
      const bench = process.cpuUsage(before.bench);
      return `server ${((cpuMs(pid) - before.server) / 1000).toFixed(1)} s, model stub ${((cpuMs(stub.child.pid!) - before.stub) / 1000).toFixed(1)} s, clients ${((bench.user + bench.system) / 1e6).toFixed(1)} s`;
    };
    let before = cpuOf();
    const many = await runConversations(server, users, 'many');
    const manyCpu = spent(before);
    const manySteps = await steps(stub, 'many');
    const rssMiB = statusKib(pid, 'VmHWM') / 1024;
    const ratio = pct(manySteps, 99) / pct(loneSteps, 99);
    // The same at once with whole answers: what streaming adds to the step under load (the three
    // processes share the machine's cores, so the stub's and the clients' work is the server's wait too).
    await configure(server, users, stub, false);
    before = cpuOf();
    await runConversations(server, users, 'whole');
    const wholeCpu = spent(before);
    const wholeSteps = await steps(stub, 'whole');
    const wholeRatio = pct(wholeSteps, 99) / pct(loneSteps, 99);
    return [
      [
        `3. ${CONCURRENT} at once, 50 ms model: delta latency`,
        `p50 ${ms(pct(many.latencies, 50))} ms, p99 ${ms(pct(many.latencies, 99))} ms (${many.latencies.length} deltas)`,
        'p99 ≤ 250 ms',
      ],
      [
        `3. step p99, ${CONCURRENT} at once / one alone`,
        `${ms(pct(manySteps, 99))} / ${ms(pct(loneSteps, 99))} ms → ${ratio.toFixed(2)}×`,
        '≤ 5×',
      ],
      [
        `3. the same with whole answers (llm_stream false)`,
        `${ms(pct(wholeSteps, 99))} / ${ms(pct(loneSteps, 99))} ms → ${wholeRatio.toFixed(2)}×`,
        'baseline',
      ],
      [`3. CPU, streamed`, manyCpu, ''],
      [`3. CPU, whole`, wholeCpu, ''],
      [`3. server peak RSS`, `${rssMiB.toFixed(0)} MiB`, '≤ 300 MiB'],
    ];
  } finally {
    await stopServer(server);
  }
}

if (process.env.BENCH_STREAM_ROLE === 'stub') {
  await runStub();
} else {
  console.log(
    `bench:streaming on ${cpus().length} cores; ${STEPS} steps per conversation, ${PIECES} pieces per answer`,
  );
  const stub = await startStub();
  try {
    const parts = (process.env.BENCH_STREAM_PARTS ?? 'latency,cpu,many').split(',');
    const rows: string[][] = [];
    if (parts.includes('latency')) rows.push(...(await latencyAlone(stub)));
    if (parts.includes('cpu')) rows.push(...(await cpuRatio(stub, 0)));
    if (parts.includes('cpu') || parts.includes('cpu-spread')) rows.push(...(await cpuRatio(stub, 50)));
    if (parts.includes('many')) rows.push(...(await atOnce(stub)));
    printTable(['measure', 'figure', 'target'], rows, 2);
  } finally {
    stub.child.kill();
  }
}
