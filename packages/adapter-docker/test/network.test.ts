/**
 * Sandboxes on a bridge cannot open connections to each other (issue 35): they share one network
 * of the engine's with inter-container traffic off. The isolation test makes one connection
 * attempt between two sandbox containers it started, on the engine's own bridge, and no other
 * traffic to container addresses.
 */
import { describe, expect, it } from 'vitest';
import Docker from 'dockerode';
import { expectOk, fixtureId } from '@acs/core/testing';
import { LABELS, type DockerSandboxRuntime } from '@acs/adapter-docker';
import { createSandboxNetwork } from '../src/sandbox-network.js';
import { bookworm, dockerRuntime, TEST_NETWORK, TEST_PREFIX } from './engine.js';

/** Inspects until the sandbox is past STARTING (90 s), failing with its last observation. */
async function running(runtime: DockerSandboxRuntime, id: string) {
  const deadline = Date.now() + 90_000;
  for (;;) {
    const observed = await expectOk(runtime.inspect(id));
    if (observed.state !== 'starting' || Date.now() > deadline) {
      expect(observed.state, `sandbox ${id}: ${observed.detail ?? ''}`).toBe('running');
      return observed;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** A spec that serves HTTP on its exposed port 8000 (python3's http.server), on every address of the container. */
const serving = {
  ...bookworm,
  id: 'serving',
  command: ['bash', '-c', 'mkdir -p /srv/ok && cd /srv && exec python3 -m http.server --bind 0.0.0.0 8000'],
  exposed_ports: [{ name: 'WEB', port: 8000, health_path: '/ok/' }],
};

/** One connection attempt to host:port from inside a sandbox, 5 s at most: `connected` on stdout when it was made. */
const connectFrom = (runtime: DockerSandboxRuntime, id: string, host: string) =>
  expectOk(
    runtime.exec(id, {
      command: ['timeout', '5', 'bash', '-c', 'exec 3<>"/dev/tcp/$0/8000" && echo connected', host],
      timeoutMs: 20_000,
    }),
  );

describe('sandbox network (Docker)', () => {
  it("keeps one user's sandbox from connecting to another's, while each serves itself and its published port", async () => {
    const runtime = await dockerRuntime();
    const [a, b] = [fixtureId(), fixtureId()];
    try {
      await expectOk(
        runtime.create({ sandbox_id: a, user_id: 'alice', installation_id: 'acs-tests', spec: bookworm, env: {} }),
      );
      await expectOk(
        runtime.create({ sandbox_id: b, user_id: 'bob', installation_id: 'acs-tests', spec: serving, env: {} }),
      );
      await running(runtime, a);
      const served = await running(runtime, b);
      const docker = runtime.connection.docker;
      const network = await docker.getNetwork(TEST_NETWORK).inspect();
      expect(network.Options).toMatchObject({ 'com.docker.network.bridge.enable_icc': 'false' });
      expect(network.Labels).toMatchObject({ [LABELS.managed]: 'true' });
      const infoA = await docker.getContainer(runtime.containerName(a)).inspect();
      const infoB = await docker.getContainer(runtime.containerName(b)).inspect();
      for (const info of [infoA, infoB]) expect(Object.keys(info.NetworkSettings.Networks)).toEqual([TEST_NETWORK]);
      const addressOfB = infoB.NetworkSettings.Networks[TEST_NETWORK]?.IPAddress ?? '';
      expect(addressOfB).toMatch(/^\d+\.\d+\.\d+\.\d+$/);

      // The control: B's listener answers inside B, and on its published port on the host's loopback.
      expect((await connectFrom(runtime, b, '127.0.0.1')).stdout.trim()).toBe('connected');
      expect((await fetch(`${served.exposed_urls[0]?.url}/ok/`)).status).toBe(200);

      // The one attempt: A cannot open a connection to B's address on the bridge.
      const attempt = await connectFrom(runtime, a, addressOfB);
      expect({ stdout: attempt.stdout.trim(), exitCode: attempt.exit_code === 0 ? 0 : 'not 0' }).toEqual({
        stdout: '',
        exitCode: 'not 0',
      });
    } finally {
      await runtime.delete(a);
      await runtime.delete(b);
    }
  });

  it('makes one network however many services ask for it at once, and they all take the same', async () => {
    const docker = new Docker();
    const name = `${TEST_PREFIX}race`;
    const labels = { [LABELS.managed]: 'true' };
    // Four services (each its own state, as separate processes would be), each asking twice at once.
    const services = [0, 1, 2, 3].map(() => createSandboxNetwork({ docker, name, labels }));
    const raced = await Promise.all(services.flatMap((service) => [service.ensure(), service.ensure()]));
    // Engines from API 1.44 refuse a second network of a name; before that (Debian 12's 20.10 is
    // API 1.41) the check is best effort, and two services making it at the same moment may each
    // get their own: both keep containers apart, and from then on every service takes the oldest.
    const { ApiVersion } = await docker.version();
    const strict = Number(ApiVersion.split('.')[1]) >= 44;
    if (strict) expect(new Set(raced).size).toBe(1);
    for (const id of new Set(raced))
      expect((await docker.getNetwork(id).inspect()).Options).toMatchObject({
        'com.docker.network.bridge.enable_icc': 'false',
      });
    const ids = await Promise.all(services.map((service) => service.ensure()));
    expect(new Set(ids).size).toBe(1);
    if (strict) expect(ids[0]).toBe(raced[0]);
    const chosen = await docker.getNetwork(ids[0] ?? '').inspect();
    expect(chosen).toMatchObject({
      Name: name,
      Driver: 'bridge',
      Options: { 'com.docker.network.bridge.enable_icc': 'false' },
      Labels: labels,
    });
    // With the MTU the engine gives its default bridge (its `mtu` setting), as sandboxes had there.
    const defaultBridge = await docker.getNetwork('bridge').inspect();
    expect(chosen.Options?.['com.docker.network.driver.mtu']).toBe(
      defaultBridge.Options?.['com.docker.network.driver.mtu'],
    );
    // Asked again, it is the same network.
    expect(await services[3]?.ensure()).toBe(ids[0]);
  });

  it("refuses a network of the name that lets containers reach each other, and uses an operator's that does not", async () => {
    const docker = new Docker();
    const open = `${TEST_PREFIX}open`;
    const own = `${TEST_PREFIX}own`;
    await docker.createNetwork({ Name: open, Driver: 'bridge', Labels: { [LABELS.managed]: 'true' } });
    const made = await docker.createNetwork({
      Name: own,
      Driver: 'bridge',
      Options: { 'com.docker.network.bridge.enable_icc': 'false' },
    });
    const refused = await (
      await dockerRuntime({ sandboxNetwork: open })
    ).create({
      sandbox_id: fixtureId(),
      user_id: 'alice',
      installation_id: 'acs-tests',
      spec: bookworm,
      env: {},
    });
    expect(refused.isErr() && refused.error).toMatchObject({
      type: 'failed',
      message: expect.stringMatching(
        new RegExp(`network ${open} lets containers reach each other.*docker network rm ${open}`),
      ) as unknown,
    });
    const runtime = await dockerRuntime({ sandboxNetwork: own });
    const id = fixtureId();
    try {
      await expectOk(
        runtime.create({ sandbox_id: id, user_id: 'alice', installation_id: 'acs-tests', spec: bookworm, env: {} }),
      );
      const info = await docker.getContainer(runtime.containerName(id)).inspect();
      expect(info.HostConfig.NetworkMode).toBe(made.id);
      expect(Object.keys(info.NetworkSettings.Networks)).toEqual([own]);
    } finally {
      await runtime.delete(id);
    }
  });
});
