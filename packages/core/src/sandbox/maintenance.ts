import { err, ok, type Result, type ResultAsync } from 'neverthrow';
import type { BackgroundTasks } from '../background.js';
import { millisOf, type Clock } from '../clock.js';
import type { Locks } from '../locks.js';
import type { Logger } from '../logger.js';
import { resultAsync } from '../result.js';
import type { StoreFailure } from '../store-failure.js';
import { finishedIdleAfterMs, shortestIdleMs, type Activity } from './activity.js';
import type { Observations } from './observations.js';
import type { Resting } from './resting.js';
import { runtimeFailure, type RuntimeSandboxSummary, type SandboxRuntime } from './runtime.js';
import { POOLED_SANDBOX_OWNER, type SandboxRecord } from './schema.js';
import { isSandboxLost, statusAfterObservation } from './state.js';
import type { ReconcileReport, SandboxServiceDeps, SandboxServiceError } from './service-contract.js';
import type { Startups } from './startups.js';
import type { SandboxSpecCatalog, SandboxStore } from './store.js';

/** The role whose holder runs the maintenance rounds when several processes share a store. */
const MAINTENANCE_ROLE = 'sandbox maintenance';

export interface MaintenanceDeps {
  sandboxes: SandboxStore;
  specs: SandboxSpecCatalog;
  runtime: SandboxRuntime;
  clock: Clock;
  logger: Logger;
  background: BackgroundTasks;
  /** The idle times, `maintenanceIntervalMs`, `reconcileIntervalMs`. */
  options: SandboxServiceDeps['options'];
  /** Who leads maintenance among the processes sharing the store. */
  locks: Locks;
  /** This process's name when it asks to lead. */
  replica: string;
  observations: Observations;
  startups: Startups;
  activity: Activity;
  resting: Resting;
  /** This installation's id, read once (only its sandboxes are listed). */
  installation: () => ResultAsync<string, StoreFailure>;
  /** Pauses one sandbox, `reason` as its status detail (the service's pause). */
  pauseBecause: (userId: string, id: string, reason: string) => ResultAsync<void, SandboxServiceError<'pause'>>;
  /** A pool-labelled container's owner as the store names it, or 'removed'/null when no live record has it (pool.ts). */
  attributePooled: (summary: RuntimeSandboxSummary) => Promise<RuntimeSandboxSummary | 'removed' | null>;
}

/**
 * Bringing the records in line with the runtime (reconcile: statuses, adoption, leftovers of
 * deleted sandboxes) and pausing sandboxes nobody used for a while (or whose conversations all
 * finished or wait for the user, for a shorter while). On a timer these run in one
 * process only: the one that leads `MAINTENANCE_ROLE` through the `Locks` port.
 * Another process's start-up in progress is left alone (`startups.startingElsewhere`).
 */
export interface Maintenance {
  pauseIdle(): Promise<number>;
  reconcile(): ResultAsync<ReconcileReport, SandboxServiceError<'reconcile'>>;
  /** Stops the timer and gives up leading. */
  stop(): void;
}

/** The timer's rounds in this process. */
interface Rounds {
  readonly reconcileEveryMs: number;
  lastReconciled: number;
  /** A slow round (a reconcile over a slow engine) is not overlapped by the next tick's. */
  inRound: boolean;
}

export function createMaintenance(deps: MaintenanceDeps): Maintenance {
  const rounds: Rounds = {
    reconcileEveryMs: deps.options?.reconcileIntervalMs ?? 60_000,
    lastReconciled: millisOf(deps.clock),
    inRound: false,
  };
  const shortestIdle = shortestIdleMs(deps.options);
  const roundEveryMs =
    deps.options?.maintenanceIntervalMs ??
    Math.min(
      60_000,
      rounds.reconcileEveryMs > 0 ? rounds.reconcileEveryMs : Number.POSITIVE_INFINITY,
      shortestIdle !== null ? Math.max(10, shortestIdle / 4) : Number.POSITIVE_INFINITY,
    );
  // Nothing to maintain (no idle pause, no periodic reconcile): no timer, and no role to hold.
  const timer =
    shortestIdle !== null || rounds.reconcileEveryMs > 0
      ? deps.clock.every(roundEveryMs, () => deps.background.spawn('sandbox maintenance', () => round(deps, rounds)))
      : null;
  return {
    pauseIdle: () => pauseIdle(deps),
    reconcile: () => resultAsync(reconcile(deps)),
    stop: () => {
      timer?.cancel();
      // Resolves, never rejects; a role it could not give up ends with the process's database session anyway.
      void deps.locks.resign(MAINTENANCE_ROLE, deps.replica);
    },
  };
}

