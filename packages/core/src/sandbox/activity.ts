import { ok, type Result } from 'neverthrow';
import { millisOf } from '../clock.js';
import type { SandboxRecord } from './schema.js';
import type { SandboxServiceDeps } from './service-contract.js';

/**
 * When each sandbox was last used. Kept here for this process and, while idle pausing (either
 * kind) is on, also written to the sandbox's record (`last_active_at`), at most once per
 * `writeEveryMs` per sandbox: the process that pauses idle sandboxes may not be the one whose
 * agent used it.
 */
export function createActivity({ sandboxes, clock, logger, background, options }: Pick<SandboxServiceDeps, 'sandboxes' | 'clock' | 'logger' | 'background' | 'options'>) {
  const idleAfter = shortestIdleMs(options);
  const persisted = idleAfter !== null;
  /** A tenth of the (shorter) idle time, at most a minute: how early another process may see a use. */
  const writeEveryMs = persisted ? Math.min(60_000, idleAfter / 10) : Number.POSITIVE_INFINITY;
  const lastUsed = new Map<string, number>();
  const lastWritten = new Map<string, number>();

  const write = (userId: string, sandboxId: string, at: number) => {
    lastWritten.set(sandboxId, at);
    background.spawn(`record activity of sandbox ${sandboxId}`, async () => {
      const stamp = new Date(at).toISOString();
      const written = await sandboxes.update(userId, sandboxId, (current): Result<SandboxRecord, never> =>
        ok((current.last_active_at ?? '') >= stamp ? current : { ...current, last_active_at: stamp }),
      );
      if (written.isErr()) {
        lastWritten.delete(sandboxId);
        logger.warn({ sandboxId, operation: written.error.operation }, 'could not record that a sandbox was used');
      }
    });
  };

  return {
    /** Notes a use now that the record's own update already shows (a start, a resume): nothing to write. */
    markUsed(sandboxId: string): void {
      lastUsed.set(sandboxId, millisOf(clock));
    },
    /** Notes a use now. */
    touch(userId: string, sandboxId: string): void {
      const now = millisOf(clock);
      lastUsed.set(sandboxId, now);
      if (persisted && now - (lastWritten.get(sandboxId) ?? Number.NEGATIVE_INFINITY) >= writeEveryMs) write(userId, sandboxId, now);
    },
    /** The latest use anyone recorded, or the last change of the record. */
    lastActiveAt(record: SandboxRecord): number {
      const recorded = record.last_active_at ? Date.parse(record.last_active_at) : 0;
      return Math.max(lastUsed.get(record.id) ?? 0, recorded, Date.parse(record.updated_at));
    },
  };
}

export type Activity = ReturnType<typeof createActivity>;

/** The default of `idlePauseFinishedAfterMs`: a sandbox whose conversations finished is paused 5 minutes after. */
const DEFAULT_FINISHED_IDLE_PAUSE_MS = 5 * 60_000;

/** `idlePauseFinishedAfterMs` with its default; 0 when off. */
export const finishedIdleAfterMs = (options: SandboxServiceDeps['options']): number => Math.max(0, options?.idlePauseFinishedAfterMs ?? DEFAULT_FINISHED_IDLE_PAUSE_MS);

/** The shorter of the two idle times that are on, or null when neither is. */
export function shortestIdleMs(options: SandboxServiceDeps['options']): number | null {
  const on = [options?.idlePauseAfterMs ?? 0, finishedIdleAfterMs(options)].filter((ms) => ms > 0);
  return on.length > 0 ? Math.min(...on) : null;
}
