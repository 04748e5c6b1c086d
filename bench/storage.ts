/**
 * Storage benchmark: the same HTTP API on four backends (memory, embedded SQLite and PGlite
 * on disk, a PostgreSQL server), measured over real loopback HTTP.
 *
 *   npm run bench                      # 2,000 requests per operation and backend
 *   BENCH_REQUESTS=500 npm run bench   # fewer
 *   BENCH_MIXED_ROUNDS=3 npm run bench # fewer rounds of the mixed-load part (default 8)
 *   BENCH_MIXED_WRITERS=8 npm run bench  # fewer background writers in it (default 16)
 *   DATABASE_URL=postgres://… npm run bench
 *
 * Then mixed load, per backend: while settings stores and conversation creates run over HTTP
 * (BENCH_MIXED_WRITERS in flight, closed loop), BURST concurrent `POST /api/v1/sandboxes` are
 * sent at once, each on a new connection as clients elsewhere would, BENCH_MIXED_ROUNDS times
 * for sandboxes spread over the users and as many times for one user's (which the service
 * starts one at a time). Reported: how long a burst takes, how many of its requests have no
 * answer after BURST_DEADLINE_MS, the event loop's delay meanwhile (on PGlite the database's
 * work ran in the event loop's turns, which kept Node from accepting new connections: one per
 * turn), and the background writes answered per second.
 *
 * Numbers, not assertions: nothing here fails on timing.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import {
  createAgentConversationService,
  createAesGcmCipher,
  type AgentConversationService,
  type AgentConversationServicePorts,
} from '@acs/core';
import { createMemoryPorts } from '@acs/testing';
import { createPostgresStorage } from '@acs/adapter-postgres';
import { createSqliteStorage } from '@acs/adapter-sqlite';
import { serve } from './serve.js';
import { percentile, positiveInt } from './stats.js';
import { runCleanups } from './cleanup.js';
import { callApi, printTable as printRows } from './report.js';
import { createAgent } from '@acs/agent';

const DATABASE_URL = process.env.DATABASE_URL || 'postgres://acs:acs@127.0.0.1:5432/acs_test';
const REQUESTS = positiveInt('BENCH_REQUESTS', 2_000);
const WARMUP = Math.min(200, Math.ceil(REQUESTS / 10));
const CONCURRENCY = 16;
const USERS = 20;
const CONVERSATIONS = 500;
const PAGE_SIZE = 20;
const MIXED_ROUNDS = positiveInt('BENCH_MIXED_ROUNDS', 8);
const MIXED_WRITERS = positiveInt('BENCH_MIXED_WRITERS', 16);
const BURST = 50;
const BURST_DEADLINE_MS = 12_000;

const MODELS = ['openai/gpt-4o', 'anthropic/claude-sonnet-4-5', 'openai/gpt-4.1-mini', 'gemini/gemini-2.5-pro'];
const LANGUAGES = ['en', 'de', 'fr', 'ja', 'pt-BR'];

interface User {
  id: string;
  key: string;
}
const users: User[] = Array.from({ length: USERS }, (_, i) => ({
  id: `user-${i}`,
  key: `bench-api-key-${String(i).padStart(4, '0')}`,
}));
const userAt = (i: number) => users[i % USERS] as User;

interface Backend {
  name: string;
  url: string;
  service: AgentConversationService;
}

interface Result {
  backend: string;
  operation: string;
  rps: number;
  p50: number;
  p99: number;
}

/** Calls fn(0..count-1) with at most CONCURRENCY calls in flight; returns each call's latency in ms. */
async function runConcurrently(count: number, fn: (i: number) => Promise<unknown>): Promise<number[]> {
  const latencies = new Array<number>(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const started = performance.now();
      await fn(i);
      latencies[i] = performance.now() - started;
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, count) }, worker));
  return latencies;
}

/** Warm-up, then REQUESTS timed calls of fn. */
async function measure(backend: string, operation: string, fn: (i: number) => Promise<unknown>): Promise<Result> {
  await runConcurrently(WARMUP, fn);
  const started = performance.now();
  const latencies = await runConcurrently(REQUESTS, (i) => fn(WARMUP + i));
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    backend,
    operation,
    rps: REQUESTS / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}