const describe = (ms: number) => (ms >= 60_000 ? `${Math.round(ms / 60_000)} min` : `${Math.round(ms / 1000)} s`);

/** The running sandboxes to pause now, each with why: idle past `idlePauseAfterMs`, or resting past `idlePauseFinishedAfterMs`. */
async function idleNow(
  deps: MaintenanceDeps,
  running: readonly SandboxRecord[],
): Promise<{ record: SandboxRecord; reason: string }[]> {
  const idleAfter = deps.options?.idlePauseAfterMs;
  const finishedIdleAfter = finishedIdleAfterMs(deps.options);
  const now = millisOf(deps.clock);
  const due: { record: SandboxRecord; reason: string }[] = [];
  const mayRest: SandboxRecord[] = [];
  for (const record of running) {
    // Pooled sandboxes wait, ready, for a claim; a claimed one's idle time starts at the claim.
    if (deps.startups.inHand(record.id) || record.user_id === POOLED_SANDBOX_OWNER) continue;
    const idleFor = now - deps.activity.lastActiveAt(record);
    if (idleAfter !== undefined && idleAfter > 0 && idleFor >= idleAfter)
      due.push({ record, reason: `paused after ${describe(idleAfter)} without use` });
    // Only a sandbox unused that long can have rested that long: the others need no look at their conversations.
    else if (finishedIdleAfter > 0 && idleFor >= finishedIdleAfter) mayRest.push(record);
  }
  if (mayRest.length === 0) return due;
  const rested = await deps.resting.restingAmong(mayRest);
  if (rested.isErr()) {
    deps.logger.warn(
      { operation: rested.error.operation, errorClass: rested.error.errorClass },
      'could not look at the conversations of idle sandboxes',
    );
    return due;
  }
  for (const { record, idleSince } of rested.value) {
    if (now - idleSince >= finishedIdleAfter)
      due.push({
        record,
        reason: `paused ${describe(finishedIdleAfter)} after its conversations finished or began to wait for you, without use since`,
      });
  }
  return due;
}

async function pauseIdle(deps: MaintenanceDeps): Promise<number> {
  const idleAfter = deps.options?.idlePauseAfterMs;
  if (!(idleAfter !== undefined && idleAfter > 0) && finishedIdleAfterMs(deps.options) <= 0) return 0;
  const running = await deps.sandboxes.listByStatus(null, ['RUNNING']);
  if (running.isErr()) {
    deps.logger.warn(
      { operation: running.error.operation, errorClass: running.error.errorClass },
      'could not look for idle sandboxes',
    );
    return 0;
  }
  let paused = 0;
  for (const { record, reason } of await idleNow(deps, running.value)) {
    const result = await deps.pauseBecause(record.user_id, record.id, reason);
    if (result.isErr()) {
      deps.logger.warn({ sandboxId: record.id, error: result.error.type }, 'could not pause an idle sandbox');
      continue;
    }
    paused++;
  }
  if (paused > 0) deps.logger.info({ paused }, 'paused idle sandboxes');
  return paused;
}

/** Records a sandbox the runtime holds without a record (e.g. made by a process that died before storing it). */
async function adopt(deps: MaintenanceDeps, summary: RuntimeSandboxSummary): Promise<boolean> {
  const observed = await deps.runtime.inspect(summary.sandbox_id);
  const spec = (await deps.specs.get(summary.spec_id)).unwrapOr(null) ?? {
    id: summary.spec_id,
    image: summary.image,
    command: null,
    working_dir: summary.working_dir,
    initial_env: {},
    description: 'Adopted: found in the runtime without a record',
    created_at: summary.created_at,
  };
  const state = observed.isOk()
    ? observed.value
    : { state: 'error' as const, detail: observed.error.message, exposed_urls: [] };
  const inserted = await deps.sandboxes.insert({
    id: summary.sandbox_id,
    user_id: summary.user_id,
    sandbox_spec_id: summary.spec_id,
    spec,
    status: statusAfterObservation('STARTING', state.state),
    status_detail: state.detail,
    exposed_urls: state.exposed_urls,
    created_at: summary.created_at,
    updated_at: deps.clock.now(),
  });
  return inserted.isOk();
}

