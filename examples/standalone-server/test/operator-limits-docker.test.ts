/**
 * A user's settings cannot raise their own sandbox limits or name an image the operator did
 * not allow (issue 35, item 2), on the example server with real Docker sandboxes: a
 * `remote_runtime_resource_factor` of 64 was applied as it was (64 CPUs, 128 GiB, 32,768 pids
 * per sandbox); now the operator's ACS_MAX_RESOURCE_FACTOR (default 1) caps it, and the
 * container's limits show what was applied.
 */
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';
import { body, call, startServer, waitFor, type Running } from './process.js';
import { removeContainersOf } from './containers.js';

const docker = new Docker();
const user = `limits-test-${randomBytes(4).toString('hex')}`;
const KEY = `${user}-key-0123456789`;
const env = (extra: Record<string, string> = {}) => ({
  ACS_API_KEYS: `${user}:${KEY}`,
  SESSION_API_KEY: 'unused-default-key-0123456789',
  ACS_SANDBOXES: 'docker',
  ACS_STORAGE: 'memory',
  ACS_SANDBOX_CPUS: '0.25',
  ACS_SANDBOX_MEMORY_MB: '256',
  ACS_SANDBOX_PIDS: '64',
  ...extra,
});

afterAll(async () => {
  await removeContainersOf(docker, user);
});

/** Starts a bookworm sandbox, waits until it runs, and answers its container's limits. */
async function sandboxLimits(server: Running): Promise<{ cpus: number; memoryMb: number; pids: number }> {
  const { id } = await body<{ id: string }>(
    call(server.url, '/api/v1/sandboxes', KEY, { sandbox_spec_id: 'bookworm' }),
  );
  const status = await waitFor(`sandbox ${id} to settle`, async () => {
    const now = await body<{ status: string; status_detail?: string }>(
      call(server.url, `/api/v1/sandboxes/${id}`, KEY),
    );
    return now.status === 'STARTING' ? undefined : now;
  });
  expect(status.status, `${JSON.stringify(status)}\n${server.stdout().slice(-3000)}`).toBe('RUNNING');
  const { HostConfig } = await docker.getContainer(`acs-sandbox-${id}`).inspect();
  await body(call(server.url, `/api/v1/sandboxes/${id}`, KEY, undefined, 'DELETE'));
  return {
    cpus: (HostConfig.NanoCpus ?? 0) / 1e9,
    memoryMb: (HostConfig.Memory ?? 0) / 1024 / 1024,
    pids: HostConfig.PidsLimit ?? 0,
  };
}

describe('operator limits on a user’s settings, on Docker', () => {
  it('applies a resource factor of 64 as 1 unless the operator raises the cap, and then at most the cap', async () => {
    const server = await startServer(env());
    await body(call(server.url, '/api/settings', KEY, { remote_runtime_resource_factor: 64 }));
    const applied = await body<{ remote_runtime_resource_factor: number }>(call(server.url, '/api/settings', KEY));
    expect(applied.remote_runtime_resource_factor).toBe(1);
    expect(await sandboxLimits(server)).toEqual({ cpus: 0.25, memoryMb: 256, pids: 64 });
    server.child.kill('SIGKILL');
    await server.exited;

    const raised = await startServer(env({ ACS_MAX_RESOURCE_FACTOR: '4' }));
    await body(call(raised.url, '/api/settings', KEY, { remote_runtime_resource_factor: 64 }));
    expect(await sandboxLimits(raised)).toEqual({ cpus: 1, memoryMb: 1024, pids: 256 });
  });

  it('refuses an image no spec has unless ACS_ALLOWED_IMAGES names it, so a user cannot make the server pull or build one', async () => {
    const server = await startServer(env({ ACS_ALLOWED_IMAGES: 'ghcr.io/acme/*' }));
    for (const image of ['acs-openhands-agent-server:9.9.9', 'registry.internal/ops:1']) {
      const refused = await body<{ code: string }>(
        call(server.url, '/api/settings', KEY, { sandbox_base_container_image: image }),
        400,
      );
      expect(refused.code).toBe('SANDBOX_IMAGE_NOT_ALLOWED');
    }
    await body(call(server.url, '/api/settings', KEY, { sandbox_base_container_image: 'ghcr.io/acme/dev:1' }));
    await body(call(server.url, '/api/settings', KEY, { sandbox_base_container_image: 'acs-sandbox:bookworm' }));
  });
});
