import { afterEach, describe, expect, it } from 'vitest';
import pg from 'pg';
import { ResultAsync } from 'neverthrow';
import {
  createAgentConversationService,
  type AgentConversationService,
  type AgentConversationServiceOptions,
} from '@acs/core';
import { InProcessLocks, type SandboxStore } from '@acs/core/ports';
import type { SandboxLifecycleStatus } from '@acs/core/schemas';
import { expectOk } from '@acs/core/testing';
import { createMemoryPorts, FakeSandboxRuntime } from '@acs/testing';
import { createAgent } from '@acs/agent';
import { createPostgresStorage, fromPgPool, PostgresLocks, type PostgresStorage } from '@acs/adapter-postgres';
import { DATABASE_URL, freshSchema, postgresDatabase, testCipher } from './databases.js';

/**
 * Sandboxes of several replicas on one PostgreSQL: each replica has a pool, storage and locks
 * of its own, as separate processes would (one runtime stands for the engine they share).
 */
const opened: { service: AgentConversationService; storage: PostgresStorage; pool: pg.Pool }[] = [];

/** A database schema and a runtime that replicas share; `add()` starts one more replica on them. */
async function cluster(options: AgentConversationServiceOptions, override: { locks?: 'per-process memory' } = {}) {
  await postgresDatabase.executor();
  const schema = freshSchema(postgresDatabase);
  const runtime = new FakeSandboxRuntime();
  const add = async () => {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
    pool.on('error', () => {});
    const storage = await createPostgresStorage({
      db: fromPgPool(pool),
      cipher: testCipher(),
      schema,
      migrations: 'auto',
    });
    const locks = override.locks ? new InProcessLocks() : storage.locks;
    // Counts the scans of every user's sandboxes (what a maintenance round does first).
    const scans = { count: 0 };
    const sandboxes: SandboxStore = Object.assign(Object.create(storage.sandboxes) as SandboxStore, {
      listByStatus: (userId: string | null, statuses: readonly SandboxLifecycleStatus[]) => {
        if (userId === null) scans.count++;
        return storage.sandboxes.listByStatus(userId, statuses);
      },
    });
    const service = createAgentConversationService(
      { ...createMemoryPorts(), agent: createAgent(), ...storage, sandboxes, locks, runtime },
      { pollIntervalMs: 5, ...options },
    );
    opened.push({ service, storage, pool });
    return { service, storage, scans };
  };
  return { runtime, add };
}

async function replicas(
  count: number,
  options: AgentConversationServiceOptions,
  override: { locks?: 'per-process memory' } = {},
) {
  const { runtime, add } = await cluster(options, override);
  const made = [];
  for (let i = 0; i < count; i++) made.push(await add());
  return { runtime, replicas: made };
}