async function reconcile(deps: MaintenanceDeps): Promise<Result<ReconcileReport, SandboxServiceError<'reconcile'>>> {
  const [installationOfRecords, stored] = await Promise.all([
    deps.installation(),
    deps.sandboxes.listByStatus(null, ['STARTING', 'RUNNING', 'PAUSED']),
  ]);
  if (installationOfRecords.isErr()) return err(installationOfRecords.error);
  if (stored.isErr()) return err(stored.error);
  const held = await deps.runtime.list(installationOfRecords.value);
  if (held.isErr()) return err(runtimeFailure('(all)', 'list')(held.error));
  const report: ReconcileReport = { checked: 0, changed: 0, adopted: 0, removed: 0 };
  await refreshStored(deps, stored.value, report);
  await takeInHeld(deps, held.value, report);
  if (report.changed + report.adopted + report.removed > 0)
    deps.logger.info({ ...report }, 'reconciled sandboxes with the runtime');
  return ok(report);
}

/** Gives each stored sandbox the status its container has now (those this process is not bringing up). */
async function refreshStored(
  deps: MaintenanceDeps,
  stored: readonly SandboxRecord[],
  report: ReconcileReport,
): Promise<void> {
  for (const record of stored) {
    if (deps.startups.inHand(record.id)) continue;
    report.checked++;
    if (record.location) deps.runtime.locate?.(record.id, record.location);
    const observed = await deps.runtime.inspect(record.id);
    if (observed.isErr()) continue;
    if (deps.startups.startingElsewhere(record, observed.value)) continue;
    const updated = (
      await deps.observations.applyObservation(record.user_id, record.id, observed.value, record)
    ).unwrapOr(null);
    if (updated && updated.status !== record.status) report.changed++;
    if (updated?.status === 'STARTING')
      deps.startups.track(record.id, () => deps.startups.awaitRunning(record.user_id, record.id));
  }
}

/** What the runtime holds: leftovers of deleted sandboxes removed, lost ones that came back updated, unknown ones adopted. */
async function takeInHeld(
  deps: MaintenanceDeps,
  held: readonly RuntimeSandboxSummary[],
  report: ReconcileReport,
): Promise<void> {
  for (const listed of held) {
    // The pool's label stays on a claimed container: the store says whose it is.
    const summary = listed.user_id === POOLED_SANDBOX_OWNER ? await deps.attributePooled(listed) : listed;
    if (summary === 'removed') report.removed++;
    if (summary === 'removed' || summary === null) continue;
    const known = (await deps.sandboxes.get(summary.user_id, summary.sandbox_id)).unwrapOr(undefined);
    if (known === undefined) continue;
    if (known?.status === 'DELETED') {
      if ((await deps.runtime.delete(summary.sandbox_id)).isOk()) report.removed++;
      continue;
    }
    if (known && isSandboxLost(known.status)) {
      // Marked lost while its engine did not answer, and there again now: it gets the
      // status its container has (still an error if the container failed).
      const observed = await deps.runtime.inspect(summary.sandbox_id);
      if (observed.isErr() || observed.value.state === 'error' || observed.value.state === 'missing') continue;
      const back = (await deps.observations.applyObservation(known.user_id, known.id, observed.value)).unwrapOr(null);
      if (back && back.status !== known.status) report.changed++;
      continue;
    }
    if (known) continue;
    if (await adopt(deps, summary)) report.adopted++;
  }
}

/** One maintenance round on the timer: only in the leading process, never two at once. */
async function round(deps: MaintenanceDeps, rounds: Rounds): Promise<void> {
  if (rounds.inRound) return;
  rounds.inRound = true;
  try {
    await leadRound(deps, rounds);
  } finally {
    rounds.inRound = false;
  }
}

async function leadRound(deps: MaintenanceDeps, rounds: Rounds): Promise<void> {
  const leads = await deps.locks.lead(MAINTENANCE_ROLE, deps.replica);
  if (leads.isErr()) {
    deps.logger.warn(
      { operation: leads.error.operation },
      'could not tell which process leads sandbox maintenance; skipping this round',
    );
    return;
  }
  if (!leads.value) return;
  await pauseIdle(deps);
  if (rounds.reconcileEveryMs > 0 && millisOf(deps.clock) - rounds.lastReconciled >= rounds.reconcileEveryMs) {
    rounds.lastReconciled = millisOf(deps.clock);
    const reconciled = await reconcile(deps);
    if (reconciled.isErr())
      deps.logger.warn({ error: reconciled.error.type }, 'periodic reconcile failed; trying again next time');
  }
}
