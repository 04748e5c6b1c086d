import { err, ok, okAsync, type Result, type ResultAsync } from 'neverthrow';
import type { DomainErrorOf } from '../errors.js';
import type { InstallationStore } from '../installation.js';
import { resultAsync } from '../result.js';
import type { StoreFailure } from '../store-failure.js';
import { createActivity, type Activity } from './activity.js';
import { isSandboxKey } from './keys.js';
import { checkImage, specForImage } from './images.js';
import { createMaintenance, type Maintenance } from './maintenance.js';
import { createObservations, type Observations } from './observations.js';
import { createResting } from './resting.js';
import { createRoom, type Room } from './room.js';
import { createSandboxPool, type SandboxPool } from './pool.js';
import { runtimeFailure, type SandboxRuntimeError } from './runtime.js';
import {
  POOLED_SANDBOX_OWNER,
  toSandboxInfo,
  type SandboxInfo,
  type SandboxRecord,
  type SandboxSpec,
} from './schema.js';
import { planSandboxAction, type SandboxAction } from './state.js';
import { createStartups, type Startups } from './startups.js';
import type {
  SandboxEndpoint,
  SandboxReservation,
  SandboxService,
  SandboxServiceDeps,
  SandboxServiceError,
} from './service-contract.js';

export * from './service-contract.js';

/**
 * The sandbox service's parts, each made once from its deps (`createSandboxParts`):
 * - `observations.ts`: a runtime observation written to the record (the one way a status changes);
 * - `startups.ts`: bringing sandboxes up and waiting for them, in this process;
 * - `activity.ts`: when each sandbox was last used (kept in the record for other processes);
 * - `pool.ts`: warm sandboxes a start claims;
 * - `room.ts`: the per-user limit, held under the user's lock (`Locks`, shared by processes),
 *   with `resting.ts` (which sandboxes' conversations have all finished or wait for the user);
 * - `maintenance.ts`: reconcile and idle pause, on a timer in the leading process.
 */
interface SandboxParts {
  readonly deps: SandboxServiceDeps;
  /** This installation's id: read once from the store and kept; a failed read is tried again on the next call. */
  readonly installation: () => ResultAsync<string, StoreFailure>;
  readonly observations: Observations;
  readonly startups: Startups;
  readonly activity: Activity;
  readonly pool: SandboxPool;
  readonly room: Room;
  readonly maintenance: Maintenance;
}

/** The sandbox lifecycle: one entry per operation, each a function below over the parts. */
export function createSandboxService(deps: SandboxServiceDeps): SandboxService {
  const parts = createSandboxParts(deps);
  return {
    resolveSpec: (specId) => resultAsync(resolveSpec(deps, specId)),
    defaultSpec: () => deps.specs.getDefault(),
    specForImage: (image) => specForImage(deps.specs, deps.options?.sandboxImages ?? {}, image),
    checkImage: (image) => checkImage(deps.specs, deps.options?.sandboxImages ?? {}, image),
    reserve: (userId, spec) => resultAsync(reserve(parts, userId, spec)),
    startFromSpec: (userId, spec) => resultAsync(reserve(parts, userId, spec)).map(commitNow),
    start: (userId, specId) => resultAsync(start(parts, userId, specId)),
    get: (userId, id) => resultAsync(get(parts, userId, id)),
    getMany: (userId, idList) => resultAsync(getMany(parts, userId, idList)),
    search: (userId, page) =>
      deps.sandboxes
        .search(userId, page)
        .map((p) => ({ items: p.items.map(toSandboxInfo), next_page_id: p.next_page_id })),
    pause: (userId, id) => resultAsync(pauseBecause(parts, userId, id, null)),
    resume: (userId, id) => resultAsync(resume(parts, userId, id)),
    delete: (userId, id) => resultAsync(deleteSandbox(parts, userId, id)),
    endpoint: (id, name) => resultAsync(endpoint(deps, id, name)),
    runningByKey: (userId, key) =>
      deps.sandboxes
        .listByStatus(userId, ['RUNNING'])
        .map((records) => records.find((record) => isSandboxKey(record, key)) ?? null)
        .map((record) => (record ? toSandboxInfo(record) : null)),
    whenSettled: (userId, id, onProgress) => parts.startups.whenSettled(userId, id, onProgress),
    liveRecords: (userId, idList) => resultAsync(liveRecords(parts, userId, idList)),
    touch: (userId, sandboxId) => parts.activity.touch(userId, sandboxId),
    pauseIdle: () => parts.maintenance.pauseIdle(),
    // After a restart the pool is refilled once the records say what is still there.
    reconcile: () =>
      parts.maintenance.reconcile().map((report) => {
        parts.pool.fillSoon();
        return report;
      }),
    poolStatus: () => parts.pool.status(),
    fillPool: () => parts.pool.fill(),
    stop: () => {
      parts.pool.stop();
      parts.maintenance.stop();
    },
    pauseIfUnused: (userId, id, stillNeeded) => pauseIfUnused(parts, userId, id, stillNeeded),
  };
}

