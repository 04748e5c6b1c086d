import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  allEvents,
  call,
  exampleDir,
  freshDataDir,
  startServer,
  waitForOutput,
  spawnServer,
  type Running,
} from './process.js';
import { scratchDatabase } from './databases.js';

const KEY = 'persist-key-0123456789abcdef';
const SECRET = 'sk-live-PERSISTED-SECRET-99';

async function json<T>(response: Promise<Response>): Promise<T> {
  const r = await response;
  expect(r.status).toBeLessThan(300);
  return (await r.json()) as T;
}

/** Stores settings, a V0 and a V1 conversation and a sandbox; resolves to their ids once started. */
async function populate(server: Running) {
  await json(
    call(server.url, '/api/settings', KEY, { llm_model: 'openai/gpt-4o', llm_api_key: SECRET, language: 'fr' }),
  );
  const v0 = await json<{ conversation_id: string }>(
    call(server.url, '/api/conversations', KEY, { initial_user_msg: 'hello' }),
  );
  const task = await json<{ id: string; app_conversation_id: string }>(
    call(server.url, '/api/v1/app-conversations', KEY, {
      initial_message: { content: [{ type: 'text', text: 'hi' }] },
      title: 'Persisted V1',
    }),
  );
  const sandbox = await json<{ id: string }>(call(server.url, '/api/v1/sandboxes', KEY, {}));
  for (let i = 0; i < 100; i++) {
    const [t] = await json<{ status: string }[]>(
      call(server.url, `/api/v1/app-conversations/start-tasks?ids=${task.id}`, KEY),
    );
    if (t?.status === 'READY') break;
    await new Promise((r) => setTimeout(r, 50));
  }
  // A key the user made, and a device sign-in approved but not yet collected by its device.
  const apiKey = await json<{ key: string }>(call(server.url, '/api/keys', KEY, { name: 'kept' }));
  const device = await json<{ device_code: string; user_code: string }>(
    call(server.url, '/oauth/device/authorize', null, {}),
  );
  await json(call(server.url, `/api/device-authorizations/${device.user_code}/approve`, KEY, {}));
  return {
    v0: v0.conversation_id,
    v1: task.app_conversation_id,
    task: task.id,
    sandbox: sandbox.id,
    apiKey: apiKey.key,
    deviceCode: device.device_code,
  };
}

/** `deviceCode` null: the device sign-in was collected already (by a server before this one). */
async function expectEverything(
  server: Running,
  ids: Omit<Awaited<ReturnType<typeof populate>>, 'deviceCode'> & { deviceCode: string | null },
) {
  const settings = await json<Record<string, unknown>>(call(server.url, '/api/settings', KEY));
  expect(settings).toMatchObject({
    llm_model: 'openai/gpt-4o',
    language: 'fr',
    llm_api_key_set: true,
    llm_api_key: null,
  });
  const list = await json<{ results: { conversation_id: string }[] }>(call(server.url, '/api/conversations', KEY));
  expect(list.results.map((c) => c.conversation_id).sort()).toEqual([ids.v0, ids.v1].sort());
  const [v1] = await json<({ title: string } | null)[]>(
    call(server.url, `/api/v1/app-conversations?ids=${ids.v1}`, KEY),
  );
  expect(v1?.title).toBe('Persisted V1');
  const [task] = await json<({ status: string } | null)[]>(
    call(server.url, `/api/v1/app-conversations/start-tasks?ids=${ids.task}`, KEY),
  );
  expect(task?.status).toBe('READY');
  const sandboxes = await json<{ items: { id: string }[] }>(call(server.url, '/api/v1/sandboxes/search', KEY));
  expect(sandboxes.items.map((s) => s.id)).toContain(ids.sandbox);
  expect(await json<{ id: string }>(call(server.url, '/api/v1/users/me', ids.apiKey))).toMatchObject({ id: 'default' });
  if (ids.deviceCode === null) return;
  const token = await json<{ access_token: string }>(
    fetch(`${server.url}/oauth/device/token`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: `device_code=${ids.deviceCode}`,
    }),
  );
  expect(await json<{ id: string }>(call(server.url, '/api/v1/users/me', token.access_token))).toMatchObject({
    id: 'default',
  });
}

async function kill(server: Running) {
  server.child.kill('SIGKILL');
  await server.exited;
}

