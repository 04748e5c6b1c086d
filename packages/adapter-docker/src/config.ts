/**
 * @acs/adapter-docker/config: what configuring the Docker runtime needs, without loading the
 * Docker client (dockerode and its SSH and gRPC stacks hold about 28 MiB): a host can read its
 * configuration, and decide whether it runs Docker at all, before it pays for it.
 */
export { commandImageProvider, type SandboxImageProvider } from './image-provider.js';
export { parseDockerHosts, type DockerEngineHost } from './hosts.js';
