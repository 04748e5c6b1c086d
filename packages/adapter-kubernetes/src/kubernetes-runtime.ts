// Why this file is over 400 lines: it is the whole SandboxRuntime port over the Kubernetes API
// (lifecycle on a StatefulSet of one, labels and adoption, exec, files as tar through exec,
// spawn), each method short; manifests, pod readings, the exec channel and processes are their own files.
import { readFirstTarEntry, tarOneFile, type TarHead } from '@acs/core';
import { PassThrough } from 'node:stream';
import {
  ApiException,
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
import { ResultAsync } from 'neverthrow';
import {
  clippedOutputNote,
  DEFAULT_EXEC_MAX_OUTPUT_BYTES,
  DEFAULT_READ_FILE_MAX_BYTES,
  MAX_SYMLINK_HOPS,
  resolveSandboxPath,
  type DirectoryEntry,
  type ExecRequest,
  type ExecResult,
  type FileContent,
  type Logger,
  type ReadFileOptions,
  type RuntimeCreateRequest,
  type RuntimeObservation,
  type RuntimeSandboxSummary,
  type SandboxProcess,
  type SandboxRuntime,
  type SandboxRuntimeError,
  type SpawnRequest,
} from '@acs/core/ports';
import { ExecOpenFailure, openExec, type ExecChannel } from './exec-channel.js';
import { ProcessStartFailure, startKubernetesProcess } from './kubernetes-process.js';
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
}

const DEFAULT_WRITABLE_PATHS = ['/tmp', '/var/tmp', '/run', '/root', '/home'] as const;
/** Bytes of tar metadata (headers, PAX and long-name entries) read beyond a file's content, at most. */
const TAR_METADATA_ALLOWANCE = 2 * 1024 * 1024;
/** GNU tar reads archives in records of 20 blocks: an archive it is fed ends on a record boundary. */
const TAR_RECORD = 10_240;

/**
 * One StatefulSet of one pod per sandbox, in the installation's namespace, through the API only:
 * commands run through `pods/exec`, files move through exec as tar archives, and no pod is
 * addressed by its IP. Pause scales the set to zero (the workspace claim stays); resume scales it
 * back to one (a new pod on the same claim: the workspace is there, processes are not).
 */
export class KubernetesSandboxRuntime implements SandboxRuntime {
  readonly specificationVersion = 'v1' as const;
  readonly namespace: string;
  readonly #kubeConfig: KubeConfig;
  readonly #core: CoreV1Api;
  readonly #apps: AppsV1Api;
  readonly #options: KubernetesRuntimeOptions;
  readonly #prefix: string;
  /** Sandboxes whose current pod has answered an exec since this process started: they are up. */
  readonly #answered = new Map<string, string>();
  readonly #workingDirs = new Map<string, string>();
  /** The installations' NetworkPolicies; null when the operator keeps them (`networkPolicy: false`). */
  readonly #policies: SandboxNetworkPolicies | null;

