import { readdirSync, readFileSync } from 'node:fs';
import { link, mkdir, open, readFile, rmdir, stat, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';

/** Who holds a data directory: written into its lock file. */
interface LockOwner {
  pid: number;
  host: string;
  /** The process's start time as the kernel reports it (Linux), to tell a reused pid from the holder. */
  process_start: string | null;
  started_at: string;
}

export interface DataDirLock {
  readonly path: string;
  /** Gives the directory back (removes the lock file if it is still ours). Idempotent. */
  release(): Promise<void>;
}

export interface LockOptions {
  /** How long to wait for a holder that was killed (or ended) and is still exiting before refusing; default 5 s. */
  exitWaitMs?: number;
  /** Told when the lock waits for such a holder. */
  onWaitingForExit?: (pid: number, waitMs: number) => void;
}

/** Another live process holds the directory; or one that is exiting did not finish within the wait. */
class DataDirInUseError extends Error {
  constructor(
    readonly dataDir: string,
    readonly holder: LockOwner,
    stillExitingAfterMs: number | null,
  ) {
    super(
      `The data directory ${dataDir} is in use by process ${holder.pid}${holder.host !== hostname() ? ` on ${holder.host}` : ''} (started ${holder.started_at})` +
        (stillExitingAfterMs === null
          ? '. '
          : `, which was killed or has ended but has not finished exiting after ${stillExitingAfterMs / 1000} s (held up in the kernel, e.g. by storage that does not answer). `) +
        'One server per data directory: stop that process, or give this one another DATA_DIR (or a DATABASE_URL).',
    );
  }
}

/**
 * Takes the data directory for this process: one server per directory, because its embedded
 * database is one process's: two writers on PGlite lose acknowledged writes, and on SQLite the
 * locks (the per-user sandbox limit) and the agents' runs are the process's own. The lock is a file naming the
 * holder; a lock left by a process that is gone (killed, crashed, a zombie its parent has not
 * reaped, or a pid since reused by another program) is taken over. A holder that is still
 * exiting (killed a moment ago) is waited for, briefly. Two processes taking over the same stale
 * lock at once are serialised by a takeover directory, so only one wins.
 */
export async function lockDataDir(dataDir: string, options: LockOptions = {}): Promise<DataDirLock> {
  const exitWaitMs = options.exitWaitMs ?? 5_000;
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const path = join(dataDir, 'server.lock');
  const mine: LockOwner = {
    pid: process.pid,
    host: hostname(),
    process_start: processStart(process.pid),
    started_at: new Date().toISOString(),
  };
  const text = `${JSON.stringify(mine)}\n`;
  for (let attempt = 0; attempt < 50; attempt++) {
    if (await createExclusive(path, text)) return handle(path, text);
    const holder = await readOwner(path);
    if (holder === 'missing') continue;
    if (holder !== 'unreadable') {
      let state = holderState(holder);
      if (state === 'exiting') {
        options.onWaitingForExit?.(holder.pid, exitWaitMs);
        const deadline = Date.now() + exitWaitMs;
        while (state === 'exiting' && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 50));
          state = holderState(holder);
        }
      }
      if (state !== 'gone') throw new DataDirInUseError(dataDir, holder, state === 'exiting' ? exitWaitMs : null);
    }
    await takeOver(path, holder === 'unreadable' ? null : holder);
  }
  throw new Error(
    `Could not lock the data directory ${dataDir}: its lock file ${path} keeps changing; is another server starting there?`,
  );
}

function handle(path: string, text: string): DataDirLock {
  let released = false;
  return {
    path,
    async release() {
      if (released) return;
      released = true;
      const current = await readFile(path, 'utf8').catch(() => null);
      if (current === text) await unlink(path).catch(() => {});
    },
  };
}

