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
