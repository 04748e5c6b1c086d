import { err, ok, type Result, type ResultAsync } from 'neverthrow';
import { millisOf, type Clock } from '../clock.js';
import type { DomainErrorOf } from '../errors.js';
import type { IdGenerator } from '../ids.js';
import type { Locks } from '../locks.js';
import type { Logger } from '../logger.js';
import { resultAsync } from '../result.js';
import type { StoreFailure } from '../store-failure.js';
import type { Activity } from './activity.js';
import { newStartingRecord } from './keys.js';
import type { SandboxRecord, SandboxSpec } from './schema.js';
import type { Resting } from './resting.js';
import type { SandboxReservation, SandboxServiceDeps, SandboxServiceError } from './service-contract.js';
import type { Startups } from './startups.js';
import type { SandboxStore } from './store.js';

type MakeRoomFailure = DomainErrorOf<'SandboxCapReached'> | StoreFailure;

/**
 * How long a sandbox's conversations must have rested (and nothing used it) before it is
 * paused to make room: a conversation shows "idle" between its sandbox coming up and its
 * agent's first step, and "finished" between a new message and the agent's next step, and
 * these moments must not be mistaken for rest.
 */
export const MAKE_ROOM_GRACE_MS = 5_000;

export interface RoomDeps {
  sandboxes: SandboxStore;
  /** The per-user lock the count and the pause that makes room are taken under. */
  locks: Locks;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  /** `maxRunningSandboxesPerUser` and `atSandboxLimit`. */
  options: SandboxServiceDeps['options'];
  resourceFactorOf: SandboxServiceDeps['resourceFactorOf'];
  startups: Startups;
  activity: Activity;
  resting: Resting;
  /** Pauses one sandbox, `reason` as its status detail (the service's pause). */
  pause: (userId: string, id: string, reason: string | null) => ResultAsync<void, SandboxServiceError<'pause'>>;
  /** A ready pooled sandbox for this start (pool.ts), or null to create one. */
  claimPooled: (userId: string, spec: SandboxSpec) => ResultAsync<SandboxReservation | null, StoreFailure>;
}

/**
 * The per-user limit of sandboxes starting or running. Whatever adds one to a user's count
 * (a new reservation, a resume) checks the count and acts under the user's lock (`Locks`), so
 * concurrent starts never slip under the limit together, in one process or across several;
 * the pause that makes room (`atSandboxLimit`) happens under that lock too.
 */
export interface Room {
  /** A reservation within the user's limit. */
  reserve(
    userId: string,
    spec: SandboxSpec,
    installationOfRecord: string,
  ): ResultAsync<SandboxReservation, MakeRoomFailure>;
  /** Runs `bringBack` (a resume) within the user's limit: the count and the resume under one lock. */
  readmit<T, E>(userId: string, bringBack: () => ResultAsync<T, E>): ResultAsync<T, E | MakeRoomFailure>;
}

export function createRoom(deps: RoomDeps): Room {
  return {
    reserve: (userId, spec, installationOfRecord) =>
      underUserLock(deps, userId, () => resultAsync(reserve(deps, userId, spec, installationOfRecord))),
    readmit: (userId, bringBack) => underUserLock(deps, userId, () => resultAsync(readmit(deps, userId, bringBack))),
  };
}

const underUserLock = <T, E>(deps: RoomDeps, userId: string, work: () => ResultAsync<T, E>) =>
  deps.locks.withLock(`sandboxes of user ${userId}`, work);

async function reserve(
  deps: RoomDeps,
  userId: string,
  spec: SandboxSpec,
  installationOfRecord: string,
): Promise<Result<SandboxReservation, MakeRoomFailure>> {
  const room = await makeRoom(deps, userId);
  if (room.isErr()) return err(room.error);
  const claimed = await deps.claimPooled(userId, spec);
  if (claimed.isErr()) return err(claimed.error);
  if (claimed.value) return ok(claimed.value);
  return insertReservation(deps, userId, spec, installationOfRecord);
}

async function readmit<T, E>(
  deps: RoomDeps,
  userId: string,
  bringBack: () => ResultAsync<T, E>,
): Promise<Result<T, E | MakeRoomFailure>> {
  const room = await makeRoom(deps, userId);
  if (room.isErr()) return err(room.error);
  return bringBack();
}

const maxRunningOf = (deps: RoomDeps) => deps.options?.maxRunningSandboxesPerUser ?? Number.POSITIVE_INFINITY;
const atLimitOf = (deps: RoomDeps) => deps.options?.atSandboxLimit ?? 'pause_finished';

