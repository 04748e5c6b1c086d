import { describe, expect, it } from 'vitest';
import { createAgentConversationService, type AgentConversationServiceOptions } from '@acs/core';
import { expectOk } from '@acs/core/testing';
import { createMemoryPorts } from '@acs/testing';
import { createAgent } from '@acs/agent';
import { clients, kubernetesRuntime, onCluster, testNamespace } from './cluster.js';

const specs = [{ id: 'bookworm', image: 'acs-sandbox:bookworm', working_dir: '/workspace' }];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

onCluster('sandbox service on Kubernetes', (kubeConfig) => {
  const namespace = testNamespace(kubeConfig);
  const { core, apps } = clients(kubeConfig);

  /** A service on the cluster with memory stores; `stores` lets a second service share them (a restart). */
  async function compose(options: AgentConversationServiceOptions = {}, stores = createMemoryPorts({ specs })) {
    const runtime = kubernetesRuntime(kubeConfig, await namespace);
    const service = createAgentConversationService(
      { agent: createAgent(), ...stores, runtime },
      { pollIntervalMs: 100, ...options },
    );
    return { service, runtime, stores };
  }

  const replicasOf = async (name: string) =>
    (await apps.readNamespacedStatefulSet({ name, namespace: await namespace })).spec?.replicas;
  const setExists = async (name: string) =>
    apps.readNamespacedStatefulSet({ name, namespace: await namespace }).then(
      () => true,
      () => false,
    );

  /** Waits (60 s) for a condition, failing with what it last saw. */
  async function eventually<T>(what: string, read: () => Promise<T>, check: (value: T) => boolean): Promise<T> {
    const deadline = Date.now() + 60_000;
    let last = await read();
    while (!check(last)) {
      if (Date.now() > deadline) throw new Error(`${what}: still not so after 60 s; last seen ${JSON.stringify(last)}`);
      await sleep(200);
      last = await read();
    }
    return last;
  }

  describe('sandbox service on Kubernetes', () => {
    it('starts, pauses (scale to zero), resumes and deletes a sandbox; the claim goes with it', async () => {
      const { service, runtime } = await compose();
      try {
        const box = await expectOk(service.sandboxes.start('alice'));
        expect((await service.sandboxes.whenSettled('alice', box.id))?.status).toBe('RUNNING');
        await expectOk(runtime.writeFile(box.id, 'mine.txt', new TextEncoder().encode('still here')));
        await expectOk(service.sandboxes.pause('alice', box.id));
        expect((await expectOk(service.sandboxes.get('alice', box.id))).status).toBe('PAUSED');
        expect(await replicasOf(runtime.setName(box.id))).toBe(0);
        await expectOk(service.sandboxes.resume('alice', box.id));
        expect((await service.sandboxes.whenSettled('alice', box.id))?.status).toBe('RUNNING');
        await eventually(
          'the sandbox to run again',
          async () => (await expectOk(service.sandboxes.get('alice', box.id))).status,
          (s) => s === 'RUNNING',
        );
        expect(new TextDecoder().decode((await expectOk(runtime.readFile(box.id, 'mine.txt'))).bytes)).toBe(
          'still here',
        );
        await expectOk(service.sandboxes.delete('alice', box.id));
        const ns = await namespace;
        await eventually(
          'the StatefulSet, pod and claim to be gone',
          async () => ({
            set: await setExists(runtime.setName(box.id)),
            pod: await core.readNamespacedPod({ name: runtime.podName(box.id), namespace: ns }).then(
              () => true,
              () => false,
            ),
            claim: await core
              .readNamespacedPersistentVolumeClaim({ name: runtime.claimName(box.id), namespace: ns })
              .then(
                () => true,
                () => false,
              ),
          }),
          (left) => !left.set && !left.pod && !left.claim,
        );
      } finally {
        await service.close();
      }
    });

    it('refuses a start over the per-user limit with 429, or pauses the oldest when told to', async () => {
      const refusing = await compose({ maxRunningSandboxesPerUser: 1, atSandboxLimit: 'refuse' });
      const pausing = await compose({ maxRunningSandboxesPerUser: 1, atSandboxLimit: 'pause_oldest' });
      try {
        const first = await expectOk(refusing.service.sandboxes.start('alice'));
        const second = await refusing.service.sandboxes.start('alice');
        expect(second.isErr() && second.error).toEqual({ type: 'SandboxCapReached', limit: 1 });
        const bobs = await expectOk(refusing.service.sandboxes.start('bob'));
        await refusing.service.idle();
        await expectOk(refusing.service.sandboxes.delete('alice', first.id));
        await expectOk(refusing.service.sandboxes.delete('bob', bobs.id));

        const older = await expectOk(pausing.service.sandboxes.start('alice'));
        await pausing.service.idle();
        const newer = await expectOk(pausing.service.sandboxes.start('alice'));
        await pausing.service.idle();
        expect((await expectOk(pausing.service.sandboxes.get('alice', older.id))).status).toBe('PAUSED');
        expect(await replicasOf(pausing.runtime.setName(older.id))).toBe(0);
        expect((await expectOk(pausing.service.sandboxes.get('alice', newer.id))).status).toBe('RUNNING');
        await expectOk(pausing.service.sandboxes.resume('alice', older.id));
        await pausing.service.idle();
        expect((await expectOk(pausing.service.sandboxes.get('alice', newer.id))).status).toBe('PAUSED');
        for (const box of [older, newer]) await expectOk(pausing.service.sandboxes.delete('alice', box.id));
      } finally {
        await refusing.service.close();
        await pausing.service.close();
      }
    });

    it('adopts its sandboxes after a restart: running, paused, pod deleted (comes back), set deleted (missing), and unknown ones', async () => {
      const before = await compose();
      const ns = await namespace;
      const [running, paused, podless, vanished] = await Promise.all(
        Array.from({ length: 4 }, () => expectOk(before.service.sandboxes.start('alice'))),
      );
      await before.service.idle();
      for (const box of [running, paused, podless, vanished])
        expect((await expectOk(before.service.sandboxes.get('alice', box!.id))).status).toBe('RUNNING');
      await expectOk(before.runtime.writeFile(podless!.id, 'survives.txt', new TextEncoder().encode('on the claim')));
      await expectOk(before.service.sandboxes.pause('alice', paused!.id));
      await before.service.close();
      // While the service is down, behind its back: one pod is deleted (its StatefulSet makes it
      // again, on the same claim), one StatefulSet is deleted with its pod.
      const podUid = (await core.readNamespacedPod({ name: before.runtime.podName(podless!.id), namespace: ns }))
        .metadata?.uid;
      await core.deleteNamespacedPod({
        name: before.runtime.podName(podless!.id),
        namespace: ns,
        gracePeriodSeconds: 0,
      });
      await apps.deleteNamespacedStatefulSet({
        name: before.runtime.setName(vanished!.id),
        namespace: ns,
        propagationPolicy: 'Foreground',
      });

      const after = await compose({}, before.stores);
      const amnesiacStores = createMemoryPorts({
        specs,
        installationId: await expectOk(before.stores.installation.identity()),
      });
      const amnesiac = await compose({}, amnesiacStores);
      const stranger = await compose();
      try {
        const report = await expectOk(after.service.sandboxes.reconcile());
        expect(report.checked).toBeGreaterThanOrEqual(4);
        const status = async (id: string) => expectOk(after.service.sandboxes.get('alice', id));
        expect((await status(running!.id)).status).toBe('RUNNING');
        expect((await status(paused!.id)).status).toBe('PAUSED');
        expect(
          await eventually(
            'the vanished sandbox to be MISSING',
            () => status(vanished!.id),
            (s) => s.status === 'MISSING',
          ),
        ).toMatchObject({
          status_detail: expect.stringMatching(/StatefulSet no longer exists/) as unknown,
        });
        // The deleted pod comes back (a new one, on the same claim): STARTING, then RUNNING with its files.
        await eventually(
          'the deleted pod to come back',
          () => status(podless!.id),
          (s) => s.status === 'RUNNING',
        );
        expect(
          (await core.readNamespacedPod({ name: before.runtime.podName(podless!.id), namespace: ns })).metadata?.uid,
        ).not.toBe(podUid);
        expect(
          new TextDecoder().decode((await expectOk(after.runtime.readFile(podless!.id, 'survives.txt'))).bytes),
        ).toBe('on the claim');

        // Another installation on the same namespace adopts none of them.
        expect((await expectOk(stranger.service.sandboxes.reconcile())).adopted).toBe(0);
        expect((await stranger.service.sandboxes.get('alice', running!.id)).isErr()).toBe(true);

        // The same installation having lost its records (memory storage, same identity) adopts its sandboxes back.
        const adopted = await expectOk(amnesiac.service.sandboxes.reconcile());
        expect(adopted.adopted).toBe(3);
        expect((await expectOk(amnesiac.service.sandboxes.get('alice', running!.id))).status).toBe('RUNNING');
        expect((await expectOk(amnesiac.service.sandboxes.get('alice', paused!.id))).status).toBe('PAUSED');
        for (const box of [running, paused, podless, vanished]) await after.service.sandboxes.delete('alice', box!.id);
      } finally {
        await after.service.close();
        await amnesiac.service.close();
        await stranger.service.close();
      }
    });

    it('pauses sandboxes left idle', async () => {
      const { service, runtime } = await compose({ idlePauseAfterMs: 400, maintenanceIntervalMs: 100 });
      try {
        const box = await expectOk(service.sandboxes.start('alice'));
        await service.idle();
        const seen = await eventually(
          'the idle sandbox to be paused with its reason',
          () => expectOk(service.sandboxes.get('alice', box.id)),
          (s) => s.status === 'PAUSED' && Boolean(s.status_detail),
        );
        expect(seen.status_detail).toMatch(/paused after \d+ (s|min) without use/);
        expect(await replicasOf(runtime.setName(box.id))).toBe(0);
        await expectOk(service.sandboxes.delete('alice', box.id));
      } finally {
        await service.close();
      }
    });
  });
});
