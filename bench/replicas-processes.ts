/**
 * Several example servers (real processes) on one PostgreSQL, sandboxes on the machine's Docker
 * engine (each step runs `echo` in the conversation's container through its persistent shell),
 * and a model that answers at once: what is measured is the service (its event log, leases and
 * coordination) and the engine's exec, not a model. (The fake runtime cannot be shared by
 * processes: each would hold its own sandboxes.)
 *
 *   npm run bench:replicas-processes
 *   BENCH_CONVERSATIONS=60 BENCH_STEPS=20 BENCH_KILLS=10 npm run bench:replicas-processes
 *
 * 1. Throughput: agent steps per second (a step: a model call, an action, its observation) of
 *    BENCH_CONVERSATIONS conversations of BENCH_STEPS steps, spread over 3 servers, against the
 *    same work on 1 server; rounds alternate (1, 3, 1, 3) on fresh databases.
 * 2. Takeover: the server running a conversation (waiting on its model) is killed with SIGKILL;
 *    the time until another server asks the model again for it, BENCH_KILLS times (p50, max),
 *    against the lease's TTL (6 s), which bounds it from below.
 *
 * Network: 127.0.0.1 only. Numbers, not assertions: nothing here fails on timing.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { connectDocker } from '@acs/adapter-docker';
import pg from 'pg';
import { marker, scriptedCompletion, startFakeOpenAi, toolCall } from '@acs/testing';
import { callApi, printTable, type BenchUser } from './report.js';
import { percentile, positiveInt } from './stats.js';

const DATABASE_URL = process.env.DATABASE_URL || 'postgres://acs:acs@127.0.0.1:5432/acs_test';
const CONVERSATIONS = positiveInt('BENCH_CONVERSATIONS', 30);
const STEPS = positiveInt('BENCH_STEPS', 20);
const KILLS = positiveInt('BENCH_KILLS', 10);
const user: BenchUser = {
  id: `bench-replicas-${randomBytes(3).toString('hex')}`,
  key: 'bench-replicas-key-0123456789abcdef',
};
const secretKey = randomBytes(32).toString('hex');
const exampleDir = new URL('../examples/standalone-server/', import.meta.url).pathname;

interface Server {
  child: ChildProcessWithoutNullStreams;
  url: string;
  exited: Promise<unknown>;
  stderr: () => string;
}
const running = new Set<Server>();

async function startServer(databaseUrl: string): Promise<Server> {
  const child = spawn(process.execPath, ['--conditions=@acs/source', '--import', 'tsx', 'src/main.ts'], {
    cwd: exampleDir,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      PORT: '0',
      DATA_DIR: mkdtempSync(join(tmpdir(), 'acs-bench-')),
      ACS_SANDBOXES: 'docker',
      ACS_SANDBOX_NETWORK: 'none',
      ACS_SANDBOX_MEMORY_MB: '256',
      ACS_SANDBOX_IDLE_MINUTES: '0',
      // No warm sandbox: what is measured is steps and takeover, and the cleanup removes the
      // bench user's containers (a pooled one carries the pool's label, not the user's).
      ACS_SANDBOX_POOL: 'none',
      DATABASE_URL: databaseUrl,
      ACS_API_KEYS: `${user.id}:${user.key}`,
      SESSION_API_KEY: 'unused-default-key-0123456789',
      ACS_SECRET_KEY: secretKey,
      ACS_MAX_RUNNING_SANDBOXES: '1000',
      ACS_MAX_ITERATIONS: String(STEPS + 10),
    },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const server: Server = { child, url: '', exited: once(child, 'exit'), stderr: () => err };
  running.add(server);
  void server.exited.then(() => running.delete(server));
  const deadline = Date.now() + 120_000;
  for (;;) {
    const line = `${out}\n${err}`.split('\n').find((l) => l.includes('"agent conversation service listening"'));
    if (line) return Object.assign(server, { url: (JSON.parse(line) as { url: string }).url });
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`a server did not start within 120 s:\n${err.slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Removes the bench user's containers and their volumes (after each round). */
async function removeSandboxes(): Promise<void> {
  const { docker } = await connectDocker();
  const containers = await docker.listContainers({ all: true, filters: { label: [`io.acs.user-id=${user.id}`] } });
  await Promise.all(
    containers.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => {}),
    ),
  );
  const ids = new Set(containers.map((c) => c.Labels['io.acs.sandbox-id']));
  const volumes = (await docker.listVolumes({ filters: { label: ['io.acs.managed=true'] } })).Volumes ?? [];
  await Promise.all(
    volumes
      .filter((v) => ids.has(v.Labels?.['io.acs.sandbox-id'] ?? ''))
      .map((v) =>
        docker
          .getVolume(v.Name)
          .remove({ force: true })
          .catch(() => {}),
      ),
  );
}

