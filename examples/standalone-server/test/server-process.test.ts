import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const exampleDir = fileURLToPath(new URL('..', import.meta.url));

interface Running {
  child: ChildProcessWithoutNullStreams;
  url: string;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

const started: Running[] = [];

/** Starts the example server as `npm start` does, on a free port, and waits for its listening line. */
async function startServer(env: Record<string, string>): Promise<Running> {
  const child = spawn(process.execPath, ['--conditions=@acs/source', '--import', 'tsx', 'src/main.ts'], {
    cwd: exampleDir,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', ...env },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  const deadline = Date.now() + 20_000;
  for (;;) {
    const line = out.split('\n').find((l) => l.includes('"agent conversation service listening"'));
    if (line) {
      const running = { child, url: (JSON.parse(line) as { url: string }).url, stdout: () => out, stderr: () => err, exited };
      started.push(running);
      return running;
    }
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`server did not start: ${err}${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

afterEach(async () => {
  for (const running of started.splice(0)) {
    if (running.child.exitCode === null) {
      running.child.kill('SIGKILL');
      await running.exited;
    }
  }
});

const call = (url: string, path: string, key: string | null, body?: unknown) =>
  fetch(url + path, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { ...(key ? { 'X-Session-API-Key': key } : {}), ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

describe('the standalone example server', () => {
  it('generates a key for user default when none is configured, shows it once on stderr, and accepts it', async () => {
    const server = await startServer({});
    const match = /generated a key for user "default"[^\n]*\n\n\s+(\S+)/.exec(server.stderr());
    expect(match).not.toBeNull();
    const key = match![1]!;
    expect(server.stderr().split(key)).toHaveLength(2);
    expect(server.stdout()).not.toContain(key);
    expect((await call(server.url, '/alive', null)).status).toBe(200);
    expect((await call(server.url, '/api/settings', null)).status).toBe(401);
    const settings = await call(server.url, '/api/settings', key);
    expect(settings.status).toBe(404);
    expect(((await settings.json()) as { code: string }).code).toBe('SETTINGS_NOT_FOUND');
  });

  it('serves several users from SESSION_API_KEY and ACS_API_KEYS, keeps them apart, and never logs a secret', async () => {
    const defaultKey = 'default-key-0123456789abcdef';
    const bobKey = 'bob-key-0123456789abcdef';
    const server = await startServer({ SESSION_API_KEY: defaultKey, ACS_API_KEYS: `bob:${bobKey}`, LOG_LEVEL: 'debug' });
    const secret = 'sk-live-SECRET-VALUE-42';
    const stored = await call(server.url, '/api/settings', defaultKey, {
      llm_model: 'openai/gpt-4o',
      llm_api_key: secret,
      secrets_store: { custom_secrets: { DEPLOY_TOKEN: { secret: 'deploy-SECRET-77' } } },
    });
    expect(stored.status).toBe(200);
    const created = await call(server.url, '/api/conversations', defaultKey, { initial_user_msg: 'hello' });
    expect(created.status).toBe(200);
    const { conversation_id } = (await created.json()) as { conversation_id: string };
    expect((await call(server.url, `/api/conversations/${conversation_id}`, bobKey)).status).toBe(404);
    expect((await call(server.url, '/api/settings', bobKey)).status).toBe(404);
    const mine = await call(server.url, `/api/conversations/${conversation_id}`, defaultKey);
    expect(mine.status).toBe(200);

    const logs = server.stdout();
    const lines = logs.trim().split('\n');
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) expect(() => JSON.parse(line) as unknown).not.toThrow();
    for (const value of [secret, 'deploy-SECRET-77', defaultKey, bobKey]) expect(logs).not.toContain(value);
    expect(logs).toContain('"path":"/api/settings"');
  });

  it.each(['SIGTERM', 'SIGINT'] as const)('shuts down cleanly on %s', async (signal) => {
    const server = await startServer({ SESSION_API_KEY: 'default-key-0123456789abcdef' });
    server.child.kill(signal);
    expect(await server.exited).toBe(0);
    expect(server.stdout()).toContain('"agent conversation service stopped"');
  });

  it('refuses bad configuration with a message that says what to fix', async () => {
    const child = spawn(process.execPath, ['--conditions=@acs/source', '--import', 'tsx', 'src/main.ts'], {
      cwd: exampleDir,
      env: { PATH: process.env.PATH ?? '', SESSION_API_KEY: 'short', PORT: '0' },
    });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(1);
    expect(err).toContain('SESSION_API_KEY: API keys must be at least 16 characters long');
  });
});
