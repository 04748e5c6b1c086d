/**
 * The real OpenHands CLI (1.16, `pip install openhands==1.16.0` on Python 3.12) against the
 * example server: `openhands login --server-url` runs the device sign-in, a person approves it
 * in the console in Chromium, and the CLI keeps the key it got; `openhands cloud -t` then
 * starts a conversation with it; once the key is revoked the CLI finds it expired.
 *
 * The CLI is found at ACS_OPENHANDS_CLI, else beside the python of the OpenHands SDK venv
 * (ACS_OPENHANDS_PYTHON, default /var/cache/acs/openhands-sdk-venv/bin/python), which
 * scripts/python-venv.sh openhands-sdk makes and .ci/run keeps. Without it the test fails, saying how to make it.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { completion, startFakeOpenAi, type FakeOpenAi } from '@acs/testing';
import { launchBrowser } from './console-scenario.js';
import { allEvents, body, call, startServer, waitFor } from './process.js';

const CLI =
  process.env.ACS_OPENHANDS_CLI ??
  join(dirname(process.env.ACS_OPENHANDS_PYTHON ?? '/var/cache/acs/openhands-sdk-venv/bin/python'), 'openhands');
const KEY = 'openhands-cli-test-key-0123456789ab';
const CLI_DEADLINE_MS = 120_000;

interface CliRun {
  child: ChildProcessWithoutNullStreams;
  output: () => string;
  exited: Promise<number | null>;
}

const runs: CliRun[] = [];

/** Runs the CLI as a user would, with its state in `home`, no browser of its own, and stdin at its end (it answers "no" to questions). */
function cli(home: string, args: string[], cwd: string): CliRun {
  const child = spawn(CLI, args, {
    cwd,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: home,
      OPENHANDS_PERSISTENCE_DIR: join(home, '.openhands'),
      BROWSER: '/bin/true',
      COLUMNS: '200',
      OPENHANDS_SUPPRESS_BANNER: '1',
      // The model price list comes from the package, not from the internet.
      LITELLM_LOCAL_MODEL_COST_MAP: 'True',
    },
  });
  child.stdin.end();
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const run = { child, output: () => output, exited };
  runs.push(run);
  return run;
}

/** Waits for the CLI to exit; fails with its output when it does not within the deadline. */
async function exitOf(run: CliRun): Promise<number | null> {
  const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), CLI_DEADLINE_MS).unref());
  const outcome = await Promise.race([run.exited, timeout]);
  if (outcome === 'timeout')
    throw new Error(`the CLI did not exit within ${CLI_DEADLINE_MS / 1000} s.\n--- output ---\n${run.output()}`);
  return outcome;
}

/** The CLI's own lines, without the warnings its libraries print. */
const cliLines = (run: CliRun) =>
  run
    .output()
    .split('\n')
    .filter((line) => !/LiteLLM:WARNING|AuthlibDeprecationWarning|from authlib|It will be compatible/.test(line))
    .join('\n');

afterEach(async () => {
  for (const run of runs.splice(0)) {
    if (run.child.exitCode === null && run.child.signalCode === null) {
      run.child.kill('SIGKILL');
      await run.exited;
    }
  }
});

let browser: Browser | undefined;
let llm: FakeOpenAi | undefined;
beforeAll(async () => {
  browser = await launchBrowser();
  llm = await startFakeOpenAi();
  llm.script([{ status: 200, body: completion({ content: 'Hello from the scripted model.' }) }]);
}, 180_000);
afterAll(async () => {
  await browser?.close();
  await llm?.close();
});

