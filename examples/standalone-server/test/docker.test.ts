import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';
import { call, freshDataDir, startServer, type Running, body } from './process.js';
import { removeContainersOf } from './containers.js';

const docker = new Docker();
const user = `docker-test-${randomBytes(4).toString('hex')}`;
const KEY = `${user}-key-0123456789`;
const env = (extra: Record<string, string> = {}) => ({
  ACS_API_KEYS: `${user}:${KEY}`,
  SESSION_API_KEY: 'unused-default-key-0123456789',
  ACS_SANDBOXES: 'docker',
  ...extra,
});

afterAll(async () => {
  await removeContainersOf(docker, user);
});

async function statusOf(server: Running, id: string): Promise<string> {
  return (await body<{ status: string }>(call(server.url, `/api/v1/sandboxes/${id}`, KEY))).status;
}

async function until(server: Running, id: string, wanted: string): Promise<string> {
  let status = '';
  for (let i = 0; i < 200 && status !== wanted; i++) {
    status = await statusOf(server, id);
    if (status !== wanted) await new Promise((r) => setTimeout(r, 50));
  }
  return status;
}

describe('the example server on Docker', () => {
  it('starts without an engine, says why, and answers sandbox routes with 503 and that reason', async () => {
    const server = await startServer(
      env({ DOCKER_HOST: 'unix:///tmp/acs-no-engine-here.sock', ACS_STORAGE: 'memory' }),
    );
    expect(server.stdout()).toContain('sandboxes are unavailable');
    expect(server.stdout()).toContain('"sandboxes":"unavailable"');
    const refused = await body<{ code: string; message: string }>(call(server.url, '/api/v1/sandboxes', KEY, {}), 503);
    expect(refused.code).toBe('SANDBOXES_UNAVAILABLE');
    expect(refused.message).toContain('No Docker engine answers at unix:///tmp/acs-no-engine-here.sock');
    await body(call(server.url, '/api/settings', KEY, { llm_model: 'm', llm_api_key: 'k' }));
    await body(call(server.url, '/api/conversations', KEY, { initial_user_msg: 'hi' }), 503);
    expect((await body<{ results: unknown[] }>(call(server.url, '/api/conversations', KEY))).results).toEqual([]);
  });

  it('runs sandboxes as containers and finds them again after being killed', async () => {
    const dataDir = freshDataDir();
    const first = await startServer(env({ DATA_DIR: dataDir }));
    expect(first.stdout()).toMatch(/"sandboxes":"docker \(engine [^)]+, API 1\.\d+\)"/);
    const running = (
      await body<{ id: string }>(call(first.url, '/api/v1/sandboxes', KEY, { sandbox_spec_id: 'bookworm' }))
    ).id;
    const paused = (
      await body<{ id: string }>(call(first.url, '/api/v1/sandboxes', KEY, { sandbox_spec_id: 'bookworm' }))
    ).id;
    expect(await until(first, running, 'RUNNING')).toBe('RUNNING');
    expect(await until(first, paused, 'RUNNING')).toBe('RUNNING');
    await body(call(first.url, `/api/v1/sandboxes/${paused}/pause`, KEY, {}));
    const container = await docker.getContainer(`acs-sandbox-${paused}`).inspect();
    expect(container.State.Paused).toBe(true);
    expect(container.Config.Labels['io.acs.user-id']).toBe(user);
    first.child.kill('SIGKILL');
    await first.exited;

    const second = await startServer(env({ DATA_DIR: dataDir }));
    expect(await statusOf(second, running)).toBe('RUNNING');
    expect(await statusOf(second, paused)).toBe('PAUSED');
    await body(call(second.url, `/api/v1/sandboxes/${paused}/resume`, KEY, {}));
    expect(await until(second, paused, 'RUNNING')).toBe('RUNNING');
    for (const id of [running, paused]) {
      await body(call(second.url, `/api/v1/sandboxes/${id}`, KEY, undefined, 'DELETE'));
      await expect(docker.getContainer(`acs-sandbox-${id}`).inspect()).rejects.toMatchObject({ statusCode: 404 });
    }
  });
});
