/**
 * Holds a process in the kernel with the cgroup v1 freezer, so a test can see a process that was
 * killed and has not finished exiting: a frozen process that gets SIGKILL stays, with the kill
 * pending, until it is thawed (cgroup v2's freezer lets a kill through, so it cannot do this).
 * Linux with the v1 freezer mounted, as root.
 */
import { accessSync, constants, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';

const ROOT = '/sys/fs/cgroup/freezer';

export const freezerAvailable = (() => {
  try {
    accessSync(`${ROOT}/cgroup.procs`, constants.W_OK);
    return true;
  } catch {
    return false;
  }
})();

export interface Frozen {
  /** Lets the process run again (a pending kill then ends it). Idempotent. */
  thaw(): void;
  /** Thaws the process, moves it back if it is still there, and removes the cgroup. */
  remove(): Promise<void>;
}

/** Moves the process (every thread) into a cgroup of its own and freezes it; resolves once it is frozen. */
export async function freeze(pid: number): Promise<Frozen> {
  const dir = `${ROOT}/acs-test-${process.pid}-${pid}`;
  mkdirSync(dir);
  const frozen: Frozen = {
    thaw: () => writeFileSync(`${dir}/freezer.state`, 'THAWED'),
    async remove() {
      frozen.thaw();
      // Whatever is still in it goes back to the root cgroup; an exit may take a moment to leave it.
      for (let attempt = 0; ; attempt++) {
        for (const left of readFileSync(`${dir}/cgroup.procs`, 'utf8').split('\n').filter(Boolean)) {
          try {
            writeFileSync(`${ROOT}/cgroup.procs`, left);
          } catch {
            // Gone meanwhile.
          }
        }
        try {
          rmdirSync(dir);
          return;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EBUSY' || attempt >= 100) throw error;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    },
  };
  try {
    writeFileSync(`${dir}/cgroup.procs`, String(pid));
    writeFileSync(`${dir}/freezer.state`, 'FROZEN');
    for (let attempt = 0; readFileSync(`${dir}/freezer.state`, 'utf8').trim() !== 'FROZEN'; attempt++) {
      if (attempt >= 100) throw new Error(`process ${pid} did not freeze within 5 s`);
      await new Promise((r) => setTimeout(r, 50));
    }
  } catch (error) {
    await frozen.remove().catch(() => {});
    throw error;
  }
  return frozen;
}
