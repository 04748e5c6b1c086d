/**
 * Sandboxes on two Docker engines: the local one and a second dockerd this file starts
 * (startDockerEngine: its own socket, data root and exec root, no bridge) and ends. The second engine is reached through a
 * socket proxy the test can close, which is what an engine that stops answering looks like to
 * the service, while its containers stay where they are.
 */
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Docker from 'dockerode';
import { createAgentConversationService } from '@acs/core';
import { expectOk } from '@acs/core/testing';
import { createAgent } from '@acs/agent';
import { createMemoryPorts, startDockerEngine, type DockerEngineProcess } from '@acs/testing';
import { createDockerEnginePool, parseDockerHosts } from '@acs/adapter-docker';
import { SANDBOX_IMAGE } from './engine.js';

const proxySocket = `/run/acs-te-proxy-${randomBytes(3).toString('hex')}.sock`;
const PREFIX = `acs-te-${randomBytes(3).toString('hex')}-`;
let engine: DockerEngineProcess | undefined;
let engineSocket = '';

/** A unix socket in front of the second engine that the test can close (engine "down") and open again. */
class SocketProxy {
  #server: Server | null = null;
  readonly #open = new Set<Socket>();
  async up(): Promise<void> {
    rmSync(proxySocket, { force: true });
    this.#server = createServer((client) => {
      const upstream = createConnection(engineSocket);
      this.#open.add(client).add(upstream);
      client.pipe(upstream).pipe(client);
      const drop = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
    });
    await new Promise<void>((resolve) => this.#server!.listen(proxySocket, resolve));
  }
  async down(): Promise<void> {
    for (const socket of this.#open) socket.destroy();
    this.#open.clear();
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()));
    this.#server = null;
  }
}
const proxy = new SocketProxy();

beforeAll(async () => {
  engine = await startDockerEngine({ images: [SANDBOX_IMAGE], tls: true });
  engineSocket = engine.socket;
  await proxy.up();
}, 300_000);

afterAll(async () => {
  await proxy.down();
  for (const docker of [new Docker(), new Docker({ socketPath: engineSocket })]) {
    const containers = await docker.listContainers({ all: true, filters: { name: [PREFIX] } }).catch(() => []);
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
        .filter((v) => v.Name.startsWith(PREFIX))
        .map((v) =>
          docker
            .getVolume(v.Name)
            .remove()
            .catch(() => {}),
        ),
    );
  }
  await engine?.stop();
  rmSync(proxySocket, { force: true });
}, 180_000);

