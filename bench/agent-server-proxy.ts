/**
 * What the proxy of a sandbox's AGENT_SERVER URL costs: `GET /health` of a real OpenHands
 * agent-server (the openhands-agent-server spec's image) through this server's proxy (the
 * router, the record read, http-proxy-3 with kept connections) against the same request to the
 * container's published port directly. One process: the service, its router and the client,
 * the two variants alternating request by request so they share the machine's noise; each
 * with its own kept-alive connection, as an SDK client holds one.
 *
 *   npm run bench:agent-server-proxy                              # 500 requests per variant
 *   BENCH_PROXY_REQUESTS=2000 npm run bench:agent-server-proxy
 *   BENCH_PROXY_STORAGE=pglite npm run bench:agent-server-proxy   # records in PGlite on disk (the example server's default)
 *
 * Needs a Docker engine and the image acs-openhands-agent-server:1.34.0
 * (scripts/build-agent-server-image.sh). The sandbox it starts is deleted at the end, also on
 * failure. Numbers, not assertions.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { setTimeout as sleep } from 'node:timers/promises';
import express from 'express';
import { createAesGcmCipher, createAgentConversationService, type AgentConversationServicePorts } from '@acs/core';
import { createPostgresStorage } from '@acs/adapter-postgres';
import { createDockerRuntime } from '@acs/adapter-docker';
import { createAcsRouter } from '@acs/adapter-express';
import { createAgent } from '@acs/agent';
import { createMemoryPorts } from '@acs/testing';
import { runCleanups } from './cleanup.js';
import { printTable } from './report.js';
import { percentile, positiveInt } from './stats.js';

const REQUESTS = positiveInt('BENCH_PROXY_REQUESTS', 500);
const WARMUP = 50;
const IMAGE = 'acs-openhands-agent-server:1.34.0';
const API_KEY = 'bench-proxy-api-key-000001';
const STORAGE = process.env.BENCH_PROXY_STORAGE === 'pglite' ? 'pglite' : 'memory';

/** PGlite on disk in a temporary directory (removed at the end), or nothing: the memory stores. */
async function storage(cleanups: (() => Promise<void>)[]): Promise<Partial<AgentConversationServicePorts>> {
  if (STORAGE === 'memory') return {};
  const dir = await mkdtemp(join(tmpdir(), 'acs-bench-proxy-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const pglite = await PGlite.create(dir);
  cleanups.push(() => pglite.close());
  const stores = await createPostgresStorage({
    db: pglite,
    cipher: createAesGcmCipher({ keys: { bench: randomBytes(32) }, currentKeyId: 'bench' }),
    migrations: 'auto',
  });
  cleanups.push(() => stores.close());
  return stores;
}

/** One GET over a kept-alive connection; resolves with the milliseconds it took (the body read). */
function timedGet(url: string, agent: Agent, host?: string): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, headers: host ? { host } : {} }, (res) => {
      res.resume();
      res.on('end', () =>
        res.statusCode === 200
          ? resolve(performance.now() - started)
          : reject(new Error(`${url}: HTTP ${res.statusCode}`)),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

async function main(): Promise<void> {
  const cleanups: (() => Promise<void>)[] = [];
  let failed = false;
  try {
    const runtime = await createDockerRuntime({ limits: { memoryBytes: 2 * 1024 ** 3, cpus: 1, pids: 512 } });
    const ports = createMemoryPorts({
      specs: [
        {
          id: 'openhands-agent-server',
          image: IMAGE,
          working_dir: '/workspace',
          exposed_ports: [{ name: 'AGENT_SERVER', port: 8000, health_path: '/ready' }],
          session_api_key_variable: 'OH_SESSION_API_KEYS_0',
        },
      ],
    });
    const stores = await storage(cleanups);
    const service = createAgentConversationService({ ...ports, ...stores, runtime, agent: createAgent() });
    const app = express();
    const router = createAcsRouter(service, { apiKeys: { [API_KEY]: 'bench' } });
    app.use(router);
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    router.attach(server);
    cleanups.push(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await service.close();
    });
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const started = await service.sandboxes.start('bench', 'openhands-agent-server');
    if (started.isErr()) throw new Error(`could not start the sandbox: ${started.error.type}`);
    const id = started.value.id;
    cleanups.push(async () => void (await service.sandboxes.delete('bench', id)));
    let record = null;
    for (let i = 0; i < 240 && record?.status !== 'RUNNING'; i++) {
      await sleep(500);
      record = (await (stores.sandboxes ?? ports.sandboxes).get('bench', id)).unwrapOr(null);
    }
    const direct = record?.exposed_urls.find((u) => u.name === 'AGENT_SERVER')?.url;
    if (record?.status !== 'RUNNING' || !direct)
      throw new Error(`the sandbox did not become RUNNING: ${JSON.stringify(record)}`);
    const host = `agent-server-${id}.localhost:${new URL(base).port}`;

    const agents = {
      direct: new Agent({ keepAlive: true, maxSockets: 1 }),
      proxy: new Agent({ keepAlive: true, maxSockets: 1 }),
    };
    const times: Record<'direct' | 'proxy', number[]> = { direct: [], proxy: [] };
    for (let i = 0; i < WARMUP + REQUESTS; i++) {
      // Alternating which goes first, so neither always follows the other.
      const order = i % 2 === 0 ? (['direct', 'proxy'] as const) : (['proxy', 'direct'] as const);
      for (const variant of order) {
        const ms =
          variant === 'direct'
            ? await timedGet(`${direct}/health`, agents.direct)
            : await timedGet(`${base}/health`, agents.proxy, host);
        if (i >= WARMUP) times[variant].push(ms);
      }
    }
    agents.direct.destroy();
    agents.proxy.destroy();

    const row = (name: string, values: number[]) => {
      const sorted = [...values].sort((a, b) => a - b);
      return [
        name,
        ...[50, 90, 99].map((p) => percentile(sorted, p).toFixed(2)),
        (sorted.reduce((s, v) => s + v, 0) / sorted.length).toFixed(2),
      ];
    };
    console.log(
      `\nGET /health of the OpenHands agent-server 1.34.0, ${REQUESTS} requests per variant (after ${WARMUP} warm-up), records in ${STORAGE}, ${cpus().length} cores, node ${process.version}`,
    );
    printTable(
      ['variant', 'p50 ms', 'p90 ms', 'p99 ms', 'mean ms'],
      [row('container directly', times.direct), row('through the proxy', times.proxy)],
    );
    const p50 = (v: number[]) =>
      percentile(
        [...v].sort((a, b) => a - b),
        50,
      );
    console.log(`\nproxy overhead at p50: ${(p50(times.proxy) - p50(times.direct)).toFixed(2)} ms`);
  } catch (error) {
    failed = true;
    console.error(error);
  } finally {
    if (!(await runCleanups(cleanups))) failed = true;
  }
  process.exit(failed ? 1 : 0);
}

await main();
