/**
 * The adapter's own `pods/exec` channel (adapter-kubernetes/src/exec-channel.ts) beside
 * `@kubernetes/client-node`'s `Exec`, on one pod of the test cluster, alternating, so both share
 * the machine's noise. What it answers: whether the kept library could take the channel's place.
 *
 *   npm run bench:kubernetes-exec
 *   BENCH_K8S_EXECS=200 BENCH_K8S_STDIN_MIB=128 npm run bench:kubernetes-exec
 *
 * - exec round trip: `true`, from opening the session to its exit status;
 * - stdin: BENCH_K8S_STDIN_MIB MiB written to `wc -c` and stdin closed (v5's close frame), to the
 *   exit status: the time, the count `wc` saw, and the most buffer memory the transfer took beyond
 *   the payload (process.memoryUsage().arrayBuffers, sampled every 5 ms);
 * - a refused exec (a pod that does not exist): what the caller is told.
 *
 * Needs the test cluster (its kubeconfig at /var/lib/acs-k8s/admin.kubeconfig, or ACS_KUBECONFIG)
 * with acs-sandbox:bookworm on its node. Everything is made in a namespace of its own, deleted at
 * the end, also on failure. Numbers, not assertions.
 */
import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import { PassThrough, Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, Exec, KubeConfig, type V1Status } from '@kubernetes/client-node';
import { openExec, type ExecTarget } from '../packages/adapter-kubernetes/src/exec-channel.js';
import { runCleanups } from './cleanup.js';
import { printTable } from './report.js';
import { percentile, positiveInt } from './stats.js';

const EXECS = positiveInt('BENCH_K8S_EXECS', 60);
const STDIN_MIB = positiveInt('BENCH_K8S_STDIN_MIB', 64);
const STDIN_ROUNDS = 3;
const KUBECONFIG = process.env.ACS_KUBECONFIG ?? '/var/lib/acs-k8s/admin.kubeconfig';

interface Outcome {
  exitCode: number | null;
  stdout: string;
}

type Way = (target: ExecTarget, argv: string[], stdin: Buffer | null) => Promise<Outcome>;

/** Through the adapter's channel: each write resolves once its frames are flushed. */
const ours =
  (kubeConfig: KubeConfig): Way =>
  async (target, argv, stdin) => {
    const channel = await openExec(kubeConfig, target, argv, { stdin: stdin !== null, tty: false });
    let stdout = '';
    channel.onStdout((chunk) => (stdout += chunk.toString('utf8')));
    if (stdin) {
      await channel.write(stdin);
      channel.closeStdin();
    }
    const end = await channel.ended;
    return { exitCode: end.exitCode, stdout };
  };

/**
 * Through client-node's Exec: stdin is a stream it forwards chunk by chunk, each chunk one
 * WebSocket message, sent without waiting; the status comes by callback. `chunkBytes`: the
 * stdin is written in pieces of that size (as the adapter's channel cuts its frames), or whole.
 */
const library =
  (kubeConfig: KubeConfig, chunkBytes: number | null): Way =>
  async (target, argv, stdin) => {
    const exec = new Exec(kubeConfig);
    let stdout = '';
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        stdout += chunk.toString('utf8');
        callback();
      },
    });
    let status: V1Status | null = null;
    const input = stdin ? new PassThrough() : null;
    const socket = await exec.exec(
      target.namespace,
      target.pod,
      target.container,
      argv,
      sink,
      null,
      input,
      false,
      (s) => (status = s),
    );
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    if (input && stdin) {
      const step = chunkBytes ?? stdin.length;
      for (let offset = 0; offset < stdin.length; offset += step) input.write(stdin.subarray(offset, offset + step));
      input.end();
    }
    await closed;
    const settled = status as V1Status | null;
    const cause = settled?.details?.causes?.find((c) => c.reason === 'ExitCode')?.message;
    const exitCode = settled?.status === 'Success' ? 0 : cause !== undefined ? Number(cause) : null;
    return { exitCode, stdout };
  };

/** How long `work` took, and the most buffer memory (beyond what there was at its start) it took meanwhile. */
const timed = async <T>(work: () => Promise<T>): Promise<{ ms: number; value: T; peakBytes: number }> => {
  // Run with --expose-gc: what earlier rounds left for the collector is not counted as this one's.
  (globalThis as { gc?: () => void }).gc?.();
  const base = process.memoryUsage().arrayBuffers;
  let peak = base;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().arrayBuffers)), 5);
  const started = performance.now();
  try {
    const value = await work();
    return {
      ms: performance.now() - started,
      value,
      peakBytes: Math.max(peak, process.memoryUsage().arrayBuffers) - base,
    };
  } finally {
    clearInterval(sampler);
  }
};

