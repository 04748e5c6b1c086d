/**
 * The whole of "several replicas": three example servers (three processes) on one PostgreSQL
 * database, sandboxes on two Docker engines (the machine's and a second dockerd this file
 * starts). 30 conversations with a slow scripted model are spread over the replicas; one replica
 * is killed with SIGKILL while they run. Then: all 30 finish; every log has ids 1..n without a
 * gap; every tool call has one observation and no command ran twice; a live stream on one replica
 * follows a conversation another runs; the per-user limit holds under concurrent starts spread
 * over the replicas; both engines ran sandboxes, and no container is left without a live record.
 */
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConversationEvent } from '@acs/core/schemas';
import {
  marker,
  scriptedCompletion,
  sseMessages,
  startDockerEngine,
  startFakeOpenAi,
  toolCall,
  type DockerEngineProcess,
  type FakeOpenAi,
} from '@acs/testing';
import { allEvents, body, call, freshDataDir, startServer, type Running } from './process.js';
import { removeContainersOf } from './containers.js';

const CONVERSATIONS = 30;
const USERS = 8;
const LIMIT = 4;
const STEPS = 4;
const DEADLINE_MS = 420_000;
const tag = randomBytes(3).toString('hex');
const users = Array.from({ length: USERS }, (_, i) => ({
  id: `cluster-${tag}-u${i}`,
  key: `cluster-${tag}-u${i}-key-0123456789`,
}));
const probe = { id: `cluster-${tag}-probe`, key: `cluster-${tag}-probe-key-0123456789` };

let engine: DockerEngineProcess | undefined;
let llm: FakeOpenAi | undefined;
let admin: pg.Client | undefined;
const database = `acs_cluster_${tag}`;
const servers: Running[] = [];

beforeAll(async () => {
  engine = await startDockerEngine({ images: ['acs-sandbox:bookworm'] });
  admin = new pg.Client({ connectionString: process.env.DATABASE_URL ?? 'postgres://acs:acs@127.0.0.1:5432/acs_test' });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  llm = await startFakeOpenAi();
  // Each conversation: STEPS commands, each answered after 300 ms, then finish. A command appends
  // its step to a file in the sandbox, so a command that ran twice would show there twice.
  llm.script('cluster', (turn) =>
    turn < STEPS
      ? {
          status: 200,
          delayMs: 300,
          body: scriptedCompletion(turn, {
            content: null,
            tool_calls: [
              toolCall(`call_step_${turn}`, 'execute_bash', {
                command: `echo step-${turn} >> /workspace/steps.log; sleep 1`,
              }),
            ],
          }),
        }
      : {
          status: 200,
          delayMs: 300,
          body: scriptedCompletion(turn, {
            content: null,
            tool_calls: [toolCall(`call_finish_${turn}`, 'finish', { message: 'All steps done.' })],
          }),
        },
  );
}, 300_000);

afterAll(async () => {
  for (const server of servers)
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
  await Promise.all(servers.map((s) => s.exited));
  for (const docker of [new Docker(), ...(engine ? [new Docker({ socketPath: engine.socket })] : [])]) {
    for (const user of [...users, probe]) await removeContainersOf(docker, user.id).catch(() => {});
  }
  await engine?.stop();
  await llm?.close();
  await admin?.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin?.end();
}, 180_000);

