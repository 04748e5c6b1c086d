import { afterEach, describe, expect, it } from 'vitest';
import pg from 'pg';
import { createAesGcmCipher, createAgentConversationService, type AgentConversationService } from '@acs/core';
import type { ConversationEvent } from '@acs/core/schemas';
import { expectOk } from '@acs/core/testing';
import { createMemoryPorts, ScriptedLlm } from '@acs/testing';
import { createAgent } from '@acs/agent';
import { createPostgresStorage, fromPgPool, type PostgresStorage } from '@acs/adapter-postgres';
import { clients, kubernetesRuntime, onCluster, testNamespace } from './cluster.js';

const specs = [{ id: 'bookworm', image: 'acs-sandbox:bookworm', working_dir: '/workspace' }];
const LLM = { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test-key' };
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://acs:acs@127.0.0.1:5432/acs_test';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const bash = (command: string) => ({ tool_calls: [{ name: 'execute_bash', arguments: { command } }] });

/** Waits (up to 90 s) until `check` holds, failing with what it last saw. */
async function eventually<T>(what: string, read: () => Promise<T>, check: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 90_000;
  let last = await read();
  while (!check(last)) {
    if (Date.now() > deadline)
      throw new Error(`${what}: still not so after 90 s; last seen ${JSON.stringify(last).slice(0, 2000)}`);
    await sleep(100);
    last = await read();
  }
  return last;
}

async function eventsOf(service: AgentConversationService, id: string): Promise<ConversationEvent[]> {
  return (await expectOk(service.conversations.searchEvents('alice', id, { after: 0, kinds: null, limit: 100 }))).items;
}

const observations = (events: ConversationEvent[]) =>
  events.flatMap((e) => (e.kind === 'observation' ? [{ content: e.content, exit_code: e.exit_code }] : []));
const executionStatus = async (service: AgentConversationService, id: string) =>
  (await expectOk(service.conversations.get('alice', id))).record.execution_status;
/** The conversation's status and its sandbox's, for what a wait saw last. */
const progressOf = async (service: AgentConversationService, id: string) => {
  const { record } = await expectOk(service.conversations.get('alice', id));
  const box = record.sandbox_id ? await service.sandboxes.get('alice', record.sandbox_id) : null;
  return {
    status: record.status,
    execution_status: record.execution_status,
    sandbox: box?.isOk() ? { status: box.value.status, detail: box.value.status_detail } : null,
  };
};

const opened: { close: () => Promise<void> }[] = [];
afterEach(async () => {
  for (const item of opened.splice(0).reverse()) await item.close();
});

onCluster('conversations on Kubernetes sandboxes', (kubeConfig) => {
  const namespace = testNamespace(kubeConfig);
  const { core, apps } = clients(kubeConfig);

  describe('a conversation in a Kubernetes sandbox', () => {
    it("runs the agent's commands in the pod, is paused (scaled to zero), resumed with its files, and deleted with its claim", async () => {
      const ns = await namespace;
      const runtime = kubernetesRuntime(kubeConfig, ns);
      const ports = createMemoryPorts({ specs });
      const service = createAgentConversationService(
        { agent: createAgent(), ...ports, runtime },
        { pollIntervalMs: 100 },
      );
      opened.push({ close: () => service.close() });
      await expectOk(service.settings.store('alice', LLM));
      ports.llm.push(bash('echo "written in $(hostname)" > notes.txt && cat notes.txt'), {
        content: 'I wrote notes.txt',
      });

      const created = await expectOk(service.conversations.create('alice', { initial_user_msg: 'write a note' }));
      const id = created.conversation_id;
      await eventually(
        'the first task to finish',
        () => progressOf(service, id),
        (p) => p.execution_status === 'finished',
      );
      const box = (await expectOk(service.conversations.get('alice', id))).record.sandbox_id!;
      expect(observations(await eventsOf(service, id))).toEqual([
        { content: expect.stringContaining(`written in ${runtime.podName(box)}`) as unknown, exit_code: 0 },
      ]);

      await expectOk(service.sandboxes.pause('alice', box));
      expect((await expectOk(service.sandboxes.get('alice', box))).status).toBe('PAUSED');
      expect((await apps.readNamespacedStatefulSet({ name: runtime.setName(box), namespace: ns })).spec?.replicas).toBe(
        0,
      );
      await eventually(
        'the pod to be gone',
        () =>
          core.readNamespacedPod({ name: runtime.podName(box), namespace: ns }).then(
            () => 'still there',
            () => 'gone',
          ),
        (s) => s === 'gone',
      );

      // A message with work resumes the sandbox (a new pod on the same claim); the agent reads its file.
      ports.llm.push(bash('cat /workspace/notes.txt'), { content: 'it says what I wrote' });
      await expectOk(
        service.conversations.sendMessage('alice', id, {
          role: 'user',
          content: [{ type: 'text', text: 'what did you write?' }],
          run: true,
        }),
      );
      await eventually(
        'the second task to finish',
        async () => observations(await eventsOf(service, id)).length,
        (n) => n === 2,
      );
      expect((await expectOk(service.sandboxes.get('alice', box))).status).toBe('RUNNING');
      expect(observations(await eventsOf(service, id))[1]).toEqual({
        content: expect.stringContaining(`written in ${runtime.podName(box)}`) as unknown,
        exit_code: 0,
      });
      await eventually(
        'the conversation to finish',
        () => executionStatus(service, id),
        (s) => s === 'finished',
      );

      // Deleting the conversation deletes its sandbox: the StatefulSet, the pod and the claim go.
      await expectOk(service.conversations.delete('alice', id));
      expect((await service.sandboxes.get('alice', box)).isErr()).toBe(true);
      await eventually(
        'the StatefulSet and the claim to be gone',
        async () => ({
          set: await apps.readNamespacedStatefulSet({ name: runtime.setName(box), namespace: ns }).then(
            () => true,
            () => false,
          ),
          claim: await core.readNamespacedPersistentVolumeClaim({ name: runtime.claimName(box), namespace: ns }).then(
            () => true,
            () => false,
          ),
        }),
        (left) => !left.set && !left.claim,
      );
    });

    it("two service replicas on one PostgreSQL share the cluster: one per-user limit, and either one runs the other's conversation", async () => {
      const ns = await namespace;
      const schema = `k8s_${Date.now().toString(36)}`;
      const llm = new ScriptedLlm();
      const cipher = createAesGcmCipher({ keys: { k1: new Uint8Array(32).fill(7) }, currentKeyId: 'k1' });
      const replica = async () => {
        const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
        pool.on('error', () => {});
        const storage: PostgresStorage = await createPostgresStorage({
          db: fromPgPool(pool),
          cipher,
          schema,
          migrations: 'auto',
        }).catch((error: unknown) => {
          throw new Error(
            `These tests need a PostgreSQL server at ${DATABASE_URL} (set DATABASE_URL, or run .ci/run once): ${(error as Error).message}`,
            { cause: error },
          );
        });
        // Each replica has a runtime of its own on the same namespace, as separate processes would.
        const service = createAgentConversationService(
          {
            ...createMemoryPorts({ specs }),
            agent: createAgent(),
            ...storage,
            runtime: kubernetesRuntime(kubeConfig, ns),
            llm,
          },
          { pollIntervalMs: 100, maxRunningSandboxesPerUser: 2, atSandboxLimit: 'refuse' },
        );
        opened.push({
          close: async () => {
            await service.close();
            await storage.close();
            await pool.end();
          },
        });
        return service;
      };
      const a = await replica();
      const b = await replica();
      opened.push({
        close: async () => {
          const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
          await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
          await pool.end();
        },
      });

      // Four concurrent starts over both replicas: the shared lock lets exactly two through.
      const before = new Set(
        (await apps.listNamespacedStatefulSet({ namespace: ns })).items.map(
          (s) => s.metadata?.labels?.['io.acs.sandbox-id'],
        ),
      );
      const starts = await Promise.all([a, b, a, b].map((s) => s.sandboxes.start('alice')));
      expect(starts.filter((r) => r.isOk())).toHaveLength(2);
      expect(starts.filter((r) => r.isErr()).map((r) => r._unsafeUnwrapErr().type)).toEqual([
        'SandboxCapReached',
        'SandboxCapReached',
      ]);
      const boxes = starts.flatMap((r) => (r.isOk() ? [r.value.id] : []));
      // The StatefulSets are created in the background of the starts: wait for them, then none more.
      const made = async () =>
        (await apps.listNamespacedStatefulSet({ namespace: ns, labelSelector: 'io.acs.user-id=alice' })).items
          .map((s) => s.metadata?.labels?.['io.acs.sandbox-id'])
          .filter((box) => !before.has(box))
          .sort();
      await eventually('the two StatefulSets to be made', made, (sets) => sets.length >= 2);
      await Promise.all([a.idle(), b.idle()]);
      expect(await made()).toEqual([...boxes].sort());
      for (const box of boxes) {
        await eventually(
          `sandbox ${box} to run, seen from the other replica`,
          async () => (await expectOk(b.sandboxes.get('alice', box))).status,
          (s) => s === 'RUNNING',
        );
        await expectOk(a.sandboxes.delete('alice', box));
      }

      // A conversation started on A; its follow-up is sent through B, whose agent runs in the same pod.
      await expectOk(a.settings.store('alice', LLM));
      llm.push(bash('echo from-a > shared.txt'), { content: 'wrote it' });
      const { conversation_id: id } = await expectOk(
        a.conversations.create('alice', { initial_user_msg: 'write shared.txt' }),
      );
      await eventually(
        'the task on A to finish',
        () => executionStatus(a, id),
        (s) => s === 'finished',
      );
      llm.push(bash('cat shared.txt; hostname'), { content: 'read it' });
      await expectOk(
        b.conversations.sendMessage('alice', id, {
          role: 'user',
          content: [{ type: 'text', text: 'read it back' }],
          run: true,
        }),
      );
      const seen = await eventually(
        'the follow-up to run',
        async () => observations(await eventsOf(b, id)),
        (o) => o.length === 2,
      );
      const box = (await expectOk(b.conversations.get('alice', id))).record.sandbox_id!;
      expect(seen[1]).toEqual({
        content: expect.stringMatching(new RegExp(`from-a\\n.*acs-${box}-0`, 's')) as unknown,
        exit_code: 0,
      });
      await eventually(
        'the conversation to finish',
        () => executionStatus(a, id),
        (s) => s === 'finished',
      );
      await expectOk(b.sandboxes.delete('alice', box));
    });
  });
});
