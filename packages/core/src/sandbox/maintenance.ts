import { ResultAsync } from 'neverthrow';
import { millisOf } from '../clock.js';
import type { StoreFailure } from '../store-failure.js';
import { finishedIdleAfterMs, shortestIdleMs, type Activity } from './activity.js';
import type { Observations } from './observations.js';
import type { Resting } from './resting.js';
import { runtimeFailure, type RuntimeSandboxSummary } from './runtime.js';
import type { SandboxRecord } from './schema.js';
import { isSandboxLost, statusAfterObservation } from './state.js';
import type { ReconcileReport, SandboxServiceDeps, SandboxServiceError } from './service-contract.js';
import type { Startups } from './startups.js';

/** The role whose holder runs the maintenance rounds when several processes share a store. */
const MAINTENANCE_ROLE = 'sandbox maintenance';

/**
 * Bringing the records in line with the runtime (reconcile: statuses, adoption, leftovers of
 * deleted sandboxes) and pausing sandboxes nobody used for a while (or whose conversations all
 * finished or wait for the user, for a shorter while). On a timer these run in one
 * process only: the one that leads `MAINTENANCE_ROLE` through the `Locks` port.
 * Another process's start-up in progress is left alone (`startups.startingElsewhere`).
 */
export function createMaintenance(
  deps: Pick<SandboxServiceDeps, 'sandboxes' | 'specs' | 'runtime' | 'clock' | 'logger' | 'background' | 'options' | 'locks' | 'replica'>,
  { applyObservation }: Observations,
  startups: Startups,
  activity: Activity,
  installation: () => ResultAsync<string, StoreFailure>,
  resting: Resting,
  pauseBecause: (userId: string, id: string, reason: string) => ResultAsync<void, SandboxServiceError<'pause'>>,
) {
  const { sandboxes, specs, runtime, clock, logger, background, options, locks, replica } = deps;
  const idleAfter = options?.idlePauseAfterMs;
  const finishedIdleAfter = finishedIdleAfterMs(options);

  const describe = (ms: number) => (ms >= 60_000 ? `${Math.round(ms / 60_000)} min` : `${Math.round(ms / 1000)} s`);

  /** The running sandboxes to pause now, each with why: idle past `idlePauseAfterMs`, or resting past `idlePauseFinishedAfterMs`. */
  const idleNow = async (running: readonly SandboxRecord[]): Promise<{ record: SandboxRecord; reason: string }[]> => {
    const now = millisOf(clock);
    const due: { record: SandboxRecord; reason: string }[] = [];
    const mayRest: SandboxRecord[] = [];
    for (const record of running) {
      if (startups.inHand(record.id)) continue;
      const idleFor = now - activity.lastActiveAt(record);
      if (idleAfter !== undefined && idleAfter > 0 && idleFor >= idleAfter) due.push({ record, reason: `paused after ${describe(idleAfter)} without use` });
      // Only a sandbox unused that long can have rested that long: the others need no look at their conversations.
      else if (finishedIdleAfter > 0 && idleFor >= finishedIdleAfter) mayRest.push(record);
    }
    if (mayRest.length === 0) return due;
    const rested = await resting.restingAmong(mayRest);
    if (rested.isErr()) {
      logger.warn({ operation: rested.error.operation, errorClass: rested.error.errorClass }, 'could not look at the conversations of idle sandboxes');
      return due;
    }
    for (const { record, idleSince } of rested.value) {
      if (now - idleSince >= finishedIdleAfter) due.push({ record, reason: `paused ${describe(finishedIdleAfter)} after its conversations finished or began to wait for you, without use since` });
    }
    return due;
  };

  const pauseIdle = async (): Promise<number> => {
    if (!(idleAfter !== undefined && idleAfter > 0) && finishedIdleAfter <= 0) return 0;
    const running = await sandboxes.listByStatus(null, ['RUNNING']);
    if (running.isErr()) {
      logger.warn({ operation: running.error.operation, errorClass: running.error.errorClass }, 'could not look for idle sandboxes');
      return 0;
    }
    let paused = 0;
    for (const { record, reason } of await idleNow(running.value)) {
      const result = await pauseBecause(record.user_id, record.id, reason);
      if (result.isErr()) {
        logger.warn({ sandboxId: record.id, error: result.error.type }, 'could not pause an idle sandbox');
        continue;
      }
      paused++;
    }
    if (paused > 0) logger.info({ paused }, 'paused idle sandboxes');
    return paused;
  };

  /** Records a sandbox the runtime holds without a record (e.g. made by a process that died before storing it). */
  const adopt = async (summary: RuntimeSandboxSummary): Promise<boolean> => {
    const observed = await runtime.inspect(summary.sandbox_id);
    const spec = (await specs.get(summary.spec_id)).unwrapOr(null) ?? {
      id: summary.spec_id,
      image: summary.image,
      command: null,
      working_dir: summary.working_dir,
      initial_env: {},
      description: 'Adopted: found in the runtime without a record',
      created_at: summary.created_at,
    };
    const state = observed.isOk() ? observed.value : { state: 'error' as const, detail: observed.error.message, exposed_urls: [] };
    const inserted = await sandboxes.insert({
      id: summary.sandbox_id,
      user_id: summary.user_id,
      sandbox_spec_id: summary.spec_id,
      spec,
      status: statusAfterObservation('STARTING', state.state),
      status_detail: state.detail,
      exposed_urls: state.exposed_urls,
      created_at: summary.created_at,
      updated_at: clock.now(),
    });
    return inserted.isOk();
  };

  const reconcile = (): ResultAsync<ReconcileReport, SandboxServiceError<'reconcile'>> =>
    ResultAsync.combine([installation(), sandboxes.listByStatus(null, ['STARTING', 'RUNNING', 'PAUSED'])] as const).andThen(([installationOfRecords, stored]) =>
      runtime
        .list(installationOfRecords)
        .mapErr(runtimeFailure('(all)', 'list'))
        .andThen((held) =>
          ResultAsync.fromSafePromise(
            (async (): Promise<ReconcileReport> => {
              const report: ReconcileReport = { checked: 0, changed: 0, adopted: 0, removed: 0 };
              for (const record of stored) {
                if (startups.inHand(record.id)) continue;
                report.checked++;
                if (record.location) runtime.locate?.(record.id, record.location);
                const observed = await runtime.inspect(record.id);
                if (observed.isErr()) continue;
                if (startups.startingElsewhere(record, observed.value)) continue;
                const updated = (await applyObservation(record.user_id, record.id, observed.value)).unwrapOr(null);
                if (updated && updated.status !== record.status) report.changed++;
                if (updated?.status === 'STARTING') startups.track(record.id, () => startups.awaitRunning(record.user_id, record.id));
              }
              for (const summary of held) {
                const known = (await sandboxes.get(summary.user_id, summary.sandbox_id)).unwrapOr(undefined);
                if (known === undefined) continue;
                if (known?.status === 'DELETED') {
                  if ((await runtime.delete(summary.sandbox_id)).isOk()) report.removed++;
                  continue;
                }
                if (known && isSandboxLost(known.status)) {
                  // Marked lost while its engine did not answer, and there again now: it gets the
                  // status its container has (still an error if the container failed).
                  const observed = await runtime.inspect(summary.sandbox_id);
                  if (observed.isErr() || observed.value.state === 'error' || observed.value.state === 'missing') continue;
                  const back = (await applyObservation(known.user_id, known.id, observed.value)).unwrapOr(null);
                  if (back && back.status !== known.status) report.changed++;
                  continue;
                }
                if (known) continue;
                if (await adopt(summary)) report.adopted++;
              }
              if (report.changed + report.adopted + report.removed > 0) logger.info({ ...report }, 'reconciled sandboxes with the runtime');
              return report;
            })(),
          ),
        ),
    );

  /** One maintenance round on the timer: only in the leading process. */
  const reconcileEveryMs = options?.reconcileIntervalMs ?? 60_000;
  let lastReconciled = millisOf(clock);
  /** A slow round (a reconcile over a slow engine) is not overlapped by the next tick's. */
  let inRound = false;
  const round = async () => {
    if (inRound) return;
    inRound = true;
    try {
      await leadRound();
    } finally {
      inRound = false;
    }
  };
  const leadRound = async () => {
    const leads = await locks.lead(MAINTENANCE_ROLE, replica);
    if (leads.isErr()) {
      logger.warn({ operation: leads.error.operation }, 'could not tell which process leads sandbox maintenance; skipping this round');
      return;
    }
    if (!leads.value) return;
    await pauseIdle();
    if (reconcileEveryMs > 0 && millisOf(clock) - lastReconciled >= reconcileEveryMs) {
      lastReconciled = millisOf(clock);
      const reconciled = await reconcile();
      if (reconciled.isErr()) logger.warn({ error: reconciled.error.type }, 'periodic reconcile failed; trying again next time');
    }
  };

  const shortestIdle = shortestIdleMs(options);
  const idlePausing = shortestIdle !== null;
  const roundEveryMs =
    options?.maintenanceIntervalMs ?? Math.min(60_000, reconcileEveryMs > 0 ? reconcileEveryMs : Number.POSITIVE_INFINITY, shortestIdle !== null ? Math.max(10, shortestIdle / 4) : Number.POSITIVE_INFINITY);
  // Nothing to maintain (no idle pause, no periodic reconcile): no timer, and no role to hold.
  const timer = idlePausing || reconcileEveryMs > 0 ? clock.every(roundEveryMs, () => background.spawn('sandbox maintenance', round)) : null;

  return {
    pauseIdle,
    reconcile,
    stop: () => {
      timer?.cancel();
      // Resolves, never rejects; a role it could not give up ends with the process's database session anyway.
      void locks.resign(MAINTENANCE_ROLE, replica);
    },
  };
}
