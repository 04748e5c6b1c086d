import { errAsync, ok, okAsync, ResultAsync, type Result } from 'neverthrow';
import { millisOf } from '../clock.js';
import type { DomainErrorOf } from '../errors.js';
import type { StoreFailure } from '../store-failure.js';
import { runtimeFailure, type RuntimeObservation } from './runtime.js';
import { toSandboxInfo, type SandboxInfo, type SandboxRecord, type SandboxSpec } from './schema.js';
import { isSandboxLost, planSandboxAction, statusAfterObservation, type SandboxAction } from './state.js';
import type { ReconcileReport, SandboxReservation, SandboxService, SandboxServiceDeps, SandboxServiceError } from './service-contract.js';

export * from './service-contract.js';

/**
 * The sandbox lifecycle. Why one closure of ~490 lines: reservations, start-up waits, delete-wins
 * retries, idle pausing and reconcile all read and write the same in-memory state (the user
 * locks that make the per-user limit hold, the in-flight start waits, last activity), so
 * splitting them apart would pass that state through every part. The contract (options, errors,
 * the interface) is in `service-contract.ts`. Issue 16 moves the locks and limits into
 * PostgreSQL, which is the natural moment to split this.
 */
export function createSandboxService(deps: SandboxServiceDeps): SandboxService {
  const { sandboxes, specs, runtime, clock, ids, logger, background } = deps;
  const startTimeoutMs = deps.options?.startTimeoutMs ?? 120_000;
  const pollIntervalMs = deps.options?.pollIntervalMs ?? 250;
  const settling = new Map<string, Promise<SandboxRecord | null>>();
  /** Who wants to hear how a sandbox's start-up goes (start pipelines waiting for it). */
  const progressListeners = new Map<string, Set<(detail: string) => void>>();

  /** Read once from the store and kept; a failed read is tried again on the next call. */
  let installationId: string | undefined;
  const installation = (): ResultAsync<string, StoreFailure> =>
    installationId !== undefined
      ? okAsync(installationId)
      : deps.installation.identity().map((id) => {
          installationId = id;
          return id;
        });

  /**
   * Whether an observation would change nothing on this record (then there is nothing to
   * write). While the status stays the same, a detail the runtime does not repeat is kept
   * (e.g. why a sandbox was paused).
   */
  const changesNothing = (record: SandboxRecord, observation: RuntimeObservation) =>
    statusAfterObservation(record.status, observation.state) === record.status &&
    (observation.detail === null || observation.detail === record.status_detail) &&
    sameUrls(record, observation);

  /** Stores what the runtime reported; tells the conversation side once when the sandbox is lost. */
  const applyObservation = (
    userId: string,
    id: string,
    observation: RuntimeObservation,
  ): ResultAsync<SandboxRecord | null, StoreFailure> => {
    let lostNow = false;
    return sandboxes
      .update(userId, id, (current): Result<SandboxRecord, never> => {
        if (changesNothing(current, observation)) return ok(current);
        const status = statusAfterObservation(current.status, observation.state);
        lostNow = !isSandboxLost(current.status) && isSandboxLost(status);
        return ok({
          ...current,
          status,
          status_detail: status === current.status ? (observation.detail ?? current.status_detail) : observation.detail,
          exposed_urls: observation.exposed_urls,
          updated_at: clock.now(),
        });
      })
      .andThen((record) => {
        if (record && lostNow && deps.onSandboxGone) {
          const reason = `sandbox ${record.status === 'MISSING' ? 'vanished' : 'failed'}${record.status_detail ? `: ${record.status_detail}` : ''}`;
          return ResultAsync.fromSafePromise(deps.onSandboxGone(userId, id, reason)).map(() => record);
        }
        return okAsync(record);
      });
  };

  const markError = (userId: string, id: string, detail: string) =>
    applyObservation(userId, id, { state: 'error', detail, exposed_urls: [] });

  /** Polls the runtime until the sandbox is no longer starting, or marks it ERROR after the timeout. */
  const awaitRunning = async (userId: string, id: string): Promise<SandboxRecord | null> => {
    const attempts = Math.max(1, Math.ceil(startTimeoutMs / pollIntervalMs));
    for (let i = 0; i < attempts && !background.closed; i++) {
      const inspected = await runtime.inspect(id);
      if (inspected.isErr()) {
        const marked = await markError(userId, id, `could not inspect the sandbox: ${inspected.error.message}`);
        return marked.unwrapOr(null);
      }
      const applied = await applyObservation(userId, id, inspected.value);
      if (applied.isErr()) return null;
      const record = applied.value;
      if (!record || record.status !== 'STARTING') return record;
      await clock.sleep(pollIntervalMs, background.signal);
    }
    if (background.closed) return (await sandboxes.get(userId, id)).unwrapOr(null);
    const marked = await markError(
      userId,
      id,
      `the sandbox did not become ready within ${Math.round(startTimeoutMs / 1000)} s; check that its image starts and stays up, then delete it and start a new one`,
    );
    return marked.unwrapOr(null);
  };

  const track = (id: string, work: () => Promise<SandboxRecord | null>): void => {
    let done!: (record: SandboxRecord | null) => void;
    settling.set(id, new Promise((resolve) => (done = resolve)));
    background.spawn(`sandbox ${id}`, async () => {
      try {
        done(await work());
      } finally {
        settling.delete(id);
      }
    });
  };

  const bringUp = async (record: SandboxRecord, installationOfRecord: string, resourceFactor: number): Promise<SandboxRecord | null> => {
    const created = await runtime.create(
      {
        sandbox_id: record.id,
        user_id: record.user_id,
        installation_id: installationOfRecord,
        spec: record.spec,
        env: { ...record.spec.initial_env },
        resource_factor: resourceFactor,
      },
      (detail) => {
        for (const listener of progressListeners.get(record.id) ?? []) listener(detail);
        background.spawn(`record progress of sandbox ${record.id}`, async () => {
          await applyObservation(record.user_id, record.id, { state: 'starting', detail, exposed_urls: [] });
        });
      },
    );
    const applied = created.isErr()
      ? await markError(record.user_id, record.id, created.error.message)
      : await applyObservation(record.user_id, record.id, created.value);
    const current = applied.unwrapOr(null);
    if (current?.status === 'DELETED') {
      // Deleted while it was being created: whatever the create left behind goes now.
      removeInBackground(record.id, 'it was deleted while it was starting');
      return current;
    }
    if (created.isErr()) logger.warn({ sandboxId: record.id, reason: created.error.message }, 'sandbox failed to start');
    if (current?.status !== 'STARTING') return current;
    return awaitRunning(record.user_id, record.id);
  };

  /**
   * Removes a deleted sandbox's container, retrying a few times (an engine may refuse while
   * the container is still being created or removed). What is left after that is removed by
   * the next reconcile, which removes the containers of deleted records it finds.
   */
  const removeInBackground = (sandboxId: string, why: string): void => {
    background.spawn(`remove sandbox ${sandboxId}`, async () => {
      const delays = [0, 250, 1_000, 4_000];
      for (const [attempt, delay] of delays.entries()) {
        if (delay > 0) await clock.sleep(delay, background.signal);
        const removed = await runtime.delete(sandboxId);
        if (removed.isOk()) return;
        if (attempt === delays.length - 1 || background.closed) {
          logger.warn({ sandboxId, why, reason: removed.error.message }, 'could not remove a deleted sandbox; the next reconcile removes it');
          return;
        }
      }
    });
  };

  const visible = (record: SandboxRecord | null): record is SandboxRecord => record !== null && record.status !== 'DELETED';

  /** Reads the runtime's view of a sandbox we are not already watching, and stores it. */
  const refresh = (record: SandboxRecord): ResultAsync<SandboxRecord, StoreFailure> => {
    if (settling.has(record.id) || !['RUNNING', 'PAUSED', 'STARTING'].includes(record.status)) return okAsync(record);
    return ResultAsync.fromSafePromise(runtime.inspect(record.id)).andThen((inspected) => {
      if (inspected.isErr()) {
        logger.warn({ sandboxId: record.id, reason: inspected.error.message }, 'could not refresh sandbox status');
        return okAsync(record);
      }
      // Most reads find nothing new: then there is nothing to write.
      if (changesNothing(record, inspected.value)) return okAsync(record);
      return applyObservation(record.user_id, record.id, inspected.value).map((updated) => updated ?? record);
    });
  };

  /** What reading a sandbox to act on it can fail with. */
  type ActFailure = DomainErrorOf<'SandboxNotFound' | 'IllegalSandboxTransition' | 'StoreUnavailable'>;
  const act = (userId: string, id: string, action: SandboxAction): ResultAsync<SandboxRecord | 'noop', ActFailure> =>
    sandboxes.get(userId, id).andThen((record) => {
      if (!record) return errAsync<SandboxRecord | 'noop', ActFailure>({ type: 'SandboxNotFound', sandboxId: id });
      const plan = planSandboxAction(record.status, action);
      if (plan.isErr()) {
        return errAsync<SandboxRecord | 'noop', ActFailure>(
          record.status === 'DELETED' && action === 'delete'
            ? { type: 'SandboxNotFound', sandboxId: id }
            : { type: 'IllegalSandboxTransition', sandboxId: id, from: record.status, action },
        );
      }
      return okAsync<SandboxRecord | 'noop', ActFailure>(plan.value === 'noop' ? 'noop' : record);
    });

  /** When each sandbox was last used, in this process (records' updated_at covers the rest). */
  const lastActive = new Map<string, number>();
  const maxRunning = deps.options?.maxRunningSandboxesPerUser ?? Number.POSITIVE_INFINITY;
  const idleAfter = deps.options?.idlePauseAfterMs;

  /** Starts of one user run one at a time, so two concurrent starts cannot both slip under the limit. */
  const userLocks = new Map<string, Promise<unknown>>();
  const withUserLock = <T, E>(userId: string, work: () => ResultAsync<T, E>): ResultAsync<T, E> => {
    const previous = userLocks.get(userId) ?? Promise.resolve();
    const result = previous.then(() => work());
    const settled = result.then(
      () => undefined,
      () => undefined,
    );
    userLocks.set(userId, settled);
    void settled.then(() => {
      if (userLocks.get(userId) === settled) userLocks.delete(userId);
    });
    return new ResultAsync(result);
  };

  /** Makes sure the user may have one more sandbox running: refuses, or pauses the oldest, at the limit. */
  type MakeRoomFailure = DomainErrorOf<'SandboxCapReached'> | StoreFailure;
  const makeRoom = (userId: string): ResultAsync<void, MakeRoomFailure> => {
    if (!Number.isFinite(maxRunning)) return okAsync(undefined);
    return sandboxes.listByStatus(userId, ['STARTING', 'RUNNING']).andThen((active) => {
      if (active.length < maxRunning) return okAsync(undefined);
      if (deps.options?.atSandboxLimit !== 'pause_oldest') return errAsync<void, MakeRoomFailure>({ type: 'SandboxCapReached', limit: maxRunning });
      const oldestRunning = active.filter((r) => r.status === 'RUNNING').slice(0, active.length - maxRunning + 1);
      if (oldestRunning.length < active.length - maxRunning + 1) return errAsync<void, MakeRoomFailure>({ type: 'SandboxCapReached', limit: maxRunning });
      return ResultAsync.combine(oldestRunning.map((r) => service.pause(userId, r.id)))
        .map(() => {
          logger.info({ userId, paused: oldestRunning.map((r) => r.id) }, 'paused the oldest sandbox to stay within the limit');
        })
        .orElse((error): ResultAsync<void, MakeRoomFailure> => {
          if (error.type === 'StoreUnavailable') return errAsync(error);
          // The caller asked about its own sandbox: another one's pause failing (deleted meanwhile, engine trouble) means no room.
          logger.warn({ userId, error: error.type }, 'could not pause the oldest sandbox to make room; refusing at the limit');
          return errAsync({ type: 'SandboxCapReached', limit: maxRunning });
        });
    });
  };

  /** Writes the record (STARTING); the caller commits (brings it up) or cancels. Runs under the user's lock. */
  const insertReservation = (userId: string, spec: SandboxSpec, installationOfRecord: string): ResultAsync<SandboxReservation, StoreFailure> => {
    const now = clock.now();
    const record: SandboxRecord = {
      id: ids.next(),
      user_id: userId,
      sandbox_spec_id: spec.id,
      spec,
      status: 'STARTING',
      status_detail: null,
      exposed_urls: [],
      created_at: now,
      updated_at: now,
    };
    let settled = false;
    return sandboxes.insert(record).map(
      (): SandboxReservation => ({
        record,
        commit: () => {
          if (settled) throw new Error(`sandbox reservation ${record.id} was already committed or cancelled`);
          settled = true;
          lastActive.set(record.id, millisOf(clock));
          track(record.id, async () => bringUp(record, installationOfRecord, (await deps.resourceFactorOf?.(userId)) ?? 1));
        },
        cancel: async () => {
          if (settled) throw new Error(`sandbox reservation ${record.id} was already committed or cancelled`);
          settled = true;
          const given = await sandboxes.update(userId, record.id, (current): Result<SandboxRecord, never> =>
            ok({ ...current, status: 'DELETED', status_detail: 'not used: the request that started it failed', updated_at: clock.now() }),
          );
          // Never brought up, so nothing runs; a record left STARTING is found MISSING by the next reconcile.
          if (given.isErr()) logger.warn({ sandboxId: record.id, error: given.error.type }, 'could not give back an unused sandbox record');
        },
      }),
    );
  };

  const timer =
    idleAfter !== undefined && idleAfter > 0
      ? clock.every(deps.options?.maintenanceIntervalMs ?? Math.min(60_000, Math.max(10, idleAfter / 4)), () =>
          background.spawn('pause idle sandboxes', async () => void (await service.pauseIdle())),
        )
      : undefined;

  /** Pauses a sandbox; `reason` is recorded as its status detail in the same write. */
  const pauseBecause = (userId: string, id: string, reason: string | null): ResultAsync<void, SandboxServiceError<'pause'>> =>
    act(userId, id, 'pause').andThen((target) =>
      target === 'noop'
        ? okAsync(undefined)
        : runtime
            .pause(id)
            .mapErr(runtimeFailure(id, 'pause'))
            .andThen((obs) => applyObservation(userId, id, { ...obs, detail: obs.detail ?? reason }))
            .map(() => undefined),
    );

  const service: SandboxService = {
    resolveSpec: (specId) =>
      specId
        ? specs.get(specId).andThen((spec) => (spec ? okAsync(spec) : errAsync<SandboxSpec, DomainErrorOf<'SandboxSpecNotFound'>>({ type: 'SandboxSpecNotFound', specId })))
        : specs.getDefault(),

    defaultSpec: () => specs.getDefault(),

    specForImage: (image) =>
      specs.getDefault().map((base) => ({
        ...base,
        id: image,
        image,
        description: 'Ad-hoc spec from the sandbox_base_container_image setting',
      })),

    reserve: (userId, spec) =>
      runtime
        .ping()
        .mapErr(runtimeFailure('(new)', 'start'))
        .andThen(() => installation())
        .andThen((installationOfRecord) => withUserLock(userId, () => makeRoom(userId).andThen(() => insertReservation(userId, spec, installationOfRecord)))),

    startFromSpec: (userId, spec) =>
      service.reserve(userId, spec).map((reservation) => {
        reservation.commit();
        return reservation.record;
      }),

    start: (userId, specId) => service.resolveSpec(specId).andThen((spec) => service.startFromSpec(userId, spec)).map(toSandboxInfo),

    get: (userId, id) =>
      sandboxes
        .get(userId, id)
        .andThen((record) => (visible(record) ? refresh(record) : errAsync<SandboxRecord, DomainErrorOf<'SandboxNotFound'>>({ type: 'SandboxNotFound', sandboxId: id })))
        .map(toSandboxInfo),

    getMany: (userId, idList) =>
      sandboxes
        .getMany(userId, idList)
        .andThen((records) =>
          ResultAsync.combine(records.map((r) => (visible(r) ? refresh(r).map((x): SandboxInfo | null => toSandboxInfo(x)) : okAsync<SandboxInfo | null, StoreFailure>(null)))),
        ),

    search: (userId, page) => sandboxes.search(userId, page).map((p) => ({ items: p.items.map(toSandboxInfo), next_page_id: p.next_page_id })),

    pause: (userId, id) => pauseBecause(userId, id, null),

    resume: (userId, id) =>
      act(userId, id, 'resume').andThen((target) => {
        if (target === 'noop') return okAsync(undefined);
        lastActive.set(id, millisOf(clock));
        return withUserLock(userId, () => makeRoom(userId)).andThen(() => runtime
          .resume(id)
          .mapErr(runtimeFailure(id, 'resume'))
          .andThen((obs) => applyObservation(userId, id, obs))
          .map((record) => {
            if (record?.status === 'STARTING' && !settling.has(id)) track(id, () => awaitRunning(userId, id));
          }));
      }),

    delete: (userId, id) =>
      act(userId, id, 'delete').andThen((target) =>
        target === 'noop'
          ? okAsync(undefined)
          : runtime
              .ping()
              .mapErr(runtimeFailure(id, 'delete'))
              // The record goes first: a start still in progress sees DELETED and removes what it made.
              .andThen(() =>
                sandboxes.update(userId, id, (current): Result<SandboxRecord, never> =>
                  ok({ ...current, status: 'DELETED', status_detail: 'deleted', exposed_urls: [], updated_at: clock.now() }),
                ),
              )
              .andThen(() =>
                deps.onSandboxGone ? ResultAsync.fromSafePromise(deps.onSandboxGone(userId, id, 'sandbox deleted')) : okAsync(undefined),
              )
              .andThen(() =>
                ResultAsync.fromSafePromise(runtime.delete(id)).map((removed) => {
                  if (removed.isErr()) removeInBackground(id, `the first attempt failed: ${removed.error.message}`);
                }),
              ),
      ),

    whenSettled: async (userId, id, onProgress) => {
      const inFlight = settling.get(id);
      if (inFlight && onProgress) {
        const listeners = progressListeners.get(id) ?? new Set();
        listeners.add(onProgress);
        progressListeners.set(id, listeners);
        return inFlight.finally(() => {
          listeners.delete(onProgress);
          if (listeners.size === 0) progressListeners.delete(id);
        });
      }
      if (inFlight) return inFlight;
      const record = (await sandboxes.get(userId, id)).unwrapOr(null);
      if (record?.status !== 'STARTING') return record;
      return awaitRunning(userId, id);
    },

    liveRecords: (userId, idList) =>
      sandboxes
        .getMany(userId, [...new Set(idList)])
        .andThen((records) =>
          ResultAsync.combine(records.map((r) => (visible(r) ? refresh(r) : okAsync<SandboxRecord | null, StoreFailure>(r)))),
        )
        .map((records) => new Map(records.filter((r): r is SandboxRecord => r !== null).map((r) => [r.id, r]))),

    touch: (sandboxId) => {
      lastActive.set(sandboxId, millisOf(clock));
    },

    pauseIdle: async () => {
      if (idleAfter === undefined || idleAfter <= 0) return 0;
      const running = await sandboxes.listByStatus(null, ['RUNNING']);
      if (running.isErr()) {
        logger.warn({ operation: running.error.operation, errorClass: running.error.errorClass }, 'could not look for idle sandboxes');
        return 0;
      }
      let paused = 0;
      for (const record of running.value) {
        const last = Math.max(lastActive.get(record.id) ?? 0, Date.parse(record.updated_at));
        if (millisOf(clock) - last < idleAfter || settling.has(record.id)) continue;
        const idleFor = idleAfter >= 60_000 ? `${Math.round(idleAfter / 60_000)} min` : `${Math.round(idleAfter / 1000)} s`;
        const result = await pauseBecause(record.user_id, record.id, `paused after ${idleFor} without use`);
        if (result.isErr()) {
          logger.warn({ sandboxId: record.id, error: result.error.type }, 'could not pause an idle sandbox');
          continue;
        }
        paused++;
      }
      if (paused > 0) logger.info({ paused }, 'paused idle sandboxes');
      return paused;
    },

    reconcile: () =>
      ResultAsync.combine([installation(), sandboxes.listByStatus(null, ['STARTING', 'RUNNING', 'PAUSED'])] as const).andThen(([installationOfRecords, stored]) =>
        runtime
          .list(installationOfRecords)
          .mapErr(runtimeFailure('(all)', 'list'))
          .andThen((held) =>
            ResultAsync.fromSafePromise(
              (async (): Promise<ReconcileReport> => {
                const report: ReconcileReport = { checked: 0, changed: 0, adopted: 0, removed: 0 };
                for (const record of stored) {
                  if (settling.has(record.id)) continue;
                  report.checked++;
                  const observed = await runtime.inspect(record.id);
                  if (observed.isErr()) continue;
                  const updated = (await applyObservation(record.user_id, record.id, observed.value)).unwrapOr(null);
                  if (updated && updated.status !== record.status) report.changed++;
                  if (updated?.status === 'STARTING') track(record.id, () => awaitRunning(record.user_id, record.id));
                }
                for (const summary of held) {
                  const known = (await sandboxes.get(summary.user_id, summary.sandbox_id)).unwrapOr(undefined);
                  if (known === undefined) continue;
                  if (known?.status === 'DELETED') {
                    if ((await runtime.delete(summary.sandbox_id)).isOk()) report.removed++;
                    continue;
                  }
                  if (known) continue;
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
                  if (inserted.isOk()) report.adopted++;
                }
                if (report.changed + report.adopted + report.removed > 0) logger.info({ ...report }, 'reconciled sandboxes with the runtime');
                return report;
              })(),
            ),
          ),
      ),

    stop: () => {
      timer?.cancel();
    },

    pauseIfUnused: async (userId, id, stillNeeded) => {
      if (stillNeeded) return;
      const settled = await service.whenSettled(userId, id);
      if (settled?.status !== 'RUNNING') return;
      const paused = await service.pause(userId, id);
      // Already paused, gone, or busy: nothing left to stop.
      if (paused.isErr() && paused.error.type !== 'IllegalSandboxTransition' && paused.error.type !== 'SandboxNotFound') {
        logger.warn({ sandboxId: id, error: paused.error.type }, 'could not pause an unused sandbox');
      }
    },
  };
  return service;
}

function sameUrls(record: SandboxRecord, observation: RuntimeObservation): boolean {
  return JSON.stringify(record.exposed_urls) === JSON.stringify(observation.exposed_urls);
}
