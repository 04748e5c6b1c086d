/**
 * @acs/adapter-docker: the sandbox runtime on a Docker Engine. One container per
 * sandbox, labelled so a restarted service finds it, never privileged, capabilities
 * dropped to what a dev shell needs, CPU/memory/pids limits, ports on 127.0.0.1 only.
 *
 * ```ts
 * const runtime = await createDockerRuntime({ limits: { memoryBytes: 2 ** 31, cpus: 1, pids: 512 } });
 * const service = createAgentConversationService({ ...storage, sandboxSpecs, runtime });
 * ```
 */
export {
  connectDocker,
  createDockerRuntime,
  MAX_DOCKER_API_VERSION,
  MIN_DOCKER_API_VERSION,
  type DockerConnection,
} from './connect.js';
export {
  DockerSandboxRuntime,
  LABELS,
  SANDBOX_CAPABILITIES,
  type DockerResourceLimits,
  type DockerRuntimeOptions,
} from './docker-runtime.js';
export { commandImageProvider, type SandboxImageProvider } from './image-provider.js';
export { SANDBOX_NETWORK } from './sandbox-network.js';
export { connectionOf, createDockerEnginePool, type DockerEnginePool } from './engines.js';
export { parseDockerHosts, type DockerEngineHost } from './hosts.js';
