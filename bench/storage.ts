/**
 * Storage benchmark: the same HTTP API on three backends (memory, embedded PGlite on
 * disk, a PostgreSQL server), measured over real loopback HTTP.
 *
 *   npm run bench                      # 2,000 requests per operation and backend
 *   BENCH_REQUESTS=500 npm run bench   # fewer
 *   DATABASE_URL=postgres://… npm run bench
 *
 * Numbers, not assertions: nothing here fails on timing.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { createAgentConversationService, createAesGcmCipher, type AgentConversationService, type AgentConversationServicePorts } from '@acs/core';
import { createMemoryPorts } from '@acs/adapter-memory';
import { createPostgresStorage } from '@acs/adapter-postgres';
import { serve } from './serve.js';
import { percentile, positiveInt } from './stats.js';
import { runCleanups } from './cleanup.js';
import { callApi } from './report.js';

const DATABASE_URL = process.env.DATABASE_URL || 'postgres://acs:acs@127.0.0.1:5432/acs_test';
const REQUESTS = positiveInt('BENCH_REQUESTS', 2_000);
const WARMUP = Math.min(200, Math.ceil(REQUESTS / 10));
const CONCURRENCY = 16;
const USERS = 20;
const CONVERSATIONS = 500;
const PAGE_SIZE = 20;

const MODELS = ['openai/gpt-4o', 'anthropic/claude-sonnet-4-5', 'openai/gpt-4.1-mini', 'gemini/gemini-2.5-pro'];
const LANGUAGES = ['en', 'de', 'fr', 'ja', 'pt-BR'];

interface User {
  id: string;
  key: string;
}
const users: User[] = Array.from({ length: USERS }, (_, i) => ({ id: `user-${i}`, key: `bench-api-key-${String(i).padStart(4, '0')}` }));
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
  return { backend, operation, rps: REQUESTS / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
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
    createAgentConversationService({ ...createMemoryPorts(), ...storage }, { pollIntervalMs: 1 });

  const memory = compose({});

  const dir = await mkdtemp(join(tmpdir(), 'acs-bench-pglite-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const pglite = await PGlite.create(dir);
  cleanups.push(() => pglite.close());
  const pgliteStorage = await createPostgresStorage({ db: pglite, cipher, migrations: 'auto' });
  cleanups.push(() => pgliteStorage.close());
  const embedded = compose(pgliteStorage);

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
    { name: 'pglite (disk)', url: await serve(embedded, apiKeys, cleanups), service: embedded },
    { name: 'postgres', url: await serve(server, apiKeys, cleanups), service: server },
  ];
}

/** USERS users with settings and CONVERSATIONS conversations among them; returns each user's second-page id. */
async function prepare(backend: Backend): Promise<string[]> {
  await runConcurrently(USERS, (i) => callApi(backend.url, userAt(i), 'POST', '/api/settings', settingsBody(i)));
  await runConcurrently(CONVERSATIONS, (i) => callApi(backend.url, userAt(i), 'POST', '/api/conversations', { initial_user_msg: `hi #${i}` }));
  await backend.service.idle();
  return Promise.all(
    users.map(async (user) => {
      const page = (await callApi(backend.url, user, 'GET', `/api/v1/app-conversations/search?limit=${PAGE_SIZE}`)) as { next_page_id: string | null };
      if (!page.next_page_id) throw new Error(`${backend.name}: ${user.id} has no second page of conversations`);
      return page.next_page_id;
    }),
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
  const line = (cells: readonly string[]) => cells.map((cell, c) => (c < 2 ? cell.padEnd(widths[c] as number) : cell.padStart(widths[c] as number))).join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const row of rows) console.log(line(row));
}

const cleanups: (() => Promise<void>)[] = [];
let failed = false;
try {
  const cpu = cpus();
  console.log(`machine: ${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version} (${process.platform}/${process.arch})`);
  console.log(
    `requests: ${REQUESTS} per operation and backend after ${WARMUP} warm-up, ${CONCURRENCY} in flight; ${USERS} users, ${CONVERSATIONS} conversations, pages of ${PAGE_SIZE}`,
  );
  const backends = await startBackends(cleanups);
  const results: Result[] = [];
  for (const backend of backends) {
    const started = performance.now();
    results.push(...(await benchmark(backend)));
    console.log(`${backend.name}: done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
  console.log();
  printTable(results);
} catch (error) {
  failed = true;
  console.error(error);
} finally {
  if (!(await runCleanups(cleanups))) failed = true;
}
process.exitCode = failed ? 1 : 0;
