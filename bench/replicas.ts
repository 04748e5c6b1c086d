/**
 * Cross-replica event latency: two services on one PostgreSQL schema in this process, each with
 * its own storage pool and its own LISTEN/NOTIFY notifier (as two replicas would have), against
 * the baseline of one service delivering to a subscription in its own process.
 *
 *   npm run bench:replicas
 *   BENCH_APPENDS=2000 DATABASE_URL=postgres://… npm run bench:replicas
 *
 * Latency is from the start of an append (a user message, sent with run: false, so no agent acts)
 * to its delivery to the subscription. Appends go one after another at BENCH_RATE per second
 * (default 100), alternating between the two setups in rounds, so both share the machine's
 * noise. Network: 127.0.0.1 only. Numbers, not assertions: nothing here fails on timing.
 */
import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import pg from 'pg';
import { createAesGcmCipher, createAgentConversationService, type AgentConversationService } from '@acs/core';
import { createAgent } from '@acs/agent';
import {
  createPostgresEventNotifier,
  createPostgresStorage,
  fromPgPool,
  type PostgresEventNotifier,
} from '@acs/adapter-postgres';
import { createMemoryPorts } from '@acs/testing';
import { printTable } from './report.js';
import { percentile, positiveInt } from './stats.js';

const DATABASE_URL = process.env.DATABASE_URL || 'postgres://acs:acs@127.0.0.1:5432/acs_test';
const APPENDS = positiveInt('BENCH_APPENDS', 1_000);
const RATE = positiveInt('BENCH_RATE', 100);
const ROUNDS = 10;
const USER = 'bench';

const key = randomBytes(32);
const cipher = createAesGcmCipher({ keys: { k: key }, currentKeyId: 'k' });
const schema = `bench_${randomBytes(6).toString('hex')}`;
const channel = `acs_bench_${randomBytes(4).toString('hex')}`;
const pools: pg.Pool[] = [];
const notifiers: PostgresEventNotifier[] = [];
const services: AgentConversationService[] = [];

async function replica(migrate: boolean): Promise<AgentConversationService> {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 5 });
  pool.on('error', () => {});
  pools.push(pool);
  const storage = await createPostgresStorage({
    db: fromPgPool(pool),
    cipher,
    schema,
    migrations: migrate ? 'auto' : 'check',
  });
  const eventNotifier = await createPostgresEventNotifier({ connectionString: DATABASE_URL, channel });
  notifiers.push(eventNotifier);
  const service = createAgentConversationService({
    ...createMemoryPorts(),
    ...storage,
    eventNotifier,
    agent: createAgent(),
  });
  services.push(service);
  return service;
}

/** Latencies (ms) of `count` appends made through `writer`, delivered to a subscription on `reader`. */
async function measure(
  writer: AgentConversationService,
  reader: AgentConversationService,
  conversationId: string,
  count: number,
): Promise<number[]> {
  const arrivals = new Map<number, number>();
  const last = await reader.conversations.searchEvents(USER, conversationId, { after: 0, kinds: null, limit: 100_000 });
  if (last.isErr()) throw new Error(last.error.type);
  const from = last.value.items.at(-1)?.id ?? 0;
  const live = await reader.conversations.subscribeEvents(USER, conversationId, from, (event) =>
    arrivals.set(event.id, performance.now()),
  );
  if (live.isErr()) throw new Error(live.error.type);
  const sent = new Map<number, number>();
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const event = await writer.conversations.sendMessage(USER, conversationId, {
      role: 'user',
      content: [{ type: 'text', text: `message ${i}` }],
      run: false,
    });
    if (event.isErr()) throw new Error(event.error.type);
    sent.set(event.value.id, started);
    const wait = 1000 / RATE - (performance.now() - started);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  const deadline = Date.now() + 60_000;
  while ([...sent.keys()].some((id) => !arrivals.has(id))) {
    if (Date.now() > deadline)
      throw new Error(`${[...sent.keys()].filter((id) => !arrivals.has(id)).length} events never arrived`);
    await new Promise((r) => setTimeout(r, 5));
  }
  live.value.close();
  return [...sent].map(([id, t]) => arrivals.get(id)! - t);
}

try {
  const a = await replica(true);
  const b = await replica(false);
  await a.settings.store(USER, { llm_model: 'openai/scripted', llm_api_key: 'sk-bench' });
  const created = await a.conversations.create(USER, { initial_user_msg: 'bench' });
  if (created.isErr()) throw new Error(created.error.type);
  await a.idle();
  const id = created.value.conversation_id;
  const local: number[] = [];
  const remote: number[] = [];
  const perRound = Math.ceil(APPENDS / ROUNDS);
  for (let round = 0; round < ROUNDS; round++) {
    local.push(...(await measure(a, a, id, perRound)));
    remote.push(...(await measure(a, b, id, perRound)));
  }
  const row = (name: string, values: number[], base: number[]) => {
    const sorted = [...values].sort((x, y) => x - y);
    const baseSorted = [...base].sort((x, y) => x - y);
    return [
      name,
      percentile(sorted, 50).toFixed(2),
      percentile(sorted, 99).toFixed(2),
      sorted.at(-1)!.toFixed(2),
      `${(percentile(sorted, 50) / percentile(baseSorted, 50)).toFixed(2)}×`,
    ];
  };
  console.log(
    `Cross-replica event latency (${cpus().length} cores; PostgreSQL at ${new URL(DATABASE_URL).host}; ${local.length} appends each, ${RATE}/s)\n`,
  );
  printTable(
    ['delivery, from the start of an append', 'p50 ms', 'p99 ms', 'max ms', 'p50 vs same process'],
    [row('same process (baseline)', local, local), row('other replica (LISTEN/NOTIFY)', remote, local)],
  );
  console.log(
    `\ntarget (issue 16): p99 ≤ 100 ms across replicas: ${
      percentile(
        [...remote].sort((x, y) => x - y),
        99,
      ) <= 100
        ? 'met'
        : 'NOT met'
    }`,
  );
} finally {
  for (const service of services) await service.close();
  for (const notifier of notifiers) await notifier.close();
  if (pools[0]) await pools[0].query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
  for (const pool of pools) await pool.end();
}
