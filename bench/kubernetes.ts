/**
 * Kubernetes sandboxes beside Docker's on this machine, through the same port (SandboxRuntime),
 * measured in one run with the two runtimes alternating, so both share the machine's noise.
 *
 *   bash scripts/k8s-cluster.sh up && npm run bench:kubernetes
 *   BENCH_K8S_SANDBOXES=10 BENCH_K8S_EXECS=50 npm run bench:kubernetes
 *
 * - create → running: `create`, then `inspect` every 20 ms until `running` (both runtimes call a
 *   sandbox running once it answers an exec);
 * - exec round trip: `exec(['true'])` in a running sandbox;
 * - write + read: a 64 KiB file written and read back (archive API on Docker, tar through exec on Kubernetes);
 * - pause, and resume → running: Docker freezes the container; Kubernetes scales the StatefulSet
 *   to zero (the pod ends) and back to one (a new pod on the same claim), so its resume is a start;
 * - delete: the call (Kubernetes: the StatefulSet, its pod and its claim are deleted in the background).
 *
 * Needs Docker with acs-sandbox:bookworm and the test cluster (its kubeconfig at
 * /var/lib/acs-k8s/admin.kubeconfig, or ACS_KUBECONFIG). Everything it makes is in a namespace
 * of its own (deleted at the end) or named acs-bench-k8s-… (removed at the end), also on failure.
 * Numbers, not assertions.
 */
import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import type { ResultAsync } from 'neverthrow';
import type { SandboxRuntime, SandboxRuntimeError } from '@acs/core/ports';
import { specFixture } from '@acs/core/testing';
import { createDockerRuntime } from '@acs/adapter-docker';
import { KubernetesSandboxRuntime } from '@acs/adapter-kubernetes';
import { percentile, positiveInt } from './stats.js';
import { runCleanups } from './cleanup.js';
import { printTable } from './report.js';

const SANDBOXES = positiveInt('BENCH_K8S_SANDBOXES', 5);
const EXECS = positiveInt('BENCH_K8S_EXECS', 30);
const KUBECONFIG = process.env.ACS_KUBECONFIG ?? '/var/lib/acs-k8s/admin.kubeconfig';
const spec = specFixture({
  id: 'bookworm',
  image: 'acs-sandbox:bookworm',
  working_dir: '/workspace',
  command: null,
  initial_env: { LANG: 'C.UTF-8' },
});
const RUNNING_TIMEOUT_MS = 120_000;

type Measure = 'create → running' | 'exec round trip' | 'write + read 64 KiB' | 'pause' | 'resume → running' | 'delete';
const MEASURES: Measure[] = [
  'create → running',
  'exec round trip',
  'write + read 64 KiB',
  'pause',
  'resume → running',
  'delete',
];

const ok = async <T>(result: ResultAsync<T, SandboxRuntimeError>, what: string): Promise<T> => {
  const settled = await result;
  if (settled.isErr()) throw new Error(`${what}: ${settled.error.message}`);
  return settled.value;
};

async function untilRunning(runtime: SandboxRuntime, id: string): Promise<void> {
  const deadline = Date.now() + RUNNING_TIMEOUT_MS;
  for (;;) {
    const seen = await ok(runtime.inspect(id), 'inspect');
    if (seen.state === 'running') return;
    if (seen.state !== 'starting' || Date.now() > deadline)
      throw new Error(`sandbox ${id} is ${seen.state}: ${seen.detail ?? ''}`);
    await sleep(20);
  }
}

const timed = async (work: () => Promise<unknown>): Promise<number> => {
  const started = performance.now();
  await work();
  return performance.now() - started;
};

