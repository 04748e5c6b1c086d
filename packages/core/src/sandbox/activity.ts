import { ok, type Result } from 'neverthrow';
import type { BackgroundTasks } from '../background.js';
import { millisOf, type Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { SandboxRecord } from './schema.js';
import type { SandboxServiceDeps } from './service-contract.js';
import type { SandboxStore } from './store.js';

export interface ActivityDeps {
  sandboxes: SandboxStore;
  clock: Clock;
  logger: Logger;
  background: BackgroundTasks;
  /** The idle times: while either is on, uses are written to the records too. */
  options: SandboxServiceDeps['options'];
}

/**
 * When each sandbox was last used. Kept here for this process and, while idle pausing (either
 * kind) is on, also written to the sandbox's record (`last_active_at`), at most once per
 * `writeEveryMs` per sandbox: the process that pauses idle sandboxes may not be the one whose
 * agent used it.
 */
export interface Activity {
  /** Notes a use now that the record's own update already shows (a start, a resume): nothing to write. */
  markUsed(sandboxId: string): void;
  /** Notes a use now. */
  touch(userId: string, sandboxId: string): void;
  /** The latest use anyone recorded, or the last change of the record. */
  lastActiveAt(record: SandboxRecord): number;
}

/** What this process knows of uses: when each sandbox was last used, and last written to its record. */
interface Uses {
  /** Whether uses are written to the records (an idle pause is on). */
  readonly persisted: boolean;
  /** A tenth of the (shorter) idle time, at most a minute: how early another process may see a use; infinite when nothing is written. */
  readonly writeEveryMs: number;
  readonly lastUsed: Map<string, number>;
  readonly lastWritten: Map<string, number>;
}

export function createActivity(deps: ActivityDeps): Activity {
  const idleAfter = shortestIdleMs(deps.options);
  const uses: Uses = {
    persisted: idleAfter !== null,
    writeEveryMs: idleAfter !== null ? Math.min(60_000, idleAfter / 10) : Number.POSITIVE_INFINITY,
    lastUsed: new Map(),
    lastWritten: new Map(),
  };
  return {
    markUsed: (sandboxId) => void uses.lastUsed.set(sandboxId, millisOf(deps.clock)),
    touch: (userId, sandboxId) => touch(deps, uses, userId, sandboxId),
    lastActiveAt: (record) => {
      const recorded = record.last_active_at ? Date.parse(record.last_active_at) : 0;
      return Math.max(uses.lastUsed.get(record.id) ?? 0, recorded, Date.parse(record.updated_at));
    },
  };
}

function touch(deps: ActivityDeps, uses: Uses, userId: string, sandboxId: string): void {
  const now = millisOf(deps.clock);
  uses.lastUsed.set(sandboxId, now);
  if (uses.persisted && now - (uses.lastWritten.get(sandboxId) ?? Number.NEGATIVE_INFINITY) >= uses.writeEveryMs)
    writeUse(deps, uses, userId, sandboxId, now);
}

function writeUse(deps: ActivityDeps, uses: Uses, userId: string, sandboxId: string, at: number): void {
  uses.lastWritten.set(sandboxId, at);
  deps.background.spawn(`record activity of sandbox ${sandboxId}`, async () => {
    const stamp = new Date(at).toISOString();
    const written = await deps.sandboxes.update(userId, sandboxId, (current): Result<SandboxRecord, never> =>
      ok((current.last_active_at ?? '') >= stamp ? current : { ...current, last_active_at: stamp }),
    );
    if (written.isErr()) {
      uses.lastWritten.delete(sandboxId);
      deps.logger.warn({ sandboxId, operation: written.error.operation }, 'could not record that a sandbox was used');
    }
  });
}

/** The default of `idlePauseFinishedAfterMs`: a sandbox whose conversations finished is paused 5 minutes after. */
const DEFAULT_FINISHED_IDLE_PAUSE_MS = 5 * 60_000;

/** `idlePauseFinishedAfterMs` with its default; 0 when off. */
export const finishedIdleAfterMs = (options: SandboxServiceDeps['options']): number =>
  Math.max(0, options?.idlePauseFinishedAfterMs ?? DEFAULT_FINISHED_IDLE_PAUSE_MS);

/** The shorter of the two idle times that are on, or null when neither is. */
export function shortestIdleMs(options: SandboxServiceDeps['options']): number | null {
  const on = [options?.idlePauseAfterMs ?? 0, finishedIdleAfterMs(options)].filter((ms) => ms > 0);
  return on.length > 0 ? Math.min(...on) : null;
}
