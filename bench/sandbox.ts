/**
 * Sandbox benchmark: our Docker sandboxes behind the HTTP API against the bare engine,
 * measured in the same run with the variants alternating, so both share the machine's noise.
 *
 *   npm run bench:sandbox                      # 10 iterations per measurement and variant
 *   BENCH_SANDBOXES=30 npm run bench:sandbox   # more
 *
 * - start: `POST /api/v1/sandboxes`, then `GET /api/v1/sandboxes/{id}` every 20 ms until
 *   RUNNING; against create + start of a container of the same image and working directory
 *   (what `docker run -d` does), then `true` through docker exec until it succeeds (RUNNING
 *   means "answers an exec" for ours too).
 * - pause/resume: POST …/pause, POST …/resume, GET until RUNNING; against pause + unpause +
 *   an exec of `true`.
 * - warm pool: the start above with a second service that keeps one warm sandbox
 *   (`sandboxPool: { bookworm: 1 }`): `POST /api/v1/sandboxes` claims it (RUNNING in the answer;
 *   the pool is refilled untimed before each iteration). And a new conversation's first command:
 *   `POST /api/conversations` (a scripted model whose first step is execute_bash `true`) until
 *   that step's observation can be read from `GET /api/v1/app-conversations/{id}/events`, with
 *   the pool and without (ours, cold); both against the bare create + start + exec. Aim: ≤ 0.3×.
 *
 * The bare variants use the same dockerode client (same socket, same negotiated API version)
 * as our runtime. Every engine call is timed (by wrapping that client's modem.dial) to show
 * where the time goes; a diagnostic variant, "bare + our config", creates a container with the
 * settings our runtime gives its containers (workspace volume, init, limits, capabilities),
 * which separates the engine's cost of that configuration from our service's own overhead.
 *
 * Needs a Docker engine and the image acs-sandbox:bookworm (scripts/build-sandbox-image.sh).
 * Everything it creates is named acs-bench-… and removed at the end, also on failure.
 * Numbers, not assertions: nothing here fails on timing.
 */
import { cpus, totalmem } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type Docker from 'dockerode';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import { createDockerRuntime } from '@acs/adapter-docker';
import { createMemoryPorts, ScriptedLlm } from '@acs/testing';
import { serve } from './serve.js';
import { percentile, positiveInt } from './stats.js';
import { runCleanups } from './cleanup.js';
import { printTable } from './report.js';
import { createAgent } from '@acs/agent';

const ITERATIONS = positiveInt('BENCH_SANDBOXES', 10);
const WARMUP = 1;
const IMAGE = 'acs-sandbox:bookworm';
const WORKING_DIR = '/workspace';
const PREFIX = 'acs-bench-';
const CLIENT_POLL_MS = 20;
/** How often the service inspects a starting sandbox (the service's default). */
const SERVICE_POLL_MS = positiveInt('BENCH_SERVICE_POLL_MS', 250);
const RUNNING_TIMEOUT_MS = 60_000;
const AIM = 1.3;
/** What the warm pool aims at, against the bare engine's create + start + exec (p50). */
const WARM_AIM = 0.3;
const API_KEY = 'bench-sandbox-api-key-0001';

interface Stats {
  p50: number;
  mean: number;
  min: number;
  max: number;
}

function stats(values: readonly number[]): Stats {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    p50: percentile(sorted, 50),
    mean: sorted.reduce((sum, v) => sum + v, 0) / sorted.length,
    min: sorted[0] ?? Number.NaN,
    max: sorted[sorted.length - 1] ?? Number.NaN,
  };
}

const mean = (values: readonly number[]) =>
  values.length === 0 ? 0 : values.reduce((sum, v) => sum + v, 0) / values.length;

// ---- engine call timing ----

/** One Docker API call during a timed section; times in ms from the section's start. */
interface EngineCall {
  label: string;
  start: number;
  end: number;
}

interface Sample {
  total: number;
  calls: EngineCall[];
  /** Named moments (ms from the start) the measured code noted. */
  marks: Record<string, number>;
}

