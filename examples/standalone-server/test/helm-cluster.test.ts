/**
 * The Helm chart deploy/helm/acs installed for real on the test cluster (scripts/k8s-cluster.sh):
 * the server's image (`npm run image`) and acs-postgres (deploy/compose/postgres) loaded onto the
 * node, two replicas on the chart's in-cluster PostgreSQL, a scripted model listening on the
 * node's address on the pods' bridge (where the pods reach it), the replicas reached through
 * port-forwards on 127.0.0.1. A conversation runs with its sandbox as a pod; the pod of the
 * replica running it is deleted in the middle of a tool call; the other replica finishes it
 * with no event lost or doubled, in the same sandbox pod. `helm uninstall` then leaves no
 * sandbox pod, StatefulSet or claim behind: the chart's pre-delete hook stops the replicas and
 * prunes them.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import Docker from 'dockerode';
import { PortForward, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { marker, scriptedCompletion, startFakeOpenAi, toolCall, type FakeOpenAi } from '@acs/testing';
import type { ConversationEvent } from '@acs/core/schemas';
import {
  clients,
  KUBECONFIG_PATH,
  onCluster,
  testNamespace,
} from '../../../packages/adapter-kubernetes/test/cluster.js';
import { CHART, onHelm, runHelm } from '../../../packages/adapter-kubernetes/test/helm.js';
import { allEvents, body, call, waitFor } from './process.js';
import { ensureServerImage, SERVER_IMAGE } from './server-image.js';
import { repositoryRoot, runCommand } from './containers.js';

/** The node's address on the pods' bridge (scripts/k8s-cluster.sh): pods reach the host there. */
const BRIDGE_ADDRESS = '10.89.0.1';
const POSTGRES_IMAGE = 'acs-postgres:15';
const RELEASE = 't';
const SERVICE_PODS = `app.kubernetes.io/name=acs,app.kubernetes.io/instance=${RELEASE}`;
const SANDBOX_OBJECTS = 'io.acs.managed=true';

/** Builds acs-postgres from deploy/compose/postgres (cached layers: seconds once built) and loads both images onto the node. */
async function loadImages(docker: Docker): Promise<void> {
  await ensureServerImage(docker);
  const base = await docker
    .getImage('acs-debian:bookworm-slim')
    .inspect()
    .then(
      () => 'acs-debian:bookworm-slim',
      () => 'debian:bookworm-slim',
    );
  for (const [command, args] of [
    ['docker', ['build', '-t', POSTGRES_IMAGE, '--build-arg', `BASE_IMAGE=${base}`, 'deploy/compose/postgres']],
    ['bash', ['scripts/k8s-cluster.sh', 'import-image', SERVER_IMAGE, POSTGRES_IMAGE]],
  ] as const) {
    const { code, output } = await runCommand(command, args, { cwd: repositoryRoot, deadlineMs: 900_000 });
    if (code !== 0) throw new Error(`${command} ${args.join(' ')} failed (exit ${code}):\n${output.slice(-6000)}`);
  }
}

/**
 * A port of 127.0.0.1 forwarded to `port` of a pod. The port-forward protocol is client-node's
 * `PortForward` (one stream through the API server per connection); only the local listener that
 * hands it each connection is here.
 */
