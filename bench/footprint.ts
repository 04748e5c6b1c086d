/**
 * Footprint benchmark: the resident memory (RSS) of the example server as `npm start` runs it,
 * ten seconds after it listens and again after one finished conversation (a model turn that runs
 * a command in the sandbox, then `finish`), for each storage; beside the baselines measured in
 * the same run: a bare Node HTTP server, and the same server run from TypeScript through the
 * loader (as `npm start` did before issue 27).
 *
 *   npm run bench:footprint
 *   BENCH_FOOTPRINT_RUNTIME=fake npm run bench:footprint   # without Docker
 *   BENCH_FOOTPRINT_RUNS=5 npm run bench:footprint        # the median of 5 starts (default 3)
 *
 * RSS after start varies by several MiB from one start to the next (when the collector runs),
 * so each figure is the median of several starts.
 *
 * The default runtime is Docker when an engine answers (the embedded default of `npm start`),
 * with the image acs-sandbox:bookworm; otherwise the fake runtime, and the table says so.
 * Targets (issue 27): the embedded default ≤ 150 MiB idle and after a conversation; memory
 * storage ≤ 100 MiB. Numbers, not assertions.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { scriptedCompletion, startFakeOpenAi, toolCall } from '@acs/testing';
import { printTable } from './report.js';
import { positiveInt } from './stats.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const exampleDir = join(root, 'examples', 'standalone-server');
const SETTLE_MS = 10_000;
const START_DEADLINE_MS = 120_000;
const KEY = 'bench-footprint-key-0123456789';
const RUNS = positiveInt('BENCH_FOOTPRINT_RUNS', 3);

const dockerAnswers = () =>
  spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], { encoding: 'utf8' }).status === 0;
const runtime = process.env.BENCH_FOOTPRINT_RUNTIME ?? (dockerAnswers() ? 'docker' : 'fake');

/** Resident and peak resident memory of a process, in MiB, from /proc. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

interface Measured {
  idle: number;
  after: number | null;
  peak: number;
}

/** Waits for `text` in the process's output; fails with that output after the deadline or when it exits. */
async function waitForOutput(
  child: ChildProcessWithoutNullStreams,
  output: () => string,
  text: string,
  what: string,
): Promise<string> {
  const deadline = Date.now() + START_DEADLINE_MS;
  for (;;) {
    const line = output()
      .split('\n')
      .find((l) => l.includes(text));
    if (line) return line;
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${what}: exited (${child.exitCode ?? child.signalCode}) first.\n${output()}`);
    if (Date.now() > deadline) throw new Error(`${what}: not within ${START_DEADLINE_MS / 1000} s.\n${output()}`);
    await sleep(100);
  }
}

const median = (values: readonly number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

/** The median of RUNS starts (each figure on its own). */
async function measureRuns(
  name: string,
  args: string[],
  env: Record<string, string>,
  conversation: ((url: string) => Promise<void>) | null,
): Promise<Measured> {
  const runs: Measured[] = [];
  for (let i = 0; i < RUNS; i++) runs.push(await measure(name, args, env, conversation));
  const afters = runs.map((r) => r.after).filter((a): a is number => a !== null);
  return {
    idle: median(runs.map((r) => r.idle)),
    after: afters.length > 0 ? median(afters) : null,
    peak: median(runs.map((r) => r.peak)),
  };
}

async function measure(
  name: string,
  args: string[],
  env: Record<string, string>,
  conversation: ((url: string) => Promise<void>) | null,
): Promise<Measured> {
  const dataDir = mkdtempSync(join(tmpdir(), 'acs-bench-footprint-'));
  const child = spawn(process.execPath, args, {
    cwd: exampleDir,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      PORT: '0',
      DATA_DIR: dataDir,
      SESSION_API_KEY: KEY,
      ...env,
    },
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-50_000)));
  child.stderr.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-50_000)));
  let installation: string | null = null;
  try {
    const bare = args[0] === '-e';
    const line = await waitForOutput(
      child,
      () => output,
      bare ? 'http://127.0.0.1:' : '"agent conversation service listening"',
      name,
    );
    const url = /(http:\/\/127\.0\.0\.1:\d+)/.exec(line)?.[1] ?? '';
    if (!bare) installation = (JSON.parse(line) as { installation: string }).installation;
    await sleep(SETTLE_MS);
    const idle = memoryOf(child.pid!).rss;
    let after: number | null = null;
    if (conversation) {
      await conversation(url);
      await sleep(SETTLE_MS);
      after = memoryOf(child.pid!).rss;
    }
    return { idle, after, peak: memoryOf(child.pid!).peak };
  } finally {
    child.kill('SIGTERM');
    const exited = once(child, 'exit');
    if (!(await Promise.race([exited.then(() => true), sleep(15_000).then(() => false)]))) child.kill('SIGKILL');
    await exited.catch(() => undefined);
    // Sandboxes outlive their server on purpose: this installation's are removed as an operator would.
    if (installation !== null && env['ACS_SANDBOXES'] === 'docker') {
      const pruned = spawnSync(process.execPath, ['dist/sandboxes-cli.js', 'prune', '--installation', installation], {
        cwd: exampleDir,
        env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir, ...env },
        encoding: 'utf8',
      });
      if (pruned.status !== 0)
        console.error(`${name}: could not remove its sandboxes (npm run sandboxes -- prune): ${pruned.stderr}`);
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const llm = await startFakeOpenAi({ keepRequests: false });
// Every conversation: one command in the sandbox, then finish.
llm.script((request) =>
  request.turn === 0
    ? {
        status: 200,
        body: scriptedCompletion(0, { tool_calls: [toolCall('call_ls', 'execute_bash', { command: 'ls -la /' })] }),
      }
    : {
        status: 200,
        body: scriptedCompletion(request.turn, {
          tool_calls: [toolCall(`call_finish_${request.turn}`, 'finish', { message: 'Done.' })],
        }),
      },
);

async function api(url: string, method: string, path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(url + path, {
    method,
    headers: { 'X-Session-API-Key': KEY, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: HTTP ${response.status} ${text.slice(0, 300)}`);
  return text === '' ? null : (JSON.parse(text) as unknown);
}