/** Makes each part once, handing each the others it needs (the room and maintenance pause through the service's own pause). */
function createSandboxParts(deps: SandboxServiceDeps): SandboxParts {
  const installation = installationOnce(deps.installation);
  const observations = createObservations({
    sandboxes: deps.sandboxes,
    clock: deps.clock,
    onSandboxGone: deps.onSandboxGone,
  });
  const startups = createStartups({
    sandboxes: deps.sandboxes,
    runtime: deps.runtime,
    clock: deps.clock,
    logger: deps.logger,
    background: deps.background,
    options: deps.options,
    shared: deps.shared,
    observations,
  });
  const activity = createActivity({
    sandboxes: deps.sandboxes,
    clock: deps.clock,
    logger: deps.logger,
    background: deps.background,
    options: deps.options,
  });
  const pause = (userId: string, id: string, reason: string | null) =>
    resultAsync(pauseBecause({ deps, observations }, userId, id, reason));
  const pool = createSandboxPool({
    sandboxes: deps.sandboxes,
    specs: deps.specs,
    runtime: deps.runtime,
    clock: deps.clock,
    ids: deps.ids,
    logger: deps.logger,
    background: deps.background,
    locks: deps.locks,
    options: deps.options,
    resourceFactorOf: deps.resourceFactorOf,
    startups,
    activity,
    installation,
  });
  const resting = createResting({ useOf: deps.useOf, startups, activity });
  const room = createRoom({
    sandboxes: deps.sandboxes,
    locks: deps.locks,
    clock: deps.clock,
    ids: deps.ids,
    logger: deps.logger,
    options: deps.options,
    resourceFactorOf: deps.resourceFactorOf,
    startups,
    activity,
    resting,
    pause,
    claimPooled: (userId, spec) => pool.claim(userId, spec),
  });
  const maintenance = createMaintenance({
    sandboxes: deps.sandboxes,
    specs: deps.specs,
    runtime: deps.runtime,
    clock: deps.clock,
    logger: deps.logger,
    background: deps.background,
    options: deps.options,
    locks: deps.locks,
    replica: deps.replica,
    observations,
    startups,
    activity,
    resting,
    installation,
    pauseBecause: pause,
    attributePooled: (summary) => pool.attribute(summary),
  });
  return { deps, installation, observations, startups, activity, pool, room, maintenance };
}

function installationOnce(store: InstallationStore): () => ResultAsync<string, StoreFailure> {
  let installationId: string | undefined;
  return () =>
    installationId !== undefined
      ? okAsync(installationId)
      : store.identity().map((id) => {
          installationId = id;
          return id;
        });
}

const visible = (record: SandboxRecord | null): record is SandboxRecord =>
  record !== null && record.status !== 'DELETED';

/** Tells a runtime over several engines where the record says the sandbox is, before acting on it. */
function locate(deps: Pick<SandboxServiceDeps, 'runtime'>, record: SandboxRecord): void {
  if (record.location) deps.runtime.locate?.(record.id, record.location);
}