describe('the OpenHands CLI against the example server', () => {
  it('logs in through the console, starts a cloud conversation with its key, and finds the key expired once revoked', async () => {
    expect(
      existsSync(CLI),
      `no OpenHands CLI at ${CLI}: run scripts/python-venv.sh openhands-sdk (or set ACS_OPENHANDS_CLI)`,
    ).toBe(true);
    const server = await startServer({ SESSION_API_KEY: KEY, ACS_STORAGE: 'memory', ACS_SANDBOXES: 'fake' });
    await body(
      call(server.url, '/api/settings', KEY, {
        llm_model: 'openai/gpt-4o-mini',
        llm_api_key: 'sk-cli-test-000000000000',
        llm_base_url: llm!.baseUrl,
      }),
    );
    const home = mkdtempSync(join(tmpdir(), 'acs-openhands-cli-'));

    // openhands login: the device sign-in; the person approves in the console.
    const login = cli(home, ['login', '--server-url', server.url], home);
    const urlLine = await waitFor(
      'the CLI to print the approval URL',
      () => /URL: (\S+)/.exec(login.output())?.[1],
      CLI_DEADLINE_MS,
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}\n--- CLI output ---\n${login.output()}`);
    });
    expect(urlLine).toMatch(
      new RegExp(`^${server.url}/console/device\\?user_code=[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$`),
    );
    const context = await browser!.newContext();
    try {
      const page = await context.newPage();
      await page.goto(urlLine);
      await page.getByLabel('API key').fill(KEY);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('button', { name: 'Approve' }).click();
      await page.getByText('Approved.').waitFor({ timeout: 60_000 });
    } finally {
      await context.close();
    }
    expect(await exitOf(login), login.output()).toBe(0);
    console.info(`--- openhands login ---\n${cliLines(login)}`);
    expect(login.output()).toContain('✓ Authentication successful!');
    expect(login.output()).toContain('✓ Logged into OpenHands Cloud');
    // The BYOR key the CLI puts into its agent settings is the user's own model key, and the settings sync (GET /api/v1/settings) succeeds.
    expect(login.output()).toContain('✓ LLM API key retrieved');
    expect(login.output()).toContain('✓ Settings synchronized successfully!');
    const agentSettings = JSON.parse(readFileSync(join(home, '.openhands', 'agent_settings.json'), 'utf8')) as {
      llm: { model: string; base_url: string };
    };
    expect(agentSettings.llm).toMatchObject({ model: 'openai/gpt-4o-mini', base_url: llm!.baseUrl });

    const keyFile = join(home, '.openhands', 'cloud', 'api_key.txt');
    const cliKey = readFileSync(keyFile, 'utf8');
    expect(cliKey).toMatch(/^acsk_/);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect((await body<{ id: string }>(call(server.url, '/api/v1/users/me', cliKey))).id).toBe('default');
    const keys = await body<{ id: string; name: string }[]>(call(server.url, '/api/keys', KEY));
    expect(keys.map((k) => k.name)).toEqual([expect.stringMatching(/^OpenHands CLI \(/)]);

    // openhands cloud: a conversation started with the CLI's key, outside any git checkout.
    const work = mkdtempSync(join(tmpdir(), 'acs-openhands-cloud-'));
    const cloud = cli(home, ['cloud', '-t', 'Say hello', '--server-url', server.url], work);
    expect(await exitOf(cloud), cloud.output()).toBe(0);
    console.info(`--- openhands cloud ---\n${cliLines(cloud)}`);
    expect(cloud.output()).toContain('Cloud conversation created successfully!');
    const id = /Conversation ID: ([0-9a-f]{32})/.exec(cloud.output())?.[1];
    expect(id, cloud.output()).toBeDefined();
    expect(cloud.output()).toContain(`View in browser: ${server.url}/conversations/${id}`);
    const events = await waitFor('the agent to answer', async () => {
      const all = await allEvents(server.url, KEY, id!);
      return JSON.stringify(all).includes('Hello from the scripted model.') ? all : undefined;
    });
    expect(JSON.stringify(events)).toContain('Say hello');

    // Every request of the CLI's own routes was answered 2xx, but the device-token polls before the
    // approval: RFC 8628 answers those 400 authorization_pending, and the CLI polls on.
    // (The console page the person used asks other routes, e.g. a count before it is signed in: not the CLI's.)
    const cliRoutes =
      /^\/(oauth\/device\/(authorize|token)|api\/keys\/llm\/byor|api\/v1\/(users\/me|settings|app-conversations(\/start-tasks)?))$/;
    const answered = server
      .stdout()
      .split('\n')
      .filter((line) => line.includes('"msg":"request"'))
      .map((line) => JSON.parse(line) as { method: string; path: string; status: number })
      .filter((r) => cliRoutes.test(r.path));
    expect(answered.map((r) => `${r.method} ${r.path}`)).toEqual(
      expect.arrayContaining([
        'POST /oauth/device/authorize',
        'GET /api/keys/llm/byor',
        'GET /api/v1/settings',
        'POST /api/v1/app-conversations',
      ]),
    );
    const refused = answered.filter((r) => r.status >= 300 && !(r.path === '/oauth/device/token' && r.status === 400));
    expect(refused).toEqual([]);

    // Revoked: the CLI's probe gets 401, and it says the connection has expired (then it would sign in again).
    await body(call(server.url, `/api/keys/${keys[0]!.id}`, KEY, undefined, 'DELETE'));
    const after = cli(home, ['cloud', '-t', 'Again', '--server-url', server.url], work);
    await waitFor(
      'the CLI to find its key expired',
      () => (after.output().includes('Your connection with OpenHands Cloud has expired.') ? true : undefined),
      CLI_DEADLINE_MS,
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}\n--- CLI output ---\n${after.output()}`);
    });
    console.info(`--- openhands cloud after the key was revoked ---\n${cliLines(after)}`);
  });
});
