/**
 * Warm sandboxes on a real Docker engine, through the example server's HTTP API: a pooled
 * container waits, owned by no user; a start claims it (RUNNING in the POST's answer), with the
 * user's resource factor applied; the record is the user's while the container's label still
 * names the pool; a restart finds both again (the claimed one still the user's, the pooled one
 * reused); `npm run sandboxes -- prune` removes both; `/server_info` counts the pool. And a spec
 * with a server of its own: the claimant gets the pooled sandbox's key, which opens its URL.
 */
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { request } from 'node:http';
import Docker from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';
import type { SandboxInfo } from '@acs/core/schemas';
import { body, call, exampleDir, freshDataDir, startServer, waitFor, type Running } from './process.js';

const docker = new Docker();
const user = `pool-test-${randomBytes(4).toString('hex')}`;
const KEY = `${user}-key-0123456789`;
const BIG = `${user}-big-key-0123456789`;
const dataDir = freshDataDir();
const MEMORY_MB = 256;
const env = () => ({
  ACS_API_KEYS: `${user}:${KEY},${user}-big:${BIG}`,
  SESSION_API_KEY: 'unused-default-key-0123456789',
  DATA_DIR: dataDir,
  ACS_SANDBOXES: 'docker',
  ACS_SANDBOX_NETWORK: 'none',
  ACS_SANDBOX_MEMORY_MB: String(MEMORY_MB),
  ACS_SANDBOX_POOL: 'bookworm=1',
  // The user with a resource factor of 2 gets it: the operator allows it (the default applies 1).
  ACS_MAX_RESOURCE_FACTOR: '2',
});
const POOL_LABEL = 'io.acs.user-id=acs:sandbox-pool';

let installation = '';
const installations: string[] = [];
afterAll(async () => {
  // Whatever a failed run left of these installations' containers and volumes.
  for (const id of installations) {
    const label = `io.acs.installation-id=${id}`;
    for (const c of await docker.listContainers({ all: true, filters: { label: [label] } }))
      await docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => {});
    for (const v of (await docker.listVolumes({ filters: { label: [label] } })).Volumes ?? [])
      await docker
        .getVolume(v.Name)
        .remove({ force: true })
        .catch(() => {});
  }
});

