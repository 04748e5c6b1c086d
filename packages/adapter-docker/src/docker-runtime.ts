// Why this file is over 400 lines: it is the whole SandboxRuntime port over dockerode (lifecycle,
// labels and adoption, exec, the archive API for files, spawn), each method short. The persistent
// shell is core's (openSandboxShell), built on spawn with a terminal.
import { readFirstTarEntry, tarOneFile, type TarHead } from '@acs/core';
import { createServer } from 'node:net';
import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';
import { ResultAsync } from 'neverthrow';
import {
  clippedOutputNote,
  DEFAULT_EXEC_MAX_OUTPUT_BYTES,
  DEFAULT_READ_FILE_MAX_BYTES,
  MAX_SYMLINK_HOPS,
  resolveSandboxPath,
  type DirectoryEntry,
  type ExecRequest,
  type FileContent,
  type ReadFileOptions,
  type ExecResult,
  type RuntimeCreateRequest,
  type RuntimeObservation,
  type RuntimeSandboxSummary,
  type SandboxProcess,
  type SandboxRuntime,
  type SandboxRuntimeError,
  type SpawnRequest,
} from '@acs/core/ports';
import type { ExposedPort, ExposedUrl } from '@acs/core/schemas';
import { ProcessStartFailure, startDockerProcess } from './docker-process.js';
import type { SandboxImageProvider } from './image-provider.js';
import {
  createSandboxNetwork,
  SANDBOX_NETWORK,
  SandboxNetworkFailure,
  type SandboxNetwork,
} from './sandbox-network.js';

export interface DockerResourceLimits {
  /** Memory limit in bytes (default 2 GiB). */
  memoryBytes?: number;
  /** CPUs (default 1). */
  cpus?: number;
  /** Maximum number of processes (default 512). */
  pids?: number;
}

export interface DockerRuntimeOptions {
  /** A dockerode client already set to the negotiated API version (see createDockerRuntime). */
  docker: Docker;
  limits?: DockerResourceLimits;
  /**
   * `bridge` (default): each sandbox on the engine's sandbox network (`sandboxNetwork`), a bridge
   * with inter-container traffic off, so sandboxes reach the outside but not each other; `none`
   * (no network); or `host` (shares the host's network; allow it only for trusted users).
   */
  networkMode?: 'bridge' | 'none' | 'host';
  /**
   * The name of the sandbox network of `bridge` mode (default `acs-sandboxes`), one per engine,
   * made on first use with `com.docker.network.bridge.enable_icc=false`. A network of that name
   * the operator made is used when it is a bridge with that option (its subnet, say, chosen);
   * any other is refused.
   */
  sandboxNetwork?: string;
  /**
   * Container ports of every sandbox published on 127.0.0.1 (a free host port each) and reported
   * as exposed URLs; a spec's own `exposed_ports` are added to these for its sandboxes.
   */
  exposedPorts?: readonly { name: string; port: number }[];
  /** Container names are this prefix plus the sandbox id. Default `acs-sandbox-`. */
  namePrefix?: string;
  /**
   * Makes images the engine lacks (e.g. builds the default sandbox image on first use). A
   * sandbox that needs one waits for it, reporting the build's progress; without a provider
   * (or for images it does not provide) a missing image fails the sandbox with a message.
   */
  images?: SandboxImageProvider;
}

/** Labels on every container this runtime creates, so a restarted service finds them. */
export const LABELS = {
  managed: 'io.acs.managed',
  /** The installation that owns the container; `list` sees only its own. Containers made before this label existed have none. */
  installation: 'io.acs.installation-id',
  sandbox: 'io.acs.sandbox-id',
  user: 'io.acs.user-id',
  spec: 'io.acs.sandbox-spec-id',
  workingDir: 'io.acs.working-dir',
  /** The container's exposed ports (JSON: name, port, health_path, and host_port on the host network), for its URLs after a restart too. */
  ports: 'io.acs.exposed-ports',
} as const;

/** An exposed port as the container's label keeps it. */
interface PortLabel extends ExposedPort {
  /** On the host network: the host port the service listens on (given to it as ACS_PORT_<NAME>). */
  host_port?: number;
}

/** What a dev shell needs; everything else (NET_RAW, MKNOD, SYS_ADMIN, …) is dropped. */
export const SANDBOX_CAPABILITIES = [
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'SETGID',
  'SETUID',
  'NET_BIND_SERVICE',
  'SYS_CHROOT',
  'AUDIT_WRITE',
] as const;

