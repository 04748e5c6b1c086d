import { parseDockerHosts } from '@acs/adapter-docker/config';
import type { DockerSandboxRuntime } from '@acs/adapter-docker';
import { unavailableSandboxRuntime } from '@acs/core/ports';
import type { Logger as PinoLogger } from 'pino';
import { z } from 'zod';
import { isSandboxImage, sandboxImageProvider } from '../sandbox-image.js';
import { defineSandboxRuntime } from './runtime-module.js';

/**
 * `ACS_SANDBOXES=docker` (the default): containers on the engine at DOCKER_HOST (or the default
 * socket), or on the engines of ACS_DOCKER_HOSTS. When the one engine does not answer, the
 * server still starts and sandbox routes answer 503 saying why.
 */
export const dockerRuntime = defineSandboxRuntime({
  name: 'docker',
  env: z.object({
    ACS_SANDBOX_IMAGE_BUILD: z.enum(['auto', 'off']).default('auto'),
    ACS_DOCKER_HOSTS: z.string().optional(),
    ACS_DOCKER_MAX_RUNNING_PER_ENGINE: z.coerce.number().int().min(1).max(100_000).default(20),
  }),
  options: (e) => ({
    /** `auto`: an `acs-sandbox:*` image the engine lacks is built at start (sandboxes wait for it); `off`: a missing image fails the sandbox. */
    imageBuild: e.ACS_SANDBOX_IMAGE_BUILD,
    /** Several Docker engines (ACS_DOCKER_HOSTS); null: the one engine of DOCKER_HOST or the default socket. */
    hosts:
      e.ACS_DOCKER_HOSTS === undefined
        ? null
        : parseDockerHosts(e.ACS_DOCKER_HOSTS, e.ACS_DOCKER_MAX_RUNNING_PER_ENGINE),
  }),
  async open(options, common) {
    const { createDockerEnginePool, createDockerRuntime } = await import('@acs/adapter-docker');
    const dockerOptions = {
      limits: { memoryBytes: common.memoryMb * 1024 * 1024, cpus: common.cpus, pids: common.pids },
      networkMode: common.network,
      ...(options.imageBuild === 'auto' ? { images: sandboxImageProvider(common.images) } : {}),
    };
    if (options.hosts) {
      // Several engines: an engine that does not answer now is still in the pool (its sandboxes are found when it is back).
      const pool = await createDockerEnginePool(options.hosts, dockerOptions);
      const description = `docker engines: ${pool.engines.map((e) => `${e.name} (${e.url}, up to ${e.maxRunning}; ${e.status})`).join(', ')}`;
      return { runtime: pool, description, unavailable: null };
    }
    try {
      const runtime = await createDockerRuntime(dockerOptions);
      return {
        runtime,
        description: `docker (engine ${runtime.connection.engineVersion}, API ${runtime.connection.apiVersion})`,
        unavailable: null,
        prepare(logger) {
          if (options.imageBuild !== 'auto') return;
          for (const image of new Set(common.images.filter(isSandboxImage)))
            prepareSandboxImage(runtime, image, logger);
        },
      };
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return { runtime: unavailableSandboxRuntime(reason), description: 'unavailable', unavailable: reason };
    }
  },
  async openForCli(options) {
    const { createDockerEnginePool, createDockerRuntime } = await import('@acs/adapter-docker');
    // Every engine the server uses (ACS_DOCKER_HOSTS), or the one engine.
    return options.hosts
      ? { runtime: await createDockerEnginePool(options.hosts), where: 'these Docker engines' }
      : { runtime: await createDockerRuntime(), where: 'this Docker engine' };
  },
});

/** Builds the default sandbox image in the background when the engine lacks it, with its progress in the log. */
function prepareSandboxImage(docker: DockerSandboxRuntime, image: string, logger: PinoLogger): void {
  let announced = false;
  const started = Date.now();
  docker
    .ensureImage(image, (line) => {
      if (!announced) {
        announced = true;
        logger.info(
          { image },
          'the sandbox image is missing; building it now (once; sandboxes started meanwhile wait for it)',
        );
      }
      logger.info({ image, step: line }, 'building the sandbox image');
    })
    .then(
      (outcome) => {
        if (outcome === 'provided')
          logger.info({ image, seconds: Math.round((Date.now() - started) / 1000) }, 'the sandbox image is ready');
      },
      (error: unknown) => {
        logger.error(
          { image, reason: error instanceof Error ? error.message : String(error) },
          'could not build the sandbox image; sandboxes will fail until it exists (run scripts/build-sandbox-image.sh to see why)',
        );
      },
    );
}
