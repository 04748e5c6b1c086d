// The SandboxRuntime port over the Kubernetes API: lifecycle on a StatefulSet of one, labels and
// adoption, pod state, spawn. Manifests are manifest.ts, readings of a pod observe.ts, exec sessions
// pod-exec.ts, commands and files through them pod-files.ts; exec, readFile, writeFile and
// listDirectory are core's (engineMethods) on that, as on every engine, and so is the spawned
// process (kubernetes-process.ts only opens its session).
import {
  AppsV1Api,
  CoreV1Api,
  NetworkingV1Api,
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Event,
  type KubeConfig,
  type V1Pod,
  type V1StatefulSet,
} from '@kubernetes/client-node';
import type { ResultAsync } from 'neverthrow';
import {
  attemptRuntime,
  checkSpawnCommand,
  createWorkingDirectories,
  engineMethods,
  RuntimeFailure,
  systemClock,
  type Clock,
  type EngineMethods,
  type Logger,
  type RuntimeAttempt,
  type RuntimeCreateRequest,
  type RuntimeObservation,
  type RuntimeSandboxSummary,
  type SandboxProcess,
  type SandboxRuntime,
  type SandboxRuntimeError,
  type SpawnRequest,
} from '@acs/core/ports';
import { startKubernetesProcess } from './kubernetes-process.js';
import { gone, orNull, toRuntimeError } from './kubernetes-errors.js';
import {
  ANNOTATIONS,
  CONTAINER,
  LABELS,
  WORKSPACE_VOLUME,
  labelValue,
  resourcesFor,
  sandboxStatefulSet,
  setName,
  type KubernetesPlacement,
  type KubernetesResources,
} from './manifest.js';
import {
  checkEgressExcept,
  createSandboxNetworkPolicies,
  DEFAULT_EGRESS_EXCEPT,
  type SandboxNetworkPolicies,
} from './network-policy.js';
import { latestEvent, readPod } from './observe.js';
import { commandPrefix, podExec, type PodExec } from './pod-exec.js';
import { podEngine } from './pod-files.js';

export interface KubernetesRuntimeOptions {
  /** The cluster and the credentials (a kubeconfig file, or the pod's service account in the cluster). */
  kubeConfig: KubeConfig;
  /** The namespace this installation's sandboxes live in (it must exist). */
  namespace: string;
  /** The workspace claims' storage class; null or absent: the cluster's default. */
  storageClassName?: string | null;
  /** Limits (scaled by the user's resource factor), requests as a share of them, and the workspace size. */
  resources?: KubernetesResources;
  /** Where every sandbox runs (a runtime class such as gVisor's, node labels, tolerations). */
  placement?: KubernetesPlacement;
  /** Per spec id, replacing `placement` for that spec's sandboxes. */
  placementBySpec?: Readonly<Record<string, KubernetesPlacement>>;
  /** Default `IfNotPresent`; `Never` on a cluster without a registry (images loaded onto the nodes). */
  imagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
  /**
   * A read-only root filesystem (default true), with an empty writable directory at each of
   * `writablePaths` (default /tmp, /var/tmp, /run, /root, /home) and the workspace. Set false for
   * images that write elsewhere (a package manager at run time, say).
   */
  readOnlyRootFilesystem?: boolean;
  writablePaths?: readonly string[];
  /** StatefulSets are named this prefix plus the sandbox id (default `acs-`). */
  namePrefix?: string;
  /**
   * How long a pod may stay unschedulable (no node has room, or none matches its selector)
   * before the sandbox is ERROR with the scheduler's reason. Default 60 s, so a cluster
   * autoscaler has time to add a node.
   */
  unschedulableAfterMs?: number;
  /**
   * A NetworkPolicy per installation (default true), applied before its first sandbox is made or
   * listed: no ingress to its sandbox pods, egress to the cluster's DNS and to addresses outside
   * `egressExcept`. False where the operator keeps the namespace's policies. A policy the Role
   * does not let the service apply is a warning in the log, and sandboxes start without it.
   */
  networkPolicy?: boolean;
  /**
   * Address ranges (CIDR) sandbox pods may not reach: default the private, shared and link-local
   * ranges of IPv4 and IPv6 (the cluster's pods, services and nodes on nearly every cluster, and
   * the cloud metadata address). Give the cluster's own ranges to let sandboxes reach the rest.
   */
  egressExcept?: readonly string[];
  /** Where the warnings go (a policy that cannot be applied); default the console. */
  logger?: Logger;
  /** The time written files are dated by. Default the system's. */
  clock?: Clock;
}