interface DockerError {
  statusCode?: number;
  code?: string;
  message?: string;
  json?: { message?: string } | null;
}

/** One container per sandbox on a Docker Engine. */
export class DockerSandboxRuntime implements SandboxRuntime {
  readonly specificationVersion = 'v1' as const;
  readonly #docker: Docker;
  readonly #limits: Required<DockerResourceLimits>;
  readonly #networkMode: 'bridge' | 'none' | 'host';
  readonly #network: SandboxNetwork;
  readonly #exposedPorts: readonly { name: string; port: number }[];
  readonly #prefix: string;
  /** Sandboxes that have answered an exec since this process started: they are up. */
  readonly #answered = new Set<string>();
  readonly #workingDirs = new Map<string, string>();
  readonly #images: SandboxImageProvider | undefined;
  /** Images being made now, each once, with everyone waiting for it. */
  readonly #provisioning = new Map<
    string,
    { done: Promise<void>; listeners: Set<(line: string) => void>; last: string | null }
  >();

  constructor(options: DockerRuntimeOptions) {
    this.#docker = options.docker;
    this.#limits = {
      memoryBytes: options.limits?.memoryBytes ?? 2 * 1024 ** 3,
      cpus: options.limits?.cpus ?? 1,
      pids: options.limits?.pids ?? 512,
    };
    this.#networkMode = options.networkMode ?? 'bridge';
    this.#network = createSandboxNetwork({
      docker: options.docker,
      name: options.sandboxNetwork ?? SANDBOX_NETWORK,
      labels: { [LABELS.managed]: 'true' },
    });
    this.#exposedPorts = options.exposedPorts ?? [];
    this.#prefix = options.namePrefix ?? 'acs-sandbox-';
    this.#images = options.images;
  }

  /**
   * Makes sure the engine has the image, making it through the image provider when it is
   * missing (one build per image, however many callers wait). Resolves to what it found or
   * did; rejects, saying why, when the image is missing and cannot be made.
   */
  async ensureImage(image: string, onProgress?: (line: string) => void): Promise<'present' | 'provided'> {
    const present = await this.#docker
      .getImage(image)
      .inspect()
      .then(
        () => true,
        (error: DockerError) => {
          if (error.statusCode === 404) return false;
          throw error;
        },
      );
    if (present) return 'present';
    if (!this.#images?.provides(image)) throw missingImage(image);
    let build = this.#provisioning.get(image);
    if (!build) {
      const listeners = new Set<(line: string) => void>();
      const entry: { done: Promise<void>; listeners: Set<(line: string) => void>; last: string | null } = {
        done: Promise.resolve(),
        listeners,
        last: null,
      };
      entry.done = this.#images
        .provide(image, (line) => {
          entry.last = line;
          for (const listener of listeners) listener(line);
        })
        .finally(() => this.#provisioning.delete(image));
      this.#provisioning.set(image, entry);
      build = entry;
    }
    if (onProgress) {
      build.listeners.add(onProgress);
      if (build.last) onProgress(build.last);
    }
    try {
      await build.done;
    } catch (error) {
      throw new RuntimeFailure(
        `the sandbox image ${image} is missing and could not be built: ${(error as Error).message}`,
      );
    } finally {
      if (onProgress) build.listeners.delete(onProgress);
    }
    return 'provided';
  }

  containerName(sandboxId: string): string {
    return `${this.#prefix}${sandboxId}`;
  }

  volumeName(sandboxId: string): string {
    return `${this.#prefix}${sandboxId}-workspace`;
  }

  ping(): ResultAsync<void, SandboxRuntimeError> {
    return this.#attempt('ping', async () => {
      await this.#docker.ping();
    });
  }

  /** How many sandboxes this engine runs now, of every installation (an engine's capacity is shared). */
  running(): ResultAsync<number, SandboxRuntimeError> {
    return this.#attempt('count running sandboxes', async () => {
      const containers = await this.#docker.listContainers({
        filters: { label: [`${LABELS.managed}=true`], status: ['running'] },
      });
      return containers.length;
    });
  }

  list(installationId: string): ResultAsync<RuntimeSandboxSummary[], SandboxRuntimeError> {
    return this.#attempt('list', async () => {
      const containers = await this.#docker.listContainers({
        all: true,
        filters: {
          label: [`${LABELS.managed}=true`, `${LABELS.installation}=${installationId}`],
          name: [this.#prefix],
        },
      });
      return containers
        .filter(
          (c) =>
            c.Names.some((n) => n.replace(/^\//, '').startsWith(this.#prefix)) &&
            c.Labels[LABELS.installation] === installationId &&
            c.Labels[LABELS.sandbox] &&
            c.Labels[LABELS.user],
        )
        .map((c) => ({
          sandbox_id: c.Labels[LABELS.sandbox] as string,
          user_id: c.Labels[LABELS.user] as string,
          spec_id: c.Labels[LABELS.spec] ?? c.Image,
          image: c.Image,
          working_dir: c.Labels[LABELS.workingDir] ?? '/',
          created_at: new Date(c.Created * 1000).toISOString(),
        }));
    });
  }

  create(
    request: RuntimeCreateRequest,
    onProgress?: (detail: string) => void,
  ): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    const factor = Math.max(1, request.resource_factor ?? 1);
    const { spec } = request;
    return this.#attempt('create', async () => {
      // Checked (or made) first, so a missing image leaves nothing behind (not even the workspace volume).
      await this.ensureImage(
        spec.image,
        onProgress && ((line) => onProgress(`waiting for the sandbox image ${spec.image} to be built: ${line}`)),
      );
      try {
        return await this.#createAndStart(request, factor);
      } catch (error) {
        // Whatever part was made (volume, container) goes, so a failed create leaves nothing.
        await this.delete(request.sandbox_id);
        throw error;
      }
    });
  }

  async #createAndStart(request: RuntimeCreateRequest, factor: number): Promise<RuntimeObservation> {
    const { spec } = request;
    const ports = await this.#portsFor(request);
    const hostNetwork = this.#networkMode === 'host';
    // On a bridge: the engine's sandbox network (its id), made first if the engine has none.
    const networkMode = this.#networkMode === 'bridge' ? await this.#network.ensure() : this.#networkMode;
    await this.#docker.createVolume({
      Name: this.volumeName(request.sandbox_id),
      Labels: {
        [LABELS.managed]: 'true',
        [LABELS.installation]: request.installation_id,
        [LABELS.sandbox]: request.sandbox_id,
      },
    });
    const container = await this.#docker
      .createContainer({
        name: this.containerName(request.sandbox_id),
        Image: spec.image,
        ...(spec.command ? { Cmd: [...spec.command] } : {}),
        WorkingDir: spec.working_dir,
        Env: Object.entries({ ...portVariables(ports, hostNetwork), ...request.env }).map(([k, v]) => `${k}=${v}`),
        Labels: {
          [LABELS.managed]: 'true',
          [LABELS.installation]: request.installation_id,
          [LABELS.sandbox]: request.sandbox_id,
          [LABELS.user]: request.user_id,
          [LABELS.spec]: spec.id,
          [LABELS.workingDir]: spec.working_dir,
          [LABELS.ports]: JSON.stringify(ports),
        },
        ExposedPorts: Object.fromEntries(ports.map((p) => [`${p.port}/tcp`, {}])),
        HostConfig: {
          Privileged: false,
          CapDrop: ['ALL'],
          CapAdd: [...SANDBOX_CAPABILITIES],
          SecurityOpt: ['no-new-privileges'],
          Init: true,
          Memory: Math.round(this.#limits.memoryBytes * factor),
          NanoCpus: Math.round(this.#limits.cpus * factor * 1e9),
          PidsLimit: Math.round(this.#limits.pids * factor),
          NetworkMode: networkMode,
          PortBindings:
            this.#networkMode === 'bridge'
              ? Object.fromEntries(ports.map((p) => [`${p.port}/tcp`, [{ HostIp: '127.0.0.1', HostPort: '' }]]))
              : {},
          Mounts: [{ Type: 'volume', Source: this.volumeName(request.sandbox_id), Target: spec.working_dir }],
          RestartPolicy: { Name: 'no' },
        },
      })
      .catch((error: DockerError) => {
        // A 404 that names the network: it was removed since it was looked up (the next create makes it again).
        if (error.statusCode === 404 && !/network/i.test(error.json?.message ?? '')) throw missingImage(spec.image);
        throw error;
      });
    this.#workingDirs.set(request.sandbox_id, spec.working_dir);
    await container.start();
    return this.#observe(request.sandbox_id);
  }

  inspect(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    return this.#attempt('inspect', () => this.#observe(sandboxId));
  }

  /**
   * The limits `create` gives a sandbox of this factor, set on the running container (`docker
   * update`): for a pooled sandbox claimed by a user whose factor is not 1. Swap stays what the
   * engine gives a container created with that memory limit (as much again).
   */
  resize(sandboxId: string, resourceFactor: number): ResultAsync<void, SandboxRuntimeError> {
    const factor = Math.max(1, resourceFactor);
    return this.#attempt('resize', async () => {
      const memory = Math.round(this.#limits.memoryBytes * factor);
      await this.#docker.getContainer(this.containerName(sandboxId)).update({
        Memory: memory,
        MemorySwap: memory * 2,
        NanoCpus: Math.round(this.#limits.cpus * factor * 1e9),
        PidsLimit: Math.round(this.#limits.pids * factor),
      });
    });
  }

  pause(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    return this.#attempt('pause', async () => {
      const info = await this.#inspectContainer(sandboxId);
      if (!info) throw new RuntimeFailure(`sandbox ${sandboxId} has no container`, 'not_found');
      if (!info.State.Paused) {
        if (!info.State.Running)
          throw new RuntimeFailure(`cannot pause sandbox ${sandboxId}: its container is ${info.State.Status}`);
        await this.#container(sandboxId).pause();
      }
      return this.#observe(sandboxId);
    });
  }

  resume(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    return this.#attempt('resume', async () => {
      const info = await this.#inspectContainer(sandboxId);
      if (!info) throw new RuntimeFailure(`sandbox ${sandboxId} has no container`, 'not_found');
      if (info.State.Paused) await this.#container(sandboxId).unpause();
      else if (!info.State.Running) {
        this.#answered.delete(sandboxId);
        await this.#container(sandboxId).start();
      }
      return this.#observe(sandboxId);
    });
  }

  delete(sandboxId: string): ResultAsync<void, SandboxRuntimeError> {
    return this.#attempt('delete', async () => {
      this.#answered.delete(sandboxId);
      this.#workingDirs.delete(sandboxId);
      await this.#container(sandboxId)
        .remove({ force: true, v: true })
        .catch((error: DockerError) => {
          if (error.statusCode !== 404) throw error;
        });
      await this.#docker
        .getVolume(this.volumeName(sandboxId))
        .remove()
        .catch((error: DockerError) => {
          if (error.statusCode !== 404) throw error;
        });
    });
  }

  exec(sandboxId: string, request: ExecRequest): ResultAsync<ExecResult, SandboxRuntimeError> {
    return this.#attempt('exec', async () => {
      const cwd = await this.#resolve(sandboxId, request.cwd ?? '.');
      const timeoutMs = request.timeoutMs ?? 120_000;
      // coreutils and busybox `timeout` both kill the command's whole process group when time is up.
      const command = ['timeout', '-s', 'KILL', String(Math.max(1, Math.ceil(timeoutMs / 1000))), ...request.command];
      return this.#run(sandboxId, command, {
        cwd,
        env: request.env ?? {},
        hostDeadlineMs: timeoutMs + 10_000,
        timeoutMs,
        maxOutputBytes: request.maxOutputBytes,
      });
    });
  }

  /**
   * Streams the archive of the path and reads only its first header and, for a file, at most
   * `maxBytes` of its content; then the stream is destroyed, so the engine stops sending (the
   * archive of `/` is the whole filesystem). A symbolic link comes back from the engine as
   * itself: its target is read in turn, resolved against the link's directory.
   */
  readFile(
    sandboxId: string,
    path: string,
    options: ReadFileOptions = {},
  ): ResultAsync<FileContent, SandboxRuntimeError> {
    const maxBytes = readLimit(options);
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

  /** The first entry of the archive of `path` (see readFirstTarEntry); `asked` is the path the caller named, for messages. */
  async #firstArchiveEntry(sandboxId: string, path: string, maxBytes: number, asked: string): Promise<TarHead> {
    const missing = () =>
      new RuntimeFailure(
        path === asked ? `${asked}: no such file` : `${asked} is a symbolic link to ${path}, which does not exist`,
        'not_found',
      );
    const archive = await this.#container(sandboxId)
      .getArchive({ path })
      .catch((error: DockerError) => {
        if (error.statusCode === 404) throw missing();
        // The engine resolves links in the path itself, and refuses a loop (its message names host paths: not repeated).
        if (/too many links/i.test(error.json?.message ?? error.message ?? ''))
          throw new RuntimeFailure(`${asked}: too many symbolic links (a loop?)`, 'not_found');
        throw error;
      });
    const entry = await readFirstTarEntry(archive, maxBytes);
    if (!entry) throw missing();
    return entry;
  }

  writeFile(sandboxId: string, path: string, content: Uint8Array): ResultAsync<void, SandboxRuntimeError> {
    return this.#attempt('writeFile', async () => {
      const resolved = await this.#resolve(sandboxId, path);
      if (resolved === '/') throw new RuntimeFailure('cannot write to /');
      // Extracting at / with the full path creates the missing parent directories.
      await this.#container(sandboxId).putArchive(tarOneFile(resolved.slice(1), content), { path: '/' });
    });
  }

  listDirectory(sandboxId: string, path: string): ResultAsync<DirectoryEntry[], SandboxRuntimeError> {
    return this.#attempt('listDirectory', async () => {
      const dir = await this.#resolve(sandboxId, path);
      const result = await this.#run(
        sandboxId,
        ['find', dir, '-mindepth', '1', '-maxdepth', '1', '-printf', '%y\\t%s\\t%f\\0'],
        {
          cwd: '/',
          env: {},
          hostDeadlineMs: 30_000,
          timeoutMs: 30_000,
        },
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
   * Starts a long-running process over an interactive `docker exec` (see docker-process.ts):
   * stdin open, stdout and stderr apart (or, with `tty`, one terminal stream on stdout), output
   * held until the first listener is added. The image needs `sh`. A program that does not exist is an error
   * (`failed`, "program not found") and nothing runs; one that is not executable likewise
   * ("not an executable file"). `kill()` sends SIGTERM to the process's group and session,
   * then SIGKILL after 2 s, so children go too; `exited` carries the engine's exit code
   * (128 + the signal after a kill).
   */
  spawn(sandboxId: string, request: SpawnRequest): ResultAsync<SandboxProcess, SandboxRuntimeError> {
    return this.#attempt('spawn', async () => {
      if (request.command.length === 0 || request.command[0] === '')
        throw new RuntimeFailure('cannot start a process: the command is empty');
      const cwd = await this.#resolve(sandboxId, request.cwd ?? '.');
      const info = await this.#inspectContainer(sandboxId);
      if (!info) throw new RuntimeFailure(`sandbox ${sandboxId} has no container`, 'not_found');
      if (info.State.Paused)
        throw new RuntimeFailure(`sandbox ${sandboxId} is paused; resume it before starting a process`);
      if (!info.State.Running)
        throw new RuntimeFailure(`sandbox ${sandboxId} is not running (its container is ${info.State.Status})`);
      const container = this.#container(sandboxId);
      return startDockerProcess({
        docker: this.#docker,
        container,
        sandboxId,
        command: request.command,
        cwd,
        env: request.env ?? {},
        tty: request.tty ?? false,
      }).catch((error: unknown) => {
        throw error instanceof ProcessStartFailure ? new RuntimeFailure(error.message) : error;
      });
    });
  }

  #container(sandboxId: string) {
    return this.#docker.getContainer(this.containerName(sandboxId));
  }

  async #inspectContainer(sandboxId: string): Promise<Docker.ContainerInspectInfo | null> {
    try {
      return await this.#container(sandboxId).inspect();
    } catch (error) {
      if ((error as DockerError).statusCode === 404) return null;
      throw error;
    }
  }

  async #resolve(sandboxId: string, path: string): Promise<string> {
    let workingDir = this.#workingDirs.get(sandboxId);
    if (!workingDir) {
      const info = await this.#inspectContainer(sandboxId);
      if (!info) throw new RuntimeFailure(`sandbox ${sandboxId} has no container`, 'not_found');
      workingDir = info.Config.WorkingDir || '/';
      this.#workingDirs.set(sandboxId, workingDir);
    }
    const resolved = resolveSandboxPath(workingDir, path);
    if (!resolved) throw new RuntimeFailure(`"${path}" is not a valid path`);
    return resolved;
  }

  async #observe(sandboxId: string): Promise<RuntimeObservation> {
    const info = await this.#inspectContainer(sandboxId);
    if (!info || info.State.Status === 'removing') {
      this.#answered.delete(sandboxId);
      return { state: 'missing', detail: 'its container no longer exists', exposed_urls: [] };
    }
    const state = info.State;
    if (state.Paused) return { state: 'paused', detail: null, exposed_urls: this.#urls(info) };
    if (state.Running) {
      if (this.#answered.has(sandboxId)) return { state: 'running', detail: null, exposed_urls: this.#urls(info) };
      const probe = await this.#run(sandboxId, ['true'], {
        cwd: '/',
        env: {},
        hostDeadlineMs: 10_000,
        timeoutMs: 10_000,
      }).catch(() => null);
      if (probe?.exit_code !== 0)
        return { state: 'starting', detail: 'waiting for the container to answer', exposed_urls: [] };
      const silent = await this.#unansweredPort(info);
      if (silent)
        return {
          state: 'starting',
          detail: `waiting for ${silent.name} to answer ${silent.health_path ?? '/'}`,
          exposed_urls: [],
        };
      this.#answered.add(sandboxId);
      return { state: 'running', detail: null, exposed_urls: this.#urls(info) };
    }
    if (state.Status === 'created' || state.Status === 'restarting')
      return { state: 'starting', detail: null, exposed_urls: [] };
    this.#answered.delete(sandboxId);
    const why = [
      `its container ${state.Status === 'dead' ? 'is dead' : `exited with code ${state.ExitCode}`}`,
      state.OOMKilled ? 'killed for using more memory than its limit' : null,
      state.Error ? state.Error : null,
    ]
      .filter(Boolean)
      .join('; ');
    return { state: 'error', detail: why, exposed_urls: [] };
  }

  /**
   * The ports a new sandbox exposes: the runtime's and its spec's. On the host network each gets
   * a free port of this host, since every sandbox shares the host's ports.
   */
  async #portsFor(request: RuntimeCreateRequest): Promise<PortLabel[]> {
    const declared: ExposedPort[] = [...this.#exposedPorts, ...(request.spec.exposed_ports ?? [])];
    const unique = declared.filter((p, i) => declared.findIndex((q) => q.name === p.name) === i);
    if (this.#networkMode !== 'host') return unique.map((p) => ({ ...p }));
    const ports: PortLabel[] = [];
    for (const p of unique) ports.push({ ...p, host_port: await freeLoopbackPort() });
    return ports;
  }

  /** The container's exposed ports, from its label (containers made before the label: the runtime's own). */
  #portsOf(info: Docker.ContainerInspectInfo): PortLabel[] {
    const label = info.Config.Labels?.[LABELS.ports];
    if (label === undefined) return this.#exposedPorts.map((p) => ({ ...p }));
    try {
      const parsed = JSON.parse(label) as unknown;
      return Array.isArray(parsed) ? (parsed as PortLabel[]) : [];
    } catch {
      return [];
    }
  }

  #urls(info: Docker.ContainerInspectInfo): ExposedUrl[] {
    const bindings = info.NetworkSettings?.Ports ?? {};
    return this.#portsOf(info).flatMap((p) => {
      if (p.host_port !== undefined) return [{ name: p.name, url: `http://127.0.0.1:${p.host_port}`, port: p.port }];
      const binding =
        bindings[`${p.port}/tcp`]?.find((b) => b.HostIp === '127.0.0.1') ?? bindings[`${p.port}/tcp`]?.[0];
      return binding ? [{ name: p.name, url: `http://127.0.0.1:${binding.HostPort}`, port: p.port }] : [];
    });
  }

  /** The first exposed port with a health path that does not answer it with 2xx yet (null: all answer). */
  async #unansweredPort(info: Docker.ContainerInspectInfo): Promise<PortLabel | null> {
    const urls = this.#urls(info);
    for (const port of this.#portsOf(info)) {
      if (!port.health_path) continue;
      const url = urls.find((u) => u.name === port.name)?.url;
      if (!url) return port;
      const answered = await fetch(`${url}${port.health_path}`, { signal: AbortSignal.timeout(2_000) }).then(
        async (response) => {
          await response.body?.cancel();
          return response.ok;
        },
        () => false,
      );
      if (!answered) return port;
    }
    return null;
  }

  /** Runs argv through docker exec with stdout and stderr demultiplexed; bounded in time and size. */
  async #run(
    sandboxId: string,
    argv: readonly string[],
    options: {
      cwd: string;
      env: Readonly<Record<string, string>>;
      hostDeadlineMs: number;
      timeoutMs: number;
      maxOutputBytes?: number | undefined;
    },
  ): Promise<ExecResult> {
    const started = Date.now();
    const exec = await this.#container(sandboxId).exec({
      Cmd: [...argv],
      AttachStdout: true,
      AttachStderr: true,
      AttachStdin: false,
      Tty: false,
      WorkingDir: options.cwd,
      Env: Object.entries(options.env).map(([k, v]) => `${k}=${v}`),
    });
    const stream = await exec.start({ hijack: true, stdin: false });
    const keep = Math.max(0, Math.floor(options.maxOutputBytes ?? DEFAULT_EXEC_MAX_OUTPUT_BYTES));
    const stdout = new Bounded(keep);
    const stderr = new Bounded(keep);
    const out = new PassThrough().on('data', (c: Buffer) => stdout.push(c));
    const err = new PassThrough().on('data', (c: Buffer) => stderr.push(c));
    this.#docker.modem.demuxStream(stream, out, err);
    let hostTimeout = false;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        hostTimeout = true;
        stream.destroy();
        resolve();
      }, options.hostDeadlineMs);
      stream.on('end', () => {
        clearTimeout(timer);
        resolve();
      });
      stream.on('close', () => {
        clearTimeout(timer);
        resolve();
      });
      stream.on('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
    const duration = Date.now() - started;
    const info = hostTimeout ? null : await exec.inspect();
    const timedOut = hostTimeout || duration >= options.timeoutMs;
    const exitCode = info?.ExitCode ?? null;
    return {
      exit_code: timedOut && (exitCode === 137 || exitCode === null) ? null : exitCode,
      stdout: stdout.text(),
      stderr: stderr.text(),
      timed_out: timedOut,
      duration_ms: duration,
    };
  }

  #attempt<T>(operation: string, work: () => Promise<T>): ResultAsync<T, SandboxRuntimeError> {
    return ResultAsync.fromPromise(work(), (error) => toRuntimeError(operation, error));
  }
}