/** Writes the whole file elsewhere, then links it into place: the lock appears complete or not at all. */
async function createExclusive(path: string, text: string): Promise<boolean> {
  const temporary = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}`;
  const file = await open(temporary, 'wx', 0o600);
  try {
    await file.writeFile(text);
    await file.sync();
  } finally {
    await file.close();
  }
  try {
    await link(temporary, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    await unlink(temporary).catch(() => {});
  }
}

async function readOwner(path: string): Promise<LockOwner | 'missing' | 'unreadable'> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
    throw error;
  }
  try {
    const owner = JSON.parse(text) as Partial<LockOwner>;
    return typeof owner.pid === 'number' && typeof owner.host === 'string'
      ? {
          pid: owner.pid,
          host: owner.host,
          process_start: owner.process_start ?? null,
          started_at: owner.started_at ?? 'at an unknown time',
        }
      : 'unreadable';
  } catch {
    return 'unreadable';
  }
}

/**
 * Whether the holder still runs. Only a process on this host can be checked; one on another
 * host (a shared network directory) counts as alive, so nothing is taken from it. Where there is
 * no /proc to ask, a process that exists counts as alive, zombie or not.
 */
function holderState(holder: LockOwner): 'alive' | 'exiting' | 'gone' {
  if (holder.host !== hostname()) return 'alive';
  if (holder.pid === process.pid || !exists(holder.pid)) return 'gone';
  // The pid is there; is it still the holder, or a new process that got its number?
  const start = processStart(holder.pid);
  if (holder.process_start !== null && start !== null && start !== holder.process_start) return 'gone';
  return threadsState(holder.pid) ?? (exists(holder.pid) ? 'alive' : 'gone');
}

/** Whether the pid names a process (a zombie too); EPERM: one of another user. */
function exists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** PF_EXITING in a task's flags (field 9 of /proc/<pid>/stat): the task is in the kernel's exit. */
const PF_EXITING = 0x4;
/** SIGKILL (9) in a /proc/<pid>/status signal mask. */
const SIGKILL_BIT = 1 << 8;

/**
 * What Linux says of the process's threads; null where /proc cannot tell. 'gone' when every one
 * is a zombie or dead: the kernel closed the process's files when it died, and a zombie waits
 * only for its parent to read its exit status, which a parent (or a container's PID 1) may never
 * do. 'exiting' when one is in its exit or has a kill pending: it runs no more code of its own,
 * but the write of a thread still in a system call may land yet. Each thread, not only the
 * first: that one is a zombie as soon as it has exited, while the others may still be exiting.
 */
function threadsState(pid: number): 'alive' | 'exiting' | 'gone' | null {
  let threads: string[];
  try {
    threads = readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  let live = 0;
  let exiting = false;
  for (const thread of threads) {
    let stat: string;
    let status: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${thread}/stat`, 'utf8');
      status = readFileSync(`/proc/${pid}/task/${thread}/status`, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'ESRCH')
        continue; // Gone meanwhile.
      return null;
    }
    // The command name (field 2) is in parentheses and may contain spaces; fields 3 (state) and 9 (flags) follow.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const state = fields[0] ?? '';
    if (state === 'Z' || state === 'X' || state === 'x') continue;
    live++;
    const pending = [...status.matchAll(/^(?:SigPnd|ShdPnd):\s*([0-9a-f]+)$/gm)].some(
      (m) => (parseInt((m[1] ?? '0').slice(-8), 16) & SIGKILL_BIT) !== 0,
    );
    if ((Number(fields[6]) & PF_EXITING) !== 0 || pending) exiting = true;
  }
  if (threads.length === 0) return null;
  return live === 0 ? 'gone' : exiting ? 'exiting' : 'alive';
}

/** Removes a stale lock, unless someone else took it over first. */
async function takeOver(path: string, stale: LockOwner | null): Promise<void> {
  const guard = `${path}.takeover`;
  try {
    await mkdir(guard);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    // Another process is taking over; a guard left by one that died while doing so is old.
    const age = Date.now() - (await stat(guard).catch(() => ({ mtimeMs: Date.now() }))).mtimeMs;
    if (age > 10_000) await rmdir(guard).catch(() => {});
    await new Promise((r) => setTimeout(r, 50));
    return;
  }
  try {
    const current = await readOwner(path);
    const unchanged =
      current === 'unreadable'
        ? stale === null
        : current !== 'missing' &&
          stale !== null &&
          current.pid === stale.pid &&
          current.started_at === stale.started_at;
    if (unchanged) await unlink(path).catch(() => {});
  } finally {
    await rmdir(guard).catch(() => {});
  }
}

/** Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); null where there is no /proc. */
function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may contain spaces.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}
