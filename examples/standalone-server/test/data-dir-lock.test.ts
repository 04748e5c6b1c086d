/** The data directory's lock against holders that are real processes: alive, or killed and held in their exit. */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { lockDataDir } from '../src/data-dir-lock.js';
import { freeze, freezerAvailable } from './freezer.js';
import { freshDataDir } from './process.js';

interface Holder {
  child: ChildProcess;
  pid: number;
  exited: Promise<unknown>;
}
const holders: Holder[] = [];
afterEach(async () => {
  for (const holder of holders.splice(0)) {
    holder.child.kill('SIGKILL');
    await holder.exited;
  }
});

/** A process that holds the directory: the lock file names it, as one the server wrote. */
async function holdWithAnotherProcess(dataDir: string): Promise<Holder> {
  const child = spawn('sleep', ['600'], { stdio: 'ignore' });
  const holder = { child, pid: 0, exited: once(child, 'exit') };
  holders.push(holder);
  await once(child, 'spawn');
  holder.pid = child.pid!;
  const stat = readFileSync(`/proc/${holder.pid}/stat`, 'utf8');
  const processStart = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  writeFileSync(
    join(dataDir, 'server.lock'),
    JSON.stringify({
      pid: holder.pid,
      host: hostname(),
      process_start: processStart,
      started_at: '2026-01-01T00:00:00.000Z',
    }),
  );
  return holder;
}

describe('the data directory lock', () => {
  it('refuses a live holder at once, naming it, without waiting', async () => {
    const dataDir = freshDataDir();
    const holder = await holdWithAnotherProcess(dataDir);
    const started = Date.now();
    await expect(lockDataDir(dataDir, { exitWaitMs: 5_000 })).rejects.toThrow(
      `The data directory ${dataDir} is in use by process ${holder.pid} (started 2026-01-01T00:00:00.000Z). One server`,
    );
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it.skipIf(!freezerAvailable)(
    'refuses a holder that was killed but has not finished exiting within the wait, naming it (held in its exit by the cgroup v1 freezer; needs root)',
    async () => {
      const dataDir = freshDataDir();
      const holder = await holdWithAnotherProcess(dataDir);
      const frozen = await freeze(holder.pid);
      try {
        holder.child.kill('SIGKILL');
        const waited: number[] = [];
        const started = Date.now();
        await expect(
          lockDataDir(dataDir, { exitWaitMs: 1_000, onWaitingForExit: (pid) => waited.push(pid) }),
        ).rejects.toThrow(
          `is in use by process ${holder.pid} (started 2026-01-01T00:00:00.000Z), which was killed or has ended but has not finished exiting after 1 s`,
        );
        expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
        expect(waited).toEqual([holder.pid]);
      } finally {
        await frozen.remove();
      }
      // Once it has exited, the directory is free.
      await holder.exited;
      const lock = await lockDataDir(dataDir);
      await lock.release();
    },
  );
});