describe('sandboxes on two Docker engines', () => {
  it('spreads sandboxes by room, keeps each record’s engine, marks an engine that stops answering, and takes its sandboxes back when it answers again', async () => {
    const hosts = parseDockerHosts(`unix:///var/run/docker.sock?name=one&max=1,unix://${proxySocket}?name=two&max=1`);
    const runtime = await createDockerEnginePool(hosts, {
      namePrefix: PREFIX,
      networkMode: 'none',
      limits: { memoryBytes: 256 * 1024 ** 2, cpus: 0.5, pids: 128 },
    });
    expect(runtime.engines.map((e) => e.status)).toEqual([
      expect.stringMatching(/^engine /),
      expect.stringMatching(/^engine /),
    ]);
    const ports = createMemoryPorts();
    const service = createAgentConversationService(
      // The memory ports' default spec is acs-sandbox:bookworm in /workspace.
      { ...ports, runtime, agent: createAgent() },
      { reconcileIntervalMs: 0 },
    );
    try {
      const first = await expectOk(service.sandboxes.start('alice'));
      await service.idle();
      const second = await expectOk(service.sandboxes.start('alice'));
      await service.idle();
      const records = await Promise.all(
        [first, second].map(async (s) => (await expectOk(ports.sandboxes.get('alice', s.id)))!),
      );
      expect(records.map((r) => r.status)).toEqual(['RUNNING', 'RUNNING']);
      expect(records.map((r) => r.location).sort()).toEqual(['one', 'two']);
      const onTwo = records.find((r) => r.location === 'two')!;
      const onOne = records.find((r) => r.location === 'one')!;
      // Each runs commands on its own engine (the second engine's container has its own hostname).
      const ran = await expectOk(runtime.exec(onTwo.id, { command: ['sh', '-c', 'echo engine-two'] }));
      expect(ran.stdout).toBe('engine-two\n');
      expect(
        (await new Docker({ socketPath: engineSocket }).listContainers({ filters: { name: [PREFIX] } })).length,
      ).toBe(1);

      // Both full (one running sandbox each): the next start is refused at once, saying why.
      const refused = (await service.sandboxes.start('alice'))._unsafeUnwrapErr();
      expect(refused.type).toBe('SandboxesUnavailable');
      expect(refused.type === 'SandboxesUnavailable' && refused.reason).toContain('at its limit');

      // Engine two stops answering: its sandbox is ERROR with the reason; engine one goes on.
      await proxy.down();
      const lost = await expectOk(service.sandboxes.get('alice', onTwo.id));
      expect(lost.status).toBe('ERROR');
      expect(lost.status_detail).toMatch(/^sandbox engine "two" does not answer: /);
      expect((await expectOk(service.sandboxes.get('alice', onOne.id))).status).toBe('RUNNING');
      expect((await expectOk(runtime.exec(onOne.id, { command: ['sh', '-c', 'echo engine-one'] }))).stdout).toBe(
        'engine-one\n',
      );

      // It answers again, its container still running: reconcile gives the record its status back.
      await proxy.up();
      await expectOk(service.sandboxes.reconcile());
      expect((await expectOk(service.sandboxes.get('alice', onTwo.id))).status).toBe('RUNNING');
      expect((await expectOk(runtime.exec(onTwo.id, { command: ['sh', '-c', 'echo back'] }))).stdout).toBe('back\n');

      await expectOk(service.sandboxes.delete('alice', onOne.id));
      await expectOk(service.sandboxes.delete('alice', onTwo.id));
    } finally {
      await service.close();
    }
  });

  it('reaches an engine over TCP with TLS (client certificates), and says so when the certificates are wrong', async () => {
    const hosts = parseDockerHosts(
      `unix:///var/run/docker.sock?name=local&max=0,${engine!.tcp!}?name=remote&tls=${engine!.tlsDir!}&max=5`,
    );
    const runtime = await createDockerEnginePool(hosts, {
      namePrefix: PREFIX,
      networkMode: 'none',
      limits: { memoryBytes: 256 * 1024 ** 2, cpus: 0.5, pids: 128 },
    });
    expect(runtime.engines[1]!.status).toMatch(/^engine /);
    const ports = createMemoryPorts();
    const service = createAgentConversationService(
      { ...ports, runtime, agent: createAgent() },
      { reconcileIntervalMs: 0 },
    );
    try {
      // The local engine takes none (max 0): the sandbox goes to the remote one, over TLS.
      const box = await expectOk(service.sandboxes.start('alice'));
      await service.idle();
      const record = (await expectOk(ports.sandboxes.get('alice', box.id)))!;
      expect([record.status, record.location]).toEqual(['RUNNING', 'remote']);
      expect((await expectOk(runtime.exec(box.id, { command: ['sh', '-c', 'echo over-tls'] }))).stdout).toBe(
        'over-tls\n',
      );
      await expectOk(service.sandboxes.delete('alice', box.id));
    } finally {
      await service.close();
    }
    // Without a client certificate the engine refuses the connection: the pool starts, the engine is "not answering".
    const untrusted = await createDockerEnginePool(parseDockerHosts(`${engine!.tcp!}?name=remote`), {
      namePrefix: PREFIX,
    });
    expect(untrusted.engines[0]!.status).toMatch(/^not answering: /);
    expect((await untrusted.ping())._unsafeUnwrapErr().message).toMatch(/^sandbox engine "remote" does not answer: /);
  });
});