async function kill(server: Server): Promise<void> {
  if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
  await server.exited;
}

const admin = new pg.Client({ connectionString: DATABASE_URL });
await admin.connect();
const databases: string[] = [];
async function freshDatabase(): Promise<string> {
  const name = `acs_bench_${randomBytes(5).toString('hex')}`;
  await admin.query(`CREATE DATABASE ${name}`);
  databases.push(name);
  const url = new URL(DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

const llm = await startFakeOpenAi({ keepRequests: true });
llm.script('steps', (turn) => ({
  status: 200,
  body: scriptedCompletion(
    turn,
    turn < STEPS
      ? { content: null, tool_calls: [toolCall(`call_${turn}`, 'execute_bash', { command: `echo ${turn}` })] }
      : { content: null, tool_calls: [toolCall(`call_finish_${turn}`, 'finish', { message: 'done' })] },
  ),
}));

/** Steps per second of the conversations spread over `count` servers. */
async function throughput(count: number): Promise<number> {
  const databaseUrl = await freshDatabase();
  const servers: Server[] = [];
  try {
    for (let i = 0; i < count; i++) servers.push(await startServer(databaseUrl));
    process.stderr.write(`  ${count} server(s) up; `);
    await callApi(servers[0]!.url, user, 'POST', '/api/settings', {
      llm_model: 'openai/scripted',
      llm_api_key: 'sk-bench',
      llm_base_url: llm.baseUrl,
    });
    const started = performance.now();
    const ids = await Promise.all(
      Array.from(
        { length: CONVERSATIONS },
        async (_, i) =>
          (
            (await callApi(servers[i % count]!.url, user, 'POST', '/api/conversations', {
              initial_user_msg: `${marker('steps')} job ${i}`,
            })) as { conversation_id: string }
          ).conversation_id,
      ),
    );
    process.stderr.write(`${ids.length} conversations started; `);
    const deadline = Date.now() + 600_000;
    for (;;) {
      const found = (await callApi(
        servers[0]!.url,
        user,
        'GET',
        `/api/v1/app-conversations?${ids.map((id) => `ids=${id}`).join('&')}`,
      )) as ({ execution_status: string | null } | null)[];
      if (found.every((c) => c?.execution_status === 'finished')) break;
      if (found.some((c) => c?.execution_status === 'error' || c?.execution_status === 'stuck')) {
        throw new Error(
          `a conversation failed: ${JSON.stringify(found.filter((c) => c?.execution_status !== 'finished'))}\n${servers.map((x) => x.stderr().slice(-1500)).join('\n---\n')}`,
        );
      }
      if (Date.now() > deadline)
        throw new Error(
          `conversations did not finish in 600 s:\n${servers.map((s) => s.stderr().slice(-1500)).join('\n---\n')}`,
        );
      await new Promise((r) => setTimeout(r, 100));
    }
    const seconds = (performance.now() - started) / 1000;
    process.stderr.write(`finished in ${seconds.toFixed(1)} s\n`);
    return (CONVERSATIONS * (STEPS + 1)) / seconds;
  } finally {
    for (const server of servers) await kill(server);
    await removeSandboxes();
  }
}

/** Milliseconds from the SIGKILL of the server running a conversation to another server asking the model for it again, `KILLS` times. */
async function takeovers(): Promise<number[]> {
  const databaseUrl = await freshDatabase();
  const servers = [await startServer(databaseUrl), await startServer(databaseUrl)];
  const times: number[] = [];
  try {
    await callApi(servers[0]!.url, user, 'POST', '/api/settings', {
      llm_model: 'openai/scripted',
      llm_api_key: 'sk-bench',
      llm_base_url: llm.baseUrl,
    });
    for (let k = 0; k < KILLS; k++) {
      const name = `takeover${k}`;
      let asked = 0;
      // The first request hangs (the holder waits on its model); the one after the takeover finishes.
      llm.script(name, (turn) =>
        asked++ === 0
          ? 'hang'
          : {
              status: 200,
              body: scriptedCompletion(turn, {
                content: null,
                tool_calls: [toolCall('call_finish', 'finish', { message: 'done' })],
              }),
            },
      );
      const holder = servers[k % 2]!;
      await callApi(holder.url, user, 'POST', '/api/conversations', { initial_user_msg: `${marker(name)} wait` });
      for (const deadline = Date.now() + 60_000; llm.requestsFor(name).length < 1;) {
        if (Date.now() > deadline)
          throw new Error(`the holder never asked the model:\n${holder.stderr().slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 10));
      }
      const killedAt = Date.now();
      await kill(holder);
      for (const deadline = Date.now() + 60_000; llm.requestsFor(name).length < 2;) {
        if (Date.now() > deadline)
          throw new Error(
            `no server took the conversation over within 60 s:\n${servers[(k + 1) % 2]!.stderr().slice(-2000)}`,
          );
        await new Promise((r) => setTimeout(r, 5));
      }
      times.push(llm.requestsFor(name)[1]!.at - killedAt);
      servers[k % 2] = await startServer(databaseUrl);
    }
    return times;
  } finally {
    for (const server of servers) await kill(server);
    await removeSandboxes();
  }
}

try {
  console.log(
    `Replicas as processes (${cpus().length} cores; PostgreSQL at ${new URL(DATABASE_URL).host}; Docker sandboxes, a model that answers at once)\n`,
  );
  const one: number[] = [];
  const three: number[] = [];
  for (let round = 0; round < 2; round++) {
    one.push(await throughput(1));
    three.push(await throughput(3));
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  printTable(
    ['throughput', 'steps/s (each round)', 'mean', 'vs 1 server'],
    [
      ['1 server (baseline)', one.map((x) => x.toFixed(1)).join(', '), mean(one).toFixed(1), '1.00×'],
      [
        '3 servers',
        three.map((x) => x.toFixed(1)).join(', '),
        mean(three).toFixed(1),
        `${(mean(three) / mean(one)).toFixed(2)}×`,
      ],
    ],
  );
  console.log(`(${CONVERSATIONS} conversations × ${STEPS + 1} steps per round)\n`);
  const times = (await takeovers()).sort((a, b) => a - b);
  printTable(
    ['takeover after SIGKILL', 'p50 ms', 'max ms', 'p50 vs lease TTL (6 s)'],
    [
      [
        `${times.length} kills`,
        percentile(times, 50).toFixed(0),
        times.at(-1)!.toFixed(0),
        `${(percentile(times, 50) / 6000).toFixed(2)}×`,
      ],
    ],
  );
  console.log(
    `\ntarget (issue 16): taken over within 10 s: ${times.at(-1)! <= 10_000 ? 'met' : 'NOT met'} (max ${(times.at(-1)! / 1000).toFixed(1)} s)`,
  );
} finally {
  for (const server of [...running]) await kill(server);
  await removeSandboxes();
  await llm.close();
  for (const name of databases) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
  await admin.end();
}
