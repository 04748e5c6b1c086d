import { err, ok, okAsync, type Result, type ResultAsync } from 'neverthrow';
import type { BackgroundTasks } from '../background.js';
import type { Clock } from '../clock.js';
import type { IdGenerator } from '../ids.js';
import type { Locks } from '../locks.js';
import type { Logger } from '../logger.js';
import { resultAsync } from '../result.js';
import type { StoreFailure } from '../store-failure.js';
import type { Activity } from './activity.js';
import { newStartingRecord } from './keys.js';
import type { RuntimeSandboxSummary, SandboxRuntime } from './runtime.js';
import { POOLED_SANDBOX_OWNER, type SandboxRecord, type SandboxSpec } from './schema.js';
import type { SandboxPoolCount, SandboxReservation, SandboxServiceDeps } from './service-contract.js';
import type { Startups } from './startups.js';
import type { SandboxSpecCatalog, SandboxStore } from './store.js';

export interface SandboxPoolDeps {
  sandboxes: SandboxStore;
  specs: SandboxSpecCatalog;
  runtime: SandboxRuntime;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  background: BackgroundTasks;
  /** A lock per spec, so processes sharing the store do not overfill its pool. */
  locks: Locks;
  /** `sandboxPool`, `sandboxPoolCheckIntervalMs`, `sandboxPoolRefillDelayMs`. */
  options: SandboxServiceDeps['options'];
  resourceFactorOf: SandboxServiceDeps['resourceFactorOf'];
  startups: Startups;
  activity: Activity;
  /** This installation's id, read once (sandboxes are labelled with it). */
  installation: () => ResultAsync<string, StoreFailure>;
}

/**
 * Warm sandboxes: per spec (the `sandboxPool` option), a few sandboxes started ahead, owned by
 * POOLED_SANDBOX_OWNER (so no user lists them, counts them, or reaches them) until a start
 * claims one. The claim is the store's atomic `claimPooled`, so processes on one store share one
 * pool and never hand out one sandbox twice. A claimed sandbox was never given to anyone; the
 * user's resource factor is applied to it (`runtime.resize`) or, where the runtime cannot, the
 * user gets a new sandbox. The pool is refilled in the background after each claim and on a
 * timer, under a lock per spec (`Locks`) so several processes do not overfill it; refilling
 * asks the runtime to admit each one (an engine's `max` counts pooled sandboxes too).
 */
export interface SandboxPool {
  /**
   * A ready pooled sandbox of this spec, now the user's, as a reservation (commit does nothing
   * more: it runs already; cancel deletes it, it is never given back). Null when the spec is not
   * pooled, none is ready, or this user's limits cannot be applied to one: then the caller
   * creates a sandbox as always. Call it under the user's lock, after the limit was checked.
   */
  claim(userId: string, spec: SandboxSpec): ResultAsync<SandboxReservation | null, StoreFailure>;
  /** Every configured spec, and those with pooled sandboxes left from an earlier configuration (drained). */
  fill(): Promise<void>;
  /** Fills every pool in the background. */
  fillSoon(): void;
  /**
   * When no engine admits another sandbox: whether a start of `spec` can go on anyway, because a
   * pooled one of it is ready to be claimed, or after removing a pooled sandbox of another spec
   * (a user's start comes before the pool; the pool is refilled when there is room again).
   */
  yieldRoom(spec: SandboxSpec): Promise<'claimable' | 'freed' | null>;
  /**
   * A container the runtime lists with the pool's label: its owner is the one the store names
   * (the label cannot change on a claim). Null: no live record has it (deleted, or never
   * recorded), so it is removed ('removed' when that worked).
   */
  attribute(summary: RuntimeSandboxSummary): Promise<RuntimeSandboxSummary | 'removed' | null>;
  status(): ResultAsync<Record<string, SandboxPoolCount>, StoreFailure>;
  stop(): void;
}

/** The pools' sizes and the fills running in this process. */
interface Fills {
  /** Spec id → how many the pool keeps (only those above 0). */
  readonly sizes: Map<string, number>;
  /** One fill per spec at a time in this process; a fill asked for meanwhile runs once after it. */
  readonly running: Map<string, Promise<void>>;
  readonly again: Set<string>;
}

const POOLED_STATUSES = ['STARTING', 'RUNNING', 'PAUSED', 'ERROR', 'MISSING'] as const;

