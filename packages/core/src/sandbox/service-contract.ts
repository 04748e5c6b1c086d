import type { ResultAsync } from 'neverthrow';
import type { BackgroundTasks } from '../background.js';
import type { Clock } from '../clock.js';
import type { DomainErrorOf, DomainErrorType, ErrorsOf } from '../errors.js';
import type { IdGenerator } from '../ids.js';
import type { InstallationStore } from '../installation.js';
import type { Locks } from '../locks.js';
import type { Logger } from '../logger.js';
import type { Page, PageRequest } from '../pagination.js';
import type { StoreFailure } from '../store-failure.js';
import type { SandboxImagePolicy } from './images.js';
import type { SandboxRuntime } from './runtime.js';
import type { SandboxInfo, SandboxRecord, SandboxSpec, SandboxStatus } from './schema.js';
import type { SandboxSpecCatalog, SandboxStore } from './store.js';

/**
 * What the conversations in a sandbox are doing, as the conversation store says (the sandbox
 * side cannot tell by itself: the composition gives it `useOf`).
 */
export type SandboxUse =
  /** No conversation: a sandbox started on its own (`POST /api/v1/sandboxes`), perhaps used by a server inside it. */
  | { readonly kind: 'unused' }
  /** An agent works in it or is about to (a conversation starting, a run not begun yet). */
  | { readonly kind: 'working' }
  /**
   * Every conversation in it has finished, waits for the user (a message, a confirmation) or
   * is stopped; `since` is when the last of them last changed (ms since the epoch).
   */
  | { readonly kind: 'resting'; readonly since: number };

export interface SandboxServiceOptions {
  /**
   * The spec of a sandbox started on its own, with no spec named (`POST /api/v1/sandboxes`
   * without one, as the OpenHands CLI's `acp --cloud` sends it): e.g. the OpenHands
   * agent-server spec, since such a sandbox is only of use with a server of its own in it.
   * Default: the catalog's default (which conversations use).
   */
  standaloneSpecId?: string;
  /** How long a sandbox may take to answer before it is marked ERROR. Default 120 s. */
  startTimeoutMs?: number;
  /** How often a starting sandbox is inspected. Default 250 ms. */
  pollIntervalMs?: number;
  /** Most sandboxes one user may have starting or running at once. Default: no limit. */
  maxRunningSandboxesPerUser?: number;
  /**
   * What a start or resume does at the user's limit:
   * - `pause_finished` (the default): pauses the user's least recently used running sandbox
   *   whose conversations have all finished or wait for the user (`SandboxUse` "resting", for
   *   at least a few seconds), and refuses (429) when there is none. A sandbox whose agent
   *   works, or that has no conversation, is never paused for another;
   * - `refuse`: always refuses (429);
   * - `pause_oldest`: pauses the user's oldest running sandbox whatever runs in it.
   */
  atSandboxLimit?: 'pause_finished' | 'refuse' | 'pause_oldest';
  /** Pause running sandboxes nobody used for this long. Default: never. */
  idlePauseAfterMs?: number;
  /**
   * Pause a running sandbox whose conversations have all finished or wait for the user (a
   * message, a confirmation; or are stopped) once nothing used it for this long, counted from
   * the later of its last use and its conversations' last change. Sandboxes without a
   * conversation follow only `idlePauseAfterMs`. Default 5 min; 0 turns it off.
   */
  idlePauseFinishedAfterMs?: number;
  /**
   * How often a maintenance round runs (idle pause, and reconcile when it is due). Default: a
   * quarter of the shorter idle time, at most 60 s. With several processes only the leading one runs it.
   */
  maintenanceIntervalMs?: number;
  /**
   * How often the records are reconciled with the runtime while the service runs (statuses,
   * adoption of sandboxes an engine that came back still holds, leftovers of deleted ones), on
   * top of the reconcile at start. Default 60 s; 0 turns it off.
   */
  reconcileIntervalMs?: number;
  /**
   * Warm sandboxes: how many ready sandboxes to keep per spec id, e.g. `{ bookworm: 1 }`. A start
   * of that spec (`POST /api/v1/sandboxes`, a new conversation's sandbox) claims one instead of
   * creating one, when one is ready. Pooled sandboxes belong to no user until claimed (never
   * listed, never counted in a user's limit, never idle-paused); an engine's capacity counts
   * them. Default: none (0 for every spec: no pool).
   */
  sandboxPool?: Readonly<Record<string, number>>;
  /** How often the pools are checked and refilled besides after each claim. Default 30 s; 0: only after claims and reconciles. */
  sandboxPoolCheckIntervalMs?: number;
  /** How long after a claim the pool is refilled: the new container's start would slow the claimant's first commands. Default 2 s. */
  sandboxPoolRefillDelayMs?: number;
  /**
   * Which images users may name (`sandbox_base_container_image`) besides the specs' own.
   * Default: none (a user picks among the specs). See `SandboxImagePolicy`.
   */
  sandboxImages?: SandboxImagePolicy;
}

