// The SandboxRuntime port over dockerode: lifecycle, labels and adoption, spawn. What a container is
// made of is container-spec.ts, what it is now container-state.ts, how commands and files reach it
// container-engine.ts; exec, readFile, writeFile and listDirectory are core's (engineMethods) on that,
// as on every engine, and so is the spawned process (docker-process.ts only opens its session).
import type Docker from 'dockerode';
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
  type RuntimeAttempt,
  type RuntimeCreateRequest,
  type RuntimeObservation,
  type RuntimeSandboxSummary,
  type SandboxProcess,
  type SandboxRuntime,
  type SandboxRuntimeError,
  type SpawnRequest,
} from '@acs/core/ports';
import { containerEngine } from './container-engine.js';
import {
  containerLimits,
  containerOptions,
  LABELS,
  limitsWithDefaults,
  ownerLabels,
  portsFor,
  type DockerResourceLimits,
  type NetworkMode,
} from './container-spec.js';
import { observeContainer, type ContainerWatch } from './container-state.js';
import { startDockerProcess } from './docker-process.js';
import { missingImage, toRuntimeError, unlessNotFound, type DockerError } from './docker-errors.js';
import { imageEnsurer, type EnsureImage, type SandboxImageProvider } from './image-provider.js';
import { createSandboxNetwork, SANDBOX_NETWORK, type SandboxNetwork } from './sandbox-network.js';

export { LABELS, SANDBOX_CAPABILITIES, type DockerResourceLimits } from './container-spec.js';

export interface DockerRuntimeOptions {
  /** A dockerode client already set to the negotiated API version (see createDockerRuntime). */
  docker: Docker;
  limits?: DockerResourceLimits;
  /**
   * `bridge` (default): each sandbox on the engine's sandbox network (`sandboxNetwork`), a bridge
   * with inter-container traffic off, so sandboxes reach the outside but not each other; `none`
   * (no network); or `host` (shares the host's network; allow it only for trusted users).
   */
  networkMode?: NetworkMode;
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
  /** The time written files are dated by. Default the system's. */
  clock?: Clock;
}

/** How long the readiness probe (`true` in the container) may take. */
const PROBE_TIMEOUT_MS = 10_000;