function commitNow(reservation: SandboxReservation): SandboxRecord {
  reservation.commit();
  return reservation.record;
}

async function resolveSpec(
  deps: SandboxServiceDeps,
  specId: string | null | undefined,
): Promise<Result<SandboxSpec, SandboxServiceError<'resolveSpec'>>> {
  if (!specId) return deps.specs.getDefault();
  const spec = await deps.specs.get(specId);
  if (spec.isErr()) return err(spec.error);
  if (!spec.value) return err({ type: 'SandboxSpecNotFound', specId });
  return ok(spec.value);
}

/**
 * The runtime admits one more sandbox. When it answers but is full, the pool gives way (a
 * ready one of the spec is claimed anyway, or one of another spec is removed to make room);
 * when no engine answers, the start is refused as always.
 */
async function admit(parts: SandboxParts, spec: SandboxSpec): Promise<Result<void, SandboxRuntimeError>> {
  const runtime = parts.deps.runtime;
  if (!runtime.admit) return runtime.ping();
  const admitted = await runtime.admit();
  if (admitted.isOk() || admitted.error.type !== 'unavailable') return admitted;
  if ((await runtime.ping()).isErr()) return admitted;
  const room = await parts.pool.yieldRoom(spec);
  if (room === 'claimable') return ok(undefined);
  if (room === 'freed') return runtime.admit();
  return admitted;
}

async function reserve(
  parts: SandboxParts,
  userId: string,
  spec: SandboxSpec,
): Promise<Result<SandboxReservation, SandboxServiceError<'reserve'>>> {
  const admitted = await admit(parts, spec);
  if (admitted.isErr()) return err(runtimeFailure('(new)', 'start')(admitted.error));
  const installation = await parts.installation();
  if (installation.isErr()) return err(installation.error);
  return parts.room.reserve(userId, spec, installation.value);
}

async function start(
  parts: SandboxParts,
  userId: string,
  specId: string | null | undefined,
): Promise<Result<SandboxInfo, SandboxServiceError<'start'>>> {
  const spec = await resolveSpec(parts.deps, specId ?? parts.deps.options?.standaloneSpecId);
  if (spec.isErr()) return err(spec.error);
  const reservation = await reserve(parts, userId, spec.value);
  if (reservation.isErr()) return err(reservation.error);
  return ok(toSandboxInfo(commitNow(reservation.value)));
}

/** Reads the runtime's view of a sandbox this process is not already watching, and stores it. */
async function refresh(parts: SandboxParts, record: SandboxRecord): Promise<Result<SandboxRecord, StoreFailure>> {
  if (parts.startups.inHand(record.id) || !['RUNNING', 'PAUSED', 'STARTING'].includes(record.status)) return ok(record);
  locate(parts.deps, record);
  const inspected = await parts.deps.runtime.inspect(record.id);
  if (inspected.isErr()) {
    parts.deps.logger.warn(
      { sandboxId: record.id, reason: inspected.error.message },
      'could not refresh sandbox status',
    );
    return ok(record);
  }
  // Most reads find nothing new: then there is nothing to write.
  if (
    parts.observations.changesNothing(record, inspected.value) ||
    parts.startups.startingElsewhere(record, inspected.value)
  )
    return ok(record);
  const updated = await parts.observations.applyObservation(record.user_id, record.id, inspected.value, record);
  if (updated.isErr()) return err(updated.error);
  return ok(updated.value ?? record);
}

async function get(
  parts: SandboxParts,
  userId: string,
  id: string,
): Promise<Result<SandboxInfo, SandboxServiceError<'get'>>> {
  const record = await parts.deps.sandboxes.get(userId, id);
  if (record.isErr()) return err(record.error);
  if (!visible(record.value)) return err({ type: 'SandboxNotFound', sandboxId: id });
  const refreshed = await refresh(parts, record.value);
  if (refreshed.isErr()) return err(refreshed.error);
  return ok(toSandboxInfo(refreshed.value));
}

