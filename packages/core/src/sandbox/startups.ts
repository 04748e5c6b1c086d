import { millisOf } from '../clock.js';
import type { RuntimeObservation } from './runtime.js';
import type { SandboxRecord } from './schema.js';
import type { Observations } from './observations.js';
import type { SandboxServiceDeps } from './service-contract.js';

/**
 * Sandboxes this process is bringing up: creating them in the runtime, waiting until they
 * answer (or marking them ERROR after the start timeout), and who waits for them meanwhile.
 * Also the reservations this process wrote but has not committed yet, so maintenance leaves
 * both alone.
 */
export function createStartups(
  { sandboxes, runtime, clock, logger, background, options, shared }: Pick<SandboxServiceDeps, 'sandboxes' | 'runtime' | 'clock' | 'logger' | 'background' | 'options' | 'shared'>,
  { applyObservation, markError }: Observations,
) {
  const startTimeoutMs = options?.startTimeoutMs ?? 120_000;
  const pollIntervalMs = options?.pollIntervalMs ?? 250;
  const settling = new Map<string, Promise<SandboxRecord | null>>();
  /** Reservations written here and not committed or cancelled yet (nothing in the runtime). */
  const reserved = new Set<string>();
  /** Who wants to hear how a sandbox's start-up goes (start pipelines waiting for it). */
  const progressListeners = new Map<string, Set<(detail: string) => void>>();

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

  /** Runs a start-up in the background; whenSettled() waits for it meanwhile. */
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

  /** Creates the sandbox in the runtime and waits until it answers. */
  const bringUp = async (record: SandboxRecord, installationOfRecord: string, resourceFactor: number): Promise<SandboxRecord | null> => {
    const created = await runtime.create(
      {
        sandbox_id: record.id,
        user_id: record.user_id,
        installation_id: installationOfRecord,
        spec: record.spec,
        env: { ...record.spec.initial_env, ...keyVariable(record) },
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

  const whenSettled = async (userId: string, id: string, onProgress?: (detail: string) => void): Promise<SandboxRecord | null> => {
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
  };

  /**
   * Whether "not there" may only mean "not there yet": with several processes, a STARTING record
   * this process is not bringing up may be another's, between writing the reservation and
   * creating the container (or building its image). Until the start timeout has passed since
   * the record last changed, reads and reconcile leave it alone rather than mark it MISSING.
   */
  const startingElsewhere = (record: SandboxRecord, observed: RuntimeObservation) =>
    shared && observed.state === 'missing' && record.status === 'STARTING' && millisOf(clock) - Date.parse(record.updated_at) < startTimeoutMs;

  return {
    startTimeoutMs,
    startingElsewhere,
    /** Whether this process is bringing the sandbox up, or holds its uncommitted reservation. */
    inHand: (id: string) => settling.has(id) || reserved.has(id),
    reserved,
    awaitRunning,
    track,
    bringUp,
    removeInBackground,
    whenSettled,
  };
}

export type Startups = ReturnType<typeof createStartups>;

/** The sandbox's own key, in the variable its spec names (nothing for specs without one). */
const keyVariable = (record: SandboxRecord): Record<string, string> =>
  record.spec.session_api_key_variable && record.session_api_key ? { [record.spec.session_api_key_variable]: record.session_api_key } : {};