export function createSandboxPool(deps: SandboxPoolDeps): SandboxPool {
  const fills: Fills = {
    sizes: new Map(Object.entries(deps.options?.sandboxPool ?? {}).filter(([, size]) => size > 0)),
    running: new Map(),
    again: new Set(),
  };
  // Refilled on a timer too: after an engine was full or down, or another process claimed.
  const everyMs = deps.options?.sandboxPoolCheckIntervalMs ?? 30_000;
  const timer = fills.sizes.size > 0 && everyMs > 0 ? deps.clock.every(everyMs, () => fillSoon(deps, fills)) : null;
  // Without a pool, leftovers of an earlier configuration are drained by the next reconcile (recover at start).
  if (fills.sizes.size > 0) fillSoon(deps, fills);
  return {
    claim: (userId, spec) => resultAsync(claim(deps, fills, userId, spec)),
    fill: () => fillAll(deps, fills),
    fillSoon: () => fillSoon(deps, fills),
    yieldRoom: (spec) => yieldRoom(deps, fills, spec),
    attribute: (summary) => attribute(deps, summary),
    status: () =>
      deps.sandboxes
        .listByStatus(POOLED_SANDBOX_OWNER, ['STARTING', 'RUNNING'])
        .map((pooled) => countsOf(fills, pooled)),
    stop: () => timer?.cancel(),
  };
}

const sizeOf = (fills: Fills, specId: string) => fills.sizes.get(specId) ?? 0;

function countsOf(fills: Fills, pooled: readonly SandboxRecord[]): Record<string, SandboxPoolCount> {
  return Object.fromEntries(
    [...new Set([...fills.sizes.keys(), ...pooled.map((r) => r.sandbox_spec_id)])].map((specId) => {
      const ofSpec = pooled.filter((r) => r.sandbox_spec_id === specId);
      return [
        specId,
        {
          size: sizeOf(fills, specId),
          ready: ofSpec.filter((r) => r.status === 'RUNNING').length,
          filling: ofSpec.filter((r) => r.status === 'STARTING').length,
        },
      ];
    }),
  );
}

/** The record goes first (DELETED), then its container, retried in the background if need be. */
async function discard(deps: SandboxPoolDeps, record: SandboxRecord, why: string): Promise<void> {
  const marked = await deps.sandboxes.update(record.user_id, record.id, (current): Result<SandboxRecord, never> =>
    ok({
      ...current,
      status: 'DELETED',
      status_detail: why,
      exposed_urls: [],
      session_api_key: null,
      updated_at: deps.clock.now(),
    }),
  );
  if (marked.isErr())
    deps.logger.warn({ sandboxId: record.id, error: marked.error.type }, 'could not mark a pooled sandbox deleted');
  if (record.location) deps.runtime.locate?.(record.id, record.location);
  const removed = await deps.runtime.delete(record.id);
  if (removed.isErr())
    deps.startups.removeInBackground(record.id, `${why}; the first attempt failed: ${removed.error.message}`);
}

/** Brings the spec's pool to its size: drops broken pooled sandboxes and any beyond the size (0: all), starts what is missing. */
async function fillSpec(deps: SandboxPoolDeps, fills: Fills, specId: string): Promise<void> {
  const size = sizeOf(fills, specId);
  const spec = size > 0 ? (await deps.specs.get(specId)).unwrapOr(null) : null;
  if (size > 0 && !spec)
    deps.logger.warn({ specId }, 'the sandbox pool names a spec the catalog does not have; nothing is pooled for it');
  const filled = await deps.locks.withLock(`sandbox pool ${specId}`, () =>
    resultAsync(insertPooled(deps, specId, size, spec)),
  );
  if (filled.isErr())
    deps.logger.warn(
      { specId, operation: filled.error.operation },
      'could not refill the sandbox pool; trying again later',
    );
  const toStart = filled.unwrapOr([]);
  if (toStart.length === 0) return;
  const installationOfRecords = await deps.installation();
  for (const record of toStart) {
    if (installationOfRecords.isErr()) {
      await discard(deps, record, 'pooled sandbox dropped: the installation id could not be read');
      continue;
    }
    // Pooled sandboxes get limits of factor 1; a claim applies the user's.
    deps.startups.track(record.id, () => deps.startups.bringUp(record, installationOfRecords.value, 1));
  }
  deps.logger.debug({ specId, started: toStart.length }, 'refilling the sandbox pool');
}