/** Makes sure the user may have one more sandbox running: refuses, or pauses another, at the limit. */
async function makeRoom(deps: RoomDeps, userId: string): Promise<Result<void, MakeRoomFailure>> {
  const maxRunning = maxRunningOf(deps);
  if (!Number.isFinite(maxRunning)) return ok(undefined);
  const active = await deps.sandboxes.listByStatus(userId, ['STARTING', 'RUNNING']);
  if (active.isErr()) return err(active.error);
  if (active.value.length < maxRunning) return ok(undefined);
  const needed = active.value.length - maxRunning + 1;
  const atLimit = atLimitOf(deps);
  if (atLimit === 'refuse') return err({ type: 'SandboxCapReached', limit: maxRunning });
  if (atLimit === 'pause_oldest') {
    const oldestRunning = active.value.filter((r) => r.status === 'RUNNING').slice(0, needed);
    if (oldestRunning.length < needed) return err({ type: 'SandboxCapReached', limit: maxRunning });
    return pauseInTurn(deps, userId, oldestRunning, needed, null, false);
  }
  const found = await deps.resting.restingAmong(active.value);
  if (found.isErr()) return err(found.error);
  const now = millisOf(deps.clock);
  const candidates = found.value.filter((c) => now - c.idleSince >= MAKE_ROOM_GRACE_MS);
  if (candidates.length < needed) return err({ type: 'SandboxCapReached', limit: maxRunning, why: 'none_at_rest' });
  return pauseInTurn(
    deps,
    userId,
    candidates.map((c) => c.record),
    needed,
    `paused to make room for another sandbox of yours (at most ${maxRunning} run at once); its conversations had finished or were waiting for you`,
    true,
  );
}

/** Pauses `needed` of the candidates, in order, passing over one whose pause fails. */
async function pauseInTurn(
  deps: RoomDeps,
  userId: string,
  candidates: readonly SandboxRecord[],
  needed: number,
  reason: string | null,
  explained: boolean,
): Promise<Result<void, MakeRoomFailure>> {
  const paused: string[] = [];
  for (const candidate of candidates) {
    if (paused.length === needed) break;
    const result = await deps.pause(userId, candidate.id, reason);
    if (result.isOk()) {
      paused.push(candidate.id);
      continue;
    }
    if (result.error.type === 'StoreUnavailable') return err(result.error);
    // The caller asked about its own sandbox: another one's pause failing (deleted meanwhile, engine trouble) is no error of its.
    deps.logger.warn(
      { userId, sandboxId: candidate.id, error: result.error.type },
      'could not pause a sandbox to make room',
    );
  }
  if (paused.length < needed)
    return err({
      type: 'SandboxCapReached',
      limit: maxRunningOf(deps),
      ...(explained ? { why: 'pause_failed' as const } : {}),
    });
  deps.logger.info(
    { userId, paused },
    atLimitOf(deps) === 'pause_oldest'
      ? 'paused the oldest sandbox to stay within the limit'
      : 'paused a sandbox whose conversations had finished, to stay within the limit',
  );
  return ok(undefined);
}

/** Writes the record (STARTING); the caller commits (brings it up) or cancels. */
async function insertReservation(
  deps: RoomDeps,
  userId: string,
  spec: SandboxSpec,
  installationOfRecord: string,
): Promise<Result<SandboxReservation, StoreFailure>> {
  const record = newStartingRecord({ id: deps.ids.next(), userId, spec, now: deps.clock.now(), statusDetail: null });
  deps.startups.reserved.add(record.id);
  const inserted = await deps.sandboxes.insert(record);
  if (inserted.isErr()) {
    deps.startups.reserved.delete(record.id);
    return err(inserted.error);
  }
  let settled = false;
  const settle = () => {
    if (settled) throw new Error(`sandbox reservation ${record.id} was already committed or cancelled`);
    settled = true;
    deps.startups.reserved.delete(record.id);
  };
  return ok({
    record,
    commit: () => {
      settle();
      deps.activity.markUsed(record.id);
      deps.startups.track(record.id, async () =>
        deps.startups.bringUp(record, installationOfRecord, (await deps.resourceFactorOf?.(userId)) ?? 1),
      );
    },
    cancel: async () => {
      settle();
      const given = await deps.sandboxes.update(userId, record.id, (current): Result<SandboxRecord, never> =>
        ok({
          ...current,
          status: 'DELETED',
          status_detail: 'not used: the request that started it failed',
          updated_at: deps.clock.now(),
        }),
      );
      // Never brought up, so nothing runs; a record left STARTING is found MISSING by a later reconcile.
      if (given.isErr())
        deps.logger.warn(
          { sandboxId: record.id, error: given.error.type },
          'could not give back an unused sandbox record',
        );
    },
  });
}