  constructor(options: KubernetesRuntimeOptions) {
    this.#options = options;
    this.#kubeConfig = options.kubeConfig;
    this.namespace = options.namespace;
    this.#core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#apps = options.kubeConfig.makeApiClient(AppsV1Api);
    this.#prefix = options.namePrefix ?? 'acs-';
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
      this.#workingDirs.set(request.sandbox_id, request.spec.working_dir);
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
      this.#workingDirs.delete(sandboxId);
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

  exec(sandboxId: string, request: ExecRequest): ResultAsync<ExecResult, SandboxRuntimeError> {
    return this.#attempt('exec', async () => {
      const cwd = await this.#resolve(sandboxId, request.cwd ?? '.');
      const timeoutMs = request.timeoutMs ?? 120_000;
      // coreutils and busybox `timeout` both kill the command's whole process group when time is up.
      const command = [
        ...this.#prefixFor(cwd, request.env ?? {}),
        'timeout',
        '-s',
        'KILL',
        String(Math.max(1, Math.ceil(timeoutMs / 1000))),
        ...request.command,
      ];
      return this.#run(sandboxId, command, {
        hostDeadlineMs: timeoutMs + 10_000,
        timeoutMs,
        maxOutputBytes: request.maxOutputBytes,
      });
    });
  }

  /**
   * `tar -c` of the path in the pod (cut with `head -c` after the bytes asked for), read as far as
   * its first header and `maxBytes` of content; then the session is cut. A symbolic link comes
   * back as itself: its target is read in turn, resolved against the link's directory.
   */
  readFile(
    sandboxId: string,
    path: string,
    options: ReadFileOptions = {},
  ): ResultAsync<FileContent, SandboxRuntimeError> {
    const maxBytes = Math.max(0, Math.floor(options.maxBytes ?? DEFAULT_READ_FILE_MAX_BYTES));
    return this.#attempt('readFile', async () => {
      const asked = await this.#resolve(sandboxId, path);
      let target = asked;
      for (let links = 0; ; links++) {
        const entry = await this.#firstArchiveEntry(sandboxId, target, maxBytes, asked);
        if (entry.type === 'file')
          return {
            bytes: new Uint8Array(entry.content),
            size: entry.size,
            truncated: entry.size > entry.content.length,
          };
        if (entry.type === 'directory') throw new RuntimeFailure(`${asked} is a directory`, 'is_directory');
        if (entry.type === 'other') throw new RuntimeFailure(`${asked} is not a regular file`);
        if (links === MAX_SYMLINK_HOPS)
          throw new RuntimeFailure(
            `${asked}: more than ${MAX_SYMLINK_HOPS} symbolic links in a row (a loop?)`,
            'not_found',
          );
        const next = resolveSandboxPath(parentOf(target), entry.target);
        if (!next)
          throw new RuntimeFailure(
            `${asked} is a symbolic link to "${entry.target}", which is not a path`,
            'not_found',
          );
        target = next;
      }
    });
  }

  async #firstArchiveEntry(sandboxId: string, path: string, maxBytes: number, asked: string): Promise<TarHead> {
    const script = 'tar -C / --no-recursion -cf - -- "$1" | head -c "$2"';
    const channel = await this.#open(
      sandboxId,
      ['sh', '-c', script, 'acs-read', path === '/' ? '.' : path.slice(1), String(maxBytes + TAR_METADATA_ALLOWANCE)],
      false,
      false,
    );
    const stdout = new PassThrough();
    let stderr = '';
    channel.onStdout((chunk) => stdout.write(chunk));
    channel.onStderr((chunk) => (stderr = (stderr + chunk.toString('utf8')).slice(-4_000)));
    void channel.ended.then(() => stdout.end());
    let entry: TarHead | null = null;
    try {
      entry = await readFirstTarEntry(stdout, maxBytes);
    } finally {
      // What was asked for is read: the rest is not wanted. An empty archive: tar's words on
      // stderr say why, so the session is let end first (within 10 s).
      if (entry) channel.destroy();
      else {
        const timer = setTimeout(() => channel.destroy(), 10_000);
        await channel.ended;
        clearTimeout(timer);
      }
    }
    if (entry) return entry;
    if (/No such file|Too many levels of symbolic links|Not a directory/i.test(stderr) || stderr.trim() === '') {
      throw new RuntimeFailure(
        path === asked ? `${asked}: no such file` : `${asked} is a symbolic link to ${path}, which does not exist`,
        'not_found',
      );
    }
    throw new RuntimeFailure(`cannot read ${asked}: ${stderr.trim().replace(/^tar: /, '')}`);
  }

  /** A one-file archive piped to `tar -x` at / in the pod: missing parent directories are made. */
  writeFile(sandboxId: string, path: string, content: Uint8Array): ResultAsync<void, SandboxRuntimeError> {
    return this.#attempt('writeFile', async () => {
      const resolved = await this.#resolve(sandboxId, path);
      if (resolved === '/') throw new RuntimeFailure('cannot write to /');
      const archive = tarOneFile(resolved.slice(1), content);
      const padded = Buffer.concat([archive, Buffer.alloc((TAR_RECORD - (archive.length % TAR_RECORD)) % TAR_RECORD)]);
      const channel = await this.#open(sandboxId, ['tar', '-x', '-C', '/', '-f', '-'], true, false);
      let stderr = '';
      channel.onStderr((chunk) => (stderr = (stderr + chunk.toString('utf8')).slice(-4_000)));
      const timer = setTimeout(() => channel.destroy(), 120_000 + content.length / 1024);
      try {
        await channel.write(padded);
        channel.closeStdin();
        const end = await channel.ended;
        if (end.exitCode !== 0)
          throw new RuntimeFailure(
            `cannot write ${resolved}: ${stderr.trim().replace(/^tar: /, '') || end.message || `tar exited with ${end.exitCode}`}`,
          );
      } finally {
        clearTimeout(timer);
        channel.destroy();
      }
    });
  }

  listDirectory(sandboxId: string, path: string): ResultAsync<DirectoryEntry[], SandboxRuntimeError> {
    return this.#attempt('listDirectory', async () => {
      const dir = await this.#resolve(sandboxId, path);
      const result = await this.#run(
        sandboxId,
        ['find', dir, '-mindepth', '1', '-maxdepth', '1', '-printf', '%y\\t%s\\t%f\\0'],
        { hostDeadlineMs: 30_000, timeoutMs: 30_000 },
      );
      if (result.exit_code !== 0) {
        const reason = result.stderr.trim() || `find exited with ${result.exit_code}`;
        throw new RuntimeFailure(`cannot list ${dir}: ${reason}`, /No such file/.test(reason) ? 'not_found' : 'failed');
      }
      const base = dir === '/' ? '' : dir;
      return result.stdout
        .split('\0')
        .filter(Boolean)
        .map((line): DirectoryEntry => {
          const [kind, size, ...name] = line.split('\t');
          const entryName = name.join('\t');
          const type = kind === 'd' ? 'directory' : kind === 'f' ? 'file' : kind === 'l' ? 'symlink' : 'other';
          return { name: entryName, path: `${base}/${entryName}`, type, size: Number(size) };
        })
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    });
  }

  /**
   * A long-running process over an interactive exec session (see kubernetes-process.ts): stdin
   * open, stdout and stderr apart (or, with `tty`, one terminal stream on stdout). The image
   * needs `sh`. `kill()` signals the process's group and session (TERM, then KILL after 2 s).
   */
  spawn(sandboxId: string, request: SpawnRequest): ResultAsync<SandboxProcess, SandboxRuntimeError> {
    return this.#attempt('spawn', async () => {
      if (request.command.length === 0 || request.command[0] === '')
        throw new RuntimeFailure('cannot start a process: the command is empty');
      const cwd = await this.#resolve(sandboxId, request.cwd ?? '.');
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
        prefix: this.#prefixFor(cwd, request.env ?? {}),
        open: (argv, stdin, tty) => this.#open(sandboxId, argv, stdin, tty),
      }).catch((error: unknown) => {
        throw error instanceof ProcessStartFailure ? new RuntimeFailure(error.message) : error;
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

  /** Exec has no working directory or environment of its own: a small `sh` prefix sets them, then execs the command (same pid). */
  #prefixFor(cwd: string, env: Readonly<Record<string, string>>): string[] {
    const variables = Object.entries(env).map(([key, value]) => `${key}=${value}`);
    return [
      'sh',
      '-c',
      'cd -- "$1" || exit 126; shift; exec "$@"',
      'acs-exec',
      cwd,
      ...(variables.length > 0 ? ['env', ...variables] : []),
    ];
  }

  /** Opens an exec session in the sandbox's pod; a pod that is not there or not running is explained from its state. */
  async #open(sandboxId: string, argv: readonly string[], stdin: boolean, tty: boolean): Promise<ExecChannel> {
    try {
      return await openExec(
        this.#kubeConfig,
        { namespace: this.namespace, pod: this.podName(sandboxId), container: CONTAINER },
        argv,
        { stdin, tty },
      );
    } catch (error) {
      if (!(error instanceof ExecOpenFailure)) throw error;
      if (error.status === 0) throw error;
      const observed = await this.#observe(sandboxId).catch(() => null);
      if (observed?.state === 'missing')
        throw new RuntimeFailure(`sandbox ${sandboxId} does not exist (${observed.detail ?? 'no pod'})`, 'not_found');
      if (observed?.state === 'paused') throw new RuntimeFailure(`sandbox ${sandboxId} is paused; resume it first`);
      throw new RuntimeFailure(
        `cannot run a command in sandbox ${sandboxId}${observed ? ` (${observed.state}${observed.detail ? `: ${observed.detail}` : ''})` : ''}: ${error.message}`,
      );
    }
  }

  /** Runs argv to its end with stdout and stderr kept apart; bounded in time and size. */
  async #run(
    sandboxId: string,
    argv: readonly string[],
    options: { hostDeadlineMs: number; timeoutMs: number; maxOutputBytes?: number | undefined },
  ): Promise<ExecResult> {
    const started = Date.now();
    const channel = await this.#open(sandboxId, argv, false, false);
    const keep = Math.max(0, Math.floor(options.maxOutputBytes ?? DEFAULT_EXEC_MAX_OUTPUT_BYTES));
    const stdout = new Bounded(keep);
    const stderr = new Bounded(keep);
    channel.onStdout((chunk) => stdout.push(chunk));
    channel.onStderr((chunk) => stderr.push(chunk));
    let hostTimeout = false;
    const timer = setTimeout(() => {
      hostTimeout = true;
      channel.destroy();
    }, options.hostDeadlineMs);
    const end = await channel.ended.finally(() => clearTimeout(timer));
    const duration = Date.now() - started;
    const timedOut = hostTimeout || duration >= options.timeoutMs;
    if (!hostTimeout && end.exitCode === null && !timedOut)
      throw new RuntimeFailure(
        `the command in sandbox ${sandboxId} ended without an exit code: ${end.message ?? 'unknown'}`,
      );
    return {
      exit_code: timedOut && (end.exitCode === 137 || end.exitCode === null) ? null : end.exitCode,
      stdout: stdout.text(),
      stderr: stderr.text(),
      timed_out: timedOut,
      duration_ms: duration,
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
    const probe = await this.#run(sandboxId, ['true'], { hostDeadlineMs: 10_000, timeoutMs: 10_000 }).catch(() => null);
    if (probe?.exit_code !== 0)
      return { state: 'starting', detail: 'waiting for the container to answer', exposed_urls: [] };
    this.#answered.set(sandboxId, podUid);
    return { state: 'running', detail: null, exposed_urls: [] };
  }

  async #resolve(sandboxId: string, path: string): Promise<string> {
    let workingDir = this.#workingDirs.get(sandboxId);
    if (!workingDir) {
      const set = await this.#readSet(sandboxId);
      if (!set)
        throw new RuntimeFailure(`sandbox ${sandboxId} has no StatefulSet in namespace ${this.namespace}`, 'not_found');
      workingDir =
        set.metadata?.annotations?.[ANNOTATIONS.workingDir] ??
        set.spec?.template.spec?.containers.find((c) => c.name === CONTAINER)?.workingDir ??
        '/';
      this.#workingDirs.set(sandboxId, workingDir);
    }
    const resolved = resolveSandboxPath(workingDir, path);
    if (!resolved) throw new RuntimeFailure(`"${path}" is not a valid path`);
    return resolved;
  }

  #attempt<T>(operation: string, work: () => Promise<T>): ResultAsync<T, SandboxRuntimeError> {
    return ResultAsync.fromPromise(work(), (error) => toRuntimeError(operation, error, this.namespace));
  }
}