/** Groups Docker API paths into the operations they are. */
function engineCallLabel(method: string | undefined, path: string): string {
  const p = path.split('?')[0] ?? path;
  if (p === '/volumes/create') return 'volume create';
  if (p === '/containers/create') return 'container create';
  const container = /^\/containers\/[^/]+\/(start|json|exec|pause|unpause)$/.exec(p)?.[1];
  if (container) {
    const names: Record<string, string> = {
      start: 'container start',
      json: 'container inspect',
      exec: 'exec',
      pause: 'pause',
      unpause: 'unpause',
    };
    return names[container] ?? container;
  }
  // An exec is three calls (create, start until the output ends, inspect for the exit code): one row.
  if (/^\/exec\/[^/]+\/(start|json)$/.test(p)) return 'exec';
  return `${method ?? 'GET'} ${p}`;
}

/**
 * Times every call made through `docker` while a section runs. For a hijacked exec
 * start, the call lasts until its output stream ends (the command has exited).
 */
class EngineRecorder {
  #current: { t0: number; calls: EngineCall[]; marks: Record<string, number> } | null = null;

  constructor(docker: Docker) {
    const modem = docker.modem;
    const dial = modem.dial.bind(modem);
    modem.dial = (options, callback) => {
      const section = this.#current;
      if (!section) return dial(options, callback);
      const label = engineCallLabel(options.method, options.path);
      const start = performance.now();
      let recorded = false;
      const record = () => {
        if (recorded) return;
        recorded = true;
        section.calls.push({ label, start: start - section.t0, end: performance.now() - section.t0 });
      };
      dial(options, (error, result) => {
        const stream = result as NodeJS.ReadableStream | null;
        if (!error && options.hijack && stream && typeof stream.once === 'function') {
          stream.once('end', record);
          stream.once('close', record);
        } else {
          record();
        }
        callback?.(error, result);
      });
    };
  }

  /** Runs fn as one timed section (sections never overlap here). */
  async time(fn: (mark: (name: string) => void) => Promise<void>): Promise<Sample> {
    const section = { t0: performance.now(), calls: [] as EngineCall[], marks: {} as Record<string, number> };
    this.#current = section;
    try {
      await fn((name) => (section.marks[name] = performance.now() - section.t0));
    } finally {
      this.#current = null;
    }
    return { total: performance.now() - section.t0, calls: section.calls, marks: section.marks };
  }
}

// ---- the two sides ----

interface SandboxInfo {
  id: string;
  status: string;
  status_detail: string | null;
}