/** One container per sandbox on a Docker Engine. */
export class DockerSandboxRuntime implements SandboxRuntime {
  readonly specificationVersion = 'v1' as const;
  readonly #docker: Docker;
  readonly #limits: Required<DockerResourceLimits>;
  readonly #networkMode: NetworkMode;
  readonly #network: SandboxNetwork;
  readonly #exposedPorts: readonly { name: string; port: number }[];
  readonly #prefix: string;
  readonly #clock: Clock;
  readonly #ensureImage: EnsureImage;
  readonly #paths = createWorkingDirectories(async (sandboxId) => {
    const info = await this.#inspectContainer(sandboxId);
    if (!info) throw new RuntimeFailure(`sandbox ${sandboxId} has no container`, 'not_found');
    return info.Config.WorkingDir || '/';
  });
  readonly #watch: ContainerWatch;
  /** Commands and files, as on every engine (core's), over docker exec and the archive API. */
  readonly exec: EngineMethods['exec'];
  readonly readFile: EngineMethods['readFile'];
  readonly writeFile: EngineMethods['writeFile'];
  readonly listDirectory: EngineMethods['listDirectory'];

  constructor(options: DockerRuntimeOptions) {
    this.#docker = options.docker;
    this.#limits = limitsWithDefaults(options.limits);
    this.#networkMode = options.networkMode ?? 'bridge';
    this.#network = createSandboxNetwork({
      docker: options.docker,
      name: options.sandboxNetwork ?? SANDBOX_NETWORK,
      labels: { [LABELS.managed]: 'true' },
    });
    this.#exposedPorts = options.exposedPorts ?? [];
    this.#prefix = options.namePrefix ?? 'acs-sandbox-';
    this.#clock = options.clock ?? systemClock;
    this.#ensureImage = imageEnsurer(options.docker, options.images);
    const engine = containerEngine(options.docker, (sandboxId) => this.#container(sandboxId), this.#clock);
    this.#watch = {
      inspect: (sandboxId) => this.#inspectContainer(sandboxId),
      probe: (sandboxId) =>
        engine
          .run(sandboxId, ['true'], { hostDeadlineMs: PROBE_TIMEOUT_MS, timeoutMs: PROBE_TIMEOUT_MS })
          .catch(() => null),
      answered: new Set(),
      exposedPorts: this.#exposedPorts,
    };
    ({
      exec: this.exec,
      readFile: this.readFile,
      writeFile: this.writeFile,
      listDirectory: this.listDirectory,
    } = engineMethods({ engine, paths: this.#paths, attempt: this.#attempt }));
  }

  /**
   * Makes sure the engine has the image, making it through the image provider when it is
   * missing (one build per image, however many callers wait). Resolves to what it found or
   * did; rejects, saying why, when the image is missing and cannot be made.
   */
  ensureImage(image: string, onProgress?: (line: string) => void): Promise<'present' | 'provided'> {
    return this.#ensureImage(image, onProgress);
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
    const ports = await portsFor(request, this.#exposedPorts, this.#networkMode);
    // On a bridge: the engine's sandbox network (its id), made first if the engine has none.
    const network = this.#networkMode === 'bridge' ? await this.#network.ensure() : this.#networkMode;
    const volume = this.volumeName(request.sandbox_id);
    await this.#docker.createVolume({ Name: volume, Labels: ownerLabels(request) });
    const options = containerOptions(request, {
      name: this.containerName(request.sandbox_id),
      volume,
      ports,
      networkMode: this.#networkMode,
      network,
      limits: this.#limits,
      factor,
    });
    const container = await this.#docker.createContainer(options).catch((error: DockerError) => {
      // A 404 that names the network: it was removed since it was looked up (the next create makes it again).
      if (error.statusCode === 404 && !/network/i.test(error.json?.message ?? '')) throw missingImage(spec.image);
      throw error;
    });
    this.#paths.remember(request.sandbox_id, spec.working_dir);
    await container.start();
    return observeContainer(this.#watch, request.sandbox_id);
  }

  inspect(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    return this.#attempt('inspect', () => observeContainer(this.#watch, sandboxId));
  }

  /**
   * The limits `create` gives a sandbox of this factor, set on the running container (`docker
   * update`): for a pooled sandbox claimed by a user whose factor is not 1. Swap stays what the
   * engine gives a container created with that memory limit (as much again).
   */
  resize(sandboxId: string, resourceFactor: number): ResultAsync<void, SandboxRuntimeError> {
    const limits = containerLimits(this.#limits, Math.max(1, resourceFactor));
    return this.#attempt('resize', async () => {
      await this.#container(sandboxId).update({ ...limits, MemorySwap: limits.Memory * 2 });
    });
  }

  pause(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    return this.#attempt('pause', async () => {
      const info = await this.#existingContainer(sandboxId);
      if (!info.State.Paused) {
        if (!info.State.Running)
          throw new RuntimeFailure(`cannot pause sandbox ${sandboxId}: its container is ${info.State.Status}`);
        await this.#container(sandboxId).pause();
      }
      return observeContainer(this.#watch, sandboxId);
    });
  }

  resume(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    return this.#attempt('resume', async () => {
      const info = await this.#existingContainer(sandboxId);
      if (info.State.Paused) await this.#container(sandboxId).unpause();
      else if (!info.State.Running) {
        this.#watch.answered.delete(sandboxId);
        await this.#container(sandboxId).start();
      }
      return observeContainer(this.#watch, sandboxId);
    });
  }

  delete(sandboxId: string): ResultAsync<void, SandboxRuntimeError> {
    return this.#attempt('delete', async () => {
      this.#watch.answered.delete(sandboxId);
      this.#paths.forget(sandboxId);
      await this.#container(sandboxId).remove({ force: true, v: true }).catch(unlessNotFound);
      await this.#docker.getVolume(this.volumeName(sandboxId)).remove().catch(unlessNotFound);
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
      checkSpawnCommand(request.command);
      const cwd = await this.#paths.resolve(sandboxId, request.cwd ?? '.');
      const info = await this.#existingContainer(sandboxId);
      if (info.State.Paused)
        throw new RuntimeFailure(`sandbox ${sandboxId} is paused; resume it before starting a process`);
      if (!info.State.Running)
        throw new RuntimeFailure(`sandbox ${sandboxId} is not running (its container is ${info.State.Status})`);
      return startDockerProcess({
        docker: this.#docker,
        container: this.#container(sandboxId),
        sandboxId,
        command: request.command,
        cwd,
        env: request.env ?? {},
        tty: request.tty ?? false,
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

  async #existingContainer(sandboxId: string): Promise<Docker.ContainerInspectInfo> {
    const info = await this.#inspectContainer(sandboxId);
    if (!info) throw new RuntimeFailure(`sandbox ${sandboxId} has no container`, 'not_found');
    return info;
  }

  #attempt: RuntimeAttempt = (operation, work) => attemptRuntime(work, (error) => toRuntimeError(operation, error));
}