/** GET a path of a sandbox's URL as the server gave it (a loopback port of the server's, which resolves as it is). */
function viaUrl(url: string, path: string, key: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { headers: { 'X-Session-API-Key': key } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

const installationOf = (server: Running) =>
  (
    JSON.parse(
      server
        .stdout()
        .split('\n')
        .find((l) => l.includes('"agent conversation service listening"'))!,
    ) as { installation: string }
  ).installation;

type PoolCounts = Record<string, { size: number; ready: number; filling: number }>;
const poolOf = async (server: Running) =>
  (await body<{ sandbox_pool: PoolCounts }>(call(server.url, '/server_info', null))).sandbox_pool;
const pooledContainers = async () =>
  (
    await docker.listContainers({
      all: true,
      filters: { label: [POOL_LABEL, `io.acs.installation-id=${installation}`] },
    })
  ).map((c) => c.Labels['io.acs.sandbox-id']!);
const readyPool = (server: Running) =>
  waitFor(
    'a ready pooled sandbox',
    async () => ((await poolOf(server)).bookworm?.ready === 1 ? true : undefined),
    120_000,
  );

async function sandboxesCommand(...args: string[]): Promise<{ code: number | null; out: string }> {
  const child = spawn(
    process.execPath,
    ['--conditions=@acs/source', '--import', 'tsx', 'src/sandboxes-cli.ts', ...args],
    {
      cwd: exampleDir,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env() },
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

describe('warm sandbox pool on Docker', () => {
  it(
    'claims a ready pooled sandbox for a start, keeps it the user’s across a restart, and prune removes pooled ones',
    { timeout: 600_000 },
    async () => {
      let server = await startServer(env());
      installation = installationOf(server);
      installations.push(installation);
      await readyPool(server);
      expect(await poolOf(server)).toEqual({ bookworm: { size: 1, ready: 1, filling: 0 } });
      const [warm] = await pooledContainers();
      expect(warm).toBeDefined();
      // No user sees it.
      expect((await body<{ items: SandboxInfo[] }>(call(server.url, '/api/v1/sandboxes/search', KEY))).items).toEqual(
        [],
      );
      expect((await call(server.url, `/api/v1/sandboxes/${warm}`, KEY)).status).toBe(404);

      const started = performance.now();
      const claimed = await body<SandboxInfo>(
        call(server.url, '/api/v1/sandboxes', KEY, { sandbox_spec_id: 'bookworm' }),
      );
      const claimMs = performance.now() - started;
      expect(claimed).toMatchObject({
        id: warm,
        status: 'RUNNING',
        created_by_user_id: user,
        sandbox_spec_id: 'bookworm',
      });
      // Generous (a busy machine): a claim is a few store writes and an inspect, where a create waits for the engine to start a container.
      expect(claimMs).toBeLessThan(5_000);
      expect(
        (await body<{ items: SandboxInfo[] }>(call(server.url, '/api/v1/sandboxes/search', KEY))).items.map(
          (s) => s.id,
        ),
      ).toEqual([warm]);
      // Docker labels cannot change: the container still names the pool, the store names the user.
      const labels = (await docker.getContainer(`acs-sandbox-${warm}`).inspect()).Config.Labels;
      expect(labels).toMatchObject({
        'io.acs.user-id': 'acs:sandbox-pool',
        'io.acs.installation-id': installation,
        'io.acs.sandbox-spec-id': 'bookworm',
      });

      // Refilled in the background with another container.
      await readyPool(server);
      const [refill] = await pooledContainers();
      expect(refill).not.toBe(warm);

      // A user with resource factor 2 gets the limits of factor 2 on the claimed container.
      await body(call(server.url, '/api/settings', BIG, { remote_runtime_resource_factor: 2 }));
      const big = await body<SandboxInfo>(call(server.url, '/api/v1/sandboxes', BIG, { sandbox_spec_id: 'bookworm' }));
      expect(big).toMatchObject({ id: refill, status: 'RUNNING', created_by_user_id: `${user}-big` });
      const host = (await docker.getContainer(`acs-sandbox-${refill}`).inspect()).HostConfig;
      expect(host.Memory).toBe(2 * MEMORY_MB * 1024 * 1024);
      expect(host.NanoCpus).toBe(2 * 1e9);
      await readyPool(server);
      const [waiting] = await pooledContainers();

      // A restart: the claimed ones are still their users', the pooled one is found again and reused, not replaced.
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      server = await startServer(env());
      expect((await body<SandboxInfo>(call(server.url, `/api/v1/sandboxes/${warm}`, KEY))).status).toBe('RUNNING');
      expect((await body<SandboxInfo>(call(server.url, `/api/v1/sandboxes/${refill}`, BIG))).status).toBe('RUNNING');
      expect((await call(server.url, `/api/v1/sandboxes/${warm}`, BIG)).status).toBe(404);
      await readyPool(server);
      expect(await pooledContainers()).toEqual(expect.arrayContaining([waiting]));
      expect((await poolOf(server)).bookworm).toEqual({ size: 1, ready: 1, filling: 0 });

      // Stopped: prune removes the users' and the pooled one, each through its record.
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      const listing = await sandboxesCommand('list');
      expect(listing.code, listing.out).toBe(0);
      expect(listing.out).toContain(`${waiting}`);
      expect(listing.out).toMatch(new RegExp(`${waiting}.*pooled \\(no user yet\\)`));
      expect(listing.out).toMatch(new RegExp(`${warm}.*user ${user}`));
      const pruned = await sandboxesCommand('prune');
      expect(pruned.code, pruned.out).toBe(0);
      expect(pruned.out).toContain(`Removed 3 of 3 sandboxes of installation ${installation}`);
      for (const id of [warm, refill, waiting])
        await expect(docker.getContainer(`acs-sandbox-${id}`).inspect()).rejects.toMatchObject({ statusCode: 404 });

      // Started again with the pool off: the claimed records show the prune (gone), no pool is kept.
      server = await startServer({ ...env(), ACS_SANDBOX_POOL: 'none' });
      expect((await call(server.url, `/api/v1/sandboxes/${warm}`, KEY)).status).toBe(404);
      expect(await poolOf(server)).toEqual({});
      expect(await pooledContainers()).toEqual([]);
    },
  );

  it(
    'hands a pooled sandbox of a spec with its own server to the claimant with its key, which opens its exposed URL',
    { timeout: 300_000 },
    async () => {
      const web = {
        id: 'web',
        image: 'acs-sandbox:bookworm',
        command: [
          'bash',
          '-c',
          'mkdir -p /srv/ok && echo ok > /srv/ok/index.html && cd /srv && exec python3 -m http.server --bind "$ACS_BIND_HOST" "$ACS_PORT_WEB"',
        ],
        exposed_ports: [{ name: 'WEB', port: 8000, health_path: '/ok/' }],
        session_api_key_variable: 'WEB_KEY',
      };
      const server = await startServer({
        ...env(),
        ACS_SANDBOX_NETWORK: 'bridge',
        ACS_STORAGE: 'memory',
        ACS_SANDBOX_SPECS: JSON.stringify([web]),
        ACS_SANDBOX_POOL: 'web=1',
        ACS_SANDBOX_IMAGE_BUILD: 'off',
      });
      installations.push(installationOf(server));
      await waitFor(
        'a ready pooled web sandbox',
        async () => ((await poolOf(server)).web?.ready === 1 ? true : undefined),
        120_000,
      );
      const claimed = await body<SandboxInfo>(call(server.url, '/api/v1/sandboxes', KEY, { sandbox_spec_id: 'web' }));
      expect(claimed.status).toBe('RUNNING');
      expect(claimed.session_api_key).toMatch(/^acss_/);
      const url = claimed.exposed_urls?.find((u) => u.name === 'WEB')?.url ?? '';
      expect(await viaUrl(url, '/ok/', claimed.session_api_key!)).toBe(200);
      expect(await viaUrl(url, '/ok/', 'acss_not-this-sandbox-key')).not.toBe(200);
      // The next pooled one has a key of its own, shown to nobody before its claim.
      await waitFor(
        'the web pool refilled',
        async () => ((await poolOf(server)).web?.ready === 1 ? true : undefined),
        120_000,
      );
      const next = await body<SandboxInfo>(call(server.url, '/api/v1/sandboxes', BIG, { sandbox_spec_id: 'web' }));
      expect(next.status).toBe('RUNNING');
      expect(next.session_api_key).not.toBe(claimed.session_api_key);
      for (const [box, key] of [
        [claimed, KEY],
        [next, BIG],
      ] as const)
        await body(call(server.url, `/api/v1/sandboxes/${box.id}`, key, undefined, 'DELETE'));
    },
  );
});