const describeError = (error: unknown): string => {
  const e = error as { message?: unknown; status?: unknown };
  const status = typeof e.status === 'number' ? ` (status ${e.status})` : '';
  return `${typeof e.message === 'string' ? e.message : String(error)}${status}`;
};

async function podRunning(core: CoreV1Api, namespace: string, name: string): Promise<void> {
  for (let i = 0; ; i++) {
    const pod = await core.readNamespacedPod({ name, namespace });
    if (pod.status?.containerStatuses?.[0]?.state?.running) return;
    if (i > 1200) throw new Error(`pod ${name} is not running after 120 s: ${JSON.stringify(pod.status)}`);
    await sleep(100);
  }
}

async function main() {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(KUBECONFIG);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const namespace = `acs-bench-exec-${randomBytes(3).toString('hex')}`;
  const cleanups: (() => Promise<void>)[] = [];
  const ways: Record<string, Way> = {
    'exec-channel.ts': ours(kubeConfig),
    'client-node Exec': library(kubeConfig, null),
    'client-node Exec, 256 KiB writes': library(kubeConfig, 256 * 1024),
  };
  const rounds: Record<string, number[]> = {};
  const writes: Record<string, { ms: number[]; counted: string; peak: number }> = {};
  const refusals: Record<string, string> = {};
  let failed = false;
  try {
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    cleanups.push(async () => void (await core.deleteNamespace({ name: namespace, propagationPolicy: 'Background' })));
    for (let i = 0; !(await core.readNamespacedServiceAccount({ name: 'default', namespace }).catch(() => null)); i++) {
      if (i > 600) throw new Error(`namespace ${namespace} has no default service account after 60 s`);
      await sleep(100);
    }
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: 'exec' },
        spec: {
          containers: [
            {
              name: 'sandbox',
              image: 'acs-sandbox:bookworm',
              imagePullPolicy: 'Never',
              command: ['sleep', 'infinity'],
            },
          ],
          terminationGracePeriodSeconds: 1,
        },
      },
    });
    await podRunning(core, namespace, 'exec');
    const target: ExecTarget = { namespace, pod: 'exec', container: 'sandbox' };
    const payload = Buffer.alloc(STDIN_MIB * 1024 * 1024, 0x61);
    for (const name of Object.keys(ways)) {
      rounds[name] = [];
      writes[name] = { ms: [], counted: '', peak: 0 };
    }
    // One untimed round each first (connections open, the pod's page cache warm).
    for (let round = -1; round < EXECS; round++) {
      for (const [name, way] of Object.entries(ways)) {
        const run = await timed(() => way(target, ['true'], null));
        if (run.value.exitCode !== 0) throw new Error(`${name}: true exited with ${run.value.exitCode}`);
        if (round >= 0) rounds[name]!.push(run.ms);
      }
    }
    for (let round = 0; round < STDIN_ROUNDS; round++) {
      for (const [name, way] of Object.entries(ways)) {
        const run = await timed(() => way(target, ['wc', '-c'], payload));
        const seen = writes[name]!;
        seen.ms.push(run.ms);
        seen.counted = `${run.value.stdout.trim()} (exit ${run.value.exitCode})`;
        seen.peak = Math.max(seen.peak, run.peakBytes);
      }
    }
    for (const [name, way] of Object.entries(ways)) {
      refusals[name] = await way({ ...target, pod: 'no-such-pod' }, ['true'], null).then(
        () => 'opened (unexpected)',
        describeError,
      );
    }
  } catch (error) {
    failed = true;
    console.error(error);
  } finally {
    if (!(await runCleanups(cleanups))) failed = true;
  }
  if (failed) process.exit(1);

  const p = (values: number[], at: number) =>
    percentile(
      [...values].sort((a, b) => a - b),
      at,
    ).toFixed(1);
  console.log(`\npods/exec: the adapter's channel beside client-node's Exec (${cpus().length} CPUs; ms)\n`);
  printTable(
    [
      'way',
      `true p50 (${EXECS})`,
      'true p90',
      `${STDIN_MIB} MiB stdin p50 (${STDIN_ROUNDS})`,
      'wc -c saw',
      'buffers beyond payload',
    ],
    Object.keys(ways).map((name) => [
      name,
      p(rounds[name]!, 50),
      p(rounds[name]!, 90),
      p(writes[name]!.ms, 50),
      writes[name]!.counted,
      `${(writes[name]!.peak / 1024 / 1024).toFixed(1)} MiB`,
    ]),
  );
  console.log('\nan exec into a pod that does not exist:');
  for (const [name, said] of Object.entries(refusals)) console.log(`  ${name}: ${said}`);
}

await main();
