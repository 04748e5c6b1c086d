import { err, errAsync, ok, okAsync, ResultAsync, type Result } from 'neverthrow';
import { millisOf } from '../clock.js';
import type { DomainErrorOf } from '../errors.js';
import type { StoreFailure } from '../store-failure.js';
import type { Activity } from './activity.js';
import { newStartingRecord } from './keys.js';
import type { SandboxRecord, SandboxSpec } from './schema.js';
import type { Resting } from './resting.js';
import type { SandboxReservation, SandboxServiceDeps, SandboxServiceError } from './service-contract.js';
import type { Startups } from './startups.js';

type MakeRoomFailure = DomainErrorOf<'SandboxCapReached'> | StoreFailure;

/**
 * How long a sandbox's conversations must have rested (and nothing used it) before it is
 * paused to make room: a conversation shows "idle" between its sandbox coming up and its
 * agent's first step, and "finished" between a new message and the agent's next step, and
 * these moments must not be mistaken for rest.
 */
export const MAKE_ROOM_GRACE_MS = 5_000;

/**
 * The per-user limit of sandboxes starting or running. Whatever adds one to a user's count
 * (a new reservation, a resume) checks the count and acts under the user's lock (`Locks`), so
 * concurrent starts never slip under the limit together, in one process or across several;
 * the pause that makes room (`atSandboxLimit`) happens under that lock too.
 */
export function createRoom(
  { sandboxes, locks, clock, ids, logger, options, resourceFactorOf }: Pick<SandboxServiceDeps, 'sandboxes' | 'locks' | 'clock' | 'ids' | 'logger' | 'options' | 'resourceFactorOf'>,
  startups: Startups,
  activity: Activity,
  resting: Resting,
  pause: (userId: string, id: string, reason: string | null) => ResultAsync<void, SandboxServiceError<'pause'>>,
  /** A ready pooled sandbox for this start (pool.ts), or null to create one. */
  claimPooled: (userId: string, spec: SandboxSpec) => ResultAsync<SandboxReservation | null, StoreFailure> = () => okAsync(null),
) {
  const maxRunning = options?.maxRunningSandboxesPerUser ?? Number.POSITIVE_INFINITY;
  const atLimit = options?.atSandboxLimit ?? 'pause_finished';

  const underUserLock = <T, E>(userId: string, work: () => ResultAsync<T, E>) => locks.withLock(`sandboxes of user ${userId}`, work);

  /** Pauses `needed` of the candidates, in order, passing over one whose pause fails. */
  const pauseInTurn = (userId: string, candidates: readonly SandboxRecord[], needed: number, reason: string | null, explained: boolean): ResultAsync<void, MakeRoomFailure> =>
    new ResultAsync(
      (async (): Promise<Result<void, MakeRoomFailure>> => {
        const paused: string[] = [];
        for (const candidate of candidates) {
          if (paused.length === needed) break;
          const result = await pause(userId, candidate.id, reason);
          if (result.isOk()) {
            paused.push(candidate.id);
            continue;
          }
          if (result.error.type === 'StoreUnavailable') return err(result.error);
          // The caller asked about its own sandbox: another one's pause failing (deleted meanwhile, engine trouble) is no error of its.
          logger.warn({ userId, sandboxId: candidate.id, error: result.error.type }, 'could not pause a sandbox to make room');
        }
        if (paused.length < needed) return err({ type: 'SandboxCapReached', limit: maxRunning, ...(explained ? { why: 'pause_failed' as const } : {}) });
        logger.info({ userId, paused }, atLimit === 'pause_oldest' ? 'paused the oldest sandbox to stay within the limit' : 'paused a sandbox whose conversations had finished, to stay within the limit');
        return ok(undefined);
      })(),
    );

  /** Makes sure the user may have one more sandbox running: refuses, or pauses another, at the limit. */
  const makeRoom = (userId: string): ResultAsync<void, MakeRoomFailure> => {
    if (!Number.isFinite(maxRunning)) return okAsync(undefined);
    return sandboxes.listByStatus(userId, ['STARTING', 'RUNNING']).andThen((active) => {
      if (active.length < maxRunning) return okAsync(undefined);
      const needed = active.length - maxRunning + 1;
      if (atLimit === 'refuse') return errAsync<void, MakeRoomFailure>({ type: 'SandboxCapReached', limit: maxRunning });
      if (atLimit === 'pause_oldest') {
        const oldestRunning = active.filter((r) => r.status === 'RUNNING').slice(0, needed);
        if (oldestRunning.length < needed) return errAsync<void, MakeRoomFailure>({ type: 'SandboxCapReached', limit: maxRunning });
        return pauseInTurn(userId, oldestRunning, needed, null, false);
      }
      return resting.restingAmong(active).andThen((found) => {
        const now = millisOf(clock);
        const candidates = found.filter((c) => now - c.idleSince >= MAKE_ROOM_GRACE_MS);
        if (candidates.length < needed) return errAsync<void, MakeRoomFailure>({ type: 'SandboxCapReached', limit: maxRunning, why: 'none_at_rest' });
        return pauseInTurn(
          userId,
          candidates.map((c) => c.record),
          needed,
          `paused to make room for another sandbox of yours (at most ${maxRunning} run at once); its conversations had finished or were waiting for you`,
          true,
        );
      });
    });
  };

  /** Writes the record (STARTING); the caller commits (brings it up) or cancels. */
  const insertReservation = (userId: string, spec: SandboxSpec, installationOfRecord: string): ResultAsync<SandboxReservation, StoreFailure> => {
    const record = newStartingRecord({ id: ids.next(), userId, spec, now: clock.now(), statusDetail: null });
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