/** Each visible record refreshed (all at once), the others as they are; the first failure in order fails them all. */
async function refreshVisible(
  parts: SandboxParts,
  records: readonly (SandboxRecord | null)[],
): Promise<Result<{ record: SandboxRecord | null; visible: boolean }[], StoreFailure>> {
  const refreshed = await Promise.all(records.map((r) => (visible(r) ? refresh(parts, r) : Promise.resolve(null))));
  const out: { record: SandboxRecord | null; visible: boolean }[] = [];
  for (const [i, r] of refreshed.entries()) {
    if (r === null) out.push({ record: records[i]!, visible: false });
    else if (r.isErr()) return err(r.error);
    else out.push({ record: r.value, visible: true });
  }
  return ok(out);
}

async function getMany(
  parts: SandboxParts,
  userId: string,
  idList: readonly string[],
): Promise<Result<(SandboxInfo | null)[], SandboxServiceError<'getMany'>>> {
  const records = await parts.deps.sandboxes.getMany(userId, idList);
  if (records.isErr()) return err(records.error);
  const refreshed = await refreshVisible(parts, records.value);
  if (refreshed.isErr()) return err(refreshed.error);
  return ok(refreshed.value.map((r) => (r.visible && r.record ? toSandboxInfo(r.record) : null)));
}

async function liveRecords(
  parts: SandboxParts,
  userId: string,
  idList: readonly string[],
): Promise<Result<Map<string, SandboxRecord>, StoreFailure>> {
  const records = await parts.deps.sandboxes.getMany(userId, [...new Set(idList)]);
  if (records.isErr()) return err(records.error);
  const refreshed = await refreshVisible(parts, records.value);
  if (refreshed.isErr()) return err(refreshed.error);
  return ok(new Map(refreshed.value.flatMap(({ record }) => (record !== null ? [[record.id, record] as const] : []))));
}

/** What reading a sandbox to act on it can fail with. */
type ActFailure = DomainErrorOf<'SandboxNotFound' | 'IllegalSandboxTransition' | 'StoreUnavailable'>;

/** The sandbox to act on, or 'noop' when the action is already done; refused when its state forbids the action. */
async function act(
  deps: SandboxServiceDeps,
  userId: string,
  id: string,
  action: SandboxAction,
): Promise<Result<SandboxRecord | 'noop', ActFailure>> {
  const record = await deps.sandboxes.get(userId, id);
  if (record.isErr()) return err(record.error);
  if (!record.value) return err({ type: 'SandboxNotFound', sandboxId: id });
  locate(deps, record.value);
  const plan = planSandboxAction(record.value.status, action);
  if (plan.isErr()) {
    if (record.value.status === 'DELETED' && action === 'delete')
      return err({ type: 'SandboxNotFound', sandboxId: id });
    return err({ type: 'IllegalSandboxTransition', sandboxId: id, from: record.value.status, action });
  }
  return ok(plan.value === 'noop' ? 'noop' : record.value);
}

/** Pauses a sandbox; `reason` is recorded as its status detail in the same write. */
async function pauseBecause(
  parts: Pick<SandboxParts, 'deps' | 'observations'>,
  userId: string,
  id: string,
  reason: string | null,
): Promise<Result<void, SandboxServiceError<'pause'>>> {
  const target = await act(parts.deps, userId, id, 'pause');
  if (target.isErr()) return err(target.error);
  if (target.value === 'noop') return ok(undefined);
  const paused = await parts.deps.runtime.pause(id);
  if (paused.isErr()) return err(runtimeFailure(id, 'pause')(paused.error));
  const applied = await parts.observations.applyObservation(userId, id, {
    ...paused.value,
    detail: paused.value.detail ?? reason,
  });
  if (applied.isErr()) return err(applied.error);
  return ok(undefined);
}

async function resume(
  parts: SandboxParts,
  userId: string,
  id: string,
): Promise<Result<void, SandboxServiceError<'resume'>>> {
  const target = await act(parts.deps, userId, id, 'resume');
  if (target.isErr()) return err(target.error);
  if (target.value === 'noop') return ok(undefined);
  parts.activity.markUsed(id);
  return parts.room.readmit(userId, () => resultAsync(resumeInRuntime(parts, userId, id)));
}

