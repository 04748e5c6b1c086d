import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { AppsV1Api, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, describe, it } from 'vitest';
import { specFixture } from '@acs/core/testing';
import { KubernetesSandboxRuntime, type KubernetesRuntimeOptions } from '@acs/adapter-kubernetes';

/** The kubeconfig `scripts/k8s-cluster.sh up` writes (or ACS_KUBECONFIG). */
export const KUBECONFIG_PATH = process.env.ACS_KUBECONFIG ?? '/var/lib/acs-k8s/admin.kubeconfig';
/** The image .ci/run builds with scripts/build-sandbox-image.sh and the cluster script imports. */
const SANDBOX_IMAGE = 'acs-sandbox:bookworm';
export const bookworm = specFixture({
  id: 'bookworm',
  image: SANDBOX_IMAGE,
  working_dir: '/workspace',
  command: null,
  initial_env: { LANG: 'C.UTF-8' },
});

const HOW_TO =
  'bring one up with `bash scripts/k8s-cluster.sh up` (builds Kubernetes once per machine, ~10 min; then ~10 s), or point ACS_KUBECONFIG at a cluster';

/** Whether a cluster answers with this kubeconfig (within 10 s), and why not. */
async function probe(): Promise<{ ok: true; kubeConfig: KubeConfig } | { ok: false; why: string }> {
  if (!existsSync(KUBECONFIG_PATH)) return { ok: false, why: `no kubeconfig at ${KUBECONFIG_PATH}` };
  const kubeConfig = new KubeConfig();
  try {
    kubeConfig.loadFromFile(KUBECONFIG_PATH);
    const core = kubeConfig.makeApiClient(CoreV1Api);
    await Promise.race([
      core.listNode(),
      new Promise((_, reject) => setTimeout(() => reject(new Error('no answer within 10 s')), 10_000).unref()),
    ]);
    return { ok: true, kubeConfig };
  } catch (error) {
    return { ok: false, why: `the cluster of ${KUBECONFIG_PATH} does not answer: ${(error as Error).message}` };
  }
}

const found = await probe();

/** The cluster's kubeconfig; null when there is none (the file's suites then say so, see `onCluster`). */
const kubeConfig = found.ok ? found.kubeConfig : null;

/**
 * Registers a file's Kubernetes suites when a cluster answers. When none does: in CI (CI=true)
 * one failing test that says how to bring it up; elsewhere a skipped suite whose name says why
 * (and a warning), so a developer without a cluster sees it and is not misled.
 */
export function onCluster(name: string, register: (kubeConfig: KubeConfig) => void): void {
  if (kubeConfig) {
    register(kubeConfig);
    return;
  }
  const why = found.ok ? '' : found.why;
  if (process.env.CI === 'true' || process.env.CI === '1') {
    describe(name, () => {
      it('needs a Kubernetes cluster', () => {
        throw new Error(`These tests need a Kubernetes cluster (${why}): ${HOW_TO}`);
      });
    });
    return;
  }
  console.warn(`[adapter-kubernetes] ${name}: NOT RUN, no Kubernetes cluster (${why}); ${HOW_TO}`);
  describe.skip(`${name} — NOT RUN: no Kubernetes cluster (${why}); ${HOW_TO}`, () => {
    it('needs a Kubernetes cluster', () => undefined);
  });
}

/** A namespace of this test file's own, made now and deleted (with all it holds) after the file. */
export async function testNamespace(kc: KubeConfig): Promise<string> {
  const name = `acs-test-${randomBytes(4).toString('hex')}`;
  const core = kc.makeApiClient(CoreV1Api);
  // Registered before the first await: callers make the namespace while their file is collected,
  // and a hook registered after collection ends is never run (the namespaces stayed behind).
  afterAll(async () => {
    // Background: the namespace controller removes what is left (pods, claims) after the file.
    await core.deleteNamespace({ name, propagationPolicy: 'Background' }).catch(() => undefined);
  });
  await core.createNamespace({ body: { metadata: { name, labels: { 'io.acs.test': 'true' } } } });
  // The default service account appears a moment later; pods cannot be created before it.
  const deadline = Date.now() + 60_000;
  for (;;) {
    const account = await core.readNamespacedServiceAccount({ name: 'default', namespace: name }).catch(() => null);
    if (account) break;
    if (Date.now() > deadline)
      throw new Error(
        `namespace ${name} has no default service account after 60 s (is kube-controller-manager running? see /var/lib/acs-k8s/logs)`,
      );
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return name;
}

/** A runtime on the test cluster in `namespace` (images come from the node: no registry here). */
export function kubernetesRuntime(
  kc: KubeConfig,
  namespace: string,
  options: Partial<Omit<KubernetesRuntimeOptions, 'kubeConfig' | 'namespace'>> = {},
): KubernetesSandboxRuntime {
  return new KubernetesSandboxRuntime({
    kubeConfig: kc,
    namespace,
    imagePullPolicy: 'Never',
    resources: { cpus: 1, memoryBytes: 512 * 1024 ** 2, workspaceSize: '1Gi' },
    ...options,
  });
}

/** The API clients, for tests that look behind the runtime's back. */
export function clients(kc: KubeConfig) {
  return { core: kc.makeApiClient(CoreV1Api), apps: kc.makeApiClient(AppsV1Api) };
}
