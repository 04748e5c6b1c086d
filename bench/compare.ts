/**
 * One benchmark on two trees, in turn: whether a change made a figure worse, told apart from the
 * host's noise. The tree before is a git revision, checked out in a temporary worktree (its own
 * `npm ci`); the tree after is this one, as it is on disk. Each round runs the benchmark once on
 * each, the order alternating (ABBA), so both share the machine's drift; then every row of its
 * output is set side by side: the median of the runs on each tree and their range
 * (compare-rows.ts).
 *
 *   npm run bench:compare -- --base f176989 bench:agent
 *   BENCH_STEPS_PARTS=engine npm run bench:compare -- --base main~3 --runs 8 bench:steps
 *   npm run bench:compare -- --base v0.1.0 --runs 5 --threshold 0.05 --all bench:footprint
 *
 *   --base REV        the tree before (any revision git knows); required
 *   --runs N          rounds (default 5): N runs on each tree
 *   --threshold F     call out changes beyond this fraction (default 0.1) whose ranges do not overlap
 *   --all             print every row that differs, not only those with a change called out
 *   --keep            keep the worktree and the runs' outputs (their directory is printed)
 *
 * Why not a kept tool: hyperfine and its kind time a command; the figures here are the ones each
 * benchmark prints itself (CPU per call, RSS, ratios against in-process baselines), so the
 * comparison reads the benchmark's own output.
 *
 * The environment is passed on to both runs (BENCH_* settings). The outputs of every run are kept
 * in a temporary directory until the end, and printed in part when a run fails. A run of the
 * base that the tree after no longer has (a bench added since) fails at once.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compareRuns, formatComparison, type RowComparison } from './compare-rows.js';

const root = fileURLToPath(new URL('..', import.meta.url));

interface Options {
  base: string;
  script: string;
  runs: number;
  threshold: number;
  all: boolean;
  keep: boolean;
}

function usage(problem: string): never {
  console.error(`bench:compare: ${problem}`);
  console.error('usage: npm run bench:compare -- --base REV [--runs N] [--threshold F] [--all] [--keep] SCRIPT');
  process.exit(2);
}

function parseOptions(argv: readonly string[]): Options {
  const options: Partial<Options> = { runs: 5, threshold: 0.1, all: false, keep: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = () => argv[++i] ?? usage(`${arg} needs a value`);
    if (arg === '--base') options.base = value();
    else if (arg === '--runs') options.runs = Number(value());
    else if (arg === '--threshold') options.threshold = Number(value());
    else if (arg === '--all') options.all = true;
    else if (arg === '--keep') options.keep = true;
    else if (arg.startsWith('-')) usage(`unknown option ${arg}`);
    else if (options.script === undefined) options.script = arg;
    else usage(`one benchmark at a time, not ${options.script} and ${arg}`);
  }
  if (!options.base) usage('--base REV is required: the revision to compare this tree with');
  if (!options.script) usage('which benchmark? e.g. bench:agent');
  if (!Number.isInteger(options.runs) || options.runs! < 1) usage('--runs must be a positive integer');
  if (!(options.threshold! > 0)) usage('--threshold must be a fraction above 0, e.g. 0.1');
  return options as Options;
}

/** Runs a command to its end; on failure, throws with the end of its output. */
function must(command: string, args: string[], cwd: string, what: string): string {
  const done = spawnSync(command, args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (done.status !== 0)
    throw new Error(`${what} failed (${done.status ?? done.signal}):\n${(done.stdout + done.stderr).slice(-4000)}`);
  return done.stdout.trim();
}

/**
 * The run under way, and the signal that stopped this comparison: from the first step to the last,
 * a signal stops the run and the comparison, and the worktree is still removed (a signal during
 * the worktree's `npm ci` is seen when it returns).
 */
let running: ChildProcess | null = null;
let stoppedBy: NodeJS.Signals | null = null;
const stop = (signal: NodeJS.Signals) => {
  stoppedBy = signal;
  running?.kill('SIGTERM');
};
function throwIfStopped(): void {
  if (stoppedBy) throw new Error(`stopped by ${stoppedBy}`);
}

/** One run of `npm run SCRIPT` in a tree, its output kept in a file; throws with its end when it fails. */
async function runOnce(tree: string, script: string, file: string): Promise<string> {
  throwIfStopped();
  const out = createWriteStream(file);
  const child = spawn('npm', ['run', '--silent', script], { cwd: tree, env: process.env });
  child.stdout.pipe(out, { end: false });
  child.stderr.pipe(out, { end: false });
  running = child;
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  running = null;
  await new Promise((resolve) => out.end(resolve));
  const text = readFileSync(file, 'utf8');
  throwIfStopped();
  if (code !== 0)
    throw new Error(`npm run ${script} in ${tree} exited ${code}; its output ends:\n${text.slice(-4000)}`);
  return text;
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  const commit = must(
    'git',
    ['rev-parse', '--verify', `${options.base}^{commit}`],
    root,
    `git rev-parse ${options.base}`,
  );
  const work = mkdtempSync(join(tmpdir(), 'acs-bench-compare-'));
  const baseTree = join(work, 'base');
  let failed = false;
  try {
    console.log(`bench:compare: ${options.script}, ${options.runs} runs on each tree`);
    console.log(`  before: ${options.base} (${commit.slice(0, 12)}), in ${baseTree}`);
    console.log(`  after:  this tree, ${root}`);
    must('git', ['worktree', 'add', '--detach', baseTree, commit], root, 'git worktree add');
    console.log('  npm ci in the tree before …');
    must('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], baseTree, 'npm ci in the tree before');
    throwIfStopped();
    const before: string[] = [];
    const after: string[] = [];
    for (let round = 1; round <= options.runs; round++) {
      const order = round % 2 === 1 ? (['before', 'after'] as const) : (['after', 'before'] as const);
      for (const side of order) {
        const started = Date.now();
        const tree = side === 'before' ? baseTree : root;
        const text = await runOnce(tree, options.script, join(work, `${side}-${round}.log`));
        (side === 'before' ? before : after).push(text);
        console.log(`  round ${round}/${options.runs}, ${side}: ${((Date.now() - started) / 1000).toFixed(0)} s`);
      }
    }
    report(options, compareRuns(before, after, options.threshold));
  } catch (error) {
    failed = true;
    console.error(error instanceof Error ? error.message : error);
  } finally {
    if (options.keep) console.log(`kept: ${work} (remove the worktree with: git worktree remove --force ${baseTree})`);
    else {
      spawnSync('git', ['worktree', 'remove', '--force', baseTree], { cwd: root });
      rmSync(work, { recursive: true, force: true });
    }
  }
  process.exitCode = failed ? 1 : 0;
}

function report(options: Options, rows: readonly RowComparison[]): void {
  const called = rows.filter((row) => row.figures.some((f) => f.changed));
  console.log();
  console.log(
    `${rows.length} rows in every run; ${called.length} with a figure that moved more than ${(options.threshold * 100).toFixed(0)} % with the runs' ranges apart (marked !). Each figure: median [range] before → after (ratio); #n is the row's n-th number.`,
  );
  console.log(
    "Read each against its row: a time or a size that grew is worse; a rate, a count or a baseline's own figure may not be.",
  );
  console.log();
  for (const line of formatComparison(options.all ? rows : called)) console.log(line);
}

await main();