/** A failure this adapter explains itself. */
class RuntimeFailure extends Error {
  constructor(
    message: string,
    readonly type: SandboxRuntimeError['type'] = 'failed',
  ) {
    super(message);
  }
}

/** The object, or null when the API says it does not exist. */
async function orNull<T>(read: Promise<T>): Promise<T | null> {
  try {
    return await read;
  } catch (error) {
    if (error instanceof ApiException && error.code === 404) return null;
    throw error;
  }
}

/** A delete whose "not found" is success. */
async function gone(deletion: Promise<unknown>): Promise<void> {
  await orNull(deletion);
}

const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOENT',
  'EACCES',
  'EPIPE',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
]);

/** The first error code in an error's cause chain (undici's fetch puts the socket's under `cause`). */
function codeOf(error: unknown): string | undefined {
  for (
    let e = error as { code?: unknown; cause?: unknown } | undefined, depth = 0;
    e && depth < 5;
    e = e.cause as typeof e, depth++
  ) {
    if (typeof e.code === 'string') return e.code;
  }
  return undefined;
}

/** The message of the API's Status body, if the exception carries one. */
function apiMessage(error: ApiException<unknown>): string {
  const body = error.body;
  if (typeof body === 'string') {
    try {
      const parsed = JSON.parse(body) as { message?: unknown };
      if (typeof parsed.message === 'string') return parsed.message;
    } catch {
      return body.slice(0, 500) || error.message;
    }
  }
  if (body && typeof body === 'object' && typeof (body as { message?: unknown }).message === 'string')
    return (body as { message: string }).message;
  return error.message;
}

