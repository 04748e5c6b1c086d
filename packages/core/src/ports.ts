/**
 * @acs/core/ports: every interface an adapter implements, with the errors it answers with and
 * the helpers an implementation needs. One import for someone writing an adapter:
 *
 * ```ts
 * import type { SandboxRuntime, SandboxRuntimeError } from '@acs/core/ports';
 * ```
 */
export type { SettingsStore } from './settings/store.js';
export type {
  ApiKeyStore,
  DeviceGrant,
  DeviceGrantInsertOutcome,
  DeviceGrantKey,
  DeviceGrantLimits,
  DeviceGrantStore,
  StoredApiKey,
} from './access/store.js';
export type { ConversationFilter, ConversationStore, StartTaskFilter, StartTaskStore } from './conversation/store.js';
export type { EventSource, EventStore, NewEvent, StoredEvent } from './events/store.js';
export type { EventNotifier, EventNotifierListener } from './events/notifier.js';
export type { StreamingDelta, TransientEvent, TransientListener } from './events/transient.js';
export { continuesDelta, joinDeltas, MAX_DELTA_TEXT, parseTransientEvent } from './events/transient.js';
export type {
  ConversationLease,
  ConversationLeaseStore,
  HeldLease,
  LeaseFence,
  LeaseHolder,
  LeaseLost,
} from './events/lease.js';
export { leaseLost } from './events/lease.js';
export {
  ConversationOwnership,
  type OwnedLease,
  type OwnershipEvents,
  type OwnershipOptions,
} from './conversation/ownership.js';
export type { SandboxSpecCatalog, SandboxStore } from './sandbox/store.js';
export type { InstallationStore } from './installation.js';
export { InProcessLocks, type Locks } from './locks.js';
// Turns an operation written top-down (an async function returning a Result) into the ResultAsync a port answers with.
export { resultAsync } from './result.js';
export type { StoreFailure } from './store-failure.js';
export type * from './sandbox/runtime.js';
export {
  isShellEnded,
  type OpenShellOptions,
  type SandboxShell,
  type ShellEnded,
  type ShellOutput,
} from './sandbox/shell.js';
// For runtimes that play bash rather than run it (test doubles): what the persistent shell types, and what it reads back.
export { parseShellLine, shellMarker, type ShellLine } from './sandbox/shell-protocol.js';
export {
  clippedOutputNote,
  DEFAULT_EXEC_MAX_OUTPUT_BYTES,
  DEFAULT_READ_FILE_MAX_BYTES,
  MAX_SYMLINK_HOPS,
  resolveSandboxPath,
  SANDBOX_CAPABILITIES,
  SANDBOX_LABELS,
  splitClippedOutput,
  unavailableSandboxRuntime,
} from './sandbox/runtime.js';
export { createSandboxRuntimePool, type PooledRuntime } from './sandbox/runtime-pool.js';
export { DEFAULT_MAX_UNHEARD_BYTES, ProcessOutputChannel } from './sandbox/process-output.js';
// For runtime adapters: what is the same on every engine (failures, exec's bounds, paths and files, spawned processes).
export { attemptRuntime, RuntimeFailure, unreachableCode } from './sandbox/runtime-error.js';
export { BoundedOutput, execOutputs, execResult, type ExecEnding } from './sandbox/exec-output.js';
export { createWorkingDirectories, missingFile, type WorkingDirectories } from './sandbox/runtime-files.js';
export {
  engineMethods,
  type EngineMethods,
  type EngineRunOptions,
  type RuntimeAttempt,
  type SandboxEngine,
} from './sandbox/engine-methods.js';
export {
  checkSpawnCommand,
  startSpawnedProcess,
  type SpawnEnd,
  type SpawnFeed,
  type SpawnSession,
  type StartSpawnedOptions,
} from './sandbox/spawned-process.js';
export type * from './llm/client.js';
export type * from './mcp/port.js';
export type * from './git/port.js';
export type { SecretCipher, SecretCipherError } from './secrets/cipher.js';
export type * from './conversation/agent-port.js';
export type * from './conversation/workspace.js';
export type { BackgroundTasks } from './background.js';
export { manualClock, millisOf, systemClock, type Clock } from './clock.js';
export { normalizeId, randomIdGenerator, sequentialIdGenerator, type IdGenerator } from './ids.js';
export { silentLogger, type Logger } from './logger.js';
// For adapters that read what a peer sends, and connect where users say: bounds that follow bytes, not pieces, and the operators' host allow-lists.
export { ByteAccumulator } from './net/byte-accumulator.js';
export {
  BodyTooLargeError,
  eventSizeCheck,
  eventStreamBound,
  readBoundedBody,
  wholeBodyBound,
} from './net/bounded-body.js';
export { allowedHostSet, describeAllowedHosts, isHostAllowed, normalizeHostEntry } from './net/allowed-hosts.js';
export { storeUnavailable } from './errors.js';
// Keyset pages, for stores: opaque cursors on (created_at, id), and paging an in-memory list.
export {
  compareNewestFirst,
  compareOldestFirst,
  decodeCursor,
  encodeCursor,
  MAX_PAGE_SIZE,
  PAGE_ID_PATTERN,
  pageInMemory,
  pageOf,
  type Page,
  type PageCursor,
  type PageRequest,
} from './pagination.js';