/** How many pooled sandboxes of one spec there are (`SandboxService.poolStatus`). */
export interface SandboxPoolCount {
  /** How many the pool keeps (the `sandboxPool` option). */
  size: number;
  /** RUNNING, waiting to be claimed. */
  ready: number;
  /** Being started to refill the pool. */
  filling: number;
}

/** What reconcile() found. */
export interface ReconcileReport {
  /** Stored sandboxes whose status was checked against the runtime. */
  checked: number;
  /** Of those, how many changed status. */
  changed: number;
  /** Sandboxes the runtime held that no record knew of, now recorded. */
  adopted: number;
  /** Containers of deleted sandboxes that were still there, now removed. */
  removed: number;
}

/**
 * A sandbox record written (STARTING, counted against the user's limit) but not brought up
 * yet, so a request that needs it together with other records can still give it back.
 */
export interface SandboxReservation {
  readonly record: SandboxRecord;
  /** Brings the sandbox up in the background. Call once, after everything else the request writes is stored. */
  commit(): void;
  /** Gives the reservation back: the record becomes a DELETED tombstone and nothing was created in the runtime. Never fails (logs instead). */
  cancel(): Promise<void>;
}

export interface SandboxServiceDeps {
  sandboxes: SandboxStore;
  /** This installation's identity: sandboxes are labelled with it, and only those are listed and adopted. */
  installation: InstallationStore;
  specs: SandboxSpecCatalog;
  runtime: SandboxRuntime;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  background: BackgroundTasks;
  /** Where the per-user limit is held and who leads maintenance (shared by processes on one store). */
  locks: Locks;
  /** This process's name when it asks to lead maintenance. */
  replica: string;
  /** Whether other processes share the store (then a STARTING record may be another process's start-up). */
  shared: boolean;
  options?: SandboxServiceOptions;
  /** Called once when a sandbox becomes unusable (ERROR, MISSING, deleted). */
  onSandboxGone?: (userId: string, sandboxId: string, reason: string) => Promise<void>;
  /** The user's remote_runtime_resource_factor (scales the runtime's limits). Default 1. */
  resourceFactorOf?: (userId: string) => Promise<number>;
  /**
   * What the conversations in a sandbox are doing (for pausing finished ones, when idle or to
   * make room at the limit). Without it every sandbox counts as having no conversation.
   */
  useOf?: (userId: string, sandboxId: string) => ResultAsync<SandboxUse, StoreFailure>;
}

/**
 * What each sandbox operation can fail with (the compiler holds the implementation to it).
 *
 * Acting on a sandbox (pause, resume, delete) reads it first: SandboxNotFound, or
 * IllegalSandboxTransition when its state forbids the action. The runtime answers
 * SandboxesUnavailable (engine down) or SandboxRuntimeFailed. Making room for one more
 * sandbox (start, resume) is SandboxCapReached at the user's limit unless it can pause
 * another sandbox of the user's instead (`atSandboxLimit`); if that pause fails (it was
 * deleted or failed meanwhile, or the runtime refused) the answer is still SandboxCapReached:
 * the caller never gets an error about another sandbox. (A delete is refused
 * by the state machine only for a deleted sandbox, which is answered as SandboxNotFound;
 * IllegalSandboxTransition stays in its list because the state machine's type does not say
 * which actions it can refuse.)
 */