const settingsBody = (i: number) => ({
  llm_model: MODELS[i % MODELS.length],
  llm_api_key: `sk-bench-${i}-${'x'.repeat(i % 40)}`,
  language: LANGUAGES[i % LANGUAGES.length],
  max_iterations: 50 + (i % 100),
  confirmation_mode: i % 2 === 0,
});

async function startBackends(cleanups: (() => Promise<void>)[]): Promise<Backend[]> {
  const cipher = createAesGcmCipher({ keys: { bench: randomBytes(32) }, currentKeyId: 'bench' });
  const compose = (storage: Partial<AgentConversationServicePorts>) =>
    createAgentConversationService({ agent: createAgent(), ...createMemoryPorts(), ...storage }, { pollIntervalMs: 1 });

  const memory = compose({});

  const dir = await mkdtemp(join(tmpdir(), 'acs-bench-pglite-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const pglite = await PGlite.create(dir);
  cleanups.push(() => pglite.close());
  const pgliteStorage = await createPostgresStorage({ db: pglite, cipher, migrations: 'auto' });
  cleanups.push(() => pgliteStorage.close());
  const embedded = compose(pgliteStorage);

  const sqliteDir = await mkdtemp(join(tmpdir(), 'acs-bench-sqlite-'));
  cleanups.push(() => rm(sqliteDir, { recursive: true, force: true }));
  const sqliteStorage = await createSqliteStorage({ path: join(sqliteDir, 'acs.sqlite'), cipher, migrations: 'auto' });
  cleanups.push(() => sqliteStorage.close());
  const sqlite = compose(sqliteStorage);

  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
  pool.on('error', () => {});
  cleanups.push(() => pool.end());
  const schema = `bench_${randomBytes(6).toString('hex')}`;
  // Registered before the schema exists, so a failed migration still leaves nothing behind.
  cleanups.push(async () => {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });
  const pgStorage = await createPostgresStorage({ db: pool, cipher, schema, migrations: 'auto' });
  cleanups.push(() => pgStorage.close());
  const server = compose(pgStorage);

  const apiKeys = Object.fromEntries(users.map((u) => [u.key, u.id]));
  return [
    { name: 'memory', url: await serve(memory, apiKeys, cleanups), service: memory },
    { name: 'sqlite (disk)', url: await serve(sqlite, apiKeys, cleanups), service: sqlite },
    { name: 'pglite (disk)', url: await serve(embedded, apiKeys, cleanups), service: embedded },
    { name: 'postgres', url: await serve(server, apiKeys, cleanups), service: server },
  ];
}

/** USERS users with settings and CONVERSATIONS conversations among them; returns each user's second-page id. */
async function prepare(backend: Backend): Promise<string[]> {
  await runConcurrently(USERS, (i) => callApi(backend.url, userAt(i), 'POST', '/api/settings', settingsBody(i)));
  await runConcurrently(CONVERSATIONS, (i) =>
    callApi(backend.url, userAt(i), 'POST', '/api/conversations', { initial_user_msg: `hi #${i}` }),
  );
  await backend.service.idle();
  return Promise.all(
    users.map(async (user) => {
      const page = (await callApi(backend.url, user, 'GET', `/api/v1/app-conversations/search?limit=${PAGE_SIZE}`)) as {
        next_page_id: string | null;
      };
      if (!page.next_page_id) throw new Error(`${backend.name}: ${user.id} has no second page of conversations`);
      return page.next_page_id;
    }),
  );
}

interface MixedRound {
  /** From the first request of the burst to its last answer (or deadline). */
  burstMs: number;
  /** Each answered request's latency. */
  latencies: number[];
  /** Requests without an answer after BURST_DEADLINE_MS. */
  unanswered: number;
  /** Event loop delay during the burst, p99. */
  loopDelayP99: number;
  /** Background writes answered per second during the burst. */
  writesPerSecond: number;
}

/** Whose sandboxes a burst starts: spread over the users, or all one user's (the service starts those one at a time). */
const BURST_SHAPES = [
  { name: `${USERS} users`, userOf: (round: number, i: number) => userAt(round * BURST + i) },
  { name: 'one user', userOf: () => userAt(0) },
] as const;

interface MixedResult {
  backend: string;
  shape: string;
  rounds: MixedRound[];
}

/**
 * One request that never throws: its status (0 when it got no answer in time) and latency.
 * `fresh` sends it on a connection of its own, as a client elsewhere would; otherwise it
 * reuses this process's keep-alive connections (fetch).
 */
async function timedRequest(
  base: string,
  user: User,
  path: string,
  body: unknown,
  fresh = false,
): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  const payload = JSON.stringify(body);
  const headers = { 'X-Session-API-Key': user.key, 'Content-Type': 'application/json' };
  try {
    const status = fresh
      ? await new Promise<number>((resolve, reject) => {
          const request = httpRequest(
            base + path,
            { method: 'POST', agent: false, headers, signal: AbortSignal.timeout(BURST_DEADLINE_MS) },
            (response) => {
              response.resume();
              response.on('end', () => resolve(response.statusCode ?? 0));
              response.on('error', reject);
            },
          );
          request.on('error', reject);
          request.end(payload);
        })
      : await fetch(base + path, {
          method: 'POST',
          headers,
          body: payload,
          signal: AbortSignal.timeout(BURST_DEADLINE_MS),
        }).then(async (response) => {
          await response.text();
          return response.status;
        });
    return { status, ms: performance.now() - started };
  } catch {
    return { status: 0, ms: performance.now() - started };
  }
}

/**
 * For each burst shape, MIXED_ROUNDS bursts of BURST concurrent sandbox starts, each request
 * on a new connection, while MIXED_WRITERS settings stores and conversation creates keep going.
 */
async function mixedLoad(backend: Backend): Promise<MixedResult[]> {
  const { url } = backend;
  let stopping = false;
  let writes = 0;
  let failedWrites = 0;
  const writer = async (w: number) => {
    for (let i = w; !stopping; i += MIXED_WRITERS) {
      const user = userAt(i);
      const { status } =
        w % 2 === 0
          ? await timedRequest(url, user, '/api/settings', settingsBody(i))
          : await timedRequest(url, user, '/api/conversations', { initial_user_msg: `mixed #${i}` });
      if (status >= 200 && status < 300) writes++;
      // No answer in time (0) is what the burst measures; a refusal is a broken backend.
      else if (status !== 0) failedWrites++;
    }
  };
  const writers = Array.from({ length: MIXED_WRITERS }, (_, w) => writer(w));
  const results: MixedResult[] = [];
  try {
    for (const shape of BURST_SHAPES) {
      const rounds: MixedRound[] = [];
      for (let round = 0; round < MIXED_ROUNDS; round++) {
        await sleep(250);
        const loopDelay = monitorEventLoopDelay({ resolution: 5 });
        loopDelay.enable();
        const writesBefore = writes;
        const started = performance.now();
        const answers = await Promise.all(
          Array.from({ length: BURST }, (_, i) =>
            timedRequest(url, shape.userOf(round, i), '/api/v1/sandboxes', {}, true),
          ),
        );
        const burstMs = performance.now() - started;
        loopDelay.disable();
        const failed = answers.filter((a) => a.status !== 0 && (a.status < 200 || a.status >= 300));
        if (failed.length > 0)
          throw new Error(`${backend.name}: ${failed.length} sandbox starts failed with HTTP ${failed[0]?.status}`);
        rounds.push({
          burstMs,
          latencies: answers.filter((a) => a.status !== 0).map((a) => a.ms),
          unanswered: answers.filter((a) => a.status === 0).length,
          loopDelayP99: loopDelay.percentile(99) / 1e6,
          writesPerSecond: ((writes - writesBefore) * 1000) / burstMs,
        });
      }
      results.push({ backend: backend.name, shape: shape.name, rounds });
    }
  } finally {
    stopping = true;
    await Promise.all(writers);
  }
  if (failedWrites > 0) throw new Error(`${backend.name}: ${failedWrites} background writes failed`);
  await backend.service.idle();
  return results;
}

function printMixed(results: readonly MixedResult[]): void {
  const median = (values: number[]) =>
    percentile(
      [...values].sort((a, b) => a - b),
      50,
    );
  const summary = (r: MixedResult) => {
    const latencies = r.rounds.flatMap((x) => x.latencies).sort((a, b) => a - b);
    return {
      burst: median(r.rounds.map((x) => x.burstMs)),
      worstBurst: Math.max(...r.rounds.map((x) => x.burstMs)),
      p50: percentile(latencies, 50),
      max: latencies.at(-1) ?? Number.NaN,
      unanswered: r.rounds.reduce((n, x) => n + x.unanswered, 0),
      stalledRounds: r.rounds.filter((x) => x.unanswered > 0).length,
      loopDelay: median(r.rounds.map((x) => x.loopDelayP99)),
      writes: median(r.rounds.map((x) => x.writesPerSecond)),
    };
  };
  console.log();
  console.log(
    `mixed load: ${BURST} concurrent POST /api/v1/sandboxes (each on a new connection) while ${MIXED_WRITERS} settings stores / conversation creates are in flight; ` +
      `${MIXED_ROUNDS} rounds per shape; medians over rounds`,
  );
  printRows(
    [
      'backend',
      'sandboxes of',
      'burst',
      'worst burst',
      'start p50',
      'start max',
      `no answer in ${BURST_DEADLINE_MS / 1000} s`,
      'rounds stalled',
      'loop delay p99',
      'writes/s',
      'burst vs memory',
    ],
    results.map((r) => {
      const s = summary(r);
      const memory = results.find((m) => m.backend === 'memory' && m.shape === r.shape);
      return [
        r.backend,
        r.shape,
        `${s.burst.toFixed(0)} ms`,
        `${s.worstBurst.toFixed(0)} ms`,
        `${s.p50.toFixed(0)} ms`,
        `${s.max.toFixed(0)} ms`,
        `${s.unanswered} of ${BURST * r.rounds.length}`,
        `${s.stalledRounds} of ${r.rounds.length}`,
        `${s.loopDelay.toFixed(1)} ms`,
        s.writes.toFixed(0),
        memory ? `${(s.burst / summary(memory).burst).toFixed(2)}×` : '',
      ];
    }),
    2,
  );
}

async function benchmark(backend: Backend): Promise<Result[]> {
  const secondPages = await prepare(backend);
  const { name, url } = backend;
  return [
    await measure(name, 'store settings', (i) => callApi(url, userAt(i), 'POST', '/api/settings', settingsBody(i))),
    await measure(name, 'load settings', (i) => callApi(url, userAt(i), 'GET', '/api/settings')),
    await measure(name, 'search conversations', (i) => {
      // Even requests: a first page; odd ones: the page that follows it.
      const pageId = i % 2 === 0 ? '' : `&page_id=${encodeURIComponent(secondPages[i % USERS] as string)}`;
      return callApi(url, userAt(i), 'GET', `/api/v1/app-conversations/search?limit=${PAGE_SIZE}${pageId}`);
    }),
  ];
}

function printTable(results: readonly Result[]): void {
  const baseline = new Map(results.filter((r) => r.backend === 'memory').map((r) => [r.operation, r]));
  const rows = results.map((r) => {
    const memory = baseline.get(r.operation);
    return [
      r.backend,
      r.operation,
      r.rps.toFixed(0),
      r.p50.toFixed(2),
      r.p99.toFixed(2),
      memory ? `${(r.rps / memory.rps).toFixed(2)}×` : '',
      memory ? `${(r.p50 / memory.p50).toFixed(2)}×` : '',
    ];
  });
  const header = ['backend', 'operation', 'req/s', 'p50 ms', 'p99 ms', 'req/s vs memory', 'p50 vs memory'];
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((row) => (row[c] as string).length)));
  const line = (cells: readonly string[]) =>
    cells.map((cell, c) => (c < 2 ? cell.padEnd(widths[c] as number) : cell.padStart(widths[c] as number))).join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const row of rows) console.log(line(row));
}

const cleanups: (() => Promise<void>)[] = [];
let failed = false;
try {
  const cpu = cpus();
  console.log(
    `machine: ${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version} (${process.platform}/${process.arch})`,
  );
  console.log(
    `requests: ${REQUESTS} per operation and backend after ${WARMUP} warm-up, ${CONCURRENCY} in flight; ${USERS} users, ${CONVERSATIONS} conversations, pages of ${PAGE_SIZE}`,
  );
  const backends = await startBackends(cleanups);
  const results: Result[] = [];
  const mixed: MixedResult[] = [];
  for (const backend of backends) {
    const started = performance.now();
    results.push(...(await benchmark(backend)));
    mixed.push(...(await mixedLoad(backend)));
    console.log(`${backend.name}: done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
  console.log();
  printTable(results);
  printMixed(mixed);
} catch (error) {
  failed = true;
  console.error(error);
} finally {
  if (!(await runCleanups(cleanups))) failed = true;
}
process.exitCode = failed ? 1 : 0;
