import Docker from 'dockerode';
import { DockerSandboxRuntime, type DockerRuntimeOptions } from './docker-runtime.js';

/** The API versions this adapter speaks: Debian's docker.io (Engine 20.10) tops out at 1.41; Engine 29 refuses below 1.44. */
export const MIN_DOCKER_API_VERSION = '1.41';
export const MAX_DOCKER_API_VERSION = '1.47';

const compare = (a: string, b: string) => {
  const [am = 0, an = 0] = a.split('.').map(Number);
  const [bm = 0, bn = 0] = b.split('.').map(Number);
  return am === bm ? an - bn : am - bm;
};

export interface DockerConnection {
  docker: Docker;
  apiVersion: string;
  engineVersion: string;
}

/**
 * Connects to the engine (DOCKER_HOST or the default socket unless `connection` says
 * otherwise) and settles on the newest API version both sides speak. Throws an Error
 * that says what to do when the engine cannot be reached or is too old or too new.
 */
export async function connectDocker(connection: Docker.DockerOptions = {}): Promise<DockerConnection> {
  const where = connection.socketPath ?? connection.host ?? process.env.DOCKER_HOST ?? '/var/run/docker.sock';
  let version: Docker.DockerVersion;
  try {
    version = await new Docker(connection).version();
  } catch (error) {
    throw new Error(
      `No Docker engine answers at ${where}: ${(error as Error).message}. Start dockerd, or set DOCKER_HOST.`,
      { cause: error },
    );
  }
  const server = version.ApiVersion;
  const chosen = compare(server, MAX_DOCKER_API_VERSION) < 0 ? server : MAX_DOCKER_API_VERSION;
  if (compare(chosen, MIN_DOCKER_API_VERSION) < 0) {
    throw new Error(
      `The Docker engine at ${where} (${version.Version}) speaks API ${server}; this adapter needs at least ${MIN_DOCKER_API_VERSION}.`,
    );
  }
  const minimum = (version as Docker.DockerVersion & { MinAPIVersion?: string }).MinAPIVersion;
  if (minimum && compare(chosen, minimum) < 0) {
    throw new Error(
      `The Docker engine at ${where} (${version.Version}) needs API ${minimum} or newer; this adapter speaks up to ${MAX_DOCKER_API_VERSION}.`,
    );
  }
  return {
    docker: new Docker({ ...connection, version: `v${chosen}` }),
    apiVersion: chosen,
    engineVersion: version.Version,
  };
}

/** Connects (negotiating the API version) and returns the sandbox runtime. */
export async function createDockerRuntime(
  options: Omit<DockerRuntimeOptions, 'docker'> & { connection?: Docker.DockerOptions } = {},
): Promise<DockerSandboxRuntime & { readonly connection: DockerConnection }> {
  const connection = await connectDocker(options.connection);
  return Object.assign(new DockerSandboxRuntime({ ...options, docker: connection.docker }), { connection });
}