export const SandboxServiceErrors = {
  start: [
    'SandboxSpecNotFound',
    'SandboxCapReached',
    'SandboxesUnavailable',
    'SandboxRuntimeFailed',
    'StoreUnavailable',
  ],
  reserve: ['SandboxCapReached', 'SandboxesUnavailable', 'SandboxRuntimeFailed', 'StoreUnavailable'],
  get: ['SandboxNotFound', 'StoreUnavailable'],
  getMany: ['StoreUnavailable'],
  search: ['StoreUnavailable'],
  pause: [
    'SandboxNotFound',
    'IllegalSandboxTransition',
    'SandboxesUnavailable',
    'SandboxRuntimeFailed',
    'StoreUnavailable',
  ],
  resume: [
    'SandboxNotFound',
    'IllegalSandboxTransition',
    'SandboxCapReached',
    'SandboxesUnavailable',
    'SandboxRuntimeFailed',
    'StoreUnavailable',
  ],
  delete: [
    'SandboxNotFound',
    'IllegalSandboxTransition',
    'SandboxesUnavailable',
    'SandboxRuntimeFailed',
    'StoreUnavailable',
  ],
  resolveSpec: ['SandboxSpecNotFound', 'StoreUnavailable'],
  endpoint: ['SandboxNotFound', 'StoreUnavailable'],
  reconcile: ['SandboxesUnavailable', 'SandboxRuntimeFailed', 'StoreUnavailable'],
} as const satisfies Record<string, readonly DomainErrorType[]>;

/**
 * Where one of a sandbox's exposed URLs leads, as its stored record says (the runtime is not
 * asked: this is read for every request through the URL's proxy).
 */
export interface SandboxEndpoint {
  sandboxId: string;
  userId: string;
  status: SandboxStatus;
  statusDetail: string | null;
  /** Whether the sandbox has an exposed URL of that name at all (its spec declares the port). */
  offered: boolean;
  /** The runtime's address of it (e.g. `http://127.0.0.1:49153`) while RUNNING; null otherwise. */
  target: string | null;
  /** The sandbox's own key (null for specs without one). */
  sessionApiKey: string | null;
}

/** The error union of a sandbox operation. */
export type SandboxServiceError<K extends keyof typeof SandboxServiceErrors> = ErrorsOf<
  (typeof SandboxServiceErrors)[K]
>;