/** Runs `npm run storage -- <args>` as a process; ended after 120 s with its output in the failure. */
async function storageCommand(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  const child = spawn(
    process.execPath,
    ['--conditions=@acs/source', '--import', 'tsx', 'src/storage-cli.ts', ...args],
    {
      cwd: exampleDir,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    },
  );
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const deadline = setTimeout(() => child.kill('SIGKILL'), 120_000);
  try {
    const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
    if (signal) throw new Error(`npm run storage -- ${args.join(' ')} ended by ${signal} (deadline 120 s):\n${output}`);
    return { code, output };
  } finally {
    clearTimeout(deadline);
    child.kill('SIGKILL');
  }
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

describe('the example server keeps its data across restarts', () => {
  it('on embedded SQLite (the default), through SIGKILL, with the generated key kept owner-only', async () => {
    const dataDir = freshDataDir();
    const first = await startServer({ SESSION_API_KEY: KEY, DATA_DIR: dataDir });
    expect(first.stdout()).toContain('"storage":"sqlite"');
    expect(first.stderr()).not.toContain('ExperimentalWarning');
    const ids = await populate(first);
    await kill(first);

    const keyFile = join(dataDir, 'secret.key');
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    // Neither the model key nor an API key is kept in clear (only the API key's hash is).
    for (const file of filesUnder(dataDir))
      expect(readFileSync(file).includes(SECRET) || readFileSync(file).includes(ids.apiKey), file).toBe(false);

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

    const wrong = await startServer(
      { SESSION_API_KEY: KEY, DATA_DIR: dataDir, ACS_SECRET_KEY: randomBytes(32).toString('base64') },
      { expectExit: true },
    );
    expect(await wrong.exited).toBe(1);
    expect(wrong.stderr()).toMatch(
      /Cannot start: Stored secrets were encrypted with key id [0-9a-f]{12}, which is not configured/,
    );

    const again = await startServer({ SESSION_API_KEY: KEY, DATA_DIR: dataDir });
    expect(await json(call(again.url, '/api/settings', KEY))).toMatchObject({ llm_model: 'm', llm_api_key_set: true });
  });

  it('on embedded PGlite made by an earlier version: used as it is, refused with ACS_STORAGE=sqlite, moved to SQLite by `npm run storage -- move-to-sqlite`', async () => {
    const dataDir = freshDataDir();
    const first = await startServer({ SESSION_API_KEY: KEY, DATA_DIR: dataDir, ACS_STORAGE: 'pglite' });
    expect(first.stdout()).toContain('"storage":"pglite"');
    const ids = await populate(first);
    const events = await allEvents(first.url, KEY, ids.v1);
    expect(events.length).toBeGreaterThan(0);
    await kill(first);

    // ACS_STORAGE left to its default (SQLite now): the PGlite database is used, with a word on how to move it.
    const second = await startServer({ SESSION_API_KEY: KEY, DATA_DIR: dataDir });
    expect(second.stdout()).toContain('"storage":"pglite"');
    expect(second.stdout()).toContain('npm run storage -- move-to-sqlite');
    await expectEverything(second, ids);
    // Collecting the token used the approved sign-in up: one waiting now, and a wrong user code counted.
    const waiting = await json<{ device_code: string; user_code: string }>(
      call(second.url, '/oauth/device/authorize', null, {}),
    );
    const wrongCode = waiting.user_code.startsWith('B') ? 'CCCC-CCCC' : 'BBBB-BBBB';
    expect((await call(second.url, `/api/device-authorizations/${wrongCode}/approve`, KEY, {})).status).toBe(404);
    // The fake sandboxes did not survive the restart: the server noted that in the log too.
    const eventsMoved = await allEvents(second.url, KEY, ids.v1);
    expect(eventsMoved.slice(0, events.length)).toEqual(events);
    await kill(second);

    const refused = await startServer(
      { SESSION_API_KEY: KEY, DATA_DIR: dataDir, ACS_STORAGE: 'sqlite' },
      { expectExit: true },
    );
    expect(await refused.exited).toBe(1);
    expect(refused.stderr()).toMatch(
      /Cannot start: ACS_STORAGE=sqlite, but the data directory .* holds a PGlite database/,
    );

    // A move that cannot read the secrets (another key) changes nothing.
    const wrongKey = await storageCommand(['move-to-sqlite'], {
      DATA_DIR: dataDir,
      ACS_SECRET_KEY: randomBytes(32).toString('base64'),
    });
    expect(wrongKey.code, wrongKey.output).toBe(1);
    expect(wrongKey.output).toMatch(
      /Cannot move: Stored secrets were encrypted with key id [0-9a-f]{12}, which is not configured/,
    );
    expect(readdirSync(dataDir).sort()).toEqual(['pglite', 'secret.key']);

    const moved = await storageCommand(['move-to-sqlite'], { DATA_DIR: dataDir });
    expect(moved.code, moved.output).toBe(0);
    // Two API keys: the one made, and the one the device sign-in gave its device.
    expect(moved.output).toMatch(
      /Moved: settings 1, secretKeys 1, apiKeys 2, deviceGrants 1, deviceCodeFailures 1, conversations 2, startTasks 2, sandboxes 3, events \d+, installation 1 \(the same counts as in PGlite\)/,
    );
    expect(existsSync(join(dataDir, 'acs.sqlite'))).toBe(true);
    expect(existsSync(join(dataDir, 'pglite'))).toBe(false);
    expect(readdirSync(dataDir).some((name) => name.startsWith('pglite.moved-'))).toBe(true);
    const again = await storageCommand(['move-to-sqlite'], { DATA_DIR: dataDir });
    expect(again.code).toBe(1);
    expect(again.output).toContain('Cannot move: There is no PGlite database');

    const third = await startServer({ SESSION_API_KEY: KEY, DATA_DIR: dataDir });
    expect(third.stdout()).toContain('"storage":"sqlite"');
    await expectEverything(third, { ...ids, deviceCode: null });
    // Every event with its id (a server may add more after them).
    expect((await allEvents(third.url, KEY, ids.v1)).slice(0, eventsMoved.length)).toEqual(eventsMoved);
    // The waiting sign-in came along: approved now, its device collects a key.
    await json(call(third.url, `/api/device-authorizations/${waiting.user_code}/approve`, KEY, {}));
    const token = await json<{ access_token: string }>(
      fetch(`${third.url}/oauth/device/token`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: `device_code=${waiting.device_code}`,
      }),
    );
    expect(await json<{ id: string }>(call(third.url, '/api/v1/users/me', token.access_token))).toMatchObject({
      id: 'default',
    });
    const installation = (s: Running) => /"installation":"([0-9a-f]+)"/.exec(s.stdout())?.[1];
    expect(installation(third)).toBe(installation(first));
    await kill(third);
  });

  it('on a PostgreSQL server given by DATABASE_URL', async () => {
    const database = await scratchDatabase('acs_example');
    try {
      const env = { SESSION_API_KEY: KEY, DATABASE_URL: database.url, DATA_DIR: freshDataDir() };
      const first = await startServer(env);
      expect(first.stdout()).toContain('"storage":"postgres"');
      const ids = await populate(first);
      await kill(first);
      const second = await startServer(env);
      await expectEverything(second, ids);
      await kill(second);
    } finally {
      await database.drop();
    }
  });

  it('waits for a PostgreSQL server that is not up yet (ACS_DATABASE_WAIT_SECONDS), and not for one that refuses it', async () => {
    const database = await scratchDatabase('acs_wait');
    const target = new URL(database.url);
    // A port nothing listens on yet (a refused connection, as from a database not started); later a
    // relay to the real server opens on it. drop-proxy.ts does not serve: it accepts and then closes,
    // which pg reports without an error code, as a database that answered.
    const relay = createServer((client) => {
      const upstream = createConnection(Number(target.port), target.hostname);
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const { port } = relay.address() as { port: number };
    await new Promise((resolve) => relay.close(resolve));
    const late = new URL(database.url);
    late.port = String(port);
    try {
      const server = spawnServer({ SESSION_API_KEY: KEY, DATABASE_URL: late.toString() });
      const waiting = await waitForOutput(server, 'trying again for up to 60 s', 'its waiting line');
      expect(waiting).toContain('ECONNREFUSED');
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(server.child.exitCode).toBeNull();
      await new Promise<void>((resolve) => relay.listen(port, '127.0.0.1', resolve));
      await waitForOutput(server, '"agent conversation service listening"', 'its listening line');
      await kill(server);

      // A wrong password is an answer: no waiting.
      const refused = new URL(database.url);
      refused.password = 'not-the-password';
      const wrong = await startServer({ SESSION_API_KEY: KEY, DATABASE_URL: refused.toString() }, { expectExit: true });
      expect(await wrong.exited).toBe(1);
      expect(wrong.stderr()).toContain('password authentication failed');
      expect(`${wrong.stdout()}${wrong.stderr()}`).not.toContain('trying again');
    } finally {
      if (relay.listening) relay.close();
      await database.drop();
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