/** Waits for `probe` to give a value; on the deadline, fails with what it last saw and what the servers said. */
async function until<T>(what: string, check: () => Promise<T | undefined>, deadlineMs = DEADLINE_MS): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      const tails = servers
        .map(
          (s, i) =>
            `--- replica ${i} (${s.child.exitCode ?? s.child.signalCode ?? 'running'}) stderr ---\n${s.stderr().slice(-2000)}`,
        )
        .join('\n');
      throw new Error(`${what}: not so after ${Math.round(deadlineMs / 1000)} s\n${tails}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

describe('three servers, one PostgreSQL, two Docker engines', () => {
  it('runs 30 conversations to the end through a SIGKILL, once each, streamed across replicas, within the per-user limit, leaving no container behind', async () => {
    const url = new URL(process.env.DATABASE_URL ?? 'postgres://acs:acs@127.0.0.1:5432/acs_test');
    url.pathname = `/${database}`;
    const env = {
      ACS_API_KEYS: [...users, probe].map((u) => `${u.id}:${u.key}`).join(','),
      SESSION_API_KEY: 'unused-default-key-0123456789',
      DATABASE_URL: url.toString(),
      ACS_SANDBOXES: 'docker',
      ACS_DOCKER_HOSTS: `unix:///var/run/docker.sock?name=one&max=40,unix://${engine!.socket}?name=two&max=40`,
      ACS_SANDBOX_NETWORK: 'none',
      ACS_SANDBOX_MEMORY_MB: '256',
      ACS_SANDBOX_CPUS: '0.5',
      ACS_MAX_RUNNING_SANDBOXES: String(LIMIT),
      ACS_SANDBOX_IDLE_MINUTES: '0',
      ACS_SECRET_KEY: randomBytes(32).toString('hex'),
    };
    for (let i = 0; i < 3; i++) servers.push(await startServer({ ...env, DATA_DIR: freshDataDir() }));
    const [a, b, c] = servers as [Running, Running, Running];
    for (const user of users)
      await body(
        call(a.url, '/api/settings', user.key, {
          llm_model: 'openai/scripted',
          llm_api_key: 'sk-cluster',
          llm_base_url: llm!.baseUrl,
        }),
      );

    // The per-user limit under concurrent starts spread over the three replicas.
    const starts = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        call(servers[i % 3]!.url, '/api/v1/sandboxes', probe.key, { sandbox_spec_id: 'bookworm' }),
      ),
    );
    expect(starts.map((r) => r.status).sort()).toEqual([
      ...Array<number>(LIMIT).fill(200),
      ...Array<number>(12 - LIMIT).fill(429),
    ]);
    for (const started of starts.filter((r) => r.status === 200)) {
      const { id } = (await started.json()) as { id: string };
      await body(call(b.url, `/api/v1/sandboxes/${id}`, probe.key, undefined, 'DELETE'));
    }

    // 30 conversations, each started through one of the replicas (which runs it).
    const conversations: { id: string; user: (typeof users)[number]; via: number }[] = [];
    await Promise.all(
      Array.from({ length: CONVERSATIONS }, async (_, i) => {
        const user = users[i % USERS]!;
        const via = i % 3;
        const { conversation_id: id } = await body<{ conversation_id: string }>(
          call(servers[via]!.url, '/api/conversations', user.key, {
            initial_user_msg: `${marker('cluster')} job ${i}`,
          }),
        );
        conversations.push({ id, user, via });
      }),
    );

    // A client reads them all through A at once (which refreshes their sandboxes, still being
    // brought up by B and C: none may be taken for vanished).
    const early = await Promise.all(
      users.map(async (u) => {
        const own = conversations.filter((x) => x.user === u);
        return body<({ status: string } | null)[]>(
          call(a.url, `/api/v1/app-conversations?${own.map((x) => `ids=${x.id}`).join('&')}`, u.key),
        );
      }),
    );
    expect(early.flat().filter((x) => x !== null)).toHaveLength(CONVERSATIONS);

    // A live stream on C of a conversation A runs.
    const watched = conversations.find((x) => x.via === 0)!;
    const streamed: ConversationEvent[] = [];
    const stream = new AbortController();
    const streaming = (async () => {
      const response = await fetch(`${c.url}/api/v1/app-conversations/${watched.id}/events/stream`, {
        headers: { 'X-Session-API-Key': watched.user.key },
        signal: stream.signal,
      });
      for await (const message of sseMessages(response.body!)) {
        // Stored events only: a delta (a piece of an answer being written) has no id.
        if (message.fields['data'] && message.fields['id'])
          streamed.push(JSON.parse(message.fields['data']) as ConversationEvent);
      }
    })().catch(() => undefined);

    // SIGKILL B once several of its conversations are mid-run.
    const ofB = conversations.filter((x) => x.via === 1);
    await until('B to be running its conversations', async () => {
      let midway = 0;
      for (const x of ofB)
        if ((await allEvents(b.url, x.user.key, x.id)).filter((e) => e.kind === 'action').length >= 2) midway++;
      return midway >= 3 ? true : undefined;
    });
    b.child.kill('SIGKILL');
    await b.exited;

    // All 30 finish, read through A (B's are taken over by A or C).
    const records = await until('all 30 conversations to finish', async () => {
      const found = await Promise.all(
        conversations.map(
          async (x) =>
            (
              await body<({ execution_status: string | null; sandbox_id: string | null } | null)[]>(
                call(a.url, `/api/v1/app-conversations?ids=${x.id}`, x.user.key),
              )
            )[0],
        ),
      );
      return found.every((r) => r?.execution_status === 'finished') ? found : undefined;
    });

    for (const [i, x] of conversations.entries()) {
      const log = await allEvents(a.url, x.user.key, x.id);
      expect(
        log.map((e) => e.id),
        `ids of conversation ${x.id}`,
      ).toEqual(log.map((_, n) => n + 1));
      const actions = log.filter((e) => e.kind === 'action');
      const observed = log.filter((e) => e.kind === 'observation');
      // Every call observed exactly once; each step's call made once.
      for (const action of actions)
        expect(
          observed.filter(
            (o) => o.kind === 'observation' && action.kind === 'action' && o.tool_call_id === action.tool_call_id,
          ),
          `observations of ${action.kind === 'action' ? action.tool_call_id : ''}`,
        ).toHaveLength(1);
      expect(new Set(actions.map((e) => e.kind === 'action' && e.tool_call_id)).size).toBe(actions.length);
      // In the sandbox: each step's line at most once; once for every step that was not cut short by the kill.
      const interrupted = new Set(
        observed
          .filter((o) => o.kind === 'observation' && o.is_error)
          .map((o) => o.kind === 'observation' && o.tool_call_id),
      );
      const file = await body<{ code: string }>(
        call(a.url, `/api/conversations/${x.id}/select-file?file=steps.log`, x.user.key),
      );
      for (let step = 0; step < STEPS; step++) {
        const times = file.code.split('\n').filter((l) => l === `step-${step}`).length;
        expect(times, `step ${step} of conversation ${i}`).toBeLessThanOrEqual(1);
        if (!interrupted.has(`call_step_${step}`)) expect(times, `step ${step} of conversation ${i}`).toBe(1);
      }
    }

    // C's stream followed A's conversation: every event, in order, the same as the log.
    const watchedLog = await allEvents(a.url, watched.user.key, watched.id);
    await until(
      'the stream on C to reach the last event',
      () => Promise.resolve(streamed.at(-1)?.id === watchedLog.at(-1)?.id ? true : undefined),
      60_000,
    );
    stream.abort();
    await streaming;
    expect(streamed.map((e) => e.id)).toEqual(watchedLog.map((e) => e.id));

    // Both engines ran sandboxes; every container is a live record's, and none is left after the deletes.
    const sandboxIds = new Set(records.map((r) => r!.sandbox_id!));
    expect(sandboxIds.size).toBe(CONVERSATIONS);
    const engines = [new Docker(), new Docker({ socketPath: engine!.socket })];
    const ours = `io.acs.user-id`;
    const held = await Promise.all(
      engines.map(async (docker) =>
        (await docker.listContainers({ all: true, filters: { label: [ours] } }))
          .filter((cn) => users.some((u) => cn.Labels[ours] === u.id))
          .map((cn) => cn.Labels['io.acs.sandbox-id']!),
      ),
    );
    expect(held[0]!.length).toBeGreaterThan(0);
    expect(held[1]!.length).toBeGreaterThan(0);
    expect(new Set(held.flat())).toEqual(sandboxIds);
    for (const x of conversations) {
      const record = records[conversations.indexOf(x)]!;
      await body(call(c.url, `/api/v1/sandboxes/${record.sandbox_id}`, x.user.key, undefined, 'DELETE'));
    }
    const left = await until(
      'the deleted sandboxes’ containers to be gone',
      async () => {
        const remaining = await Promise.all(
          engines.map(async (docker) =>
            (await docker.listContainers({ all: true, filters: { label: [ours] } })).filter((cn) =>
              [...users, probe].some((u) => cn.Labels[ours] === u.id),
            ),
          ),
        );
        return remaining.flat().length === 0 ? 0 : undefined;
      },
      120_000,
    );
    expect(left).toBe(0);
    console.log(
      `cluster: ${CONVERSATIONS} conversations, engine one ran ${held[0]!.length}, engine two ${held[1]!.length}; B killed with ${ofB.length} of its conversations`,
    );
  });
});
