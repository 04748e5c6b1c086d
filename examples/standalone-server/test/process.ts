/** Runs the example server as a real process for tests. */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, expect } from 'vitest';

export const exampleDir = fileURLToPath(new URL('..', import.meta.url));

export interface Running {
  child: ChildProcessWithoutNullStreams;
  url: string;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

const started: Running[] = [];

/** A fresh data directory, so each server starts from nothing. */
export const freshDataDir = () => mkdtempSync(join(tmpdir(), 'acs-example-'));

/** Starts the example server as `npm start` does, on a free port, and waits for its listening line. */
export async function startServer(env: Record<string, string>, options: { expectExit?: boolean } = {}): Promise<Running> {
  const child = spawn(process.execPath, ['--conditions=@acs/source', '--import', 'tsx', 'src/main.ts'], {
    cwd: exampleDir,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', DATA_DIR: freshDataDir(), ACS_SANDBOXES: 'fake', ...env },
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
    if (child.exitCode !== null && options.expectExit) return { child, url: '', stdout: () => out, stderr: () => err, exited };
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`server did not start: ${err}${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Every server a test started is killed after it (SIGKILL, if it is still running). */
afterEach(async () => {
  for (const running of started.splice(0)) {
    if (running.child.exitCode === null) {
      running.child.kill('SIGKILL');
      await running.exited;
    }
  }
});

export const call = (url: string, path: string, key: string | null, body?: unknown, method?: string) =>
  fetch(url + path, {
    method: method ?? (body === undefined ? 'GET' : 'POST'),
    headers: { ...(key ? { 'X-Session-API-Key': key } : {}), ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

/** The JSON body of a response, after checking its status (the body is shown when it differs). */
export async function body<T>(response: Promise<Response>, status = 200): Promise<T> {
  const r = await response;
  const text = await r.text();
  expect(r.status, text).toBe(status);
  return JSON.parse(text) as T;
}

/** Polls every 100 ms until `probe` returns something other than undefined. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
