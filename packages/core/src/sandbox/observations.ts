import { ok, okAsync, ResultAsync, type Result } from 'neverthrow';
import type { StoreFailure } from '../store-failure.js';
import type { RuntimeObservation } from './runtime.js';
import type { SandboxRecord } from './schema.js';
import { isSandboxLost, statusAfterObservation } from './state.js';
import type { SandboxServiceDeps } from './service-contract.js';

/**
 * What the runtime reports about a sandbox, written to its record: the one way a record's
 * status follows its container. Tells the conversation side once when a sandbox is lost.
 */
export function createObservations({ sandboxes, clock, onSandboxGone }: Pick<SandboxServiceDeps, 'sandboxes' | 'clock' | 'onSandboxGone'>) {
  /**
   * Whether an observation would change nothing on this record (then there is nothing to
   * write). While the status stays the same, a detail the runtime does not repeat is kept
   * (e.g. why a sandbox was paused).
   */
  const changesNothing = (record: SandboxRecord, observation: RuntimeObservation) =>
    statusAfterObservation(record.status, observation.state) === record.status &&
    (observation.detail === null || observation.detail === record.status_detail) &&
    (observation.location === undefined || observation.location === record.location) &&
    JSON.stringify(record.exposed_urls) === JSON.stringify(observation.exposed_urls);

  const applyObservation = (userId: string, id: string, observation: RuntimeObservation): ResultAsync<SandboxRecord | null, StoreFailure> => {
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
          ...(observation.location !== undefined ? { location: observation.location } : {}),
          updated_at: clock.now(),
        });
      })
      .andThen((record) => {
        if (record && lostNow && onSandboxGone) {
          const reason = `sandbox ${record.status === 'MISSING' ? 'vanished' : 'failed'}${record.status_detail ? `: ${record.status_detail}` : ''}`;
          return ResultAsync.fromSafePromise(onSandboxGone(userId, id, reason)).map(() => record);
        }
        return okAsync(record);
      });
  };

  const markError = (userId: string, id: string, detail: string) => applyObservation(userId, id, { state: 'error', detail, exposed_urls: [] });

  return { changesNothing, applyObservation, markError };
}

export type Observations = ReturnType<typeof createObservations>;