/** Under the spec's lock: drops what the pool must not hand out, and writes the records of the sandboxes to start (returned). */
async function insertPooled(
  deps: SandboxPoolDeps,
  specId: string,
  size: number,
  spec: SandboxSpec | null,
): Promise<Result<SandboxRecord[], StoreFailure>> {
  const pooled = await deps.sandboxes.listByStatus(POOLED_SANDBOX_OWNER, [...POOLED_STATUSES]);
  if (pooled.isErr()) return err(pooled.error);
  const ofSpec = pooled.value.filter((r) => r.sandbox_spec_id === specId);
  // Nobody pauses a pooled sandbox; one that failed, vanished or was paused anyway is not handed out.
  for (const broken of ofSpec.filter((r) => r.status !== 'STARTING' && r.status !== 'RUNNING')) {
    await discard(
      deps,
      broken,
      `pooled sandbox dropped: it was ${broken.status}${broken.status_detail ? ` (${broken.status_detail})` : ''}`,
    );
  }
  const live = ofSpec.filter((r) => r.status === 'STARTING' || r.status === 'RUNNING');
  // More than the pool keeps now (its size was lowered, or the pool is off): the newest go.
  for (const extra of live.slice(size))
    await discard(deps, extra, 'pooled sandbox removed: the pool of its spec keeps fewer now');
  const toStart: SandboxRecord[] = [];
  for (let i = live.length; spec && i < size; i++) {
    // Only where an engine has room: a pool never takes the last place a user's start needs by refusing it.
    const admitted = await (deps.runtime.admit ? deps.runtime.admit() : deps.runtime.ping());
    if (admitted.isErr()) {
      deps.logger.debug(
        { specId, reason: admitted.error.message },
        'the sandbox pool waits: no engine takes another sandbox now',
      );
      break;
    }
    const record = newStartingRecord({
      id: deps.ids.next(),
      userId: POOLED_SANDBOX_OWNER,
      spec,
      now: deps.clock.now(),
      statusDetail: 'pooled: started ahead for the next claim',
    });
    const inserted = await deps.sandboxes.insert(record);
    if (inserted.isErr()) break;
    toStart.push(record);
  }
  return ok(toStart);
}

function fill(deps: SandboxPoolDeps, fills: Fills, specId: string): Promise<void> {
  const current = fills.running.get(specId);
  if (current) {
    fills.again.add(specId);
    return current;
  }
  const round = (async () => {
    do {
      fills.again.delete(specId);
      await fillSpec(deps, fills, specId);
    } while (fills.again.has(specId) && !deps.background.closed);
  })().finally(() => fills.running.delete(specId));
  fills.running.set(specId, round);
  return round;
}

async function fillAll(deps: SandboxPoolDeps, fills: Fills): Promise<void> {
  if (deps.background.closed) return;
  const pooled = (await deps.sandboxes.listByStatus(POOLED_SANDBOX_OWNER, [...POOLED_STATUSES])).unwrapOr([]);
  await Promise.all(
    [...new Set([...fills.sizes.keys(), ...pooled.map((r) => r.sandbox_spec_id)])].map((specId) =>
      fill(deps, fills, specId),
    ),
  );
}

function fillSoon(deps: SandboxPoolDeps, fills: Fills, specId?: string): void {
  if (deps.background.closed) return;
  if (!specId) return deps.background.spawn('fill sandbox pools', () => fillAll(deps, fills));
  const refillDelayMs = deps.options?.sandboxPoolRefillDelayMs ?? 2_000;
  // After a claim: a moment later, so the new container's start (the engine's heaviest work)
  // does not slow the claimant's first commands on the same engine.
  deps.background.spawn(`refill sandbox pool ${specId}`, async () => {
    if (refillDelayMs > 0) await deps.clock.sleep(refillDelayMs, deps.background.signal);
    if (!deps.background.closed) await fill(deps, fills, specId);
  });
}

/** Whether this spec is pooled as the catalog has it (an ad-hoc spec of the same id is not). */
function pooledAsIs(deps: SandboxPoolDeps, fills: Fills, spec: SandboxSpec): ResultAsync<boolean, StoreFailure> {
  if (sizeOf(fills, spec.id) === 0) return okAsync(false);
  return deps.specs.get(spec.id).map((listed) => listed !== null && JSON.stringify(listed) === JSON.stringify(spec));
}

