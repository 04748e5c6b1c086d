import { describe, expect, it } from 'vitest';
import { expectOk, fixtureId } from '@acs/core/testing';
import {
  connectDocker,
  LABELS,
  MAX_DOCKER_API_VERSION,
  MIN_DOCKER_API_VERSION,
  SANDBOX_CAPABILITIES,
} from '@acs/adapter-docker';
import { bookworm, dockerRuntime, TEST_NETWORK } from './engine.js';

const until = async <T>(probe: () => Promise<T>, done: (value: T) => boolean, ms = 90_000): Promise<T> => {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
};

describe('Docker sandbox runtime', () => {
  it('negotiates an API version both sides speak', async () => {
    const { apiVersion, docker } = await connectDocker();
    const server = (await docker.version()).ApiVersion;
    expect(Number(apiVersion.split('.')[1])).toBeGreaterThanOrEqual(Number(MIN_DOCKER_API_VERSION.split('.')[1]));
    expect(Number(apiVersion.split('.')[1])).toBeLessThanOrEqual(
      Math.min(Number(server.split('.')[1]), Number(MAX_DOCKER_API_VERSION.split('.')[1])),
    );
  });

  it('says clearly when no engine answers', async () => {
    await expect(connectDocker({ socketPath: '/tmp/acs-no-such-docker.sock' })).rejects.toThrow(
      /No Docker engine answers at \/tmp\/acs-no-such-docker.sock.*Start dockerd, or set DOCKER_HOST/,
    );
  });

  it('creates an isolated, limited, labelled container with ports on loopback only', async () => {
    const runtime = await dockerRuntime({
      exposedPorts: [{ name: 'WORKER_1', port: 8011 }],
      limits: { memoryBytes: 256 * 1024 ** 2, cpus: 0.5, pids: 100 },
    });
    const id = fixtureId();
    try {
      await expectOk(
        runtime.create({
          sandbox_id: id,
          user_id: 'alice',
          installation_id: 'acs-tests',
          spec: bookworm,
          env: { A: '1' },
          resource_factor: 2,
        }),
      );
      const info = await runtime.connection.docker.getContainer(runtime.containerName(id)).inspect();
      const host = info.HostConfig;
      expect(host.Privileged).toBe(false);
      expect(host.CapDrop).toEqual(['ALL']);
      expect([...((host.CapAdd as string[] | undefined) ?? [])].sort()).toEqual([...SANDBOX_CAPABILITIES].sort());
      expect(host.SecurityOpt).toContain('no-new-privileges');
      expect(host.Memory).toBe(2 * 256 * 1024 ** 2);
      expect(host.NanoCpus).toBe(1e9);
      expect(host.PidsLimit).toBe(200);
      // The sandbox network (by id), and nothing else.
      expect(host.NetworkMode).toBe((await runtime.connection.docker.getNetwork(TEST_NETWORK).inspect()).Id);
      expect(Object.keys(info.NetworkSettings.Networks)).toEqual([TEST_NETWORK]);
      expect(info.Mounts.map((m) => m.Destination)).toEqual(['/workspace']);
      expect(info.Mounts.some((m) => m.Source.includes('docker.sock'))).toBe(false);
      expect(info.Config.Labels).toMatchObject({
        [LABELS.managed]: 'true',
        [LABELS.sandbox]: id,
        [LABELS.user]: 'alice',
        [LABELS.spec]: 'bookworm',
      });
      expect(info.Config.Env).toContain('A=1');
      expect((host.PortBindings as Record<string, unknown> | undefined)?.['8011/tcp']).toEqual([
        { HostIp: '127.0.0.1', HostPort: '' },
      ]);
      const running = await until(
        () => expectOk(runtime.inspect(id)),
        (o) => o.state !== 'starting',
      );
      expect(running.state).toBe('running');
      expect(running.exposed_urls).toHaveLength(1);
      expect(running.exposed_urls[0]?.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const docker = await expectOk(
        runtime.exec(id, { command: ['bash', '-c', 'ls /var/run/docker.sock 2>&1; id -u'] }),
      );
      expect(docker.stdout).toMatch(/No such file or directory/);
    } finally {
      await runtime.delete(id);
    }
  });

  it('changes a running sandbox’s limits to another resource factor (a claimed pooled sandbox), keeping it running', async () => {
    const runtime = await dockerRuntime({ limits: { memoryBytes: 256 * 1024 ** 2, cpus: 0.5, pids: 100 } });
    const id = fixtureId();
    try {
      await expectOk(
        runtime.create({
          sandbox_id: id,
          user_id: 'acs:sandbox-pool',
          installation_id: 'acs-tests',
          spec: bookworm,
          env: {},
          resource_factor: 1,
        }),
      );
      expect(
        (
          await until(
            () => expectOk(runtime.inspect(id)),
            (o) => o.state !== 'starting',
          )
        ).state,
      ).toBe('running');
      await expectOk(runtime.resize(id, 3));
      const host = (await runtime.connection.docker.getContainer(runtime.containerName(id)).inspect()).HostConfig;
      expect([host.Memory, host.NanoCpus, host.PidsLimit]).toEqual([3 * 256 * 1024 ** 2, 1.5e9, 300]);
      expect((await expectOk(runtime.inspect(id))).state).toBe('running');
      expect((await expectOk(runtime.exec(id, { command: ['true'] }))).exit_code).toBe(0);
      expect((await runtime.resize('no-such-sandbox', 2))._unsafeUnwrapErr().type).toBe('not_found');
    } finally {
      await runtime.delete(id);
    }
  });

  /** A spec whose image serves HTTP on the port it is told (ACS_PORT_WEB), after a delay, and a health path. */
  const serving = (delaySeconds: number) => ({
    ...bookworm,
    id: 'serving',
    command: [
      'bash',
      '-c',
      `sleep ${delaySeconds}; mkdir -p /srv/ok && cd /srv && exec python3 -m http.server --bind "$ACS_BIND_HOST" "$ACS_PORT_WEB"`,
    ],
    exposed_ports: [{ name: 'WEB', port: 8000, health_path: '/ok/' }],
  });

  it("publishes a spec's ports on loopback, and keeps the sandbox STARTING until the health path answers", async () => {
    const runtime = await dockerRuntime();
    const id = fixtureId();
    try {
      await expectOk(
        runtime.create({ sandbox_id: id, user_id: 'alice', installation_id: 'acs-tests', spec: serving(3), env: {} }),
      );
      const early = await expectOk(runtime.inspect(id));
      expect(early).toMatchObject({ state: 'starting', exposed_urls: [] });
      const running = await until(
        () => expectOk(runtime.inspect(id)),
        (o) => o.state !== 'starting',
      );
      expect(running.state).toBe('running');
      expect(running.exposed_urls.map((u) => ({ ...u, url: /^http:\/\/127\.0\.0\.1:\d+$/.test(u.url) }))).toEqual([
        { name: 'WEB', url: true, port: 8000 },
      ]);
      expect((await fetch(`${running.exposed_urls[0]?.url}/ok/`)).status).toBe(200);
      const info = await runtime.connection.docker.getContainer(runtime.containerName(id)).inspect();
      expect(info.Config.Env).toEqual(expect.arrayContaining(['ACS_PORT_WEB=8000', 'ACS_BIND_HOST=0.0.0.0']));
      expect(JSON.parse(info.Config.Labels[LABELS.ports] ?? '[]')).toEqual([
        { name: 'WEB', port: 8000, health_path: '/ok/' },
      ]);
    } finally {
      await runtime.delete(id);
    }
  });

  it('gives each sandbox on the host network a port of its own, bound to loopback', async () => {
    const runtime = await dockerRuntime({ networkMode: 'host' });
    const ids = [fixtureId(), fixtureId()];
    try {
      for (const id of ids)
        await expectOk(
          runtime.create({ sandbox_id: id, user_id: 'alice', installation_id: 'acs-tests', spec: serving(0), env: {} }),
        );
      const urls: string[] = [];
      for (const id of ids) {
        const running = await until(
          () => expectOk(runtime.inspect(id)),
          (o) => o.state !== 'starting',
        );
        expect(running.state, running.detail ?? '').toBe('running');
        urls.push(running.exposed_urls[0]?.url ?? '');
        const info = await runtime.connection.docker.getContainer(runtime.containerName(id)).inspect();
        expect(info.Config.Env).toEqual(
          expect.arrayContaining([
            'ACS_BIND_HOST=127.0.0.1',
            `ACS_PORT_WEB=${new URL(running.exposed_urls[0]?.url ?? '').port}`,
          ]),
        );
      }
      expect(new Set(urls).size).toBe(2);
      for (const url of urls) expect((await fetch(`${url}/ok/`)).status).toBe(200);
    } finally {
      for (const id of ids) await runtime.delete(id);
    }
  });

  it('keeps a sandbox off the network with networkMode none', async () => {
    const runtime = await dockerRuntime({ networkMode: 'none' });
    const id = fixtureId();
    try {
      await expectOk(
        runtime.create({ sandbox_id: id, user_id: 'alice', installation_id: 'acs-tests', spec: bookworm, env: {} }),
      );
      await until(
        () => expectOk(runtime.inspect(id)),
        (o) => o.state !== 'starting',
      );
      const links = await expectOk(runtime.exec(id, { command: ['bash', '-c', 'ls /sys/class/net'] }));
      expect(links.stdout.trim().split('\n')).toEqual(['lo']);
    } finally {
      await runtime.delete(id);
    }
  });

  it('ends a sandbox whose image is missing in an error that says what to do, leaving no container or volume', async () => {
    const runtime = await dockerRuntime();
    const { docker } = await connectDocker();
    const id = fixtureId();
    const created = await runtime.create({
      sandbox_id: id,
      user_id: 'alice',
      installation_id: 'acs-tests',
      spec: { ...bookworm, image: 'acs-sandbox:does-not-exist' },
      env: {},
    });
    expect(created.isErr() && created.error.message).toMatch(
      /image acs-sandbox:does-not-exist is not on this Docker engine; build or load it first/,
    );
    const volumes = (await docker.listVolumes({ filters: { label: [`${LABELS.sandbox}=${id}`] } })).Volumes ?? [];
    const containers = await docker.listContainers({ all: true, filters: { label: [`${LABELS.sandbox}=${id}`] } });
    expect({ volumes: volumes.map((v) => v.Name), containers: containers.map((c) => c.Id) }).toEqual({
      volumes: [],
      containers: [],
    });
    await runtime.delete(id);
  });

  it('reports a container that died as error with the reason, and one removed behind its back as missing', async () => {
    const runtime = await dockerRuntime();
    const id = fixtureId();
    try {
      await expectOk(
        runtime.create({ sandbox_id: id, user_id: 'alice', installation_id: 'acs-tests', spec: bookworm, env: {} }),
      );
      await until(
        () => expectOk(runtime.inspect(id)),
        (o) => o.state !== 'starting',
      );
      await runtime.connection.docker.getContainer(runtime.containerName(id)).kill({ signal: 'SIGKILL' });
      const died = await until(
        () => expectOk(runtime.inspect(id)),
        (o) => o.state === 'error',
      );
      expect(died).toMatchObject({ state: 'error' });
      expect(died.detail).toMatch(/exited with code 137/);
      await runtime.connection.docker.getContainer(runtime.containerName(id)).remove({ force: true });
      expect((await expectOk(runtime.inspect(id))).state).toBe('missing');
    } finally {
      await runtime.delete(id);
    }
  });
});