async function main() {
  const cleanups: (() => Promise<void>)[] = [];
  const kubeConfig = new KubeConfig();
  try {
    kubeConfig.loadFromFile(KUBECONFIG);
  } catch (error) {
    throw new Error(
      `no kubeconfig at ${KUBECONFIG} (bring the test cluster up: bash scripts/k8s-cluster.sh up): ${(error as Error).message}`,
      { cause: error },
    );
  }
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const namespace = `acs-bench-${randomBytes(3).toString('hex')}`;
  const samples: Record<string, Record<Measure, number[]>> = {};
  let failed = false;
  try {
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    cleanups.push(async () => {
      await core.deleteNamespace({ name: namespace, propagationPolicy: 'Background' });
    });
    for (
      let i = 0;
      !(await core.readNamespacedServiceAccount({ name: 'default', namespace }).then(
        () => true,
        () => false,
      ));
      i++
    ) {
      if (i > 600) throw new Error(`namespace ${namespace} has no default service account after 60 s`);
      await sleep(100);
    }
    const runtimes: Record<string, SandboxRuntime> = {
      docker: await createDockerRuntime({
        namePrefix: 'acs-bench-k8s-',
        limits: { memoryBytes: 512 * 1024 ** 2, cpus: 1, pids: 256 },
      }),
      kubernetes: new KubernetesSandboxRuntime({
        kubeConfig,
        namespace,
        imagePullPolicy: 'Never',
        resources: { cpus: 1, memoryBytes: 512 * 1024 ** 2, workspaceSize: '1Gi' },
      }),
    };
    const made: { runtime: SandboxRuntime; id: string }[] = [];
    cleanups.push(async () => {
      for (const { runtime, id } of made) await runtime.delete(id);
    });
    for (const name of Object.keys(runtimes))
      samples[name] = Object.fromEntries(MEASURES.map((m) => [m, []])) as unknown as Record<Measure, number[]>;
    const payload = new Uint8Array(64 * 1024).map((_, i) => i % 251);

    // One untimed round each first (images in the page cache, connections open).
    for (let round = -1; round < SANDBOXES; round++) {
      for (const [name, runtime] of Object.entries(runtimes)) {
        const record = (measure: Measure, ms: number) => {
          if (round >= 0) samples[name]![measure].push(ms);
        };
        const id = randomBytes(16).toString('hex');
        made.push({ runtime, id });
        record(
          'create → running',
          await timed(async () => {
            await ok(
              runtime.create({
                sandbox_id: id,
                user_id: 'bench',
                installation_id: 'acs-bench',
                spec,
                env: { ...spec.initial_env },
              }),
              'create',
            );
            await untilRunning(runtime, id);
          }),
        );
        for (let i = 0; i < (round >= 0 ? EXECS : 3); i++)
          record('exec round trip', await timed(() => ok(runtime.exec(id, { command: ['true'] }), 'exec')));
        record(
          'write + read 64 KiB',
          await timed(async () => {
            await ok(runtime.writeFile(id, 'bench.bin', payload), 'writeFile');
            await ok(runtime.readFile(id, 'bench.bin'), 'readFile');
          }),
        );
        record('pause', await timed(() => ok(runtime.pause(id), 'pause')));
        record(
          'resume → running',
          await timed(async () => {
            await ok(runtime.resume(id), 'resume');
            await untilRunning(runtime, id);
          }),
        );
        record('delete', await timed(() => ok(runtime.delete(id), 'delete')));
      }
    }
  } catch (error) {
    failed = true;
    console.error(error);
  } finally {
    if (!(await runCleanups(cleanups))) failed = true;
  }
  if (failed) process.exit(1);

  const summary = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return { p50: percentile(sorted, 50), p90: percentile(sorted, 90) };
  };
  console.log(
    `\nKubernetes sandboxes beside Docker's (${cpus().length} CPUs; ${SANDBOXES} sandboxes each, ${EXECS} execs per sandbox; ms)\n`,
  );
  printTable(
    ['measure', 'docker p50', 'docker p90', 'kubernetes p50', 'kubernetes p90', 'k8s / docker (p50)'],
    MEASURES.map((measure) => {
      const docker = summary(samples.docker![measure]);
      const kubernetes = summary(samples.kubernetes![measure]);
      return [
        measure,
        docker.p50.toFixed(1),
        docker.p90.toFixed(1),
        kubernetes.p50.toFixed(1),
        kubernetes.p90.toFixed(1),
        `${(kubernetes.p50 / docker.p50).toFixed(2)}×`,
      ];
    }),
  );
}

await main();