/** One request; throws on anything but 2xx. */
async function call(base: string, method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(base + path, {
    method,
    headers: { 'X-Session-API-Key': API_KEY, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: HTTP ${response.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as unknown;
}

/** GETs the sandbox every CLIENT_POLL_MS until it is RUNNING; returns how many GETs that took. */
async function untilRunning(base: string, id: string): Promise<number> {
  const deadline = performance.now() + RUNNING_TIMEOUT_MS;
  for (let polls = 1; ; polls++) {
    checkInterrupted();
    const info = (await call(base, 'GET', `/api/v1/sandboxes/${id}`)) as SandboxInfo;
    if (info.status === 'RUNNING') return polls;
    if (info.status !== 'STARTING')
      throw new Error(`sandbox ${id} is ${info.status}${info.status_detail ? `: ${info.status_detail}` : ''}`);
    if (performance.now() > deadline)
      throw new Error(`sandbox ${id} was not RUNNING within ${RUNNING_TIMEOUT_MS / 1000} s`);
    await sleep(CLIENT_POLL_MS);
  }
}

/** Runs `true` in the container until it exits 0 (what "answers an exec" means). */
async function execTrue(container: Docker.Container): Promise<void> {
  const deadline = performance.now() + RUNNING_TIMEOUT_MS;
  for (;;) {
    checkInterrupted();
    try {
      const exec = await container.exec({
        Cmd: ['true'],
        AttachStdout: true,
        AttachStderr: true,
        AttachStdin: false,
        Tty: false,
      });
      const stream = await exec.start({ hijack: true, stdin: false });
      await new Promise<void>((resolve, reject) => {
        stream.once('end', resolve);
        stream.once('close', resolve);
        stream.once('error', reject);
        stream.resume();
      });
      if ((await exec.inspect()).ExitCode === 0) return;
    } catch (error) {
      if (performance.now() > deadline) throw error;
    }
    if (performance.now() > deadline)
      throw new Error(`container ${container.id} did not answer an exec within ${RUNNING_TIMEOUT_MS / 1000} s`);
  }
}

/** Container settings our runtime used for one of its containers, read back from the engine. */
interface OurConfig {
  env: string[];
  hostConfig: Docker.HostConfig;
}

async function readOurConfig(docker: Docker, containerName: string): Promise<OurConfig> {
  const info = await docker.getContainer(containerName).inspect();
  const h = info.HostConfig;
  return {
    env: info.Config.Env,
    hostConfig: {
      Privileged: h.Privileged,
      // Typed `any` by @types/dockerode; the engine returns string lists.
      CapDrop: (h.CapDrop as string[] | null) ?? [],
      CapAdd: (h.CapAdd as string[] | null) ?? [],
      SecurityOpt: (h.SecurityOpt as string[] | null) ?? [],
      Init: h.Init ?? false,
      Memory: h.Memory,
      NanoCpus: h.NanoCpus,
      PidsLimit: h.PidsLimit,
      NetworkMode: h.NetworkMode,
      RestartPolicy: h.RestartPolicy,
    },
  };
}

// ---- measurements ----

type Variant = 'ours' | 'bare' | 'config' | 'warm';
const VARIANT_NAMES: Record<Variant, string> = {
  ours: 'ours (HTTP API)',
  bare: 'bare engine',
  config: 'bare + our config',
  warm: 'ours, warm pool',
};

interface Bench {
  base: string;
  /** The service that keeps a warm sandbox, and its URL. */
  warm: { base: string; service: AgentConversationService };
  /** The service without a pool (base), in process, for cleaning up after conversations. */
  cold: AgentConversationService;
  docker: Docker;
  recorder: EngineRecorder;
  ourConfig: OurConfig;
  serial: number;
}

let interruption: NodeJS.Signals | null = null;

/** Throws when a signal asked the benchmark to stop; called between steps. */
function checkInterrupted(): void {
  if (interruption) throw new Error(`interrupted by ${interruption}`);
}

const unlessNotFound = (error: unknown) => {
  if ((error as { statusCode?: number }).statusCode !== 404) throw error;
};

/** Removes everything named acs-bench-…: containers (with anonymous volumes), then volumes. */
async function sweep(docker: Docker): Promise<number> {
  const containers = (await docker.listContainers({ all: true, filters: { name: [PREFIX] } })).filter((c) =>
    c.Names.some((n) => n.startsWith(`/${PREFIX}`)),
  );
  await Promise.all(containers.map((c) => docker.getContainer(c.Id).remove({ force: true, v: true })));
  const volumes = ((await docker.listVolumes()).Volumes ?? []).filter((v) => v.Name.startsWith(PREFIX));
  await Promise.all(volumes.map((v) => docker.getVolume(v.Name).remove()));
  return containers.length + volumes.length;
}

async function startOurs(bench: Bench): Promise<Sample> {
  let id = '';
  let polls = 0;
  const sample = await bench.recorder.time(async (mark) => {
    id = ((await call(bench.base, 'POST', '/api/v1/sandboxes', {})) as SandboxInfo).id;
    mark('post');
    polls = await untilRunning(bench.base, id);
  });
  sample.marks.polls = polls;
  await call(bench.base, 'DELETE', `/api/v1/sandboxes/${id}`);
  return sample;
}

/** Waits (untimed) until the warm service's pool has a ready sandbox. */
async function untilPoolReady(service: AgentConversationService): Promise<void> {
  const deadline = performance.now() + RUNNING_TIMEOUT_MS;
  for (;;) {
    checkInterrupted();
    const pool = await service.sandboxes.poolStatus();
    if (pool.isOk() && (pool.value.bookworm?.ready ?? 0) >= 1) return;
    if (performance.now() > deadline)
      throw new Error(`the warm pool had no ready sandbox within ${RUNNING_TIMEOUT_MS / 1000} s`);
    await sleep(CLIENT_POLL_MS);
  }
}

async function startWarm(bench: Bench): Promise<Sample> {
  await untilPoolReady(bench.warm.service);
  let id = '';
  let polls = 0;
  const sample = await bench.recorder.time(async (mark) => {
    const info = (await call(bench.warm.base, 'POST', '/api/v1/sandboxes', {})) as SandboxInfo;
    id = info.id;
    mark('post');
    polls = info.status === 'RUNNING' ? 0 : await untilRunning(bench.warm.base, id);
  });
  sample.marks.polls = polls;
  await call(bench.warm.base, 'DELETE', `/api/v1/sandboxes/${id}`);
  return sample;
}

/** A new conversation (V0) until the observation of its first command (execute_bash `true`) can be read. */
async function firstCommand(bench: Bench, warm: boolean): Promise<Sample> {
  const base = warm ? bench.warm.base : bench.base;
  const service = warm ? bench.warm.service : bench.cold;
  if (warm) await untilPoolReady(service);
  let id = '';
  const sample = await bench.recorder.time(async (mark) => {
    id = (
      (await call(base, 'POST', '/api/conversations', { initial_user_msg: 'run true' })) as { conversation_id: string }
    ).conversation_id;
    mark('post');
    const deadline = performance.now() + RUNNING_TIMEOUT_MS;
    for (;;) {
      checkInterrupted();
      const page = (await call(base, 'GET', `/api/v1/app-conversations/${id}/events?kind=observation`)) as {
        items: { kind: string; tool_name?: string }[];
      };
      if (page.items.some((e) => e.tool_name === 'execute_bash')) return;
      if (performance.now() > deadline)
        throw new Error(`conversation ${id} ran no command within ${RUNNING_TIMEOUT_MS / 1000} s`);
      await sleep(CLIENT_POLL_MS / 4);
    }
  });
  // Untimed: the conversation's sandbox goes (the conversation stops with it).
  const record = await service.conversations.get('bench', id);
  const sandboxId = record.isOk() ? record.value.record.sandbox_id : null;
  await service.idle();
  if (sandboxId) await service.sandboxes.delete('bench', sandboxId);
  return sample;
}

/** A model whose first step runs `true` and which then finishes. */
const firstCommandModel = () =>
  new ScriptedLlm()
    .forgetRequests()
    .respondWith((request) =>
      request.messages.some((m) => m.role === 'tool')
        ? { content: 'done' }
        : { tool_calls: [{ name: 'execute_bash', arguments: { command: 'true' } }] },
    );

async function startBare(bench: Bench, withOurConfig: boolean): Promise<Sample> {
  const name = `${PREFIX}${withOurConfig ? 'config' : 'bare'}-${bench.serial++}`;
  const volume = `${name}-workspace`;
  let container: Docker.Container | null = null;
  try {
    return await bench.recorder.time(async () => {
      if (withOurConfig) await bench.docker.createVolume({ Name: volume });
      container = await bench.docker.createContainer({
        name,
        Image: IMAGE,
        WorkingDir: WORKING_DIR,
        ...(withOurConfig
          ? {
              Env: bench.ourConfig.env,
              HostConfig: {
                ...bench.ourConfig.hostConfig,
                Mounts: [{ Type: 'volume', Source: volume, Target: WORKING_DIR }],
              },
            }
          : {}),
      });
      await container.start();
      await execTrue(container);
    });
  } finally {
    // Not found: creating it failed, and that error is the one to report.
    await bench.docker.getContainer(name).remove({ force: true, v: true }).catch(unlessNotFound);
    if (withOurConfig) await bench.docker.getVolume(volume).remove().catch(unlessNotFound);
  }
}

async function pauseResumeOurs(bench: Bench, id: string): Promise<Sample> {
  let polls = 0;
  const sample = await bench.recorder.time(async () => {
    await call(bench.base, 'POST', `/api/v1/sandboxes/${id}/pause`);
    await call(bench.base, 'POST', `/api/v1/sandboxes/${id}/resume`);
    polls = await untilRunning(bench.base, id);
  });
  sample.marks.polls = polls;
  return sample;
}

async function pauseResumeBare(bench: Bench, container: Docker.Container): Promise<Sample> {
  return bench.recorder.time(async () => {
    await container.pause();
    await container.unpause();
    await execTrue(container);
  });
}

/** Runs each variant once per iteration, rotating which goes first; the first WARMUP rounds are not kept. */
async function alternate(
  variants: readonly Variant[],
  run: (variant: Variant) => Promise<Sample>,
): Promise<Map<Variant, Sample[]>> {
  const samples = new Map<Variant, Sample[]>(variants.map((v) => [v, []]));
  for (let i = 0; i < WARMUP + ITERATIONS; i++) {
    const order = variants.map((_, k) => variants[(i + k) % variants.length] as Variant);
    for (const variant of order) {
      checkInterrupted();
      const sample = await run(variant);
      if (i >= WARMUP) samples.get(variant)?.push(sample);
    }
  }
  return samples;
}

// ---- printing ----

const ms = (value: number) => value.toFixed(1);

interface Measurement {
  name: string;
  samples: Map<Variant, Sample[]>;
}

/** The warm pool's p50 against the bare engine's, and whether it meets WARM_AIM. */
function printWarmAim(name: string, samples: Map<Variant, Sample[]>): void {
  const p50 = (v: Variant) => stats((samples.get(v) ?? []).map((s) => s.total)).p50;
  const ratio = p50('warm') / p50('bare');
  const cold = samples.has('ours') ? `; ours without a pool ${(p50('ours') / p50('bare')).toFixed(2)}×` : '';
  console.log(
    `${name}, warm pool aim (within ${WARM_AIM}× of the bare engine, p50): ${ratio <= WARM_AIM ? 'met' : 'NOT met'} at ${ratio.toFixed(2)}× (${ms(p50('warm'))} ms vs ${ms(p50('bare'))} ms${cold})`,
  );
}

function printResults(measurements: readonly Measurement[]): void {
  const rows: string[][] = [];
  for (const m of measurements) {
    const bare = stats((m.samples.get('bare') ?? []).map((s) => s.total));
    for (const [variant, samples] of m.samples) {
      const s = stats(samples.map((x) => x.total));
      const isBare = variant === 'bare';
      rows.push([
        m.name,
        VARIANT_NAMES[variant],
        ms(s.p50),
        ms(s.mean),
        ms(s.min),
        ms(s.max),
        isBare ? '' : `${(s.p50 / bare.p50).toFixed(2)}×`,
        isBare ? '' : `${(s.mean / bare.mean).toFixed(2)}×`,
      ]);
    }
  }
  printTable(
    ['measurement', 'variant', 'p50 ms', 'mean ms', 'min ms', 'max ms', 'p50 vs bare', 'mean vs bare'],
    rows,
    2,
  );
}

/** Mean time per iteration in each kind of engine call, and what is left outside the engine. */
function printPhases(title: string, samples: Map<Variant, Sample[]>): void {
  const variants = [...samples.keys()];
  const labels: string[] = [];
  for (const list of samples.values())
    for (const s of list) for (const c of s.calls) if (!labels.includes(c.label)) labels.push(c.label);
  const perIteration = (variant: Variant, label: string) => {
    const list = samples.get(variant) ?? [];
    const time = mean(
      list.map((s) => s.calls.filter((c) => c.label === label).reduce((sum, c) => sum + (c.end - c.start), 0)),
    );
    // An exec is three calls; count execs by their first (create) call.
    const count = mean(list.map((s) => s.calls.filter((c) => c.label === label).length)) / (label === 'exec' ? 3 : 1);
    return count === 0 ? '' : `${ms(time)} (${count % 1 === 0 ? count : count.toFixed(1)}×)`;
  };
  const engine = (s: Sample) => s.calls.reduce((sum, c) => sum + (c.end - c.start), 0);
  const rows = labels.map((label) => [`engine: ${label}`, ...variants.map((v) => perIteration(v, label))]);
  rows.push(['engine calls, total', ...variants.map((v) => ms(mean((samples.get(v) ?? []).map(engine))))]);
  rows.push([
    'outside the engine',
    ...variants.map((v) => ms(mean((samples.get(v) ?? []).map((s) => s.total - engine(s))))),
  ]);
  rows.push(['total', ...variants.map((v) => ms(mean((samples.get(v) ?? []).map((s) => s.total))))]);
  console.log();
  console.log(`${title}: mean ms per iteration (calls per iteration)`);
  printTable(['phase', ...variants.map((v) => VARIANT_NAMES[v])], rows, 1);
}

/** Where ours spends the time the engine does not: around the HTTP request, between engine calls, after the readiness probe. */
function printOurTimeline(samples: readonly Sample[]): void {
  const firstCall = (s: Sample) => s.calls.reduce((min, c) => Math.min(min, c.start), s.total);
  // The sandbox is up once an exec answered; later calls are the GET that reports it (an inspect).
  const probed = (s: Sample) => s.calls.filter((c) => c.label === 'exec').reduce((max, c) => Math.max(max, c.end), 0);
  const gaps = (s: Sample) => {
    const calls = s.calls.filter((c) => c.end <= probed(s)).sort((a, b) => a.start - b.start);
    let gap = 0;
    for (let k = 1; k < calls.length; k++)
      gap += Math.max(0, (calls[k] as EngineCall).start - (calls[k - 1] as EngineCall).end);
    return gap;
  };
  const rows: [string, string][] = [
    ['first engine call begins', ms(mean(samples.map(firstCall)))],
    ['POST /api/v1/sandboxes answered (STARTING)', ms(mean(samples.map((s) => s.marks.post ?? 0)))],
    ['exec probe answered (the sandbox is up)', ms(mean(samples.map(probed)))],
    ['client sees RUNNING', ms(mean(samples.map((s) => s.total)))],
    ['of which: before the first engine call', ms(mean(samples.map(firstCall)))],
    ['of which: between engine calls, up to the probe', ms(mean(samples.map(gaps)))],
    ['of which: after the probe (next poll, its GET)', ms(mean(samples.map((s) => s.total - probed(s))))],
    ['GETs until RUNNING', mean(samples.map((s) => s.marks.polls ?? 0)).toFixed(1)],
  ];
  console.log();
  console.log('ours, start timeline: mean ms from sending the POST');
  printTable(['moment', 'ms'], rows, 1);
}

// ---- main ----

const cleanups: (() => Promise<void>)[] = [];
let failed = false;

// Ctrl-C stops at the next step and cleans up as after a failure; a second one exits at once.
const interrupted = (signal: NodeJS.Signals) => {
  if (interruption) process.exit(130);
  interruption = signal;
  console.error(`\n${signal}: stopping, then removing what the benchmark created (again to exit at once)…`);
};
process.on('SIGINT', interrupted);
process.on('SIGTERM', interrupted);

try {
  const cpu = cpus();
  const runtime = await createDockerRuntime({
    namePrefix: PREFIX,
    limits: { memoryBytes: 512 * 1024 ** 2, cpus: 1, pids: 256 },
  }).catch((error: unknown) => {
    throw new Error(
      `This benchmark needs a Docker engine (start dockerd, or set DOCKER_HOST): ${(error as Error).message}`,
      { cause: error },
    );
  });
  const client = runtime.connection.docker;
  await client
    .getImage(IMAGE)
    .inspect()
    .catch((error: unknown) => {
      throw new Error(`This benchmark needs the image ${IMAGE}: run scripts/build-sandbox-image.sh`, { cause: error });
    });
  console.log(
    `machine: ${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version} (${process.platform}/${process.arch})`,
  );
  console.log(
    `docker: engine ${runtime.connection.engineVersion}, API ${runtime.connection.apiVersion}; image ${IMAGE}`,
  );
  console.log(
    `iterations: ${ITERATIONS} per measurement and variant (after ${WARMUP} warm-up), variants alternating; client polls every ${CLIENT_POLL_MS} ms, service polls every ${SERVICE_POLL_MS} ms`,
  );
  console.log(
    'bare variants: dockerode on the same socket and API version as our runtime (create + start = `docker run -d`)',
  );
  const left = await sweep(client);
  if (left > 0) console.log(`removed ${left} leftovers of an earlier run`);
  cleanups.push(async () => {
    await sweep(client);
  });

  const specs = [{ id: 'bookworm', image: IMAGE, working_dir: WORKING_DIR }];
  const service = createAgentConversationService(
    { ...createMemoryPorts({ specs }), llm: firstCommandModel(), runtime, agent: createAgent() },
    { pollIntervalMs: SERVICE_POLL_MS },
  );
  const base = await serve(service, { [API_KEY]: 'bench' }, cleanups);
  // The same, keeping one warm sandbox (refilled after each claim; no timer).
  const warmService = createAgentConversationService(
    { ...createMemoryPorts({ specs }), llm: firstCommandModel(), runtime, agent: createAgent() },
    { pollIntervalMs: SERVICE_POLL_MS, sandboxPool: { bookworm: 1 }, sandboxPoolCheckIntervalMs: 0 },
  );
  const warmBase = await serve(warmService, { [API_KEY]: 'bench' }, cleanups);
  for (const s of [service, warmService]) {
    const stored = await s.settings.store('bench', { llm_model: 'openai/bench-scripted', llm_api_key: 'unused' });
    if (stored.isErr()) throw new Error(`could not store the bench user's settings: ${stored.error.type}`);
  }

  // One sandbox of ours, started untimed, shows the settings our runtime gives its containers.
  const probe = (await call(base, 'POST', '/api/v1/sandboxes', {})) as SandboxInfo;
  await untilRunning(base, probe.id);
  const ourConfig = await readOurConfig(client, runtime.containerName(probe.id));

  const bench: Bench = {
    base,
    warm: { base: warmBase, service: warmService },
    cold: service,
    docker: client,
    recorder: new EngineRecorder(client),
    ourConfig,
    serial: 0,
  };
  const started = performance.now();
  const start = await alternate(['ours', 'bare', 'config', 'warm'], (v) =>
    v === 'ours' ? startOurs(bench) : v === 'warm' ? startWarm(bench) : startBare(bench, v === 'config'),
  );
  console.log(`start: done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  const firstAt = performance.now();
  const first = await alternate(['warm', 'ours', 'bare'], (v) =>
    v === 'bare' ? startBare(bench, false) : firstCommand(bench, v === 'warm'),
  );
  console.log(`first command: done in ${((performance.now() - firstAt) / 1000).toFixed(1)} s`);

  // Pause/resume: the sandbox above, and one bare container.
  const bareName = `${PREFIX}bare-pause`;
  const bare = await client.createContainer({ name: bareName, Image: IMAGE, WorkingDir: WORKING_DIR });
  await bare.start();
  await execTrue(bare);
  const pausedAt = performance.now();
  const pause = await alternate(['ours', 'bare'], (v) =>
    v === 'ours' ? pauseResumeOurs(bench, probe.id) : pauseResumeBare(bench, bare),
  );
  console.log(`pause/resume: done in ${((performance.now() - pausedAt) / 1000).toFixed(1)} s`);
  await call(base, 'DELETE', `/api/v1/sandboxes/${probe.id}`);
  await bare.remove({ force: true, v: true });

  console.log();
  printResults([
    { name: 'start → RUNNING', samples: start },
    { name: 'new conversation → first command', samples: first },
    { name: 'pause + resume → RUNNING', samples: pause },
  ]);
  const ours = stats((start.get('ours') ?? []).map((s) => s.total));
  const bareStart = stats((start.get('bare') ?? []).map((s) => s.total));
  const ratio = ours.p50 / bareStart.p50;
  console.log();
  console.log(
    `start aim (ours within ${AIM}× of the bare engine, p50): ${ratio <= AIM ? 'met' : 'NOT met'} at ${ratio.toFixed(2)}× (mean ${(ours.mean / bareStart.mean).toFixed(2)}×)`,
  );
  printWarmAim('start → RUNNING', start);
  printWarmAim('new conversation → first command', first);
  printPhases('start', start);
  printOurTimeline(start.get('ours') ?? []);
  printPhases('new conversation → first command', first);
  printPhases('pause + resume', pause);
} catch (error) {
  failed = true;
  if (!interruption) console.error(error);
} finally {
  if (!(await runCleanups(cleanups))) failed = true;
}
process.exitCode = interruption ? 130 : failed ? 1 : 0;
