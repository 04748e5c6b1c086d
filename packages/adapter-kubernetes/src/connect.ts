import { existsSync, readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { z } from 'zod';
import { KubernetesSandboxRuntime, type KubernetesRuntimeOptions } from './kubernetes-runtime.js';

/** Where a pod finds its own service account's namespace. */
const IN_CLUSTER_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** What `createKubernetesRuntime` reads from the environment (each overridden by the option of the same meaning). */
const KubernetesEnvironmentSchema = z.object({
  /** A kubeconfig file (else KUBECONFIG; else, inside a pod, its service account; else ~/.kube/config). */
  ACS_KUBECONFIG: z.string().min(1).optional(),
  KUBECONFIG: z.string().min(1).optional(),
  /** The namespace of the installation's sandboxes (else the kubeconfig context's, else the pod's own, else `default`). */
  ACS_KUBERNETES_NAMESPACE: z
    .string()
    .regex(
      /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/,
      'a namespace name: lower-case letters, digits and dashes, at most 63',
    )
    .optional(),
  /** The workspace claims' storage class (else the cluster's default). */
  ACS_KUBERNETES_STORAGE_CLASS: z.string().min(1).optional(),
  /** Always, IfNotPresent (default) or Never. */
  ACS_KUBERNETES_IMAGE_PULL_POLICY: z.enum(['Always', 'IfNotPresent', 'Never']).optional(),
  /** A runtime class for every sandbox, e.g. gVisor's `runsc`. */
  ACS_KUBERNETES_RUNTIME_CLASS: z.string().min(1).optional(),
  KUBERNETES_SERVICE_HOST: z.string().optional(),
});

export interface CreateKubernetesRuntimeOptions extends Partial<Omit<KubernetesRuntimeOptions, 'kubeConfig'>> {
  /** A kubeconfig file; `'in-cluster'` for the pod's service account. Default: from the environment. */
  kubeconfig?: string;
  /** A ready KubeConfig instead (tests, or a host that builds its own). */
  kubeConfig?: KubeConfig;
  /** The environment to read (default process.env). */
  env?: Readonly<Record<string, string | undefined>>;
}

/**
 * Makes the Kubernetes runtime from options and the environment: the kubeconfig (a path, the
 * pod's service account in the cluster, or the default locations), the namespace and the storage
 * class, and checks that the API answers in that namespace. Throws an Error that says what to
 * do when the configuration is wrong or the cluster cannot be reached.
 */
export async function createKubernetesRuntime(
  options: CreateKubernetesRuntimeOptions = {},
): Promise<KubernetesSandboxRuntime> {
  // An empty variable is an unset one (a manifest's `value: ""`).
  const parsed = KubernetesEnvironmentSchema.safeParse(
    Object.fromEntries(Object.entries(options.env ?? process.env).filter(([, value]) => value !== '')),
  );
  if (!parsed.success) {
    throw new Error(
      `The Kubernetes runtime's environment is not valid: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  }
  const env = parsed.data;
  const kubeConfig =
    options.kubeConfig ??
    loadKubeConfig(
      options.kubeconfig ??
        env.ACS_KUBECONFIG ??
        env.KUBECONFIG ??
        (env.KUBERNETES_SERVICE_HOST ? 'in-cluster' : undefined),
    );
  const contextNamespace = kubeConfig.getContextObject(kubeConfig.getCurrentContext())?.namespace;
  const podNamespace =
    env.KUBERNETES_SERVICE_HOST && existsSync(IN_CLUSTER_NAMESPACE_FILE)
      ? readFileSync(IN_CLUSTER_NAMESPACE_FILE, 'utf8').trim()
      : undefined;
  const runtimeClass = env.ACS_KUBERNETES_RUNTIME_CLASS;
  const runtime = new KubernetesSandboxRuntime({
    ...options,
    kubeConfig,
    namespace: options.namespace ?? env.ACS_KUBERNETES_NAMESPACE ?? contextNamespace ?? podNamespace ?? 'default',
    storageClassName: options.storageClassName ?? env.ACS_KUBERNETES_STORAGE_CLASS ?? null,
    imagePullPolicy: options.imagePullPolicy ?? env.ACS_KUBERNETES_IMAGE_PULL_POLICY ?? 'IfNotPresent',
    ...(options.placement || runtimeClass
      ? { placement: { ...(runtimeClass ? { runtimeClassName: runtimeClass } : {}), ...options.placement } }
      : {}),
  });
  const reached = await runtime.ping();
  if (reached.isErr()) {
    const server = kubeConfig.getCurrentCluster()?.server ?? '(no cluster in the kubeconfig)';
    throw new Error(
      `No Kubernetes API answers for namespace ${runtime.namespace} at ${server}: ${reached.error.message}`,
    );
  }
  return runtime;
}

function loadKubeConfig(source: string | undefined): KubeConfig {
  const kubeConfig = new KubeConfig();
  try {
    if (source === 'in-cluster') kubeConfig.loadFromCluster();
    else if (source) {
      if (!existsSync(source)) throw new Error(`no such file: ${source}`);
      kubeConfig.loadFromFile(source);
    } else kubeConfig.loadFromDefault();
  } catch (error) {
    throw new Error(`Cannot load the kubeconfig (${source ?? 'default locations'}): ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (!kubeConfig.getCurrentCluster())
    throw new Error(
      `The kubeconfig (${source ?? 'default locations'}) names no current cluster; set ACS_KUBECONFIG or KUBECONFIG`,
    );
  return kubeConfig;
}
