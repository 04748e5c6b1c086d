import { ok, okAsync, ResultAsync, type Result } from 'neverthrow';
import type { StoreFailure } from '../store-failure.js';
import type { Activity } from './activity.js';
import { newStartingRecord } from './keys.js';
import type { RuntimeSandboxSummary } from './runtime.js';
import { POOLED_SANDBOX_OWNER, type SandboxRecord, type SandboxSpec } from './schema.js';
import type { SandboxPoolCount, SandboxReservation, SandboxServiceDeps } from './service-contract.js';
import type { Startups } from './startups.js';

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
export function createSandboxPool(
  deps: Pick<SandboxServiceDeps, 'sandboxes' | 'specs' | 'runtime' | 'clock' | 'ids' | 'logger' | 'background' | 'locks' | 'options' | 'resourceFactorOf'>,
  startups: Startups,
  activity: Activity,
  installation: () => ResultAsync<string, StoreFailure>,
) {
  const { sandboxes, specs, runtime, clock, ids, logger, background, locks, options, resourceFactorOf } = deps;
  const sizes = new Map(Object.entries(options?.sandboxPool ?? {}).filter(([, size]) => size > 0));
  const sizeOf = (specId: string) => sizes.get(specId) ?? 0;

  /** The record goes first (DELETED), then its container, retried in the background if need be. */
  const discard = async (record: SandboxRecord, why: string): Promise<void> => {
    const marked = await sandboxes.update(record.user_id, record.id, (current): Result<SandboxRecord, never> =>
      ok({ ...current, status: 'DELETED', status_detail: why, exposed_urls: [], session_api_key: null, updated_at: clock.now() }),
    );
    if (marked.isErr()) logger.warn({ sandboxId: record.id, error: marked.error.type }, 'could not mark a pooled sandbox deleted');
    if (record.location) runtime.locate?.(record.id, record.location);
    const removed = await runtime.delete(record.id);
    if (removed.isErr()) startups.removeInBackground(record.id, `${why}; the first attempt failed: ${removed.error.message}`);
  };

  /** Brings the spec's pool to its size: drops broken pooled sandboxes and any beyond the size (0: all), starts what is missing. */
  const fillSpec = async (specId: string): Promise<void> => {
    const size = sizeOf(specId);
    const spec = size > 0 ? (await specs.get(specId)).unwrapOr(null) : null;
    if (size > 0 && !spec) logger.warn({ specId }, 'the sandbox pool names a spec the catalog does not have; nothing is pooled for it');
    const toStart: SandboxRecord[] = [];
    const filled = await locks.withLock(`sandbox pool ${specId}`, () =>
      sandboxes.listByStatus(POOLED_SANDBOX_OWNER, ['STARTING', 'RUNNING', 'PAUSED', 'ERROR', 'MISSING']).andThen((pooled) =>
        ResultAsync.fromSafePromise(
          (async () => {
            const ofSpec = pooled.filter((r) => r.sandbox_spec_id === specId);
            // Nobody pauses a pooled sandbox; one that failed, vanished or was paused anyway is not handed out.
            for (const broken of ofSpec.filter((r) => r.status !== 'STARTING' && r.status !== 'RUNNING')) {
              await discard(broken, `pooled sandbox dropped: it was ${broken.status}${broken.status_detail ? ` (${broken.status_detail})` : ''}`);
            }
            const live = ofSpec.filter((r) => r.status === 'STARTING' || r.status === 'RUNNING');
            // More than the pool keeps now (its size was lowered, or the pool is off): the newest go.
            for (const extra of live.slice(size)) await discard(extra, 'pooled sandbox removed: the pool of its spec keeps fewer now');
            for (let i = live.length; spec && i < size; i++) {
              // Only where an engine has room: a pool never takes the last place a user's start needs by refusing it.
              const admitted = await (runtime.admit ? runtime.admit() : runtime.ping());
              if (admitted.isErr()) {
                logger.debug({ specId, reason: admitted.error.message }, 'the sandbox pool waits: no engine takes another sandbox now');
                break;
              }
              const record = newStartingRecord({ id: ids.next(), userId: POOLED_SANDBOX_OWNER, spec, now: clock.now(), statusDetail: 'pooled: started ahead for the next claim' });
;
              const inserted = await sandboxes.insert(record);
              if (inserted.isErr()) break;
              toStart.push(record);
            }
          })(),
        ),
      ),
    );
    if (filled.isErr()) logger.warn({ specId, operation: filled.error.operation }, 'could not refill the sandbox pool; trying again later');
    if (toStart.length === 0) return;
    const installationOfRecords = await installation();
    for (const record of toStart) {
      if (installationOfRecords.isErr()) {
        await discard(record, 'pooled sandbox dropped: the installation id could not be read');
        continue;
      }
      // Pooled sandboxes get limits of factor 1; a claim applies the user's.
      startups.track(record.id, () => startups.bringUp(record, installationOfRecords.value, 1));
    }
    logger.debug({ specId, started: toStart.length }, 'refilling the sandbox pool');
  };

  /** One fill per spec at a time in this process; a fill asked for meanwhile runs once after it. */
  const running = new Map<string, Promise<void>>();
  const again = new Set<string>();
  const fill = (specId: string): Promise<void> => {
    const current = running.get(specId);
    if (current) {
      again.add(specId);
      return current;
    }
    const round = (async () => {
      do {
        again.delete(specId);
        await fillSpec(specId);
      } while (again.has(specId) && !background.closed);
    })().finally(() => running.delete(specId));
    running.set(specId, round);
    return round;
  };
  /** Every configured spec, and those with pooled sandboxes left from an earlier configuration (drained). */
  const fillAll = async (): Promise<void> => {
    if (background.closed) return;
    const pooled = (await sandboxes.listByStatus(POOLED_SANDBOX_OWNER, ['STARTING', 'RUNNING', 'PAUSED', 'ERROR', 'MISSING'])).unwrapOr([]);
    await Promise.all([...new Set([...sizes.keys(), ...pooled.map((r) => r.sandbox_spec_id)])].map((specId) => fill(specId)));
  };
  const refillDelayMs = options?.sandboxPoolRefillDelayMs ?? 2_000;
  const fillSoon = (specId?: string) => {
    if (background.closed) return;
    if (!specId) return background.spawn('fill sandbox pools', fillAll);
    // After a claim: a moment later, so the new container's start (the engine's heaviest work)
    // does not slow the claimant's first commands on the same engine.
    background.spawn(`refill sandbox pool ${specId}`, async () => {
      if (refillDelayMs > 0) await clock.sleep(refillDelayMs, background.signal);
      if (!background.closed) await fill(specId);
    });
  };

  /** Whether this spec is pooled as the catalog has it (an ad-hoc spec of the same id is not). */
  const pooledAsIs = (spec: SandboxSpec): ResultAsync<boolean, StoreFailure> =>
    sizeOf(spec.id) === 0 ? okAsync(false) : specs.get(spec.id).map((listed) => listed !== null && JSON.stringify(listed) === JSON.stringify(spec));

  /**
   * A ready pooled sandbox of this spec, now the user's, as a reservation (commit does nothing
   * more: it runs already; cancel deletes it, it is never given back). Null when the spec is not
   * pooled, none is ready, or this user's limits cannot be applied to one: then the caller
   * creates a sandbox as always. Call it under the user's lock, after the limit was checked.
   */
  const claim = (userId: string, spec: SandboxSpec): ResultAsync<SandboxReservation | null, StoreFailure> => {
    if (userId === POOLED_SANDBOX_OWNER) return okAsync(null);
    return pooledAsIs(spec).andThen((pooled) => {
      if (!pooled) return okAsync(null);
      return ResultAsync.fromSafePromise((async () => (await resourceFactorOf?.(userId)) ?? 1)()).andThen((factor) => {
        // Pooled sandboxes run with factor 1 (create raises smaller factors to 1 too).
        const resize = factor > 1 ? runtime.resize?.bind(runtime) : undefined;
        if (factor > 1 && !resize) return okAsync(null);
        return sandboxes.claimPooled(spec.id, userId, clock.now()).andThen((claimed) => {
          fillSoon(spec.id);
          if (!claimed) return okAsync(null);
          return ResultAsync.fromSafePromise(ready(claimed, resize ? () => resize(claimed.id, factor) : null)).map((usable) => (usable ? reservationOf(usable) : null));
        });
      });
    });
  };

  /** The claimed sandbox, checked to run and resized; null (and it is deleted) when it cannot be used. */
  const ready = async (claimed: SandboxRecord, resize: (() => ResultAsync<void, { message: string }>) | null): Promise<SandboxRecord | null> => {
    if (claimed.location) runtime.locate?.(claimed.id, claimed.location);
    // The record said RUNNING; the container must still be (a reconcile may not have run since it died).
    const seen = await runtime.inspect(claimed.id);
    const problem = seen.isErr() ? seen.error.message : seen.value.state !== 'running' ? `it was ${seen.value.state}` : null;
    const resized = problem === null && resize ? await resize() : null;
    const failure = problem ?? (resized?.isErr() ? `its limits could not be changed: ${resized.error.message}` : null);
    if (failure === null) return claimed;
    logger.warn({ sandboxId: claimed.id, reason: failure }, 'a claimed pooled sandbox could not be used; starting a new one instead');
    await discard(claimed, `pooled sandbox not used: ${failure}`);
    return null;
  };

  const reservationOf = (record: SandboxRecord): SandboxReservation => {
    let settled = false;
    const settle = () => {
      if (settled) throw new Error(`sandbox reservation ${record.id} was already committed or cancelled`);
      settled = true;
    };
    activity.markUsed(record.id);
    return {
      record,
      commit: () => {
        settle();
        activity.markUsed(record.id);
      },
      cancel: async () => {
        settle();
        // It ran for this request: it is not handed to anyone else.
        await discard(record, 'not used: the request that claimed it failed');
      },
    };
  };

  /**
   * When no engine admits another sandbox: whether a start of `spec` can go on anyway, because a
   * pooled one of it is ready to be claimed, or after removing a pooled sandbox of another spec
   * (a user's start comes before the pool; the pool is refilled when there is room again).
   */
  const yieldRoom = async (spec: SandboxSpec): Promise<'claimable' | 'freed' | null> => {
    if (sizes.size === 0) return null;
    const pooled = (await sandboxes.listByStatus(POOLED_SANDBOX_OWNER, ['RUNNING', 'STARTING'])).unwrapOr([]);
    if ((await pooledAsIs(spec)).unwrapOr(false) && pooled.some((r) => r.status === 'RUNNING' && r.sandbox_spec_id === spec.id)) return 'claimable';
    const victim = pooled.find((r) => r.sandbox_spec_id !== spec.id && !startups.inHand(r.id)) ?? pooled.find((r) => r.sandbox_spec_id !== spec.id);
    if (!victim) return null;
    await discard(victim, 'pooled sandbox removed to make room for a user\'s sandbox');
    return 'freed';
  };

  /**
   * A container the runtime lists with the pool's label: its owner is the one the store names
   * (the label cannot change on a claim). Null: no live record has it (deleted, or never
   * recorded), so it is removed ('removed' when that worked).
   */
  const attribute = async (summary: RuntimeSandboxSummary): Promise<RuntimeSandboxSummary | 'removed' | null> => {
    const owner = await sandboxes.ownerOf(summary.sandbox_id);
    if (owner.isErr()) return null;
    if (owner.value !== null) return { ...summary, user_id: owner.value };
    if (startups.inHand(summary.sandbox_id)) return null;
    return (await runtime.delete(summary.sandbox_id)).isOk() ? 'removed' : null;
  };

  const status = (): ResultAsync<Record<string, SandboxPoolCount>, StoreFailure> =>
    sandboxes.listByStatus(POOLED_SANDBOX_OWNER, ['STARTING', 'RUNNING']).map((pooled) =>
      Object.fromEntries(
        [...new Set([...sizes.keys(), ...pooled.map((r) => r.sandbox_spec_id)])].map((specId) => {
          const ofSpec = pooled.filter((r) => r.sandbox_spec_id === specId);
          return [specId, { size: sizeOf(specId), ready: ofSpec.filter((r) => r.status === 'RUNNING').length, filling: ofSpec.filter((r) => r.status === 'STARTING').length }];
        }),
      ),
    );

  // Refilled on a timer too: after an engine was full or down, or another process claimed.
  const everyMs = options?.sandboxPoolCheckIntervalMs ?? 30_000;
  const timer = sizes.size > 0 && everyMs > 0 ? clock.every(everyMs, () => fillSoon()) : null;
  // Without a pool, leftovers of an earlier configuration are drained by the next reconcile (recover at start).
  if (sizes.size > 0) fillSoon();

  return {
    claim,
    fill: fillAll,
    fillSoon: () => fillSoon(),
    yieldRoom,
    attribute,
    status,
    stop: () => timer?.cancel(),
  };
}

