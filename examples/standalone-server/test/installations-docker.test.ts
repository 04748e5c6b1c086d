/**
 * Two installations (two example servers with their own data) on one Docker engine, each with
 * a user `default`: neither sees, counts, adopts, pauses or deletes the other's sandboxes, also
 * across restarts; `npm run sandboxes -- prune` removes only its own installation's.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import type { SandboxInfo } from '@acs/core/schemas';
import Docker from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';
import { body, call, exampleDir, freshDataDir, startServer, waitFor, type Running } from './process.js';

const docker = new Docker();
const KEY = 'installations-default-key-0123456789';
const dirs = { a: freshDataDir(), b: freshDataDir() };
const env = (dataDir: string) => ({
  SESSION_API_KEY: KEY,
  DATA_DIR: dataDir,
  ACS_SANDBOXES: 'docker',
  ACS_SANDBOX_NETWORK: 'none',
  ACS_MAX_RUNNING_SANDBOXES: '2',
});
const installationOf = (server: Running) =>
  (
    JSON.parse(
      server
        .stdout()
        .split('\n')
        .find((l) => l.includes('"agent conversation service listening"'))!,
    ) as { installation: string }
  ).installation;

const ids: string[] = [];
afterAll(async () => {
  // Whatever a failed run left: only the containers this test made.
  for (const id of ids)
    await docker
      .getContainer(`acs-sandbox-${id}`)
      .remove({ force: true, v: true })
      .catch(() => {});
  for (const id of ids)
    await docker
      .getVolume(`acs-sandbox-${id}-workspace`)
      .remove()
      .catch(() => {});
});

async function startTwo(server: Running): Promise<string[]> {
  const made: string[] = [];
  for (let i = 0; i < 2; i++) {
    const box = await body<SandboxInfo>(call(server.url, '/api/v1/sandboxes', KEY, { sandbox_spec_id: 'bookworm' }));
    made.push(box.id);
    ids.push(box.id);
  }
  for (const id of made)
    await waitFor(`sandbox ${id} to run`, async () =>
      (await body<SandboxInfo>(call(server.url, `/api/v1/sandboxes/${id}`, KEY))).status === 'RUNNING'
        ? true
        : undefined,
    );
  return made;
}

const listed = async (server: Running) =>
  (await body<{ items: SandboxInfo[] }>(call(server.url, '/api/v1/sandboxes/search', KEY))).items
    .map((s) => s.id)
    .sort();

async function sandboxesCommand(dataDir: string, ...args: string[]): Promise<{ code: number | null; out: string }> {
  const child = spawn(
    process.execPath,
    ['--conditions=@acs/source', '--import', 'tsx', 'src/sandboxes-cli.ts', ...args],
    {
      cwd: exampleDir,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env(dataDir) },
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

describe('two installations on one Docker engine', () => {
  it('keep to their own sandboxes, also across restarts, and prune only their own', { timeout: 600_000 }, async () => {
    let a = await startServer(env(dirs.a));
    const aBoxes = await startTwo(a);
    const containerOf = async (id: string) => (await docker.getContainer(`acs-sandbox-${id}`).inspect()).Config.Labels;
    expect(await containerOf(aBoxes[0]!)).toMatchObject({
      'io.acs.installation-id': installationOf(a),
      'io.acs.user-id': 'default',
    });

    // B starts on the same engine: it adopts nothing, and A's two do not count against its limit of two.
    let b = await startServer(env(dirs.b));
    expect(installationOf(b)).not.toBe(installationOf(a));
    expect(await listed(b)).toEqual([]);
    const bBoxes = await startTwo(b);
    expect((await call(b.url, '/api/v1/sandboxes', KEY, { sandbox_spec_id: 'bookworm' })).status).toBe(429);
    for (const id of aBoxes) {
      expect((await call(b.url, `/api/v1/sandboxes/${id}`, KEY)).status).toBe(404);
      expect((await call(b.url, `/api/v1/sandboxes/${id}/pause`, KEY, {})).status).toBe(404);
      expect((await call(b.url, `/api/v1/sandboxes/${id}`, KEY, undefined, 'DELETE')).status).toBe(404);
    }

    // Both restart: each finds exactly its own.
    for (const server of [a, b]) {
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
    }
    b = await startServer(env(dirs.b));
    a = await startServer(env(dirs.a));
    expect(await listed(a)).toEqual([...aBoxes].sort());
    expect(await listed(b)).toEqual([...bBoxes].sort());
    for (const id of [...aBoxes, ...bBoxes]) expect((await containerOf(id)) !== undefined).toBe(true);

    // Stopped, A's leftovers are pruned: only A's.
    a.child.kill('SIGTERM');
    expect(await a.exited).toBe(0);
    const listing = await sandboxesCommand(dirs.a, 'list');
    expect(listing.code, listing.out).toBe(0);
    for (const id of aBoxes) expect(listing.out).toContain(id);
    for (const id of bBoxes) expect(listing.out).not.toContain(id);
    // B still runs, so its data directory is busy: the command refuses rather than racing it.
    const busy = await sandboxesCommand(dirs.b, 'prune');
    expect(busy.code).toBe(1);
    expect(busy.out).toContain(`The data directory ${dirs.b} is in use by process ${b.child.pid}`);
    const pruned = await sandboxesCommand(dirs.a, 'prune');
    expect(pruned.code, pruned.out).toBe(0);
    expect(pruned.out).toContain(`Removed 2 of 2 sandboxes of installation ${installationOf(a)}`);
    for (const id of aBoxes)
      await expect(docker.getContainer(`acs-sandbox-${id}`).inspect()).rejects.toMatchObject({ statusCode: 404 });
    expect((await docker.getContainer(`acs-sandbox-${bBoxes[0]}`).inspect()).State.Running).toBe(true);
    expect(await listed(b)).toEqual([...bBoxes].sort());

    // A, restarted, shows them gone.
    a = await startServer(env(dirs.a));
    expect(await listed(a)).toEqual([]);
    for (const id of bBoxes) await body(call(b.url, `/api/v1/sandboxes/${id}`, KEY, undefined, 'DELETE'));
  });
});
