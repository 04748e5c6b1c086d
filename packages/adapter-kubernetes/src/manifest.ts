import { createHash } from 'node:crypto';
import type { V1StatefulSet } from '@kubernetes/client-node';
import { SANDBOX_CAPABILITIES, SANDBOX_LABELS, type RuntimeCreateRequest } from '@acs/core/ports';

/** What a dev shell needs (core's list, the same as on Docker); everything else is dropped. */
export { SANDBOX_CAPABILITIES } from '@acs/core/ports';

/** Labels on every object this runtime creates (StatefulSet, pod, claim): core's, as on Docker's containers. */
export const LABELS = SANDBOX_LABELS;

/** Annotations keep what a label cannot hold (any user id, the working directory, the image). */
export const ANNOTATIONS = {
  installation: 'io.acs/installation-id',
  user: 'io.acs/user-id',
  spec: 'io.acs/sandbox-spec-id',
  workingDir: 'io.acs/working-dir',
} as const;

/** The container's name in every sandbox pod. */
export const CONTAINER = 'sandbox';
/** The claim template's name; the claim of sandbox pod `<set>-0` is `workspace-<set>-0`. */
export const WORKSPACE_VOLUME = 'workspace';

export interface KubernetesResources {
  /** CPUs a sandbox may use (its limit; default 1). */
  cpus?: number;
  /** Memory limit in bytes (default 2 GiB). */
  memoryBytes?: number;
  /** What the scheduler reserves, as a share of the limits (default 0.25). */
  requestShare?: number;
  /** The workspace claim's size (default 10Gi). */
  workspaceSize?: string;
}

/** Where a spec's sandboxes run: a runtime class (e.g. gVisor's `runsc`) and node labels. */
export interface KubernetesPlacement {
  runtimeClassName?: string;
  nodeSelector?: Record<string, string>;
  /** Tolerations for tainted node pools, as the API takes them. */
  tolerations?: {
    key?: string;
    operator?: 'Exists' | 'Equal';
    value?: string;
    effect?: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute';
  }[];
}

export interface ManifestOptions {
  namePrefix: string;
  resources: Required<KubernetesResources>;
  /** The claim's storage class; null: the cluster's default. */
  storageClassName: string | null;
  imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never';
  /** A read-only root filesystem with an empty, writable directory at each of `writablePaths`; false for images that write elsewhere. */
  readOnlyRootFilesystem: boolean;
  writablePaths: readonly string[];
  placement: KubernetesPlacement;
}

/**
 * A label value for any string: the string itself when Kubernetes takes it as one (at most 63
 * characters of [A-Za-z0-9_.-], alphanumeric at both ends), otherwise `h-` and the start of its
 * SHA-256. The exact value is kept in an annotation; labels are for selecting.
 */
export function labelValue(value: string): string {
  if (/^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$/.test(value)) return value;
  return `h-${createHash('sha256').update(value).digest('hex').slice(0, 40)}`;
}

/** A Kubernetes quantity for bytes (Ki, whole). */
const bytesQuantity = (bytes: number) => `${Math.max(1, Math.round(bytes / 1024))}Ki`;
/** A Kubernetes quantity for CPUs (millicores, at least 1). */
const cpuQuantity = (cpus: number) => `${Math.max(1, Math.round(cpus * 1000))}m`;

export function setName(prefix: string, sandboxId: string): string {
  return `${prefix}${sandboxId}`;
}

/** The resources of a sandbox of this factor: limits scaled, requests a share of them. */
export function resourcesFor(resources: Required<KubernetesResources>, factor: number) {
  const cpus = resources.cpus * factor;
  const memory = resources.memoryBytes * factor;
  return {
    limits: { cpu: cpuQuantity(cpus), memory: bytesQuantity(memory) },
    requests: {
      cpu: cpuQuantity(cpus * resources.requestShare),
      memory: bytesQuantity(memory * resources.requestShare),
    },
  };
}

/**
 * A StatefulSet of one replica for the sandbox: one pod of the spec's image, its working
 * directory on a claim from the template (kept when the set is scaled to zero, removed with it).
 */
export function sandboxStatefulSet(request: RuntimeCreateRequest, options: ManifestOptions): V1StatefulSet {
  const { spec } = request;
  const name = setName(options.namePrefix, request.sandbox_id);
  const factor = Math.max(1, request.resource_factor ?? 1);
  const labels = {
    [LABELS.managed]: 'true',
    [LABELS.installation]: labelValue(request.installation_id),
    [LABELS.sandbox]: request.sandbox_id,
    [LABELS.user]: labelValue(request.user_id),
    [LABELS.spec]: labelValue(spec.id),
  };
  const annotations = {
    [ANNOTATIONS.installation]: request.installation_id,
    [ANNOTATIONS.user]: request.user_id,
    [ANNOTATIONS.spec]: spec.id,
    [ANNOTATIONS.workingDir]: spec.working_dir,
  };
  const writable = options.readOnlyRootFilesystem
    ? options.writablePaths.filter((path) => path !== spec.working_dir)
    : [];
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name, labels, annotations },
    spec: {
      replicas: 1,
      serviceName: name,
      selector: { matchLabels: { [LABELS.managed]: 'true', [LABELS.sandbox]: request.sandbox_id } },
      podManagementPolicy: 'Parallel',
      // A change of the template (resize) waits for the next pod (after a pause): a running sandbox is never restarted for it.
      updateStrategy: { type: 'OnDelete' },
      // The claim is kept over a scale to zero (the default) and deleted by `delete` itself: a
      // retention policy of `whenDeleted: Delete` makes the controller update every new claim's
      // owner references, which raced the provisioner (provisioning failed with a conflict and
      // waited for the claim binder's next resync, 15 s by default).
      template: {
        metadata: { labels, annotations },
        spec: {
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          // The pause container is PID 1 of the pod and reaps orphans, as tini does on Docker.
          shareProcessNamespace: true,
          terminationGracePeriodSeconds: 2,
          restartPolicy: 'Always',
          ...(options.placement.runtimeClassName ? { runtimeClassName: options.placement.runtimeClassName } : {}),
          ...(options.placement.nodeSelector ? { nodeSelector: { ...options.placement.nodeSelector } } : {}),
          ...(options.placement.tolerations
            ? { tolerations: options.placement.tolerations.map((t) => ({ ...t })) }
            : {}),
          securityContext: { seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: CONTAINER,
              image: spec.image,
              imagePullPolicy: options.imagePullPolicy,
              ...(spec.command ? { command: [...spec.command] } : {}),
              workingDir: spec.working_dir,
              env: Object.entries(request.env).map(([key, value]) => ({ name: key, value })),
              resources: resourcesFor(options.resources, factor),
              securityContext: {
                privileged: false,
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: options.readOnlyRootFilesystem,
                capabilities: { drop: ['ALL'], add: [...SANDBOX_CAPABILITIES] },
              },
              volumeMounts: [
                { name: WORKSPACE_VOLUME, mountPath: spec.working_dir },
                ...writable.map((path, i) => ({ name: `writable-${i}`, mountPath: path })),
              ],
            },
          ],
          volumes: writable.map((_, i) => ({ name: `writable-${i}`, emptyDir: {} })),
        },
      },
      volumeClaimTemplates: [
        {
          metadata: { name: WORKSPACE_VOLUME, labels, annotations },
          spec: {
            accessModes: ['ReadWriteOnce'],
            ...(options.storageClassName ? { storageClassName: options.storageClassName } : {}),
            resources: { requests: { storage: options.resources.workspaceSize } },
          },
        },
      ],
    },
  };
}
