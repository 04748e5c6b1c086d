import type { BackgroundTasks } from '../background.js';
import { millisOf, type Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { RuntimeObservation, SandboxRuntime } from './runtime.js';
import type { SandboxRecord } from './schema.js';
import type { Observations } from './observations.js';
import type { SandboxServiceDeps } from './service-contract.js';
import type { SandboxStore } from './store.js';

export interface StartupsDeps {
  sandboxes: SandboxStore;
  runtime: SandboxRuntime;
  clock: Clock;
  logger: Logger;
  background: BackgroundTasks;
  /** `startTimeoutMs` and `pollIntervalMs`. */
  options: SandboxServiceDeps['options'];
  /** Whether other processes share the store (then a STARTING record may be another process's start-up). */
  shared: boolean;
  observations: Observations;
}

/**
 * Sandboxes this process is bringing up: creating them in the runtime, waiting until they
 * answer (or marking them ERROR after the start timeout), and who waits for them meanwhile.
 * Also the reservations this process wrote but has not committed yet, so maintenance leaves
 * both alone.
 */
export interface Startups {
  /**
   * Whether "not there" may only mean "not there yet": with several processes, a STARTING record
   * this process is not bringing up may be another's, between writing the reservation and
   * creating the container (or building its image). Until the start timeout has passed since
   * the record last changed, reads and reconcile leave it alone rather than mark it MISSING.
   */
  startingElsewhere(record: SandboxRecord, observed: RuntimeObservation): boolean;
  /** Whether this process is bringing the sandbox up, or holds its uncommitted reservation. */
  inHand(id: string): boolean;
  /** Reservations written here and not committed or cancelled yet (nothing in the runtime). */
  readonly reserved: Set<string>;
  /** Polls the runtime until the sandbox is no longer starting, or marks it ERROR after the timeout. */
  awaitRunning(userId: string, id: string): Promise<SandboxRecord | null>;
  /** Runs a start-up in the background; whenSettled() waits for it meanwhile. */
  track(id: string, work: () => Promise<SandboxRecord | null>): void;
  /** Creates the sandbox in the runtime and waits until it answers. */
  bringUp(record: SandboxRecord, installationOfRecord: string, resourceFactor: number): Promise<SandboxRecord | null>;
  /**
   * Removes a deleted sandbox's container, retrying a few times (an engine may refuse while
   * the container is still being created or removed). What is left after that is removed by
   * the next reconcile, which removes the containers of deleted records it finds.
   */
  removeInBackground(sandboxId: string, why: string): void;
  /** The sandbox once settled (not STARTING), waiting for a start-up in progress; `onProgress` hears what it does meanwhile. */
  whenSettled(userId: string, id: string, onProgress?: (detail: string) => void): Promise<SandboxRecord | null>;
}

/** The start-ups in flight in this process. */
interface InFlight {
  readonly startTimeoutMs: number;
  readonly pollIntervalMs: number;
  readonly settling: Map<string, Promise<SandboxRecord | null>>;
  readonly reserved: Set<string>;
  /** Who wants to hear how a sandbox's start-up goes (start pipelines waiting for it). */
  readonly progressListeners: Map<string, Set<(detail: string) => void>>;
}

export function createStartups(deps: StartupsDeps): Startups {
  const inFlight: InFlight = {
    startTimeoutMs: deps.options?.startTimeoutMs ?? 120_000,
    pollIntervalMs: deps.options?.pollIntervalMs ?? 250,
    settling: new Map(),
    reserved: new Set(),
    progressListeners: new Map(),
  };
  return {
    startingElsewhere: (record, observed) =>
      deps.shared &&
      observed.state === 'missing' &&
      record.status === 'STARTING' &&
      millisOf(deps.clock) - Date.parse(record.updated_at) < inFlight.startTimeoutMs,
    inHand: (id) => inFlight.settling.has(id) || inFlight.reserved.has(id),
    reserved: inFlight.reserved,
    awaitRunning: (userId, id) => awaitRunning(deps, inFlight, userId, id),
    track: (id, work) => track(deps, inFlight, id, work),
    bringUp: (record, installationOfRecord, resourceFactor) =>
      bringUp(deps, inFlight, record, installationOfRecord, resourceFactor),
    removeInBackground: (sandboxId, why) => removeInBackground(deps, sandboxId, why),
    whenSettled: (userId, id, onProgress) => whenSettled(deps, inFlight, userId, id, onProgress),
  };
}

async function awaitRunning(
  deps: StartupsDeps,
  inFlight: InFlight,
  userId: string,
  id: string,
): Promise<SandboxRecord | null> {
  const attempts = Math.max(1, Math.ceil(inFlight.startTimeoutMs / inFlight.pollIntervalMs));
  for (let i = 0; i < attempts && !deps.background.closed; i++) {
    const inspected = await deps.runtime.inspect(id);
    if (inspected.isErr()) {
      const marked = await deps.observations.markError(
        userId,
        id,
        `could not inspect the sandbox: ${inspected.error.message}`,
      );
      return marked.unwrapOr(null);
    }
    const applied = await deps.observations.applyObservation(userId, id, inspected.value);
    if (applied.isErr()) return null;
    const record = applied.value;
    if (!record || record.status !== 'STARTING') return record;
    await deps.clock.sleep(inFlight.pollIntervalMs, deps.background.signal);
  }
  if (deps.background.closed) return (await deps.sandboxes.get(userId, id)).unwrapOr(null);
  const marked = await deps.observations.markError(
    userId,
    id,
    `the sandbox did not become ready within ${Math.round(inFlight.startTimeoutMs / 1000)} s; check that its image starts and stays up, then delete it and start a new one`,
  );
  return marked.unwrapOr(null);
}

function track(deps: StartupsDeps, inFlight: InFlight, id: string, work: () => Promise<SandboxRecord | null>): void {
  let done!: (record: SandboxRecord | null) => void;
  inFlight.settling.set(id, new Promise((resolve) => (done = resolve)));
  deps.background.spawn(`sandbox ${id}`, async () => {
    try {
      done(await work());
    } finally {
      inFlight.settling.delete(id);
    }
  });
}

function removeInBackground(deps: StartupsDeps, sandboxId: string, why: string): void {
  deps.background.spawn(`remove sandbox ${sandboxId}`, async () => {
    const delays = [0, 250, 1_000, 4_000];
    for (const [attempt, delay] of delays.entries()) {
      if (delay > 0) await deps.clock.sleep(delay, deps.background.signal);
      const removed = await deps.runtime.delete(sandboxId);
      if (removed.isOk()) return;
      if (attempt === delays.length - 1 || deps.background.closed) {
        deps.logger.warn(
          { sandboxId, why, reason: removed.error.message },
          'could not remove a deleted sandbox; the next reconcile removes it',
        );
        return;
      }
    }
  });
}

async function bringUp(
  deps: StartupsDeps,
  inFlight: InFlight,
  record: SandboxRecord,
  installationOfRecord: string,
  resourceFactor: number,
): Promise<SandboxRecord | null> {
  const created = await deps.runtime.create(
    {
      sandbox_id: record.id,
      user_id: record.user_id,
      installation_id: installationOfRecord,
      spec: record.spec,
      env: { ...record.spec.initial_env, ...keyVariable(record) },
      resource_factor: resourceFactor,
    },
    (detail) => {
      for (const listener of inFlight.progressListeners.get(record.id) ?? []) listener(detail);
      deps.background.spawn(`record progress of sandbox ${record.id}`, async () => {
        await deps.observations.applyObservation(record.user_id, record.id, {
          state: 'starting',
          detail,
          exposed_urls: [],
        });
      });
    },
  );
  const applied = created.isErr()
    ? await deps.observations.markError(record.user_id, record.id, created.error.message)
    : await deps.observations.applyObservation(record.user_id, record.id, created.value);
  const current = applied.unwrapOr(null);
  if (current?.status === 'DELETED') {
    // Deleted while it was being created: whatever the create left behind goes now.
    removeInBackground(deps, record.id, 'it was deleted while it was starting');
    return current;
  }
  if (created.isErr())
    deps.logger.warn({ sandboxId: record.id, reason: created.error.message }, 'sandbox failed to start');
  if (current?.status !== 'STARTING') return current;
  return awaitRunning(deps, inFlight, record.user_id, record.id);
}

async function whenSettled(
  deps: StartupsDeps,
  inFlight: InFlight,
  userId: string,
  id: string,
  onProgress?: (detail: string) => void,
): Promise<SandboxRecord | null> {
  const pending = inFlight.settling.get(id);
  if (pending && onProgress) {
    const listeners = inFlight.progressListeners.get(id) ?? new Set();
    listeners.add(onProgress);
    inFlight.progressListeners.set(id, listeners);
    return pending.finally(() => {
      listeners.delete(onProgress);
      if (listeners.size === 0) inFlight.progressListeners.delete(id);
    });
  }
  if (pending) return pending;
  const record = (await deps.sandboxes.get(userId, id)).unwrapOr(null);
  if (record?.status !== 'STARTING') return record;
  return awaitRunning(deps, inFlight, userId, id);
}

/** The sandbox's own key, in the variable its spec names (nothing for specs without one). */
const keyVariable = (record: SandboxRecord): Record<string, string> =>
  record.spec.session_api_key_variable && record.session_api_key
    ? { [record.spec.session_api_key_variable]: record.session_api_key }
    : {};