/** One conversation to its end through the API, as a client would run it. */
async function oneConversation(url: string): Promise<void> {
  await api(url, 'POST', '/api/settings', {
    llm_model: 'openai/scripted-model',
    llm_api_key: 'sk-bench',
    llm_base_url: llm.baseUrl,
  });
  const { conversation_id: id } = (await api(url, 'POST', '/api/conversations', {
    initial_user_msg: 'List the root directory, then finish.',
  })) as { conversation_id: string };
  const deadline = Date.now() + 180_000;
  for (;;) {
    const [conversation] = (await api(url, 'GET', `/api/v1/app-conversations?ids=${id}`)) as ({
      execution_status: string | null;
    } | null)[];
    if (conversation?.execution_status === 'finished') return;
    if (conversation?.execution_status === 'error')
      throw new Error(
        `conversation ${id} ended in error: ${JSON.stringify(await api(url, 'GET', `/api/v1/app-conversations/${id}/events?limit=100`))}`,
      );
    if (Date.now() > deadline)
      throw new Error(`conversation ${id} did not finish within 180 s (last: ${JSON.stringify(conversation)})`);
    await sleep(200);
  }
}

const built = spawnSync(process.execPath, [join(root, 'scripts', 'ensure-built.mjs')], { stdio: 'inherit' });
if (built.status !== 0) throw new Error('building the workspaces failed');

const storages = ['sqlite', 'pglite', 'memory'].filter(
  (kind) => kind !== 'sqlite' || existsSync(join(root, 'packages', 'adapter-sqlite')),
);
const runtimeEnv = { ACS_SANDBOXES: runtime };
const rows: string[][] = [];
const mib = (value: number | null) => (value === null ? '-' : value.toFixed(0));

try {
  const bare = await measureRuns(
    'bare Node HTTP server',
    [
      '-e',
      "require('node:http').createServer((q, s) => s.end('ok')).listen(0, '127.0.0.1', function () { console.log('http://127.0.0.1:' + this.address().port); })",
    ],
    {},
    null,
  );
  rows.push(['bare Node HTTP server (baseline)', mib(bare.idle), '-', mib(bare.peak), '', '1.00×']);
  const ratio = (value: number | null) => (value === null ? '-' : `${(value / bare.idle).toFixed(2)}×`);
  const target = (storage: string) => (storage === 'memory' ? '≤ 100' : storage === storages[0] ? '≤ 150' : '');
  for (const storage of storages) {
    const result = await measureRuns(
      `${storage}, built`,
      ['dist/main.js'],
      { ...runtimeEnv, ACS_STORAGE: storage },
      oneConversation,
    );
    rows.push([
      `npm start: ${storage}${storage === storages[0] ? ' (the default)' : ''}`,
      mib(result.idle),
      mib(result.after),
      mib(result.peak),
      target(storage),
      ratio(result.after ?? result.idle),
    ]);
  }
  const before = await measureRuns(
    'memory, through the TypeScript loader',
    ['--conditions=@acs/source', '--import', 'tsx', 'src/main.ts'],
    { ...runtimeEnv, ACS_STORAGE: 'memory' },
    oneConversation,
  );
  rows.push([
    'memory, run through tsx (as before)',
    mib(before.idle),
    mib(before.after),
    mib(before.peak),
    '',
    ratio(before.after ?? before.idle),
  ]);
} finally {
  await llm.close();
}

console.log(
  `\nFootprint of the example server (RSS in MiB, ${SETTLE_MS / 1000} s after start and after one conversation; median of ${RUNS} starts; sandboxes: ${runtime})\n`,
);
printTable(['process', 'idle', 'after conversation', 'peak', 'target', 'after ÷ bare Node'], rows);
