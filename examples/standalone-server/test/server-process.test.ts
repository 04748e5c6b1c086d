import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { call, exampleDir, freshDataDir, startServer, waitForOutput } from './process.js';

describe('the standalone example server', () => {
  it('generates a key for user default when none is configured, shows it on stderr (never in the log), and accepts it', async () => {
    const server = await startServer({});
    // The key is printed once listening, so it may come just after the listening line.
    await waitForOutput(server, 'API key of user "default"', 'the printed key');
    const match = /API key of user "default" \(made now, kept in [^)]*\)[^\n]*\n\n\s+(\S+)/.exec(server.stderr());
    expect(match, server.stderr()).not.toBeNull();
    const key = match![1]!;
    expect(server.stdout()).not.toContain(key);
    expect(server.stderr()).toContain(`  Console (signs in as user "default"): ${server.url}/console/?key=${key}  (`);
    expect(server.stderr()).not.toContain('ACS_API_KEYS');
    expect((await call(server.url, '/alive', null)).status).toBe(200);
    expect((await call(server.url, '/api/settings', null)).status).toBe(401);
    const settings = await call(server.url, '/api/settings', key);
    expect(settings.status).toBe(404);
    expect(((await settings.json()) as { code: string }).code).toBe('SETTINGS_NOT_FOUND');
  });

  it('with ACS_API_KEYS but no SESSION_API_KEY, says its links sign in as the generated "default", names the configured users, and prints none of their keys', async () => {
    const aliceKey = 'alice-key-0123456789abcdef';
    const bobKey = 'bob-key-0123456789abcdef';
    const uiDir = freshDataDir();
    writeFileSync(join(uiDir, 'index.html'), '<!doctype html><title>a UI</title>');
    const server = await startServer({
      ACS_API_KEYS: `alice:${aliceKey},bob:${bobKey}`,
      ACS_STORAGE: 'memory',
      ACS_UI_DIR: uiDir,
    });
    // Printed at once, with the key.
    await waitForOutput(server, '/console/?key=', 'the printed links');
    const printed = server.stderr();
    const defaultKey = /API key of user "default" \([^)]*\)[^\n]*\n\n\s+(\S+)/.exec(printed)?.[1];
    expect(defaultKey, printed).toBeDefined();
    expect(printed).toContain(`  Console (signs in as user "default"): ${server.url}/console/?key=${defaultKey}  (`);
    expect(printed).toContain(
      `  Your web UI (ACS_UI_DIR) (signs in as user "default"): ${server.url}/?key=${defaultKey}\n`,
    );
    expect(printed).toContain(
      "  To sign in as a user of ACS_API_KEYS (alice, bob) instead, put that user's key in the link: ?key=<their key>\n",
    );
    for (const key of [aliceKey, bobKey]) expect(printed).not.toContain(key);
  });

  it('serves several users from SESSION_API_KEY and ACS_API_KEYS, keeps them apart, and never logs a secret', async () => {
    const defaultKey = 'default-key-0123456789abcdef';
    const bobKey = 'bob-key-0123456789abcdef';
    const server = await startServer({
      SESSION_API_KEY: defaultKey,
      ACS_API_KEYS: `bob:${bobKey}`,
      LOG_LEVEL: 'debug',
      ACS_STORAGE: 'memory',
    });
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

    // pino writes asynchronously: wait for the request lines to reach stdout.
    for (let i = 0; i < 100 && (server.stdout().match(/"msg":"request"/g) ?? []).length < 6; i++)
      await new Promise((r) => setTimeout(r, 20));
    const logs = server.stdout();
    const lines = logs.trim().split('\n');
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) expect(() => JSON.parse(line) as unknown).not.toThrow();
    for (const value of [secret, 'deploy-SECRET-77', defaultKey, bobKey]) expect(logs).not.toContain(value);
    expect(logs).toContain('"path":"/api/settings"');
  });

  it.each([
    ['SIGTERM', 'sqlite'],
    ['SIGTERM', 'pglite'],
    ['SIGINT', 'memory'],
  ] as const)('shuts down cleanly on %s (%s storage)', async (signal, storage) => {
    const server = await startServer({ SESSION_API_KEY: 'default-key-0123456789abcdef', ACS_STORAGE: storage });
    server.child.kill(signal);
    expect(await server.exited).toBe(0);
    expect(server.stdout()).toContain('"agent conversation service stopped"');
  });

  it('npm start builds what is stale and runs the built JavaScript, with no TypeScript loader in the process', async () => {
    // npm runs the script in a shell of its own: the whole group is ended at the end, however the test went.
    const child = spawn('npm', ['start'], {
      cwd: exampleDir,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        PORT: '0',
        DATA_DIR: freshDataDir(),
        ACS_SANDBOXES: 'fake',
        ACS_STORAGE: 'memory',
      },
      detached: true,
    });
    const running = {
      child,
      url: '',
      stdout: () => out,
      stderr: () => err,
      exited: once(child, 'exit').then(([code]) => code as number | null),
    };
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    try {
      const line = await waitForOutput(
        running,
        '"agent conversation service listening"',
        'its listening line',
        240_000,
      );
      const { url, pid } = JSON.parse(line) as { url: string; pid: number };
      expect((await call(url, '/alive', null)).status).toBe(200);
      const commandLine = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      expect(commandLine.slice(1), commandLine.join(' ')).toEqual(['dist/main.js', '']);
    } finally {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      await running.exited;
    }
  });

  it('refuses bad configuration with a message that says what to fix', async () => {
    const child = spawn(process.execPath, ['--conditions=@acs/source', '--import', 'tsx', 'src/main.ts'], {
      cwd: exampleDir,
      env: { PATH: process.env.PATH ?? '', SESSION_API_KEY: 'short', PORT: '0' },
      // Ended even if it never exits by itself, so a failing test leaves no process behind.
      timeout: 120_000,
      killSignal: 'SIGKILL',
    });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(1);
    expect(err).toContain('SESSION_API_KEY: API keys must be at least 16 characters long');
  });
});
