/**
 * @acs/core: the framework-agnostic domain of the Agent Conversation Service.
 *
 * Compose a service from ports (stores, a sandbox runtime, clock, ids, logger):
 *
 * ```ts
 * const service = createAgentConversationService({ settings, conversations, startTasks, sandboxes, sandboxSpecs, runtime });
 * const view = await service.settings.load('alice'); // ResultAsync<SettingsView, DomainError>
 * ```
 */
export * from './errors.js';
export * from './ids.js';
export * from './clock.js';
export * from './logger.js';
export * from './pagination.js';
export * from './validation.js';
export type { StoreFailure } from './store-failure.js';
export type { InstallationStore } from './installation.js';

export * from './mcp/schema.js';
export type * from './mcp/port.js';
export { splitShellWords } from './mcp/shell-words.js';
export type { BackgroundTasks } from './background.js';

export * from './settings/schema.js';
export { applySettingsInput } from './settings/merge.js';
export { toSettingsView } from './settings/view.js';
export type { SettingsStore } from './settings/store.js';
export { SettingsServiceErrors, type SettingsService } from './settings/service.js';

export * from './sandbox/schema.js';
export * from './sandbox/state.js';
export type * from './sandbox/runtime.js';
export { resolveSandboxPath, unavailableSandboxRuntime } from './sandbox/runtime.js';
export * from './sandbox/shell.js';
export { openSandboxShell } from './sandbox/persistent-shell.js';
export type { SandboxStore, SandboxSpecCatalog } from './sandbox/store.js';
export { SandboxServiceErrors, type ReconcileReport, type SandboxReservation, type SandboxService, type SandboxServiceError, type SandboxServiceOptions } from './sandbox/service.js';

export * from './conversation/schema.js';
export type * from './conversation/workspace.js';
export type * from './conversation/agent-port.js';
export { parseReplayTrajectory, MAX_REPLAY_EVENTS, type ReplayPlan, type ReplayStep, type ReplayUserMessage } from './conversation/replay-trajectory.js';
export { nextExecutionStatus, type ExecutionEvent, type IllegalExecutionEvent } from './conversation/execution-state.js';
export { createWorkspaceService, WorkspaceServiceErrors, type GitChange, type WorkspaceDescription, type WorkspaceService, type WorkspaceServiceError } from './workspace/files.js';
export * from './conversation/state.js';
export type { ConversationOverview, ConversationStatusChange } from './conversation/overview.js';
export type { ConversationFilter, ConversationStore, StartTaskFilter, StartTaskStore } from './conversation/store.js';
export {
  ConversationServiceErrors,
  DEFAULT_KEYLESS_MODEL_PREFIXES,
  type ConversationService,
  type ConversationServiceError,
  type ConversationServiceOptions,
  type CreatedConversation,
} from './conversation/service.js';

export * from './service.js';

export type { EventSource, EventStore, NewEvent, StoredEvent } from './events/store.js';
export { createAesGcmCipher, keyFingerprint, parseSecretKey, type AesGcmCipherOptions, type SecretCipher, type SecretCipherError } from './secrets/cipher.js';

export * from './llm/client.js';
export * from './events/schema.js';
export { EventLog, type EventListener, type EventSubscription } from './events/log.js';
