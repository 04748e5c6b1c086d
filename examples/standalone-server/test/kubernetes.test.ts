/**
 * The example server on Kubernetes (`ACS_SANDBOXES=kubernetes`) against the test cluster of
 * `scripts/k8s-cluster.sh`: a sandbox started through the API is a StatefulSet in the configured
 * namespace, labelled with the installation; stopped, `npm run sandboxes -- list|prune` finds
 * and removes it there. Without a cluster the suite fails in CI and says how to bring one up.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import type { SandboxInfo } from '@acs/core/schemas';
import { expect, it } from 'vitest';
import {
  clients,
  KUBECONFIG_PATH,
  onCluster,
  testNamespace,
} from '../../../packages/adapter-kubernetes/test/cluster.js';
import { body, call, exampleDir, freshDataDir, startServer, waitFor } from './process.js';

const KEY = 'kubernetes-example-key-0123456789';

async function sandboxesCommand(
  env: Record<string, string>,
  ...args: string[]
): Promise<{ code: number | null; out: string }> {
  const child = spawn(
    process.execPath,
    ['--conditions=@acs/source', '--import', 'tsx', 'src/sandboxes-cli.ts', ...args],
    {
      cwd: exampleDir,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
      // Ended even if it never exits by itself, so a failing test leaves no process behind.
      timeout: 180_000,
      killSignal: 'SIGKILL',
    },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, out };
}

onCluster('the example server with ACS_SANDBOXES=kubernetes', (kubeConfig) => {
  const namespace = testNamespace(kubeConfig);

  it(
    'runs a sandbox as a StatefulSet of its namespace, and the sandboxes command lists and prunes it',
    { timeout: 600_000 },
    async () => {
      const ns = await namespace;
      const { apps } = clients(kubeConfig);
      const env = {
        SESSION_API_KEY: KEY,
        DATA_DIR: freshDataDir(),
        ACS_SANDBOXES: 'kubernetes',
        ACS_KUBECONFIG: KUBECONFIG_PATH,
        ACS_KUBERNETES_NAMESPACE: ns,
        // No registry here: the cluster script loads the sandbox image onto the node.
        ACS_KUBERNETES_IMAGE_PULL_POLICY: 'Never',
        ACS_KUBERNETES_WORKSPACE_SIZE: '1Gi',
        ACS_SANDBOX_MEMORY_MB: '512',
      };
      const server = await startServer(env);
      expect(server.stdout()).toContain(`kubernetes (namespace ${ns})`);
      const installation = (
        JSON.parse(
          server
            .stdout()
            .split('\n')
            .find((l) => l.includes('"agent conversation service listening"'))!,
        ) as { installation: string }
      ).installation;

      const box = await body<SandboxInfo>(call(server.url, '/api/v1/sandboxes', KEY, { sandbox_spec_id: 'bookworm' }));
      await waitFor(`sandbox ${box.id} to run`, async () =>
        (await body<SandboxInfo>(call(server.url, `/api/v1/sandboxes/${box.id}`, KEY))).status === 'RUNNING'
          ? true
          : undefined,
      );
      const set = await apps.readNamespacedStatefulSet({ name: `acs-${box.id}`, namespace: ns });
      expect(set.metadata?.labels).toMatchObject({
        'io.acs.installation-id': installation,
        'io.acs.sandbox-id': box.id,
      });

      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      const listing = await sandboxesCommand(env, 'list');
      expect(listing.code, listing.out).toBe(0);
      expect(listing.out).toContain(box.id);
      const pruned = await sandboxesCommand(env, 'prune');
      expect(pruned.code, pruned.out).toBe(0);
      expect(pruned.out).toContain(`Removed 1 of 1 sandboxes of installation ${installation}`);
      await waitFor(`StatefulSet acs-${box.id} to go`, async () =>
        (await apps
          .readNamespacedStatefulSet({ name: `acs-${box.id}`, namespace: ns })
          .then(() => false)
          .catch(() => true))
          ? true
          : undefined,
      );
    },
  );
});
