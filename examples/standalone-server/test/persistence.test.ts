import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { call, freshDataDir, startServer, type Running } from './process.js';

const KEY = 'persist-key-0123456789abcdef';
const SECRET = 'sk-live-PERSISTED-SECRET-99';

async function json<T>(response: Promise<Response>): Promise<T> {
  const r = await response;
  expect(r.status).toBeLessThan(300);
  return (await r.json()) as T;
}

/** Stores settings, a V0 and a V1 conversation and a sandbox; resolves to their ids once started. */
async function populate(server: Running) {
  await json(call(server.url, '/api/settings', KEY, { llm_model: 'openai/gpt-4o', llm_api_key: SECRET, language: 'fr' }));
  const v0 = await json<{ conversation_id: string }>(call(server.url, '/api/conversations', KEY, { initial_user_msg: 'hello' }));
  const task = await json<{ id: string; app_conversation_id: string }>(
    call(server.url, '/api/v1/app-conversations', KEY, { initial_message: { content: [{ type: 'text', text: 'hi' }] }, title: 'Persisted V1' }),
  );
  const sandbox = await json<{ id: string }>(call(server.url, '/api/v1/sandboxes', KEY, {}));
  for (let i = 0; i < 100; i++) {
    const [t] = await json<{ status: string }[]>(call(server.url, `/api/v1/app-conversations/start-tasks?ids=${task.id}`, KEY));
    if (t?.status === 'READY') break;
    await new Promise((r) => setTimeout(r, 50));
  }
  // A key the user made, and a device sign-in approved but not yet collected by its device.
  const apiKey = await json<{ key: string }>(call(server.url, '/api/keys', KEY, { name: 'kept' }));
  const device = await json<{ device_code: string; user_code: string }>(call(server.url, '/oauth/device/authorize', null, {}));
  await json(call(server.url, `/api/device-authorizations/${device.user_code}/approve`, KEY, {}));
  return { v0: v0.conversation_id, v1: task.app_conversation_id, task: task.id, sandbox: sandbox.id, apiKey: apiKey.key, deviceCode: device.device_code };
}

async function expectEverything(server: Running, ids: Awaited<ReturnType<typeof populate>>) {
  const settings = await json<Record<string, unknown>>(call(server.url, '/api/settings', KEY));
  expect(settings).toMatchObject({ llm_model: 'openai/gpt-4o', language: 'fr', llm_api_key_set: true, llm_api_key: null });
  const list = await json<{ results: { conversation_id: string }[] }>(call(server.url, '/api/conversations', KEY));
  expect(list.results.map((c) => c.conversation_id).sort()).toEqual([ids.v0, ids.v1].sort());
  const [v1] = await json<({ title: string } | null)[]>(call(server.url, `/api/v1/app-conversations?ids=${ids.v1}`, KEY));
  expect(v1?.title).toBe('Persisted V1');
  const [task] = await json<({ status: string } | null)[]>(call(server.url, `/api/v1/app-conversations/start-tasks?ids=${ids.task}`, KEY));
  expect(task?.status).toBe('READY');
  const sandboxes = await json<{ items: { id: string }[] }>(call(server.url, '/api/v1/sandboxes/search', KEY));
  expect(sandboxes.items.map((s) => s.id)).toContain(ids.sandbox);
  expect(await json<{ id: string }>(call(server.url, '/api/v1/users/me', ids.apiKey))).toMatchObject({ id: 'default' });
  const token = await json<{ access_token: string }>(
    fetch(`${server.url}/oauth/device/token`, { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: `device_code=${ids.deviceCode}` }),
  );
  expect(await json<{ id: string }>(call(server.url, '/api/v1/users/me', token.access_token))).toMatchObject({ id: 'default' });
}

async function kill(server: Running) {
  server.child.kill('SIGKILL');
  await server.exited;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

describe('the example server keeps its data across restarts', () => {
  it('on embedded PGlite (the default), through SIGKILL, with the generated key kept owner-only', async () => {
    const dataDir = freshDataDir();
    const first = await startServer({ SESSION_API_KEY: KEY, DATA_DIR: dataDir });
    expect(first.stdout()).toContain('"storage":"pglite"');
    const ids = await populate(first);
    await kill(first);

    const keyFile = join(dataDir, 'secret.key');
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    // Neither the model key nor an API key is kept in clear (only the API key's hash is).
    for (const file of filesUnder(dataDir)) expect(readFileSync(file).includes(SECRET) || readFileSync(file).includes(ids.apiKey), file).toBe(false);

    const second = await startServer({ SESSION_API_KEY: KEY, DATA_DIR: dataDir });
    expect(second.stdout()).toContain('"secretKey":"key file"');
    await expectEverything(second, ids);
    await kill(second);
  });

  it('refuses to start with a different key instead of losing the stored secrets', async () => {
    const dataDir = freshDataDir();
    const first = await startServer({ SESSION_API_KEY: KEY, DATA_DIR: dataDir });
    await json(call(first.url, '/api/settings', KEY, { llm_model: 'm', llm_api_key: SECRET }));
    await kill(first);

    const wrong = await startServer({ SESSION_API_KEY: KEY, DATA_DIR: dataDir, ACS_SECRET_KEY: randomBytes(32).toString('base64') }, { expectExit: true });
    expect(await wrong.exited).toBe(1);
    expect(wrong.stderr()).toMatch(/Cannot start: Stored secrets were encrypted with key id [0-9a-f]{12}, which is not configured/);

    const again = await startServer({ SESSION_API_KEY: KEY, DATA_DIR: dataDir });
    expect(await json(call(again.url, '/api/settings', KEY))).toMatchObject({ llm_model: 'm', llm_api_key_set: true });
  });

  it('on a PostgreSQL server given by DATABASE_URL', async () => {
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL ?? 'postgres://acs:acs@127.0.0.1:5432/acs_test' });
    await admin.connect();
    const database = `acs_example_${randomBytes(5).toString('hex')}`;
    await admin.query(`CREATE DATABASE ${database}`);
    try {
      const url = new URL(process.env.DATABASE_URL ?? 'postgres://acs:acs@127.0.0.1:5432/acs_test');
      url.pathname = `/${database}`;
      const env = { SESSION_API_KEY: KEY, DATABASE_URL: url.toString(), DATA_DIR: freshDataDir() };
      const first = await startServer(env);
      expect(first.stdout()).toContain('"storage":"postgres"');
      const ids = await populate(first);
      await kill(first);
      const second = await startServer(env);
      await expectEverything(second, ids);
      await kill(second);
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.end();
    }
  });

  it('keeps nothing with ACS_STORAGE=memory, as documented', async () => {
    const first = await startServer({ SESSION_API_KEY: KEY, ACS_STORAGE: 'memory' });
    expect(first.stdout()).toContain('memory (nothing survives a restart)');
    await json(call(first.url, '/api/settings', KEY, { llm_model: 'm' }));
    await kill(first);
    const second = await startServer({ SESSION_API_KEY: KEY, ACS_STORAGE: 'memory' });
    expect((await call(second.url, '/api/settings', KEY)).status).toBe(404);
  });
});