export interface SandboxService {
  /** Creates a sandbox from a spec (when absent: `standaloneSpecId`, else the default). Returns at once, STARTING; it comes up in the background. */
  start(userId: string, specId?: string | null): ResultAsync<SandboxInfo, SandboxServiceError<'start'>>;
  /** Creates a sandbox from an already resolved spec and returns its record. */
  startFromSpec(userId: string, spec: SandboxSpec): ResultAsync<SandboxRecord, SandboxServiceError<'reserve'>>;
  /**
   * Like startFromSpec (the runtime must answer, the user's limit applies), but the sandbox
   * is only brought up on `commit()`; `cancel()` gives it back. For requests that store more
   * than the sandbox and must store all of it or none of it.
   */
  reserve(userId: string, spec: SandboxSpec): ResultAsync<SandboxReservation, SandboxServiceError<'reserve'>>;
  get(userId: string, id: string): ResultAsync<SandboxInfo, SandboxServiceError<'get'>>;
  getMany(userId: string, ids: readonly string[]): ResultAsync<(SandboxInfo | null)[], SandboxServiceError<'getMany'>>;
  search(userId: string, page: PageRequest): ResultAsync<Page<SandboxInfo>, SandboxServiceError<'search'>>;
  pause(userId: string, id: string): ResultAsync<void, SandboxServiceError<'pause'>>;
  resume(userId: string, id: string): ResultAsync<void, SandboxServiceError<'resume'>>;
  /**
   * Deletes the sandbox: the record is DELETED at once (also while the sandbox is still
   * starting), then its container is removed, now or, if the runtime fails, by retries in the
   * background and at the next reconcile. Refused only when the runtime cannot be reached.
   */
  delete(userId: string, id: string): ResultAsync<void, SandboxServiceError<'delete'>>;
  /**
   * Where the sandbox's exposed URL `name` (e.g. AGENT_SERVER) leads now, and whose sandbox it
   * is, for the URL's proxy: found by the sandbox id alone (the proxy checks the caller).
   */
  endpoint(id: string, name: string): ResultAsync<SandboxEndpoint, SandboxServiceError<'endpoint'>>;
  /**
   * The user's RUNNING sandbox whose own key (`session_api_key`, e.g. an agent-server's) is
   * `key`; null when none is. Compared in constant time; a user has only a few running.
   */
  runningByKey(userId: string, key: string): ResultAsync<SandboxInfo | null, StoreFailure>;
  /** The spec to use: by id, or the catalog default. */
  resolveSpec(specId?: string | null): ResultAsync<SandboxSpec, SandboxServiceError<'resolveSpec'>>;
  /** The catalog's default spec. */
  defaultSpec(): ResultAsync<SandboxSpec, StoreFailure>;
  /**
   * The spec a user's image (`sandbox_base_container_image`) runs with: the spec of that image,
   * else an ad-hoc spec on the default one when `sandboxImages` allows the image, else
   * SandboxImageNotAllowed.
   */
  specForImage(image: string): ResultAsync<SandboxSpec, DomainErrorOf<'SandboxImageNotAllowed'> | StoreFailure>;
  /** Null when users may name the image (see specForImage), else why not. */
  checkImage(image: string): ResultAsync<DomainErrorOf<'SandboxImageNotAllowed'> | null, StoreFailure>;
  /**
   * Resolves when the sandbox has settled (RUNNING, PAUSED, ERROR, MISSING or deleted),
   * waiting for start-up in progress. Null when it does not exist for this user. `onProgress`
   * hears what a slow start-up is doing meanwhile (e.g. building the image).
   */
  whenSettled(userId: string, id: string, onProgress?: (detail: string) => void): Promise<SandboxRecord | null>;
  /**
   * Stored records of these sandboxes, each refreshed from the runtime first (so a
   * sandbox that died is seen, and its conversations stopped). Missing ids are left out.
   */
  liveRecords(userId: string, ids: readonly string[]): ResultAsync<Map<string, SandboxRecord>, StoreFailure>;
  /** Pauses the sandbox unless another conversation still needs it; never fails (logs instead). */
  pauseIfUnused(userId: string, id: string, stillNeeded: boolean): Promise<void>;
  /** Notes that a sandbox is in use, so idle pausing (in this process or another) leaves it alone. */
  touch(userId: string, sandboxId: string): void;
  /**
   * Brings the records in line with the runtime, e.g. after a restart: each stored
   * sandbox gets the status its container has now (RUNNING, PAUSED, ERROR with the
   * reason, MISSING), and sandboxes the runtime holds without a record are adopted.
   */
  reconcile(): ResultAsync<ReconcileReport, SandboxServiceError<'reconcile'>>;
  /** The warm pools per spec id: their size, ready and filling sandboxes (the specs of `sandboxPool`, and any others with pooled sandboxes left). */
  poolStatus(): ResultAsync<Record<string, SandboxPoolCount>, StoreFailure>;
  /** Refills the warm pools now (it also happens after each claim, after a reconcile and on a timer); resolves when the refill's sandboxes are started, not yet running. */
  fillPool(): Promise<void>;
  /** Pauses running sandboxes idle longer than idlePauseAfterMs, and those whose conversations rest idle longer than idlePauseFinishedAfterMs; resolves to how many. */
  pauseIdle(): Promise<number>;
  /** Stops the maintenance timer (and gives up leading it). */
  stop(): void;
}
