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

/** The repository's root (the build scripts run from there). */
export const repositoryRoot = fileURLToPath(new URL('../../../', import.meta.url));
const AGENT_SERVER_BUILD = fileURLToPath(new URL('../../../scripts/build-agent-server-image.sh', import.meta.url));

/** Runs a command to its end, with its output; never throws. */
export function runCommand(
  command: string,
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; deadlineMs?: number } = {},
): Promise<{ code: number | null; output: string }> {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const timer = setTimeout(() => child.kill('SIGTERM'), options.deadlineMs ?? 300_000);
  return new Promise((resolve) => {
    child.on('error', (error) => (output += `\n${error.message}`));
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/**
 * Builds an image the engine lacks with one of the repository's build scripts (`bash` and
 * `script`, from the repository's root; a few minutes), failing with the build's output.
 */
export async function ensureImage(docker: Docker, image: string, script: readonly string[]): Promise<void> {
  const present = await docker
    .getImage(image)
    .inspect()
    .then(
      () => true,
      () => false,
    );
  if (present) return;
  const { code, output } = await runCommand('bash', script, { cwd: repositoryRoot, deadlineMs: 1_500_000 });
  if (code !== 0) throw new Error(`Building ${image} failed (exit ${code}):\n${output.slice(-6000)}`);
}

/**
 * An OpenHands agent-server image, built as the service would on its first sandbox when the
 * engine lacks it (CI builds only the newest pin).
 */
export const ensureAgentServerImage = (docker: Docker, image: string): Promise<void> =>
  ensureImage(docker, image, [AGENT_SERVER_BUILD, '--tag', image]);