/** The runtime's resume, written to the record; a sandbox that comes back slowly is waited for in the background. */
async function resumeInRuntime(
  parts: SandboxParts,
  userId: string,
  id: string,
): Promise<Result<void, SandboxServiceError<'resume'>>> {
  const resumed = await parts.deps.runtime.resume(id);
  if (resumed.isErr()) return err(runtimeFailure(id, 'resume')(resumed.error));
  const record = await parts.observations.applyObservation(userId, id, resumed.value);
  if (record.isErr()) return err(record.error);
  if (record.value?.status === 'STARTING' && !parts.startups.inHand(id))
    parts.startups.track(id, () => parts.startups.awaitRunning(userId, id));
  return ok(undefined);
}

async function deleteSandbox(
  parts: SandboxParts,
  userId: string,
  id: string,
): Promise<Result<void, SandboxServiceError<'delete'>>> {
  const deps = parts.deps;
  const target = await act(deps, userId, id, 'delete');
  if (target.isErr()) return err(target.error);
  if (target.value === 'noop') return ok(undefined);
  const reachable = await deps.runtime.ping();
  if (reachable.isErr()) return err(runtimeFailure(id, 'delete')(reachable.error));
  // The record goes first: a start still in progress sees DELETED and removes what it made.
  const marked = await deps.sandboxes.update(userId, id, (current): Result<SandboxRecord, never> =>
    ok({
      ...current,
      status: 'DELETED',
      status_detail: 'deleted',
      exposed_urls: [],
      session_api_key: null,
      updated_at: deps.clock.now(),
    }),
  );
  if (marked.isErr()) return err(marked.error);
  if (deps.onSandboxGone) await deps.onSandboxGone(userId, id, 'sandbox deleted');
  const removed = await deps.runtime.delete(id);
  if (removed.isErr()) parts.startups.removeInBackground(id, `the first attempt failed: ${removed.error.message}`);
  return ok(undefined);
}

async function endpoint(
  deps: SandboxServiceDeps,
  id: string,
  name: string,
): Promise<Result<SandboxEndpoint, SandboxServiceError<'endpoint'>>> {
  const owner = await deps.sandboxes.ownerOf(id);
  if (owner.isErr()) return err(owner.error);
  // A pooled sandbox is nobody's yet: its URLs lead nowhere until it is claimed.
  const found =
    owner.value === null || owner.value === POOLED_SANDBOX_OWNER ? ok(null) : await deps.sandboxes.get(owner.value, id);
  if (found.isErr()) return err(found.error);
  const record = found.value;
  if (!visible(record)) return err({ type: 'SandboxNotFound', sandboxId: id });
  const info = toSandboxInfo(record);
  return ok({
    sandboxId: record.id,
    userId: record.user_id,
    status: info.status,
    statusDetail: info.status_detail,
    offered:
      (record.spec.exposed_ports ?? []).some((p) => p.name === name) ||
      record.exposed_urls.some((u) => u.name === name),
    target: info.status === 'RUNNING' ? (record.exposed_urls.find((u) => u.name === name)?.url ?? null) : null,
    sessionApiKey: record.session_api_key ?? null,
  });
}

async function pauseIfUnused(parts: SandboxParts, userId: string, id: string, stillNeeded: boolean): Promise<void> {
  if (stillNeeded) return;
  const settled = await parts.startups.whenSettled(userId, id);
  if (settled?.status !== 'RUNNING') return;
  const paused = await pauseBecause(parts, userId, id, null);
  // Already paused, gone, or busy: nothing left to stop.
  if (paused.isErr() && paused.error.type !== 'IllegalSandboxTransition' && paused.error.type !== 'SandboxNotFound') {
    parts.deps.logger.warn({ sandboxId: id, error: paused.error.type }, 'could not pause an unused sandbox');
  }
}
