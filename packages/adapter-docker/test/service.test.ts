import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { describe, expect, it } from 'vitest';
import { createAgentConversationService, type AgentConversationServiceOptions } from '@acs/core';
import { expectOk } from '@acs/core/testing';
import { createAcsRouter } from '@acs/adapter-express';
import { createMemoryPorts } from '@acs/testing';
import { dockerRuntime } from './engine.js';
import { createAgent } from '@acs/agent';

const KEY = 'docker-http-key-0123456789';
const specs = [{ id: 'bookworm', image: 'acs-sandbox:bookworm', working_dir: '/workspace' }];

/** A service on the real engine with memory stores; `stores` lets a second service share them (a restart). */
async function compose(options: AgentConversationServiceOptions = {}, stores = createMemoryPorts({ specs })) {
  const runtime = await dockerRuntime();
  const service = createAgentConversationService(
    { agent: createAgent(), ...stores, runtime },
    { pollIntervalMs: 20, ...options },
  );
  return { service, runtime, stores };
}

const inspect = (runtime: Awaited<ReturnType<typeof dockerRuntime>>, id: string) =>
  runtime.connection.docker.getContainer(runtime.containerName(id)).inspect();

describe('sandbox service on Docker', () => {
  it('serves the V1 sandbox routes over HTTP with real containers', async () => {
    const { service, runtime } = await compose();
    const app = express().use(createAcsRouter(service, { apiKeys: { [KEY]: 'alice' } }));
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const call = async (method: string, path: string) => {
      const r = await fetch(base + path, { method, headers: { 'X-Session-API-Key': KEY } });
      return { status: r.status, body: (await r.json()) as Record<string, unknown> };
    };
    try {
      const created = await call('POST', '/api/v1/sandboxes');
      expect(created.status).toBe(200);
      const id = created.body.id as string;
      await service.idle();
      expect((await call('GET', `/api/v1/sandboxes/${id}`)).body.status).toBe('RUNNING');
      expect((await call('POST', `/api/v1/sandboxes/${id}/pause`)).body).toEqual({ success: true });
      expect((await inspect(runtime, id)).State.Paused).toBe(true);
      expect((await call('GET', `/api/v1/sandboxes/${id}`)).body.status).toBe('PAUSED');
      expect((await call('POST', `/api/v1/sandboxes/${id}/resume`)).body).toEqual({ success: true });
      expect((await inspect(runtime, id)).State.Running && !(await inspect(runtime, id)).State.Paused).toBe(true);
      expect((await call('DELETE', `/api/v1/sandboxes/${id}`)).body).toEqual({ success: true });
      await expect(inspect(runtime, id)).rejects.toMatchObject({ statusCode: 404 });
      expect((await call('GET', `/api/v1/sandboxes/${id}`)).status).toBe(404);
      expect((await call('POST', `/api/v1/sandboxes/${id}/resume`)).status).toBe(409);
    } finally {
      server.close();
      await service.close();
    }
  });

  it('refuses a start over the per-user limit with 429, or pauses the oldest when told to', async () => {
    const refusing = await compose({ maxRunningSandboxesPerUser: 1, atSandboxLimit: 'refuse' });
    const first = await expectOk(refusing.service.sandboxes.start('alice'));
    const second = await refusing.service.sandboxes.start('alice');
    expect(second.isErr() && second.error).toEqual({ type: 'SandboxCapReached', limit: 1 });
    expect((await refusing.service.sandboxes.start('bob')).isOk()).toBe(true);
    await refusing.service.idle();
    await expectOk(refusing.service.sandboxes.delete('alice', first.id));

    const pausing = await compose({ maxRunningSandboxesPerUser: 1, atSandboxLimit: 'pause_oldest' });
    const older = await expectOk(pausing.service.sandboxes.start('alice'));
    await pausing.service.idle();
    const newer = await expectOk(pausing.service.sandboxes.start('alice'));
    await pausing.service.idle();
    expect((await expectOk(pausing.service.sandboxes.get('alice', older.id))).status).toBe('PAUSED');
    expect((await inspect(pausing.runtime, older.id)).State.Paused).toBe(true);
    expect((await expectOk(pausing.service.sandboxes.get('alice', newer.id))).status).toBe('RUNNING');
    const resumeOlder = await pausing.service.sandboxes.resume('alice', older.id);
    expect(resumeOlder.isOk()).toBe(true);
    await pausing.service.idle();
    expect((await expectOk(pausing.service.sandboxes.get('alice', newer.id))).status).toBe('PAUSED');
    await refusing.service.close();
    await pausing.service.close();
  });

  it('pauses sandboxes left idle', async () => {
    const { service, runtime } = await compose({ idlePauseAfterMs: 400, maintenanceIntervalMs: 100 });
    const box = await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    // Any reader may see the engine's PAUSED before the idle pauser records its reason; the reason follows.
    let seen = { status: '', status_detail: null as string | null };
    for (let i = 0; i < 60 && !(seen.status === 'PAUSED' && seen.status_detail); i++) {
      await new Promise((r) => setTimeout(r, 100));
      seen = await expectOk(service.sandboxes.get('alice', box.id));
    }
    expect(seen.status).toBe('PAUSED');
    expect(seen.status_detail).toMatch(/paused after \d+ (s|min) without use/);
    expect((await inspect(runtime, box.id)).State.Paused).toBe(true);
    await service.close();
  });

  it('adopts its containers after a restart: running, paused, died, vanished, and unknown ones', async () => {
    const before = await compose();
    const [running, paused, died, vanished] = await Promise.all(
      Array.from({ length: 4 }, () => expectOk(before.service.sandboxes.start('alice'))),
    );
    await before.service.idle();
    await expectOk(before.service.sandboxes.pause('alice', paused!.id));
    await before.service.close();
    // While the service is down: one container dies, one is removed.
    await before.runtime.connection.docker
      .getContainer(before.runtime.containerName(died!.id))
      .kill({ signal: 'SIGKILL' });
    await before.runtime.connection.docker
      .getContainer(before.runtime.containerName(vanished!.id))
      .remove({ force: true });

    const after = await compose({}, before.stores);
    const report = await expectOk(after.service.sandboxes.reconcile());
    expect(report.checked).toBeGreaterThanOrEqual(4);
    const status = async (id: string) => expectOk(after.service.sandboxes.get('alice', id));
    expect((await status(running!.id)).status).toBe('RUNNING');
    expect((await status(paused!.id)).status).toBe('PAUSED');
    expect(await status(died!.id)).toMatchObject({
      status: 'ERROR',
      status_detail: expect.stringMatching(/exited with code 137/) as unknown,
    });
    expect((await status(vanished!.id)).status).toBe('MISSING');

    // Another installation on the same engine adopts none of them.
    const stranger = await compose();
    expect((await expectOk(stranger.service.sandboxes.reconcile())).adopted).toBe(0);
    expect((await stranger.service.sandboxes.get('alice', running!.id)).isErr()).toBe(true);
    await stranger.service.close();

    // The same installation having lost its records (memory storage, same identity) adopts its containers back.
    const amnesiac = await compose(
      {},
      createMemoryPorts({ specs, installationId: await expectOk(before.stores.installation.identity()) }),
    );
    const adopted = await expectOk(amnesiac.service.sandboxes.reconcile());
    expect(adopted.adopted).toBe(3);
    expect((await expectOk(amnesiac.service.sandboxes.get('alice', running!.id))).status).toBe('RUNNING');
    expect((await expectOk(amnesiac.service.sandboxes.get('alice', paused!.id))).status).toBe('PAUSED');
    for (const box of [running, paused, died, vanished]) await after.service.sandboxes.delete('alice', box!.id);
    await after.service.close();
    await amnesiac.service.close();
  });
});
