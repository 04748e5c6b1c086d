import { errAsync, ok, okAsync, ResultAsync, type Result } from 'neverthrow';
import type { DomainErrorOf } from '../errors.js';
import type { StoreFailure } from '../store-failure.js';
import type { Activity } from './activity.js';
import { newSandboxKey } from './keys.js';
import type { SandboxRecord, SandboxSpec } from './schema.js';
import type { SandboxReservation, SandboxServiceDeps, SandboxServiceError } from './service-contract.js';
import type { Startups } from './startups.js';

type MakeRoomFailure = DomainErrorOf<'SandboxCapReached'> | StoreFailure;

/**
 * The per-user limit of sandboxes starting or running. Whatever adds one to a user's count
 * (a new reservation, a resume) checks the count and acts under the user's lock (`Locks`), so
 * concurrent starts never slip under the limit together, in one process or across several.
 */
export function createRoom(
  { sandboxes, locks, clock, ids, logger, options, resourceFactorOf }: Pick<SandboxServiceDeps, 'sandboxes' | 'locks' | 'clock' | 'ids' | 'logger' | 'options' | 'resourceFactorOf'>,
  startups: Startups,
  activity: Activity,
  pause: (userId: string, id: string) => ResultAsync<void, SandboxServiceError<'pause'>>,
  /** A ready pooled sandbox for this start (pool.ts), or null to create one. */
  claimPooled: (userId: string, spec: SandboxSpec) => ResultAsync<SandboxReservation | null, StoreFailure> = () => okAsync(null),
) {
  const maxRunning = options?.maxRunningSandboxesPerUser ?? Number.POSITIVE_INFINITY;

  const underUserLock = <T, E>(userId: string, work: () => ResultAsync<T, E>) => locks.withLock(`sandboxes of user ${userId}`, work);

  /** Makes sure the user may have one more sandbox running: refuses, or pauses the oldest, at the limit. */
  const makeRoom = (userId: string): ResultAsync<void, MakeRoomFailure> => {
    if (!Number.isFinite(maxRunning)) return okAsync(undefined);
    return sandboxes.listByStatus(userId, ['STARTING', 'RUNNING']).andThen((active) => {
      if (active.length < maxRunning) return okAsync(undefined);
      if (options?.atSandboxLimit !== 'pause_oldest') return errAsync<void, MakeRoomFailure>({ type: 'SandboxCapReached', limit: maxRunning });
      const oldestRunning = active.filter((r) => r.status === 'RUNNING').slice(0, active.length - maxRunning + 1);
      if (oldestRunning.length < active.length - maxRunning + 1) return errAsync<void, MakeRoomFailure>({ type: 'SandboxCapReached', limit: maxRunning });
      return ResultAsync.combine(oldestRunning.map((r) => pause(userId, r.id)))
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

  /** Writes the record (STARTING); the caller commits (brings it up) or cancels. */
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
      ...(spec.session_api_key_variable ? { session_api_key: newSandboxKey() } : {}),
    };
    let settled = false;
    const settle = () => {
      if (settled) throw new Error(`sandbox reservation ${record.id} was already committed or cancelled`);
      settled = true;
      startups.reserved.delete(record.id);
    };
    startups.reserved.add(record.id);
    return sandboxes
      .insert(record)
      .mapErr((failure) => {
        startups.reserved.delete(record.id);
        return failure;
      })
      .map(
        (): SandboxReservation => ({
          record,
          commit: () => {
            settle();
            activity.markUsed(record.id);
            startups.track(record.id, async () => startups.bringUp(record, installationOfRecord, (await resourceFactorOf?.(userId)) ?? 1));
          },
          cancel: async () => {
            settle();
            const given = await sandboxes.update(userId, record.id, (current): Result<SandboxRecord, never> =>
              ok({ ...current, status: 'DELETED', status_detail: 'not used: the request that started it failed', updated_at: clock.now() }),
            );
            // Never brought up, so nothing runs; a record left STARTING is found MISSING by a later reconcile.
            if (given.isErr()) logger.warn({ sandboxId: record.id, error: given.error.type }, 'could not give back an unused sandbox record');
          },
        }),
      );
  };

  return {
    /** A reservation within the user's limit. */
    reserve: (userId: string, spec: SandboxSpec, installationOfRecord: string) =>
      underUserLock(userId, () =>
        makeRoom(userId)
          .andThen(() => claimPooled(userId, spec))
          .andThen((claimed) => (claimed ? okAsync<SandboxReservation, StoreFailure>(claimed) : insertReservation(userId, spec, installationOfRecord))),
      ),
    /** Runs `bringBack` (a resume) within the user's limit: the count and the resume under one lock. */
    readmit: <T, E>(userId: string, bringBack: () => ResultAsync<T, E>) => underUserLock(userId, () => makeRoom(userId).andThen(bringBack)),
  };
}
