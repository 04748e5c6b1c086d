import { afterAll, describe, expect, it } from 'vitest';
import { NodeV1Api } from '@kubernetes/client-node';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import type { SandboxInfo } from '@acs/core/schemas';
import { expectOk, specFixture } from '@acs/core/testing';
import { createMemoryPorts } from '@acs/testing';
import { createAgent } from '@acs/agent';
import type { KubernetesSandboxRuntime } from '@acs/adapter-kubernetes';
import { bookworm, clients, kubernetesRuntime, onCluster, testNamespace } from './cluster.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

onCluster('sandbox pods on Kubernetes', (kubeConfig) => {
  const namespace = testNamespace(kubeConfig);
  const { core, apps } = clients(kubeConfig);
  const services: AgentConversationService[] = [];
  afterAll(async () => {
    await Promise.all(services.map((s) => s.close()));
  });

  /** A service whose default spec is `spec`, on a runtime with these options. */
  async function compose(
    spec: { id: string; image: string; working_dir: string; command?: string[] | null },
    options: Parameters<typeof kubernetesRuntime>[2] = {},
  ) {
    const runtime = kubernetesRuntime(kubeConfig, await namespace, options);
    const service = createAgentConversationService(
      { agent: createAgent(), ...createMemoryPorts({ specs: [spec] }), runtime },
      { pollIntervalMs: 100 },
    );
    services.push(service);
    return { service, runtime };
  }

  /** Starts a sandbox and waits until it is no longer STARTING (the service's own wait), returning what it became. */
  async function startAndSettle(service: AgentConversationService): Promise<SandboxInfo> {
    const box = await expectOk(service.sandboxes.start('alice'));
    await service.sandboxes.whenSettled('alice', box.id);
    return expectOk(service.sandboxes.get('alice', box.id));
  }

  describe('pods that cannot start, and pods while they start', () => {
    it("an image the node does not have: ERROR with the kubelet's reason", async () => {
      const { service } = await compose({ id: 'nothing', image: 'acs-no-such-image:never', working_dir: '/workspace' });
      const box = await startAndSettle(service);
      expect(box.status).toBe('ERROR');
      expect(box.status_detail).toMatch(/ErrImageNeverPull|acs-no-such-image:never/);
      await expectOk(service.sandboxes.delete('alice', box.id));
    });

    it('a command that keeps exiting: ERROR with the crash loop and its exit code', async () => {
      const { service } = await compose({
        id: 'crash',
        image: 'acs-sandbox:bookworm',
        working_dir: '/workspace',
        command: ['sh', '-c', 'echo boom >&2; exit 3'],
      });
      const box = await startAndSettle(service);
      expect(box.status).toBe('ERROR');
      expect(box.status_detail).toMatch(/CrashLoopBackOff|exited with code 3/);
      expect(box.status_detail).toMatch(/code 3/);
      await expectOk(service.sandboxes.delete('alice', box.id));
    });

    it("no node matches: STARTING with the scheduler's words while it waits, ERROR once it waited long enough", async () => {
      const nowhere = { nodeSelector: { 'acs.test/pool': 'none-such' } };
      const waiting = await compose(
        { id: 'bookworm', image: 'acs-sandbox:bookworm', working_dir: '/workspace' },
        { placement: nowhere, unschedulableAfterMs: 600_000 },
      );
      const box = await expectOk(waiting.service.sandboxes.start('alice'));
      let seen = await expectOk(waiting.service.sandboxes.get('alice', box.id));
      for (let i = 0; i < 300 && !/node/.test(seen.status_detail ?? ''); i++) {
        await sleep(200);
        seen = await expectOk(waiting.service.sandboxes.get('alice', box.id));
      }
      expect(seen.status).toBe('STARTING');
      expect(seen.status_detail).toMatch(/waiting to be scheduled: 0\/1 nodes are available/);
      await expectOk(waiting.service.sandboxes.delete('alice', box.id));

      const impatient = await compose(
        { id: 'bookworm', image: 'acs-sandbox:bookworm', working_dir: '/workspace' },
        { placement: nowhere, unschedulableAfterMs: 0 },
      );
      const failed = await startAndSettle(impatient.service);
      expect(failed.status).toBe('ERROR');
      expect(failed.status_detail).toMatch(/cannot be scheduled \(Unschedulable\): 0\/1 nodes are available/);
      await expectOk(impatient.service.sandboxes.delete('alice', failed.id));
    });
  });

  describe('what a sandbox pod may do', () => {
    let runtime: KubernetesSandboxRuntime;
    let id: string;
    const nodeApi = kubeConfig.makeApiClient(NodeV1Api);
    const runtimeClass = `acs-test-runc-${Math.random().toString(16).slice(2, 8)}`;

    it("runs without a service-account token, privilege or most capabilities, on a read-only root, with the factor's limits and the spec's runtime class", async () => {
      await nodeApi.createRuntimeClass({ body: { metadata: { name: runtimeClass }, handler: 'runc' } });
      try {
        runtime = kubernetesRuntime(kubeConfig, await namespace, {
          placementBySpec: { bookworm: { runtimeClassName: runtimeClass } },
        });
        id = `pods${Date.now().toString(16)}`.padEnd(32, '0');
        await expectOk(
          runtime.create({
            sandbox_id: id,
            user_id: 'alice@example.com',
            installation_id: 'acs-tests',
            spec: bookworm,
            env: { LANG: 'C.UTF-8' },
            resource_factor: 2,
          }),
        );
        const deadline = Date.now() + 120_000;
        let state = (await expectOk(runtime.inspect(id))).state;
        while (state === 'starting' && Date.now() < deadline) {
          await sleep(200);
          state = (await expectOk(runtime.inspect(id))).state;
        }
        expect(state).toBe('running');
        const ns = await namespace;
        const pod = await core.readNamespacedPod({ name: runtime.podName(id), namespace: ns });
        expect(pod.spec).toMatchObject({ automountServiceAccountToken: false, runtimeClassName: runtimeClass });
        const container = pod.spec!.containers[0]!;
        expect(container.securityContext).toMatchObject({
          allowPrivilegeEscalation: false,
          privileged: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
        });
        expect(container.resources?.limits).toEqual({ cpu: '2', memory: '1Gi' });
        // The user id is no label value (an @): the label holds its hash, the annotation the id.
        expect(pod.metadata?.labels?.['io.acs.user-id']).toMatch(/^h-[0-9a-f]{40}$/);
        expect(pod.metadata?.annotations?.['io.acs/user-id']).toBe('alice@example.com');

        const sh = async (script: string) => expectOk(runtime.exec(id, { command: ['sh', '-c', script] }));
        expect((await sh('ls /var/run/secrets/kubernetes.io 2>&1; echo $?')).stdout).toMatch(
          /No such file|cannot access/,
        );
        expect((await sh('touch /etc/acs-test 2>&1; echo $?')).stdout).toMatch(/Read-only file system/);
        expect((await sh('touch /tmp/ok /root/ok /workspace/ok && echo writable')).stdout).toBe('writable\n');
        expect((await sh('grep -E "^(CapEff|NoNewPrivs)" /proc/self/status')).stdout).toMatch(
          /CapEff:\s+00000000200404fb\nNoNewPrivs:\s+1/,
        );
        // The memory limit the kubelet set (cgroup v1 or v2), twice the runtime's 512 MiB.
        expect(
          (
            await sh('cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max')
          ).stdout.trim(),
        ).toBe(String(1024 ** 3));
        // Pods of the same StatefulSet keep their claim: the workspace is a PVC, not the pod's own disk.
        const set = await apps.readNamespacedStatefulSet({ name: runtime.setName(id), namespace: ns });
        expect(set.spec?.volumeClaimTemplates?.[0]?.metadata?.name).toBe('workspace');
        expect(text((await expectOk(runtime.readFile(id, '/workspace/ok'))).bytes)).toBe('');
      } finally {
        if (id) await runtime.delete(id);
        await nodeApi.deleteRuntimeClass({ name: runtimeClass }).catch(() => undefined);
      }
    });

    it('resizes a running sandbox in place (no restart), and its next pod keeps the new limits', async () => {
      const ns = await namespace;
      const sized = kubernetesRuntime(kubeConfig, ns);
      const box = `size${Date.now().toString(16)}`.padEnd(32, '0');
      const memoryLimit = async () =>
        (
          await expectOk(
            sized.exec(box, {
              command: [
                'sh',
                '-c',
                'cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max',
              ],
            }),
          )
        ).stdout.trim();
      const untilRunning = async () => {
        const deadline = Date.now() + 120_000;
        let seen = await expectOk(sized.inspect(box));
        while (seen.state === 'starting' && Date.now() < deadline) {
          await sleep(200);
          seen = await expectOk(sized.inspect(box));
        }
        expect(seen).toMatchObject({ state: 'running' });
      };
      try {
        await expectOk(
          sized.create({ sandbox_id: box, user_id: 'alice', installation_id: 'acs-tests', spec: bookworm, env: {} }),
        );
        await untilRunning();
        expect(await memoryLimit()).toBe(String(512 * 1024 ** 2));
        const uid = (await core.readNamespacedPod({ name: sized.podName(box), namespace: ns })).metadata?.uid;
        await expectOk(sized.resize(box, 2));
        // The kubelet applies it a moment later.
        const deadline = Date.now() + 60_000;
        let limit = await memoryLimit();
        while (limit !== String(1024 ** 3) && Date.now() < deadline) {
          await sleep(250);
          limit = await memoryLimit();
        }
        expect(limit).toBe(String(1024 ** 3));
        expect((await core.readNamespacedPod({ name: sized.podName(box), namespace: ns })).metadata?.uid).toBe(uid);
        await expectOk(sized.pause(box));
        await expectOk(sized.resume(box));
        await untilRunning();
        expect(await memoryLimit()).toBe(String(1024 ** 3));
      } finally {
        await sized.delete(box);
      }
    });

    it('says what is wrong with a spec that exposes ports (not offered on Kubernetes yet)', async () => {
      const plain = kubernetesRuntime(kubeConfig, await namespace);
      const spec = specFixture({ ...bookworm, exposed_ports: [{ name: 'WORKER_1', port: 8011 }] });
      const result = await plain.create({
        sandbox_id: `ports${Date.now().toString(16)}`.padEnd(32, '0'),
        user_id: 'alice',
        installation_id: 'acs-tests',
        spec,
        env: {},
      });
      expect(result.isErr() && result.error).toMatchObject({
        type: 'failed',
        message: expect.stringMatching(/exposes ports/) as unknown,
      });
    });
  });
});