async function forward(kc: KubeConfig, namespace: string, pod: string, port: number) {
  const forwarder = new PortForward(kc);
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    forwarder.portForward(namespace, pod, [port], socket, null, socket).catch(() => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port: local } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${local}`,
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

/** The values of the install: images from the node, small claims and requests for a two-core machine, the model's address allowed. */
function valuesFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'acs-helm-values-')), 'values.yaml');
  writeFileSync(
    file,
    JSON.stringify({
      replicaCount: 2,
      image: { tag: SERVER_IMAGE.split(':')[1], pullPolicy: 'Never' },
      resources: { requests: { cpu: '50m', memory: '128Mi' }, limits: { memory: '1Gi' } },
      postgresql: { image: { pullPolicy: 'Never' }, persistence: { size: '1Gi' } },
      kubernetes: { imagePullPolicy: 'Never', workspaceSize: '1Gi' },
      extraEnv: [{ name: 'ACS_LLM_ALLOWED_HOSTS', value: BRIDGE_ADDRESS }],
    }),
  );
  return file;
}

/** The model's script: the agent sleeps in its sandbox (where the takeover happens), then finishes. */
function scriptTakeover(llm: FakeOpenAi): void {
  llm.script('helm-takeover', (turn) => ({
    status: 200,
    body: scriptedCompletion(
      turn,
      turn === 0
        ? {
            content: null,
            tool_calls: [toolCall('call_sleep_1', 'execute_bash', { command: 'sleep 300', timeout: 600 })],
          }
        : {
            content: null,
            tool_calls: [toolCall(`call_finish_${turn}`, 'finish', { message: 'Carried on elsewhere.' })],
          },
    ),
  }));
}

/** What went wrong around a failed wait: each pod of the namespace, its state and the end of its log. */
async function podReport(kc: KubeConfig, namespace: string): Promise<string> {
  const { core } = clients(kc);
  const pods = await core.listNamespacedPod({ namespace }).catch(() => ({ items: [] as V1Pod[] }));
  const parts = await Promise.all(
    pods.items.map(async (pod) => {
      const name = pod.metadata!.name!;
      const log = await core.readNamespacedPodLog({ name, namespace, tailLines: 40 }).catch((e: Error) => e.message);
      return `--- ${name} (${pod.status?.phase}) ---\n${log}`;
    }),
  );
  return parts.join('\n');
}

/** Each tool call id with how many actions and observations name it. */
function callCounts(events: readonly ConversationEvent[]): Record<string, string> {
  const counts: Record<string, { actions: number; observations: number }> = {};
  for (const e of events) {
    const id = e.kind === 'action' || e.kind === 'observation' ? e.tool_call_id : null;
    if (!id) continue;
    counts[id] ??= { actions: 0, observations: 0 };
    if (e.kind === 'action') counts[id].actions += 1;
    else counts[id].observations += 1;
  }
  return Object.fromEntries(Object.entries(counts).map(([id, c]) => [id, `${c.actions}/${c.observations}`]));
}

onHelm('the Helm chart installed on the test cluster', (helm) => {
  onCluster('the Helm chart installed on the test cluster', (kubeConfig) => {
    const namespace = testNamespace(kubeConfig);
    const docker = new Docker();
    let llm: FakeOpenAi | undefined;
    const closers: (() => void)[] = [];

    beforeAll(async () => {
      await loadImages(docker);
      llm = await startFakeOpenAi({ host: BRIDGE_ADDRESS });
      scriptTakeover(llm);
    }, 1_600_000);

    afterAll(async () => {
      for (const close of closers) close();
      await llm?.close();
    });

    it(
      'two replicas on the in-cluster PostgreSQL: the replica running a conversation is deleted, the other finishes it; uninstall removes the sandboxes',
      { timeout: 900_000 },
      async () => {
        const ns = await namespace;
        const { core, apps } = clients(kubeConfig);
        const helmArgs = ['-n', ns, '--kubeconfig', KUBECONFIG_PATH];
        const values = valuesFile();
        closers.push(() => rmSync(dirname(values), { recursive: true, force: true }));
        const startedAt = Date.now();
        const install = await runHelm(
          helm,
          ['install', RELEASE, CHART, ...helmArgs, '-f', values, '--wait', '--timeout', '5m'],
          400_000,
        );
        if (install.code !== 0)
          throw new Error(`helm install failed: ${install.stderr}\n${await podReport(kubeConfig, ns)}`);
        const installedAt = Date.now();

        const replicas = (await core.listNamespacedPod({ namespace: ns, labelSelector: SERVICE_PODS })).items;
        expect(replicas.map((p) => p.status?.phase)).toEqual(['Running', 'Running']);
        const [a, b] = replicas.map((p) => p.metadata!.name!) as [string, string];
        const keys = await core.readNamespacedSecret({ name: `${RELEASE}-acs-keys`, namespace: ns });
        const key = Buffer.from(keys.data!['session-api-key']!, 'base64').toString();
        const toA = await forward(kubeConfig, ns, a, 3000);
        const toB = await forward(kubeConfig, ns, b, 3000);
        closers.push(toA.close, toB.close);

        await body(
          call(toA.url, '/api/settings', key, {
            llm_model: 'openai/scripted-model',
            llm_api_key: 'sk-helm-takeover',
            llm_base_url: llm!.baseUrl,
          }),
        );
        const { conversation_id: id } = await body<{ conversation_id: string }>(
          call(toA.url, '/api/conversations', key, { initial_user_msg: `${marker('helm-takeover')} wait` }),
        );
        const report = async () =>
          `${JSON.stringify(await allEvents(toB.url, key, id).catch(String))}\n${await podReport(kubeConfig, ns)}`;
        await waitFor(
          'the sleep action, run by the first replica',
          async () => ((await allEvents(toA.url, key, id)).some((e) => e.kind === 'action') ? true : undefined),
          240_000,
        ).catch(async (error: Error) => {
          throw new Error(`${error.message}\n${await report()}`);
        });
        const [record] = await body<({ sandbox_id: string } | null)[]>(
          call(toA.url, `/api/v1/app-conversations?ids=${id}`, key),
        );
        const sandboxPods = (
          await core.listNamespacedPod({ namespace: ns, labelSelector: `io.acs.sandbox-id=${record!.sandbox_id}` })
        ).items;
        expect(sandboxPods).toHaveLength(1);
        const sandboxPod = sandboxPods[0]!.metadata!;

        await core.deleteNamespacedPod({ name: a, namespace: ns });
        const deletedAt = Date.now();
        await waitFor(
          'the other replica to take the conversation over and finish it',
          async () => {
            const [c] = await body<({ execution_status: string | null } | null)[]>(
              call(toB.url, `/api/v1/app-conversations?ids=${id}`, key),
            );
            return c?.execution_status === 'finished' ? true : undefined;
          },
          240_000,
        ).catch(async (error: Error) => {
          throw new Error(`${error.message}\n${await report()}`);
        });
        const log = await allEvents(toB.url, key, id);
        // Nothing lost (ids 1..n without a gap), nothing doubled (each call once asked, once answered).
        expect(log.map((e) => e.id)).toEqual(log.map((_, i) => i + 1));
        expect(callCounts(log)).toEqual({ call_sleep_1: '1/1', call_finish_1: '1/1' });
        expect(log.flatMap((e) => (e.kind === 'observation' ? [[e.tool_call_id, e.is_error]] : []))).toEqual([
          ['call_sleep_1', true],
          ['call_finish_1', false],
        ]);
        expect(llm!.requestsFor('helm-takeover')).toHaveLength(2);
        // Taken over by the other replica (not finished by the first one while it shut down).
        const logOfB = await core.readNamespacedPodLog({ name: b, namespace: ns });
        const tookOver = logOfB
          .split('\n')
          .filter((line) => line.includes('took over a running conversation nobody held') && line.includes(id));
        expect(tookOver, logOfB.slice(-4000)).toHaveLength(1);
        // The same sandbox pod, never replaced.
        const after = await core.readNamespacedPod({ name: sandboxPod.name!, namespace: ns });
        expect(after.metadata!.uid).toBe(sandboxPod.uid);
        const finishedAt = Date.now();
        console.log(
          `helm: install ${((installedAt - startedAt) / 1000).toFixed(1)} s; ` +
            `the other replica finished the conversation ${((finishedAt - deletedAt) / 1000).toFixed(1)} s after the first one's pod was deleted`,
        );

        const uninstall = await runHelm(
          helm,
          ['uninstall', RELEASE, ...helmArgs, '--wait', '--timeout', '5m'],
          400_000,
        );
        expect(uninstall.code, uninstall.stderr).toBe(0);
        const left = {
          pods: (await core.listNamespacedPod({ namespace: ns, labelSelector: SANDBOX_OBJECTS })).items.length,
          statefulSets: (await apps.listNamespacedStatefulSet({ namespace: ns, labelSelector: SANDBOX_OBJECTS })).items
            .length,
          claims: (await core.listNamespacedPersistentVolumeClaim({ namespace: ns })).items.map(
            (c) => c.metadata!.name,
          ),
        };
        // The database's claim is kept on purpose (a new install finds its data); no sandbox's is.
        expect(left).toEqual({ pods: 0, statefulSets: 0, claims: [`data-${RELEASE}-acs-postgresql-0`] });
      },
    );
  });
});
