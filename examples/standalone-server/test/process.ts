/** Runs the example server as a real process for tests. */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, expect } from 'vitest';
import type { ConversationEvent, EventPage } from '@acs/core/schemas';

export const exampleDir = fileURLToPath(new URL('..', import.meta.url));

export interface Running {
  child: ChildProcessWithoutNullStreams;
  url: string;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/**
 * Every process a test started, registered the moment it is spawned: ended after each test, however
 * the test went, with its stop signal (SIGKILL, unless it must clean up after itself).
 */
const started: { child: ChildProcessWithoutNullStreams; exited: Promise<number | null>; stopSignal: NodeJS.Signals }[] =
  [];
/** Servers a whole test file shares (started in beforeAll): ended after the file. */
const startedForFile: typeof started = [];

/** How long a server may take to start on a busy machine before the test gives up (and ends it). */
const START_DEADLINE_MS = 120_000;

/** A fresh data directory, so each server starts from nothing. */
export const freshDataDir = () => mkdtempSync(join(tmpdir(), 'acs-example-'));

/**
 * Spawns the example server as `npm start` does (PORT 0, a fresh DATA_DIR, fake sandboxes and no
 * warm pool unless `env` says otherwise: a pooled container would take engine places and outlive
 * tests that remove their user's containers; the pool's own tests turn it on).
 */
export function spawnServer(env: Record<string, string>, lifetime: 'test' | 'file' = 'test'): Running {
  return track(spawn(process.execPath, SERVER_ARGS, { cwd: exampleDir, env: serverEnv(env) }), lifetime, 'SIGKILL');
}

const SERVER_ARGS = ['--conditions=@acs/source', '--import', 'tsx', 'src/main.ts'];
const serverEnv = (env: Record<string, string>) => ({
  PATH: process.env.PATH ?? '',
  HOME: process.env.HOME ?? '',
  PORT: '0',
  DATA_DIR: freshDataDir(),
  ACS_SANDBOXES: 'fake',
  ACS_SANDBOX_POOL: 'none',
  ...env,
});

/**
 * A parent that never reaps its child, as a container's PID 1 that does not: the server killed
 * stays a zombie. Perl, because a shell or Node reaps its children. The signal that would end the
 * parent is held until it knows the server's pid; on SIGTERM (the cleanup after the test) it kills
 * the server, reaps it and exits, so nothing is left behind.
 */
const NON_REAPING_PARENT = `
use POSIX ();
my $term = POSIX::SigSet->new(POSIX::SIGTERM());
POSIX::sigprocmask(POSIX::SIG_BLOCK(), $term);
my $pid = fork() // die "fork: $!\n";
if ($pid == 0) { POSIX::sigprocmask(POSIX::SIG_UNBLOCK(), $term); exec { $ARGV[0] } @ARGV; die "exec $ARGV[0]: $!\n"; }
$SIG{TERM} = sub { kill 'KILL', $pid; waitpid $pid, 0; exit 0; };
print STDERR "server pid $pid\n";
POSIX::sigprocmask(POSIX::SIG_UNBLOCK(), $term);
sleep 60 while 1;
`;

/** Spawns the example server (as spawnServer does) as the child of a parent that never reaps it; `serverPid` is the server's own pid. */
export function spawnServerUnreaped(env: Record<string, string>): Running & { serverPid: () => number } {
  const running = track(
    spawn('perl', ['-e', NON_REAPING_PARENT, process.execPath, ...SERVER_ARGS], {
      cwd: exampleDir,
      env: serverEnv(env),
    }),
    'test',
    'SIGTERM',
  );
  return {
    ...running,
    serverPid: () => {
      const pid = /^server pid (\d+)$/m.exec(running.stderr())?.[1];
      if (!pid) throw new Error(`the parent did not say the server's pid.\n--- stderr ---\n${running.stderr()}`);
      return Number(pid);
    },
  };
}

function track(child: ChildProcessWithoutNullStreams, lifetime: 'test' | 'file', stopSignal: NodeJS.Signals): Running {
  const exited = once(child, 'exit').then(([code, signal]) => (code as number | null) ?? (signal ? -1 : null));
  (lifetime === 'file' ? startedForFile : started).push({ child, exited, stopSignal });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return { child, url: '', stdout: () => out, stderr: () => err, exited };
}

/** Waits until the process prints a line containing `text` (stdout or stderr); fails with the process's output after the deadline, or if it exits first. */
export async function waitForOutput(
  running: Running,
  text: string,
  what: string,
  deadlineMs = START_DEADLINE_MS,
): Promise<string> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const line = `${running.stdout()}\n${running.stderr()}`.split('\n').find((l) => l.includes(text));
    if (line) return line;
    if (running.child.exitCode !== null || running.child.signalCode !== null) {
      throw new Error(
        `the server exited (${running.child.exitCode ?? running.child.signalCode}) before ${what}.\n--- stderr ---\n${running.stderr()}\n--- stdout ---\n${running.stdout()}`,
      );
    }
    if (Date.now() > deadline) {
      throw new Error(
        `no ${what} within ${Math.round(deadlineMs / 1000)} s.\n--- stderr ---\n${running.stderr()}\n--- stdout ---\n${running.stdout()}`,
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts the example server as `npm start` does, on a free port, and waits for its listening line. */
export async function startServer(
  env: Record<string, string>,
  options: { expectExit?: boolean; lifetime?: 'test' | 'file' } = {},
): Promise<Running> {
  const running = spawnServer(env, options.lifetime);
  try {
    const line = await waitForOutput(running, '"agent conversation service listening"', 'its listening line');
    return { ...running, url: (JSON.parse(line) as { url: string }).url };
  } catch (error) {
    // A server expected to refuse to start has exited: the caller looks at its output.
    if (options.expectExit && (running.child.exitCode !== null || running.child.signalCode !== null)) {
      await running.exited;
      return running;
    }
    throw error;
  }
}

async function end(servers: typeof started): Promise<void> {
  for (const running of servers.splice(0)) {
    if (running.child.exitCode === null && running.child.signalCode === null) {
      running.child.kill(running.stopSignal);
      await running.exited;
    }
  }
}

/** Every server a test started is ended after it (if it is still running), also when the test failed or gave up. */
afterEach(() => end(started));
afterAll(() => end(startedForFile));

export const call = (url: string, path: string, key: string | null, body?: unknown, method?: string) =>
  fetch(url + path, {
    method: method ?? (body === undefined ? 'GET' : 'POST'),
    headers: {
      ...(key ? { 'X-Session-API-Key': key } : {}),
      ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

/** The JSON body of a response, after checking its status (the body is shown when it differs). */
export async function body<T>(response: Promise<Response>, status = 200): Promise<T> {
  const r = await response;
  const text = await r.text();
  expect(r.status, text).toBe(status);
  return JSON.parse(text) as T;
}

/** Every event of a conversation, page by page through GET …/events (`pageSize` small to exercise paging). */
export async function allEvents(url: string, key: string, id: string, pageSize = 100): Promise<ConversationEvent[]> {
  const events: ConversationEvent[] = [];
  let after: number | null = 0;
  while (after !== null) {
    const page: EventPage = await body<EventPage>(
      call(url, `/api/v1/app-conversations/${id}/events?after=${after}&limit=${pageSize}`, key),
    );
    events.push(...page.items);
    after = page.next_after;
  }
  return events;
}

/** Polls every 100 ms until `probe` returns something other than undefined. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 90_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