/**
 * What a container is told about its exposed ports: `ACS_PORT_<NAME>` (the port to listen on:
 * the declared one, or on the host network the host port it was given) and `ACS_BIND_HOST`
 * (on the host network only loopback, so nothing outside this host reaches it).
 */
function portVariables(ports: readonly PortLabel[], hostNetwork: boolean): Record<string, string> {
  if (ports.length === 0) return {};
  return {
    ACS_BIND_HOST: hostNetwork ? '127.0.0.1' : '0.0.0.0',
    ...Object.fromEntries(ports.map((p) => [`ACS_PORT_${p.name}`, String(p.host_port ?? p.port)])),
  };
}

/** A port of 127.0.0.1 nothing listens on now (the kernel's choice). */
function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
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

const missingImage = (image: string) =>
  new RuntimeFailure(
    `image ${image} is not on this Docker engine; build or load it first (for acs-sandbox:bookworm: scripts/build-sandbox-image.sh)`,
  );

const ENGINE_UNREACHABLE = new Set([
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
]);

function toRuntimeError(operation: string, error: unknown): SandboxRuntimeError {
  if (error instanceof RuntimeFailure) return { type: error.type, message: error.message };
  if (error instanceof SandboxNetworkFailure) return { type: 'failed', message: error.message };
  const e = error as DockerError;
  // Codes of a connection to the engine that could not be made or was cut (not of the operation).
  if (e.code !== undefined && ENGINE_UNREACHABLE.has(e.code)) {
    return {
      type: 'unavailable',
      message: `the Docker engine cannot be reached (${e.code}); start dockerd or set DOCKER_HOST`,
    };
  }
  if (e.statusCode === 404) return { type: 'not_found', message: e.json?.message ?? `not found during ${operation}` };
  return { type: 'failed', message: e.json?.message ?? e.message ?? String(error) };
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

/** How many bytes of a file to read: the caller's limit, or the port's default. */
const readLimit = (options: ReadFileOptions): number =>
  Math.max(0, Math.floor(options.maxBytes ?? DEFAULT_READ_FILE_MAX_BYTES));

const parentOf = (path: string): string => path.slice(0, path.lastIndexOf('/')) || '/';
