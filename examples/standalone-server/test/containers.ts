import type Docker from 'dockerode';

/** Removes every container (and its volumes) the server made for this test user; for afterAll. */
export async function removeContainersOf(docker: Docker, userId: string): Promise<void> {
  const mine = await docker.listContainers({ all: true, filters: { label: [`io.acs.user-id=${userId}`] } });
  await Promise.all(mine.map((c) => docker.getContainer(c.Id).remove({ force: true, v: true }).catch(() => {})));
}
