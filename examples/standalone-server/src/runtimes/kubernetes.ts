import { unavailableSandboxRuntime } from '@acs/core/ports';
import { z } from 'zod';
import { defineSandboxRuntime } from './runtime-module.js';

/**
 * `ACS_SANDBOXES=kubernetes`: each sandbox a StatefulSet of one pod in the installation's
 * namespace, its workspace on a claim (`@acs/adapter-kubernetes`). The cluster is the one of
 * ACS_KUBECONFIG, else KUBECONFIG, else (in a pod) its service account, else ~/.kube/config.
 * When no API answers, the server still starts and sandbox routes answer 503 saying why.
 */
export const kubernetesRuntime = defineSandboxRuntime({
  name: 'kubernetes',
  env: z.object({
    ACS_KUBECONFIG: z.string().min(1).optional(),
    KUBECONFIG: z.string().min(1).optional(),
    KUBERNETES_SERVICE_HOST: z.string().min(1).optional(),
    ACS_KUBERNETES_NAMESPACE: z.string().min(1).optional(),
    ACS_KUBERNETES_STORAGE_CLASS: z.string().min(1).optional(),
    ACS_KUBERNETES_IMAGE_PULL_POLICY: z.enum(['Always', 'IfNotPresent', 'Never']).optional(),
    ACS_KUBERNETES_RUNTIME_CLASS: z.string().min(1).optional(),
    ACS_KUBERNETES_WORKSPACE_SIZE: z
      .string()
      .regex(/^\d+(\.\d+)?(Ki|Mi|Gi|Ti)?$/, 'a Kubernetes quantity such as 10Gi')
      .default('10Gi'),
    ACS_KUBERNETES_NETWORK_POLICY: z.enum(['true', 'false', '1', '0']).default('true'),
    ACS_KUBERNETES_SANDBOX_EGRESS_EXCEPT: z.string().optional(),
  }),
  options: (e) => ({
    /** The package reads these names itself (and KUBECONFIG); passed on as they were given. */
    env: {
      ACS_KUBECONFIG: e.ACS_KUBECONFIG,
      KUBECONFIG: e.KUBECONFIG,
      KUBERNETES_SERVICE_HOST: e.KUBERNETES_SERVICE_HOST,
      ACS_KUBERNETES_NAMESPACE: e.ACS_KUBERNETES_NAMESPACE,
      ACS_KUBERNETES_STORAGE_CLASS: e.ACS_KUBERNETES_STORAGE_CLASS,
      ACS_KUBERNETES_IMAGE_PULL_POLICY: e.ACS_KUBERNETES_IMAGE_PULL_POLICY,
      ACS_KUBERNETES_RUNTIME_CLASS: e.ACS_KUBERNETES_RUNTIME_CLASS,
    },
    workspaceSize: e.ACS_KUBERNETES_WORKSPACE_SIZE,
    /** The installation's NetworkPolicy (sandboxes reach the outside, not each other); `false`: the operator keeps the namespace's policies. */
    networkPolicy: e.ACS_KUBERNETES_NETWORK_POLICY === 'true' || e.ACS_KUBERNETES_NETWORK_POLICY === '1',
    /** Address ranges sandboxes may not reach (CIDR, comma-separated); unset: the package's default (private, shared and link-local ranges). */
    egressExcept:
      e.ACS_KUBERNETES_SANDBOX_EGRESS_EXCEPT === undefined
        ? undefined
        : e.ACS_KUBERNETES_SANDBOX_EGRESS_EXCEPT.split(',')
            .map((range) => range.trim())
            .filter(Boolean),
  }),
  async open(options, common) {
    const { createKubernetesRuntime } = await import('@acs/adapter-kubernetes');
    try {
      const runtime = await createKubernetesRuntime({
        env: options.env,
        networkPolicy: options.networkPolicy,
        ...(options.egressExcept ? { egressExcept: options.egressExcept } : {}),
        resources: {
          cpus: common.cpus,
          memoryBytes: common.memoryMb * 1024 * 1024,
          workspaceSize: options.workspaceSize,
        },
      });
      return { runtime, description: `kubernetes (namespace ${runtime.namespace})`, unavailable: null };
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return { runtime: unavailableSandboxRuntime(reason), description: 'unavailable', unavailable: reason };
    }
  },
  async openForCli(options) {
    const { createKubernetesRuntime } = await import('@acs/adapter-kubernetes');
    const runtime = await createKubernetesRuntime({ env: options.env });
    return { runtime, where: `the Kubernetes namespace ${runtime.namespace}` };
  },
});
