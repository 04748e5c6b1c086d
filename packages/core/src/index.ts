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
export type { SandboxStore, SandboxSpecCatalog } from './sandbox/store.js';
export { SandboxServiceErrors, type ReconcileReport, type SandboxReservation, type SandboxService, type SandboxServiceError, type SandboxServiceOptions } from './sandbox/service.js';

export * from './conversation/schema.js';
export {
  credentialHelperScript,
  DEFAULT_CLONE_TIMEOUT_MS,
  DEFAULT_CREDENTIAL_DIR,
  DEFAULT_GIT_USER_EMAIL,
  DEFAULT_GIT_USER_NAME,
  DEFAULT_SETUP_SCRIPT_TIMEOUT_MS,
  PROVIDER_HOSTS,
  repositoryDir,
  resolveRemote,
  scrubSecrets,
  workBranchName,
  type ConversationWorkspace,
  type RepositoryRemote,
  type WorkspaceOptions,
} from './workspace/repository.js';
export * from './workspace/guidance.js';
export { createWorkspaceService, WorkspaceServiceErrors, type GitChange, type WorkspaceDescription, type WorkspaceService, type WorkspaceServiceError } from './workspace/files.js';
export * from './conversation/state.js';
export { toAppConversation, toConversationInfo } from './conversation/view.js';
export type { ConversationFilter, ConversationStore, StartTaskFilter, StartTaskStore } from './conversation/store.js';
export {
  ConversationServiceErrors,
  DEFAULT_KEYLESS_MODEL_PREFIXES,
  type ConversationService,
  type ConversationServiceError,
  type ConversationServiceOptions,
  type ConversationStatusResponse,
} from './conversation/service.js';

export * from './service.js';

export type { EventSource, EventStore, NewEvent, StoredEvent } from './events/store.js';
export { createAesGcmCipher, keyFingerprint, parseSecretKey, type AesGcmCipherOptions, type SecretCipher, type SecretCipherError } from './secrets/cipher.js';

export * from './llm/client.js';
export * from './events/schema.js';
export { EventLog, type EventListener, type EventSubscription } from './events/log.js';
export {
  createAgentEngine,
  metricsOf,
  pendingConfirmation,
  DEFAULT_MAX_ITERATIONS,
  type AgentEngine,
  type AgentEngineOptions,
  type ConfirmationDecision,
  type ConfirmationFailure,
  type RecoveryReport,
  type UserMessage,
} from './agent/engine.js';
export * from './agent/security.js';
export * from './agent/condenser.js';
export * from './mcp/session.js';
export { nextExecutionStatus, type ExecutionEvent } from './agent/execution-state.js';
export { MISSING_RESULT, projectMessages, systemPrompt, type PromptContext } from './agent/prompt.js';
export { detectStuck, STUCK_THRESHOLDS, type StuckVerdict } from './agent/stuck.js';
export { parseReplayTrajectory, MAX_REPLAY_EVENTS, type ReplayPlan, type ReplayStep, type ReplayUserMessage } from './agent/replay.js';
export { BUILTIN_TOOLS, parseToolArguments, Toolset } from './agent/toolset.js';
export { executeBashTool, DEFAULT_COMMAND_WAIT_SECONDS } from './agent/bash-tool.js';
export { strReplaceEditorTool, MAX_VIEW_CHARS } from './agent/editor-tool.js';
export { thinkTool, finishTool } from './agent/builtin-tools.js';
export type { AgentTool, ToolContext, ToolOutcome } from './agent/tool.js';
export * from './agent/security-rules.js';
