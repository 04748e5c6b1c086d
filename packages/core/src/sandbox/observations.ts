import { ok, type Result, type ResultAsync } from 'neverthrow';
import type { Clock } from '../clock.js';
import { resultAsync } from '../result.js';
import type { StoreFailure } from '../store-failure.js';
import type { RuntimeObservation } from './runtime.js';
import type { SandboxRecord } from './schema.js';
import { isSandboxLost, statusAfterObservation } from './state.js';
import type { SandboxStore } from './store.js';

export interface ObservationsDeps {
  sandboxes: SandboxStore;
  clock: Clock;
  /** Called once when a sandbox becomes unusable (ERROR, MISSING). */
  onSandboxGone: ((userId: string, sandboxId: string, reason: string) => Promise<void>) | undefined;
}

/**
 * What the runtime reports about a sandbox, written to its record: the one way a record's
 * status follows its container. Tells the conversation side once when a sandbox is lost.
 */
export interface Observations {
  /** Whether an observation would change nothing on this record (then there is nothing to write). */
  changesNothing(record: SandboxRecord, observation: RuntimeObservation): boolean;
  /**
   * Writes the observation to the record; null when there is no record. With `seen`, the record
   * as it was read before the runtime was asked: when it has changed since (a pause, a resume or
   * another observation wrote meanwhile), the observation is older than what the record says,
   * and the record is left as it is.
   */
  applyObservation(
    userId: string,
    id: string,
    observation: RuntimeObservation,
    seen?: SandboxRecord,
  ): ResultAsync<SandboxRecord | null, StoreFailure>;
  /** Records the sandbox as ERROR with `detail`. */
  markError(userId: string, id: string, detail: string): ResultAsync<SandboxRecord | null, StoreFailure>;
}

export function createObservations(deps: ObservationsDeps): Observations {
  return {
    changesNothing,
    applyObservation: (userId, id, observation, seen) =>
      resultAsync(applyObservation(deps, userId, id, observation, seen)),
    markError: (userId, id, detail) =>
      resultAsync(applyObservation(deps, userId, id, { state: 'error', detail, exposed_urls: [] })),
  };
}

/**
 * While the status stays the same, a detail the runtime does not repeat is kept (e.g. why a
 * sandbox was paused).
 */
function changesNothing(record: SandboxRecord, observation: RuntimeObservation): boolean {
  return (
    statusAfterObservation(record.status, observation.state) === record.status &&
    (observation.detail === null || observation.detail === record.status_detail) &&
    (observation.location === undefined || observation.location === record.location) &&
    JSON.stringify(record.exposed_urls) === JSON.stringify(observation.exposed_urls)
  );
}

/**
 * Whether the record was written after `seen` was read. An inspection that began before a pause
 * (a refresh on read, under load) can answer after it: had it been written, a paused sandbox
 * would have shown STARTING ("waiting for the container to answer", its pod going away), and then
 * PAUSED without the reason it was paused for.
 */
const changedSince = (current: SandboxRecord, seen: SandboxRecord) =>
  current.updated_at !== seen.updated_at ||
  current.status !== seen.status ||
  current.status_detail !== seen.status_detail;

async function applyObservation(
  deps: ObservationsDeps,
  userId: string,
  id: string,
  observation: RuntimeObservation,
  seen?: SandboxRecord,
): Promise<Result<SandboxRecord | null, StoreFailure>> {
  let lostNow = false;
  const updated = await deps.sandboxes.update(userId, id, (current): Result<SandboxRecord, never> => {
    if (changesNothing(current, observation) || (seen && changedSince(current, seen))) return ok(current);
    const status = statusAfterObservation(current.status, observation.state);
    lostNow = !isSandboxLost(current.status) && isSandboxLost(status);
    return ok({
      ...current,
      status,
      status_detail: status === current.status ? (observation.detail ?? current.status_detail) : observation.detail,
      exposed_urls: observation.exposed_urls,
      ...(observation.location !== undefined ? { location: observation.location } : {}),
      updated_at: deps.clock.now(),
    });
  });
  if (updated.isErr()) return updated;
  const record = updated.value;
  if (record && lostNow && deps.onSandboxGone) {
    const reason = `sandbox ${record.status === 'MISSING' ? 'vanished' : 'failed'}${record.status_detail ? `: ${record.status_detail}` : ''}`;
    await deps.onSandboxGone(userId, id, reason);
  }
  return ok(record);
}