function toRuntimeError(operation: string, error: unknown, namespace: string): SandboxRuntimeError {
  if (error instanceof RuntimeFailure) return { type: error.type, message: error.message };
  if (error instanceof ApiException) {
    const message = apiMessage(error);
    if (error.code === 404) return { type: 'not_found', message };
    if (error.code === 401)
      return { type: 'unavailable', message: `the Kubernetes API refused the credentials (401): ${message}` };
    if (error.code === 403)
      return {
        type: 'failed',
        message: `the Kubernetes API forbids ${operation} in namespace ${namespace} (check the service account's Role): ${message}`,
      };
    if (error.code >= 500)
      return { type: 'unavailable', message: `the Kubernetes API failed (${error.code}): ${message}` };
    return { type: 'failed', message };
  }
  const code = codeOf(error);
  if (code !== undefined && UNREACHABLE.has(code)) {
    return {
      type: 'unavailable',
      message: `the Kubernetes API cannot be reached (${code}); check the kubeconfig or that the cluster is up`,
    };
  }
  return { type: 'failed', message: (error as Error).message ?? String(error) };
}

/** Keeps at most `limit` bytes, noting how much was dropped. */
class Bounded {
  readonly #chunks: Buffer[] = [];
  #size = 0;
  #dropped = 0;
  constructor(private readonly limit: number) {}
  push(chunk: Buffer) {
    const room = this.limit - this.#size;
    if (room > 0) this.#chunks.push(chunk.subarray(0, room));
    this.#size += Math.min(room, chunk.length);
    this.#dropped += Math.max(0, chunk.length - Math.max(0, room));
  }
  text(): string {
    const text = Buffer.concat(this.#chunks).toString('utf8');
    return this.#dropped > 0 ? `${text}${clippedOutputNote(this.#dropped)}` : text;
  }
}

const parentOf = (path: string): string => path.slice(0, path.lastIndexOf('/')) || '/';

/** The default logger: warnings on the console (the rest is silent). */
const consoleWarnings: Logger = {
  debug: () => {},
  info: () => {},
  warn: (fields, message) => console.warn(`${message} ${JSON.stringify(fields)}`),
  error: (fields, message) => console.error(`${message} ${JSON.stringify(fields)}`),
};