afterEach(async () => {
  for (const { service, storage, pool } of opened.splice(0)) {
    await service.close();
    await storage.close();
    await pool.end();
  }
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits (up to 60 s) until `check` holds, failing with what it last saw. */
async function eventually<T>(what: string, read: () => Promise<T>, check: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 60_000;
  let last: T = await read();
  while (!check(last)) {
    if (Date.now() > deadline) throw new Error(`${what}: still not so after 60 s; last seen ${JSON.stringify(last)}`);
    await sleep(20);
    last = await read();
  }
  return last;
}

describe('sandboxes of several replicas on one PostgreSQL', () => {
  const startsAcross = async (services: AgentConversationService[], n: number) =>
    Promise.all(Array.from({ length: n }, (_, i) => services[i % services.length]!.sandboxes.start('alice')));

  it('holds the per-user limit under concurrent starts spread over three replicas', async () => {
    const {
      replicas: [a, b, c],
    } = await replicas(3, { maxRunningSandboxesPerUser: 3 });
    const results = await startsAcross([a!.service, b!.service, c!.service], 24);
    expect(results.filter((r) => r.isOk())).toHaveLength(3);
    expect(results.filter((r) => r.isErr()).map((r) => r._unsafeUnwrapErr().type)).toEqual(
      Array(21).fill('SandboxCapReached'),
    );
    const stored = await expectOk(a!.storage.sandboxes.listByStatus('alice', ['STARTING', 'RUNNING']));
    expect(stored).toHaveLength(3);
  });

  it('exceeds the limit when each replica locks only in its own memory (what the shared locks prevent)', async () => {
    // The control of the test above: the same starts with per-process locks slip past the limit.
    let worst = 0;
    for (let round = 0; round < 5 && worst <= 3; round++) {
      const {
        replicas: [a, b, c],
      } = await replicas(3, { maxRunningSandboxesPerUser: 3 }, { locks: 'per-process memory' });
      await startsAcross([a!.service, b!.service, c!.service], 24);
      worst = Math.max(
        worst,
        (await expectOk(a!.storage.sandboxes.listByStatus('alice', ['STARTING', 'RUNNING']))).length,
      );
    }
    expect(worst).toBeGreaterThan(3);
  });

  it('holds the limit for resumes on different replicas too', async () => {
    const {
      runtime,
      replicas: [a, b],
    } = await replicas(2, { maxRunningSandboxesPerUser: 1 });
    const one = await expectOk(a!.service.sandboxes.start('alice'));
    await a!.service.idle();
    await expectOk(a!.service.sandboxes.pause('alice', one.id));
    const two = await expectOk(b!.service.sandboxes.start('alice'));
    await b!.service.idle();
    await expectOk(b!.service.sandboxes.pause('alice', two.id));
    // The engine takes a while to bring a sandbox back: the count must wait for it, not only for the check.
    const resume = runtime.resume.bind(runtime);
    runtime.resume = (id) => new ResultAsync(sleep(200).then(() => resume(id)));
    const resumed = await Promise.all([
      a!.service.sandboxes.resume('alice', one.id),
      b!.service.sandboxes.resume('alice', two.id),
    ]);
    expect(resumed.filter((r) => r.isOk())).toHaveLength(1);
    expect(resumed.find((r) => r.isErr())?._unsafeUnwrapErr().type).toBe('SandboxCapReached');
  });

  it('makes room from finished conversations under the same lock: concurrent creates over three replicas get exactly one sandbox per finished one', async () => {
    const {
      replicas: [a, b, c],
    } = await replicas(3, { maxRunningSandboxesPerUser: 3, reconcileIntervalMs: 0 });
    await expectOk(a!.service.settings.store('alice', { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test' }));
    // Three conversations that finish at once (the scripted model's text reply), on replica A.
    const finished: string[] = [];
    for (let i = 0; i < 3; i++) {
      const created = await expectOk(a!.service.conversations.create('alice', { initial_user_msg: `task ${i}` }));
      await a!.service.idle();
      const record = (await expectOk(a!.service.conversations.get('alice', created.conversation_id))).record;
      expect(record.execution_status).toBe('finished');
      finished.push(record.sandbox_id!);
    }
    // A finish counts once it is a few seconds old (core's MAKE_ROOM_GRACE_MS, 5 s).
    await sleep(5_200);

    const services = [a!.service, b!.service, c!.service];
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        services[i % 3]!.conversations.create('alice', { initial_user_msg: `at once ${i}` }),
      ),
    );
    expect(results.filter((r) => r.isOk())).toHaveLength(3);
    expect(results.filter((r) => r.isErr()).map((r) => r._unsafeUnwrapErr())).toEqual(
      Array(9).fill({ type: 'SandboxCapReached', limit: 3, why: 'none_at_rest' }),
    );
    await Promise.all(services.map((s) => s.idle()));
    for (const id of finished) expect((await expectOk(a!.storage.sandboxes.get('alice', id)))?.status).toBe('PAUSED');
    expect(await expectOk(a!.storage.sandboxes.listByStatus('alice', ['STARTING', 'RUNNING']))).toHaveLength(3);
    expect(await expectOk(a!.service.conversations.count('alice', {}))).toBe(6);
  });

  it('pauses idle sandboxes from one replica only, sees use recorded on another, and hands the lead over when the leader goes', async () => {
    const { runtime, add } = await cluster({
      idlePauseAfterMs: 400,
      maintenanceIntervalMs: 25,
      reconcileIntervalMs: 0,
    });
    const a = await add();
    const used = await expectOk(a.service.sandboxes.start('alice'));
    const unused = await expectOk(a.service.sandboxes.start('alice'));
    await a.service.idle();
    // A leads maintenance before B exists (its rounds run every 25 ms); B joins.
    await sleep(100);
    const b = await add();
    // An agent on replica B keeps using one sandbox; nobody uses the other.
    const until = Date.now() + 1_500;
    while (Date.now() < until) {
      b.service.sandboxes.touch('alice', used.id);
      await sleep(50);
    }
    expect((await expectOk(a.service.sandboxes.get('alice', unused.id))).status).toBe('PAUSED');
    expect((await expectOk(a.service.sandboxes.get('alice', used.id))).status).toBe('RUNNING');
    expect(runtime.calls.filter((c) => c.operation === 'pause' && c.sandboxId === unused.id)).toHaveLength(1);
    // Only the leader looked for idle sandboxes (a round every 25 ms); B's rounds did nothing.
    expect(a.scans.count).toBeGreaterThan(10);
    expect(b.scans.count).toBe(0);

    // The leader's database session ends (as a crash would end it; its service is left running
    // but can no longer lead); B leads now and pauses what nobody uses any more.
    expect(a.storage.locks).toBeInstanceOf(PostgresLocks);
    (a.storage.locks as PostgresLocks).close();
    await eventually(
      'the used sandbox is paused once nobody uses it',
      () => expectOk(b.service.sandboxes.get('alice', used.id)),
      (s) => s.status === 'PAUSED',
    );
    expect(b.scans.count).toBeGreaterThan(0);
  });

  it('leaves a sandbox another replica is still bringing up alone when it reconciles or reads it', async () => {
    const {
      runtime,
      replicas: [a, b],
    } = await replicas(2, { reconcileIntervalMs: 0 });
    const spec = await expectOk(a!.service.sandboxes.defaultSpec());
    // A has written the record but not created the container yet (a conversation start writes its other records first).
    const reservation = await expectOk(a!.service.sandboxes.reserve('alice', spec));
    expect(runtime.peek(reservation.record.id)).toBeUndefined();
    await expectOk(b!.service.sandboxes.reconcile());
    expect((await expectOk(b!.storage.sandboxes.get('alice', reservation.record.id)))?.status).toBe('STARTING');
    // Nor does a read through B (a conversation list refreshes its sandboxes): the benchmark caught that one.
    expect((await expectOk(b!.service.sandboxes.get('alice', reservation.record.id))).status).toBe('STARTING');
    expect(
      (await expectOk(b!.service.sandboxes.liveRecords('alice', [reservation.record.id]))).get(reservation.record.id)
        ?.status,
    ).toBe('STARTING');
    reservation.commit();
    expect((await a!.service.sandboxes.whenSettled('alice', reservation.record.id))?.status).toBe('RUNNING');
  });

  it('shares one warm pool: filled once under the shared lock, each pooled sandbox claimed by one start only', async () => {
    const pool = { sandboxPool: { bookworm: 3 }, sandboxPoolRefillDelayMs: 0, sandboxPoolCheckIntervalMs: 0 };
    const {
      runtime,
      replicas: [a, b, c],
    } = await replicas(3, pool);
    const services = [a!.service, b!.service, c!.service];
    await Promise.all(services.map((s) => s.sandboxes.fillPool()));
    const ready = async () => (await expectOk(a!.service.sandboxes.poolStatus())).bookworm;
    await eventually('three ready pooled sandboxes', ready, (p) => p?.ready === 3);
    expect(await ready()).toEqual({ size: 3, ready: 3, filling: 0 });
    const pooled = new Set(
      (await expectOk(a!.storage.sandboxes.listByStatus('acs:sandbox-pool', ['RUNNING']))).map((r) => r.id),
    );
    const created = runtime.calls.filter((call) => call.operation === 'create').length;
    expect(created).toBe(3);

    const starts = await Promise.all(
      Array.from({ length: 12 }, (_, i) => services[i % 3]!.sandboxes.start(`user-${i}`)),
    );
    const infos = starts.map((r) => r._unsafeUnwrap());
    expect(new Set(infos.map((s) => s.id)).size).toBe(12);
    const claimed = infos.filter((s) => pooled.has(s.id));
    expect(claimed.length).toBeGreaterThanOrEqual(1);
    for (const s of claimed) expect(s.status).toBe('RUNNING');
    for (const [i, s] of infos.entries()) expect(await expectOk(a!.storage.sandboxes.ownerOf(s.id))).toBe(`user-${i}`);
    // Refilled to three again, not to three per replica.
    await Promise.all(services.map((s) => s.idle()));
    await Promise.all(services.map((s) => s.sandboxes.fillPool()));
    await eventually('the pool refilled', ready, (p) => p?.ready === 3);
    expect(
      (await expectOk(a!.storage.sandboxes.listByStatus('acs:sandbox-pool', ['STARTING', 'RUNNING']))).length,
    ).toBe(3);
  });
});
