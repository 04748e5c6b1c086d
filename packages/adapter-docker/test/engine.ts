import { randomBytes } from 'node:crypto';
import { afterAll } from 'vitest';
import Docker from 'dockerode';
import { specFixture } from '@acs/core/testing';
import { createDockerRuntime, type DockerRuntimeOptions } from '@acs/adapter-docker';

/** The image .ci/run builds with scripts/build-sandbox-image.sh. */
export const SANDBOX_IMAGE = 'acs-sandbox:bookworm';
/** Per test file (vitest gives each file its own module instance), so one file's cleanup never touches another's sandboxes. */
export const TEST_PREFIX = `acs-test-${randomBytes(3).toString('hex')}-`;
/** This file's sandbox network (bridge mode), in place of the engine's `acs-sandboxes`, removed after the file. */
export const TEST_NETWORK = `${TEST_PREFIX}sandboxes`;
export const bookworm = specFixture({
  id: 'bookworm',
  image: SANDBOX_IMAGE,
  working_dir: '/workspace',
  command: null,
  initial_env: { LANG: 'C.UTF-8' },
});

/** A runtime on the local engine; fails with a message saying what to do when there is none or the image is missing. */
export async function dockerRuntime(options: Omit<DockerRuntimeOptions, 'docker'> = {}) {
  const runtime = await createDockerRuntime({
    namePrefix: TEST_PREFIX,
    sandboxNetwork: TEST_NETWORK,
    limits: { memoryBytes: 512 * 1024 ** 2, cpus: 1, pids: 256 },
    ...options,
  }).catch((error: unknown) => {
    throw new Error(
      `These tests need a Docker engine (run .ci/run once, or start dockerd): ${(error as Error).message}`,
      { cause: error },
    );
  });
  await runtime.connection.docker
    .getImage(SANDBOX_IMAGE)
    .inspect()
    .catch((error: unknown) => {
      throw new Error(`These tests need the image ${SANDBOX_IMAGE}: run scripts/build-sandbox-image.sh`, {
        cause: error,
      });
    });
  return runtime;
}

/** Removes whatever this test file left behind (containers, volumes and networks with its prefix). */
afterAll(async () => {
  const docker = new Docker();
  const containers = await docker.listContainers({ all: true, filters: { name: [TEST_PREFIX] } }).catch(() => []);
  await Promise.all(
    containers.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => {}),
    ),
  );
  const volumes = (await docker.listVolumes().catch(() => ({ Volumes: [] }))).Volumes ?? [];
  await Promise.all(
    volumes
      .filter((v) => v.Name.startsWith(TEST_PREFIX))
      .map((v) =>
        docker
          .getVolume(v.Name)
          .remove()
          .catch(() => {}),
      ),
  );
  const networks = await docker.listNetworks({ filters: { name: [TEST_PREFIX] } }).catch(() => []);
  await Promise.all(
    networks
      .filter((n) => n.Name.startsWith(TEST_PREFIX))
      .map((n) =>
        docker
          .getNetwork(n.Id)
          .remove()
          .catch(() => {}),
      ),
  );
});