async function claim(
  deps: SandboxPoolDeps,
  fills: Fills,
  userId: string,
  spec: SandboxSpec,
): Promise<Result<SandboxReservation | null, StoreFailure>> {
  if (userId === POOLED_SANDBOX_OWNER) return ok(null);
  const pooled = await pooledAsIs(deps, fills, spec);
  if (pooled.isErr()) return err(pooled.error);
  if (!pooled.value) return ok(null);
  const factor = (await deps.resourceFactorOf?.(userId)) ?? 1;
  // Pooled sandboxes run with factor 1 (create raises smaller factors to 1 too).
  const resize = factor > 1 ? deps.runtime.resize?.bind(deps.runtime) : undefined;
  if (factor > 1 && !resize) return ok(null);
  const claimed = await deps.sandboxes.claimPooled(spec.id, userId, deps.clock.now());
  if (claimed.isErr()) return err(claimed.error);
  fillSoon(deps, fills, spec.id);
  if (!claimed.value) return ok(null);
  const record = claimed.value;
  const usable = await ready(deps, record, resize ? () => resize(record.id, factor) : null);
  return ok(usable ? reservationOf(deps, usable) : null);
}

/** The claimed sandbox, checked to run and resized; null (and it is deleted) when it cannot be used. */
async function ready(
  deps: SandboxPoolDeps,
  claimed: SandboxRecord,
  resize: (() => ResultAsync<void, { message: string }>) | null,
): Promise<SandboxRecord | null> {
  if (claimed.location) deps.runtime.locate?.(claimed.id, claimed.location);
  // The record said RUNNING; the container must still be (a reconcile may not have run since it died).
  const seen = await deps.runtime.inspect(claimed.id);
  const problem = seen.isErr()
    ? seen.error.message
    : seen.value.state !== 'running'
      ? `it was ${seen.value.state}`
      : null;
  const resized = problem === null && resize ? await resize() : null;
  const failure = problem ?? (resized?.isErr() ? `its limits could not be changed: ${resized.error.message}` : null);
  if (failure === null) return claimed;
  deps.logger.warn(
    { sandboxId: claimed.id, reason: failure },
    'a claimed pooled sandbox could not be used; starting a new one instead',
  );
  await discard(deps, claimed, `pooled sandbox not used: ${failure}`);
  return null;
}

function reservationOf(deps: SandboxPoolDeps, record: SandboxRecord): SandboxReservation {
  let settled = false;
  const settle = () => {
    if (settled) throw new Error(`sandbox reservation ${record.id} was already committed or cancelled`);
    settled = true;
  };
  deps.activity.markUsed(record.id);
  return {
    record,
    commit: () => {
      settle();
      deps.activity.markUsed(record.id);
    },
    cancel: async () => {
      settle();
      // It ran for this request: it is not handed to anyone else.
      await discard(deps, record, 'not used: the request that claimed it failed');
    },
  };
}

async function yieldRoom(
  deps: SandboxPoolDeps,
  fills: Fills,
  spec: SandboxSpec,
): Promise<'claimable' | 'freed' | null> {
  if (fills.sizes.size === 0) return null;
  const pooled = (await deps.sandboxes.listByStatus(POOLED_SANDBOX_OWNER, ['RUNNING', 'STARTING'])).unwrapOr([]);
  if (
    (await pooledAsIs(deps, fills, spec)).unwrapOr(false) &&
    pooled.some((r) => r.status === 'RUNNING' && r.sandbox_spec_id === spec.id)
  )
    return 'claimable';
  const victim =
    pooled.find((r) => r.sandbox_spec_id !== spec.id && !deps.startups.inHand(r.id)) ??
    pooled.find((r) => r.sandbox_spec_id !== spec.id);
  if (!victim) return null;
  await discard(deps, victim, "pooled sandbox removed to make room for a user's sandbox");
  return 'freed';
}

async function attribute(
  deps: SandboxPoolDeps,
  summary: RuntimeSandboxSummary,
): Promise<RuntimeSandboxSummary | 'removed' | null> {
  const owner = await deps.sandboxes.ownerOf(summary.sandbox_id);
  if (owner.isErr()) return null;
  if (owner.value !== null) return { ...summary, user_id: owner.value };
  if (deps.startups.inHand(summary.sandbox_id)) return null;
  return (await deps.runtime.delete(summary.sandbox_id)).isOk() ? 'removed' : null;
}