const DEFAULT_WRITABLE_PATHS = ['/tmp', '/var/tmp', '/run', '/root', '/home'] as const;
/** How long the readiness probe (`true` in the pod) may take. */
const PROBE_TIMEOUT_MS = 10_000;

/**
 * One StatefulSet of one pod per sandbox, in the installation's namespace, through the API only:
 * commands run through `pods/exec`, files move through exec as tar archives, and no pod is
 * addressed by its IP. Pause scales the set to zero (the workspace claim stays); resume scales it
 * back to one (a new pod on the same claim: the workspace is there, processes are not).
 */
export class KubernetesSandboxRuntime implements SandboxRuntime {
  readonly specificationVersion = 'v1' as const;
  readonly namespace: string;
  readonly #core: CoreV1Api;
  readonly #apps: AppsV1Api;
  readonly #options: KubernetesRuntimeOptions;
  readonly #prefix: string;
  readonly #clock: Clock;
  /** Sandboxes whose current pod has answered an exec since this process started: they are up. */
  readonly #answered = new Map<string, string>();
  readonly #paths = createWorkingDirectories(async (sandboxId) => {
    const set = await this.#readSet(sandboxId);
    if (!set)
      throw new RuntimeFailure(`sandbox ${sandboxId} has no StatefulSet in namespace ${this.namespace}`, 'not_found');
    return (
      set.metadata?.annotations?.[ANNOTATIONS.workingDir] ??
      set.spec?.template.spec?.containers.find((c) => c.name === CONTAINER)?.workingDir ??
      '/'
    );
  });
  readonly #exec: PodExec;
  /** Commands and files, as on every engine (core's), through `pods/exec`. */
  readonly exec: EngineMethods['exec'];
  readonly readFile: EngineMethods['readFile'];
  readonly writeFile: EngineMethods['writeFile'];
  readonly listDirectory: EngineMethods['listDirectory'];
  /** The installations' NetworkPolicies; null when the operator keeps them (`networkPolicy: false`). */
  readonly #policies: SandboxNetworkPolicies | null;

  constructor(options: KubernetesRuntimeOptions) {
    this.#options = options;
    this.namespace = options.namespace;
    this.#core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#apps = options.kubeConfig.makeApiClient(AppsV1Api);
    this.#prefix = options.namePrefix ?? 'acs-';
    this.#clock = options.clock ?? systemClock;
    this.#exec = podExec({
      kubeConfig: options.kubeConfig,
      namespace: options.namespace,
      podName: (sandboxId) => this.podName(sandboxId),
      observe: (sandboxId) => this.#observe(sandboxId),
    });
    ({
      exec: this.exec,
      readFile: this.readFile,
      writeFile: this.writeFile,
      listDirectory: this.listDirectory,
    } = engineMethods({ engine: podEngine(this.#exec, this.#clock), paths: this.#paths, attempt: this.#attempt }));
    const egressExcept = options.egressExcept ?? DEFAULT_EGRESS_EXCEPT;
    checkEgressExcept(egressExcept);
    this.#policies =
      options.networkPolicy === false
        ? null
        : createSandboxNetworkPolicies({
            networking: options.kubeConfig.makeApiClient(NetworkingV1Api),
            namespace: options.namespace,
            options: { namePrefix: this.#prefix, egressExcept },
            logger: options.logger ?? consoleWarnings,
            now: Date.now,
          });
  }

  /** The StatefulSet of a sandbox; its pod is this name with `-0`, its claim `workspace-` that. */
  setName(sandboxId: string): string {
    return setName(this.#prefix, sandboxId);
  }

  podName(sandboxId: string): string {
    return `${this.setName(sandboxId)}-0`;
  }

  claimName(sandboxId: string): string {
    return `${WORKSPACE_VOLUME}-${this.podName(sandboxId)}`;
  }

  ping(): ResultAsync<void, SandboxRuntimeError> {
    // A namespaced read: the service account's Role may grant nothing cluster-wide.
    return this.#attempt('ping', async () => {
      await this.#apps.listNamespacedStatefulSet({ namespace: this.namespace, limit: 1 });
    });
  }

  list(installationId: string): ResultAsync<RuntimeSandboxSummary[], SandboxRuntimeError> {
    return this.#attempt('list', async () => {
      // At a service's start (its reconcile lists first): sandboxes made before the policy existed are kept apart too.
      await this.#policies?.ensure(installationId);
      const sets = await this.#apps.listNamespacedStatefulSet({
        namespace: this.namespace,
        labelSelector: `${LABELS.managed}=true,${LABELS.installation}=${labelValue(installationId)}`,
      });
      return sets.items.flatMap((set) => {
        const labels = set.metadata?.labels ?? {};
        const notes = set.metadata?.annotations ?? {};
        const sandboxId = labels[LABELS.sandbox];
        const userId = notes[ANNOTATIONS.user];
        if (
          notes[ANNOTATIONS.installation] !== installationId ||
          !sandboxId ||
          !userId ||
          set.metadata?.name !== this.setName(sandboxId)
        )
          return [];
        // One being deleted (its pod still ending) is gone for adoption, as `inspect` says.
        if (set.metadata?.deletionTimestamp) return [];
        const image = set.spec?.template.spec?.containers.find((c) => c.name === CONTAINER)?.image ?? '';
        return [
          {
            sandbox_id: sandboxId,
            user_id: userId,
            spec_id: notes[ANNOTATIONS.spec] ?? image,
            image,
            working_dir: notes[ANNOTATIONS.workingDir] ?? '/',
            created_at: new Date(set.metadata?.creationTimestamp ?? 0).toISOString(),
          },
        ];
      });
    });
  }

  create(request: RuntimeCreateRequest): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    return this.#attempt('create', async () => {
      if ((request.spec.exposed_ports ?? []).length > 0) {
        throw new RuntimeFailure(
          `spec ${request.spec.id} exposes ports; the Kubernetes runtime does not offer exposed URLs yet (use the Docker runtime for this spec)`,
        );
      }
      const placement = this.#options.placementBySpec?.[request.spec.id] ?? this.#options.placement ?? {};
      await this.#policies?.ensure(request.installation_id);
      const manifest = sandboxStatefulSet(request, {
        namePrefix: this.#prefix,
        resources: this.#resources(),
        storageClassName: this.#options.storageClassName ?? null,
        imagePullPolicy: this.#options.imagePullPolicy ?? 'IfNotPresent',
        readOnlyRootFilesystem: this.#options.readOnlyRootFilesystem ?? true,
        writablePaths: this.#options.writablePaths ?? DEFAULT_WRITABLE_PATHS,
        placement,
      });
      await this.#apps.createNamespacedStatefulSet({ namespace: this.namespace, body: manifest });
      this.#paths.remember(request.sandbox_id, request.spec.working_dir);
      return this.#observe(request.sandbox_id);
    });
  }

  inspect(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    return this.#attempt('inspect', () => this.#observe(sandboxId));
  }

  /**
   * The limits and requests `create` gives a sandbox of this factor, set on the running pod in
   * place (the `pods/resize` subresource: no restart) and on the StatefulSet's template for the
   * pods to come (the set's update strategy is OnDelete, so that changes no running pod). For a
   * pooled sandbox claimed by a user whose factor is not 1.
   */
  resize(sandboxId: string, resourceFactor: number): ResultAsync<void, SandboxRuntimeError> {
    const resources = resourcesFor(this.#resources(), Math.max(1, resourceFactor));
    const patch = { containers: [{ name: CONTAINER, resources }] };
    return this.#attempt('resize', async () => {
      const strategic = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
      await this.#apps.patchNamespacedStatefulSet(
        { name: this.setName(sandboxId), namespace: this.namespace, body: { spec: { template: { spec: patch } } } },
        strategic,
      );
      const pod = await orNull(
        this.#core.patchNamespacedPodResize(
          { name: this.podName(sandboxId), namespace: this.namespace, body: { spec: patch } },
          strategic,
        ),
      );
      if (!pod)
        throw new RuntimeFailure(
          `sandbox ${sandboxId} has no pod to resize (paused or gone); its next pod has the new limits`,
          'not_found',
        );
    });
  }

  /** Scale to zero: the pod ends (its processes with it), the workspace claim stays. */
  pause(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    return this.#attempt('pause', async () => {
      const set = await this.#readSet(sandboxId);
      if (!set)
        throw new RuntimeFailure(`sandbox ${sandboxId} has no StatefulSet in namespace ${this.namespace}`, 'not_found');
      if (set.spec?.replicas !== 0) await this.#scale(sandboxId, 0);
      this.#answered.delete(sandboxId);
      return this.#observe(sandboxId);
    });
  }

  /** Scale back to one: a new pod on the same claim. */
  resume(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    return this.#attempt('resume', async () => {
      const set = await this.#readSet(sandboxId);
      if (!set)
        throw new RuntimeFailure(`sandbox ${sandboxId} has no StatefulSet in namespace ${this.namespace}`, 'not_found');
      if (set.spec?.replicas === 0) await this.#scale(sandboxId, 1);
      return this.#observe(sandboxId);
    });
  }

  /** The StatefulSet, its pod and its claim; what is already gone is fine. */
  delete(sandboxId: string): ResultAsync<void, SandboxRuntimeError> {
    return this.#attempt('delete', async () => {
      this.#answered.delete(sandboxId);
      this.#paths.forget(sandboxId);
      const namespace = this.namespace;
      await gone(
        this.#apps.deleteNamespacedStatefulSet({
          name: this.setName(sandboxId),
          namespace,
          propagationPolicy: 'Background',
        }),
      );
      await gone(this.#core.deleteNamespacedPod({ name: this.podName(sandboxId), namespace, gracePeriodSeconds: 1 }));
      await gone(this.#core.deleteNamespacedPersistentVolumeClaim({ name: this.claimName(sandboxId), namespace }));
    });
  }

  /**
   * A long-running process over an interactive exec session (see kubernetes-process.ts): stdin
   * open, stdout and stderr apart (or, with `tty`, one terminal stream on stdout). The image
   * needs `sh`. `kill()` signals the process's group and session (TERM, then KILL after 2 s).
   */
  spawn(sandboxId: string, request: SpawnRequest): ResultAsync<SandboxProcess, SandboxRuntimeError> {
    return this.#attempt('spawn', async () => {
      checkSpawnCommand(request.command);
      const cwd = await this.#paths.resolve(sandboxId, request.cwd ?? '.');
      const observed = await this.#observe(sandboxId);
      if (observed.state === 'missing')
        throw new RuntimeFailure(
          `sandbox ${sandboxId} does not exist (${observed.detail ?? 'no StatefulSet'})`,
          'not_found',
        );
      if (observed.state === 'paused')
        throw new RuntimeFailure(`sandbox ${sandboxId} is paused; resume it before starting a process`);
      if (observed.state !== 'running')
        throw new RuntimeFailure(
          `sandbox ${sandboxId} is not running (${observed.state}${observed.detail ? `: ${observed.detail}` : ''})`,
        );
      return startKubernetesProcess({
        sandboxId,
        command: request.command,
        tty: request.tty ?? false,
        prefix: commandPrefix(cwd, request.env ?? {}),
        open: (argv, stdin, tty) => this.#exec.open(sandboxId, argv, stdin, tty),
      });
    });
  }

  #resources(): Required<KubernetesResources> {
    return {
      cpus: this.#options.resources?.cpus ?? 1,
      memoryBytes: this.#options.resources?.memoryBytes ?? 2 * 1024 ** 3,
      requestShare: this.#options.resources?.requestShare ?? 0.25,
      workspaceSize: this.#options.resources?.workspaceSize ?? '10Gi',
    };
  }

  async #readSet(sandboxId: string): Promise<V1StatefulSet | null> {
    return orNull(this.#apps.readNamespacedStatefulSet({ name: this.setName(sandboxId), namespace: this.namespace }));
  }

  async #scale(sandboxId: string, replicas: number): Promise<void> {
    await this.#apps.patchNamespacedStatefulSetScale(
      { name: this.setName(sandboxId), namespace: this.namespace, body: { spec: { replicas } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  async #events(name: string): Promise<CoreV1Event[]> {
    const list = await this.#core
      .listNamespacedEvent({ namespace: this.namespace, fieldSelector: `involvedObject.name=${name}` })
      .catch(() => null);
    return list?.items ?? [];
  }

  async #observe(sandboxId: string): Promise<RuntimeObservation> {
    const set = await this.#readSet(sandboxId);
    if (!set || set.metadata?.deletionTimestamp) {
      this.#answered.delete(sandboxId);
      return { state: 'missing', detail: 'its StatefulSet no longer exists', exposed_urls: [] };
    }
    if (set.spec?.replicas === 0) return { state: 'paused', detail: null, exposed_urls: [] };
    const pod: V1Pod | null = await orNull(
      this.#core.readNamespacedPod({ name: this.podName(sandboxId), namespace: this.namespace }),
    );
    if (!pod) {
      this.#answered.delete(sandboxId);
      const latest = latestEvent(await this.#events(this.setName(sandboxId)));
      const why = latest?.type === 'Warning' ? `: ${latest.reason ?? ''} ${latest.message ?? ''}`.trimEnd() : '';
      return {
        state: 'starting',
        detail: `waiting for the StatefulSet controller to create its pod${why}`,
        exposed_urls: [],
      };
    }
    const needsEvents = !pod.status?.containerStatuses?.some((c) => c.name === CONTAINER && c.state?.running);
    const reading = readPod(
      pod,
      needsEvents ? await this.#events(this.podName(sandboxId)) : [],
      Date.now(),
      this.#options.unschedulableAfterMs ?? 60_000,
    );
    if (reading.state !== 'ready') {
      this.#answered.delete(sandboxId);
      return { state: reading.state, detail: reading.detail, exposed_urls: [] };
    }
    const podUid = pod.metadata?.uid ?? '';
    if (this.#answered.get(sandboxId) === podUid) return { state: 'running', detail: null, exposed_urls: [] };
    const probe = await this.#exec
      .run(sandboxId, ['true'], { hostDeadlineMs: PROBE_TIMEOUT_MS, timeoutMs: PROBE_TIMEOUT_MS })
      .catch(() => null);
    if (probe?.exit_code !== 0)
      return { state: 'starting', detail: 'waiting for the container to answer', exposed_urls: [] };
    this.#answered.set(sandboxId, podUid);
    return { state: 'running', detail: null, exposed_urls: [] };
  }

  #attempt: RuntimeAttempt = (operation, work) =>
    attemptRuntime(work, (error) => toRuntimeError(operation, error, this.namespace));
}

/** The default logger: warnings on the console (the rest is silent). */
const consoleWarnings: Logger = {
  debug: () => {},
  info: () => {},
  warn: (fields, message) => console.warn(`${message} ${JSON.stringify(fields)}`),
  error: (fields, message) => console.error(`${message} ${JSON.stringify(fields)}`),
};
