import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type Docker from 'dockerode';

/** Removes every container the server made for this test user, and their workspace volumes; for afterAll. */
export async function removeContainersOf(docker: Docker, userId: string): Promise<void> {
  const mine = await docker.listContainers({ all: true, filters: { label: [`io.acs.user-id=${userId}`] } });
  await Promise.all(
    mine.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => {}),
    ),
  );
  // The workspace is a named volume (it outlives a container restart), so `v: true` leaves it.
  const sandboxIds = new Set(mine.map((c) => c.Labels['io.acs.sandbox-id']).filter((id): id is string => Boolean(id)));
  if (sandboxIds.size === 0) return;
  const { Volumes } = await docker.listVolumes({ filters: { label: ['io.acs.managed=true'] } });
  await Promise.all(
    (Volumes ?? [])
      .filter((v) => sandboxIds.has(v.Labels?.['io.acs.sandbox-id'] ?? ''))
      .map((v) =>
        docker
          .getVolume(v.Name)
          .remove({ force: true })
          .catch(() => {}),
      ),
  );
}

const AGENT_SERVER_BUILD = fileURLToPath(new URL('../../../scripts/build-agent-server-image.sh', import.meta.url));

/**
 * Builds an OpenHands agent-server image the engine lacks, as the service would on its first
 * sandbox (a few minutes; CI builds only the newest pin), failing with the build's output.
 */
export async function ensureAgentServerImage(docker: Docker, image: string): Promise<void> {
  const present = await docker
    .getImage(image)
    .inspect()
    .then(
      () => true,
      () => false,
    );
  if (present) return;
  const build = spawn('bash', [AGENT_SERVER_BUILD, '--tag', image], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  build.stdout.on('data', (d: Buffer) => (output += d.toString()));
  build.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const timer = setTimeout(() => build.kill('SIGTERM'), 1_500_000);
  const code = await new Promise<number | null>((resolve) => build.on('close', resolve));
  clearTimeout(timer);
  if (code !== 0) throw new Error(`Building ${image} failed (exit ${code}):\n${output.slice(-6000)}`);
}
