import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Docker from 'dockerode';
import { createSandboxRuntimePool, type SandboxRuntime } from '@acs/core/ports';
import { connectDocker, MIN_DOCKER_API_VERSION } from './connect.js';
import { DockerSandboxRuntime, type DockerRuntimeOptions } from './docker-runtime.js';
import type { DockerEngineHost } from './hosts.js';

/** dockerode's connection options for a host. */
export function connectionOf(host: DockerEngineHost): Docker.DockerOptions {
  if (host.url.startsWith('unix://')) return { socketPath: host.url.slice('unix://'.length) };
  const [hostname = '', port = ''] = host.url.slice('tcp://'.length).split(':');
  if (!host.tlsDir) return { host: hostname, port: Number(port), protocol: 'http' };
  const read = (file: string) => readFileSync(join(host.tlsDir!, file));
  return {
    host: hostname,
    port: Number(port),
    protocol: 'https',
    ca: read('ca.pem'),
    cert: read('cert.pem'),
    key: read('key.pem'),
  };
}

export interface DockerEnginePool extends SandboxRuntime {
  /** Each engine: its name, and its engine version, or why it did not answer at start. */
  readonly engines: readonly { name: string; url: string; maxRunning: number; status: string }[];
}

/**
 * Sandboxes on several Docker engines as one runtime (core's `createSandboxRuntimePool`): a new
 * sandbox goes to the engine with the most room, its record keeps the engine's name, an engine
 * that stops answering marks its sandboxes ERROR with the reason while the others go on. An
 * engine that does not answer at start is still in the pool (at the oldest API version this
 * adapter speaks) so its sandboxes are found when it is back.
 */
export async function createDockerEnginePool(
  hosts: readonly DockerEngineHost[],
  options: Omit<DockerRuntimeOptions, 'docker'> = {},
): Promise<DockerEnginePool> {
  const members = await Promise.all(
    hosts.map(async (host) => {
      const connection = connectionOf(host);
      const connected = await connectDocker(connection).then(
        (c) => ({ docker: c.docker, status: `engine ${c.engineVersion}, API ${c.apiVersion}` }),
        (error: unknown) => ({
          docker: new Docker({ ...connection, version: `v${MIN_DOCKER_API_VERSION}` }),
          status: `not answering: ${(error as Error).message}`,
        }),
      );
      const runtime = new DockerSandboxRuntime({ ...options, docker: connected.docker });
      return { host, runtime, status: connected.status };
    }),
  );
  const pool = createSandboxRuntimePool(
    members.map(({ host, runtime }) => ({
      name: host.name,
      runtime,
      maxRunning: host.maxRunning,
      running: () => runtime.running(),
    })),
  );
  return Object.assign(pool, {
    engines: members.map(({ host, status }) => ({
      name: host.name,
      url: host.url,
      maxRunning: host.maxRunning,
      status,
    })),
  });
}
