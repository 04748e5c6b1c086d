import { errAsync, ok, okAsync, ResultAsync, type Result } from 'neverthrow';
import type { DomainErrorOf } from '../errors.js';
import type { StoreFailure } from '../store-failure.js';
import { createActivity } from './activity.js';
import { createMaintenance } from './maintenance.js';
import { createObservations } from './observations.js';
import { createResting } from './resting.js';
import { createRoom } from './room.js';
import { runtimeFailure } from './runtime.js';
import { toSandboxInfo, type SandboxInfo, type SandboxRecord, type SandboxSpec } from './schema.js';
import { planSandboxAction, type SandboxAction } from './state.js';
import { createStartups } from './startups.js';
import type { SandboxEndpoint, SandboxService, SandboxServiceDeps, SandboxServiceError } from './service-contract.js';

export * from './service-contract.js';

/**
 * The sandbox lifecycle: one entry per operation, composed from its parts:
 * - `observations.ts`: a runtime observation written to the record (the one way a status changes);
 * - `startups.ts`: bringing sandboxes up and waiting for them, in this process;
 * - `room.ts`: the per-user limit, held under the user's lock (`Locks`, shared by processes);
 * - `resting.ts`: which sandboxes' conversations have all finished or wait for the user;
 * - `activity.ts`: when each sandbox was last used (kept in the record for other processes);
 * - `maintenance.ts`: reconcile and idle pause, on a timer in the leading process.
 */
export function createSandboxService(deps: SandboxServiceDeps): SandboxService {
  const { sandboxes, specs, runtime, clock, logger } = deps;

  /** Read once from the store and kept; a failed read is tried again on the next call. */
  let installationId: string | undefined;
  const installation = (): ResultAsync<string, StoreFailure> =>
    installationId !== undefined
      ? okAsync(installationId)
      : deps.installation.identity().map((id) => {
          installationId = id;
          return id;
        });

  const observations = createObservations(deps);
  const { applyObservation, changesNothing } = observations;
  const startups = createStartups(deps, observations);
  const activity = createActivity(deps);

  const visible = (record: SandboxRecord | null): record is SandboxRecord => record !== null && record.status !== 'DELETED';
  /** Tells a runtime over several engines where the record says the sandbox is, before acting on it. */
  const locate = (record: SandboxRecord) => {
    if (record.location) runtime.locate?.(record.id, record.location);
  };

  /** Reads the runtime's view of a sandbox this process is not already watching, and stores it. */
  const refresh = (record: SandboxRecord): ResultAsync<SandboxRecord, StoreFailure> => {
    if (startups.inHand(record.id) || !['RUNNING', 'PAUSED', 'STARTING'].includes(record.status)) return okAsync(record);
    locate(record);
    return ResultAsync.fromSafePromise(runtime.inspect(record.id)).andThen((inspected) => {
      if (inspected.isErr()) {
        logger.warn({ sandboxId: record.id, reason: inspected.error.message }, 'could not refresh sandbox status');
        return okAsync(record);
      }
      // Most reads find nothing new: then there is nothing to write.
      if (changesNothing(record, inspected.value) || startups.startingElsewhere(record, inspected.value)) return okAsync(record);
      return applyObservation(record.user_id, record.id, inspected.value).map((updated) => updated ?? record);
    });
  };

  /** What reading a sandbox to act on it can fail with. */
  type ActFailure = DomainErrorOf<'SandboxNotFound' | 'IllegalSandboxTransition' | 'StoreUnavailable'>;
  const act = (userId: string, id: string, action: SandboxAction): ResultAsync<SandboxRecord | 'noop', ActFailure> =>
    sandboxes.get(userId, id).andThen((record) => {
      if (!record) return errAsync<SandboxRecord | 'noop', ActFailure>({ type: 'SandboxNotFound', sandboxId: id });
      locate(record);
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

  const resting = createResting(deps, startups, activity);
  const room = createRoom(deps, startups, activity, resting, pauseBecause);
  const maintenance = createMaintenance(deps, observations, startups, activity, installation, resting, pauseBecause);

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
      (runtime.admit ? runtime.admit() : runtime.ping())
        .mapErr(runtimeFailure('(new)', 'start'))
        .andThen(() => installation())
        .andThen((installationOfRecord) => room.reserve(userId, spec, installationOfRecord)),

    startFromSpec: (userId, spec) =>
      service.reserve(userId, spec).map((reservation) => {
        reservation.commit();
        return reservation.record;
      }),

    start: (userId, specId) =>
      service
        .resolveSpec(specId ?? deps.options?.standaloneSpecId)
        .andThen((spec) => service.startFromSpec(userId, spec))
        .map(toSandboxInfo),

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
        activity.markUsed(id);
        return room.readmit(userId, () =>
          runtime
            .resume(id)
            .mapErr(runtimeFailure(id, 'resume'))
            .andThen((obs) => applyObservation(userId, id, obs))
            .map((record) => {
              if (record?.status === 'STARTING' && !startups.inHand(id)) startups.track(id, () => startups.awaitRunning(userId, id));
            }),
        );
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
                  ok({ ...current, status: 'DELETED', status_detail: 'deleted', exposed_urls: [], session_api_key: null, updated_at: clock.now() }),
                ),
              )
              .andThen(() =>
                deps.onSandboxGone ? ResultAsync.fromSafePromise(deps.onSandboxGone(userId, id, 'sandbox deleted')) : okAsync(undefined),
              )
              .andThen(() =>
                ResultAsync.fromSafePromise(runtime.delete(id)).map((removed) => {
                  if (removed.isErr()) startups.removeInBackground(id, `the first attempt failed: ${removed.error.message}`);
                }),
              ),
      ),

    endpoint: (id, name) =>
      sandboxes
        .ownerOf(id)
        .andThen((owner) => (owner === null ? okAsync(null) : sandboxes.get(owner, id)))
        .andThen((record) => {
          if (!visible(record)) return errAsync<SandboxEndpoint, DomainErrorOf<'SandboxNotFound'>>({ type: 'SandboxNotFound', sandboxId: id });
          const info = toSandboxInfo(record);
          return okAsync<SandboxEndpoint, DomainErrorOf<'SandboxNotFound'>>({
            sandboxId: record.id,
            userId: record.user_id,
            status: info.status,
            statusDetail: info.status_detail,
            offered: (record.spec.exposed_ports ?? []).some((p) => p.name === name) || record.exposed_urls.some((u) => u.name === name),
            target: info.status === 'RUNNING' ? (record.exposed_urls.find((u) => u.name === name)?.url ?? null) : null,
            sessionApiKey: record.session_api_key ?? null,
          });
        }),

    whenSettled: (userId, id, onProgress) => startups.whenSettled(userId, id, onProgress),

    liveRecords: (userId, idList) =>
      sandboxes
        .getMany(userId, [...new Set(idList)])
        .andThen((records) =>
          ResultAsync.combine(records.map((r) => (visible(r) ? refresh(r) : okAsync<SandboxRecord | null, StoreFailure>(r)))),
        )
        .map((records) => new Map(records.filter((r): r is SandboxRecord => r !== null).map((r) => [r.id, r]))),

    touch: (userId, sandboxId) => activity.touch(userId, sandboxId),

    pauseIdle: () => maintenance.pauseIdle(),

    reconcile: () => maintenance.reconcile(),

    stop: () => maintenance.stop(),

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
