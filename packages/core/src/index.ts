/**
 * @acs/core: the framework-agnostic domain of the Agent Conversation Service.
 *
 * This entry is for a host that composes the service and for code that calls it: the factory,
 * the services and the errors each operation can fail with, and the domain rules an agent
 * builds on. The rest has its own entry:
 *
 * - `@acs/core/schemas`: the zod schemas of everything that crosses the edge, and their types;
 * - `@acs/core/ports`: the interfaces an adapter implements (stores, runtime, model, MCP,
 *   cipher, clock, ids, logger, the agent) and the helpers an implementation needs;
 * - `@acs/core/testing`: the contract suites an adapter's tests run.
 *
 * ```ts
 * const service = createAgentConversationService({ ...stores, sandboxSpecs, runtime, llm, agent: createAgent() });
 * const view = await service.settings.load('alice'); // ResultAsync<SettingsView, DomainError>
 * ```
 */

// The service and its parts.
export {
  createAgentConversationService,
  SandboxSpecServiceErrors,
  type AgentConversationService,
  type AgentConversationServiceOptions,
  type AgentConversationServicePorts,
  type SandboxSpecService,
} from './service.js';
export { SettingsServiceErrors, type SettingsOverview, type SettingsService } from './settings/service.js';
export { DEFAULT_USER_SETTING_LIMITS, applyUserSettingLimits, type UserSettingLimits } from './settings/limits.js';
export { imageMatches, type SandboxImagePolicy } from './sandbox/images.js';
export type { LlmProfileInput, LlmProfilesView, LlmProfileView, SaveProfileRequest } from './settings/profiles.js';
export type { SettingsChange } from './settings/merge.js';
export type { AllowedHostList, EgressOptions } from './settings/egress.js';
export { allowedHostSet, normalizeHostEntry } from './net/allowed-hosts.js';
export {
  API_KEY_PREFIX,
  ApiKeyServiceErrors,
  hashSecret,
  type ApiKeyHolder,
  type ApiKeyService,
  type NewApiKeyOptions,
} from './access/api-keys.js';
export {
  DeviceAuthorizationErrors,
  type DeviceAuthorizationOptions,
  type DeviceAuthorizationService,
  type DeviceToken,
  type StartedDeviceAuthorization,
} from './access/device-authorization.js';
export {
  SandboxServiceErrors,
  type ReconcileReport,
  type SandboxEndpoint,
  type SandboxReservation,
  type SandboxService,
  type SandboxServiceError,
  type SandboxServiceOptions,
  type SandboxUse,
} from './sandbox/service.js';
export { isSandboxKey } from './sandbox/keys.js';
export {
  ConversationServiceErrors,
  DEFAULT_KEYLESS_MODEL_PREFIXES,
  MAX_PENDING_MESSAGES,
  type ConversationService,
  type ConversationUpdate,
  type QueuedMessage,
  type ConversationServiceError,
  type ConversationServiceOptions,
  type CreatedConversation,
} from './conversation/service.js';
export type { ConversationOverview, ConversationStatusChange } from './conversation/overview.js';
export type { ConversationKeyBinding } from './conversation/keys.js';
export {
  WorkspaceServiceErrors,
  type GitChange,
  type RepositorySkill,
  type WorkspaceDescription,
  type WorkspaceService,
  type WorkspaceServiceError,
} from './workspace/files.js';
export {
  GitServiceErrors,
  type BranchSearch,
  type GitService,
  type InstallationSearch,
  type RepositorySearch,
} from './git/service.js';
export { decodeGitPageId, encodeGitPageId, GIT_PAGE_ID_PATTERN } from './git/page-id.js';
export type { Page, PageRequest } from './pagination.js';
export { EventLog, type EventListener, type EventSubscription } from './events/log.js';
export type { StreamingDelta, TransientEvent, TransientListener } from './events/transient.js';

// What the operations fail with, and how an edge explains it.
export {
  DEVICE_TOKEN_REFUSALS,
  DOMAIN_ERROR_CODES,
  explainDomainError,
  validationFailed,
  type DomainError,
  type DomainErrorCode,
  type DomainErrorOf,
  type DomainErrorType,
  type DeviceTokenRefusal,
  type ErrorHints,
  type ErrorsOf,
  type ExplainedDomainError,
  type FieldIssue,
} from './errors.js';
export { findUnstorableText, STORABLE_TEXT_PATTERN, toFieldIssues, UNSTORABLE_TEXT_MESSAGE } from './validation.js';

// Secrets at rest: the cipher a storage adapter seals them with.
export { createAesGcmCipher, keyFingerprint, parseSecretKey, type AesGcmCipherOptions } from './secrets/cipher.js';
export { openSettings, sealSettings } from './secrets/sealed-settings.js';
export { checkSecretKeys, SecretKeyMismatchError, secretKeyCheckValue } from './secrets/key-check.js';

// Domain rules an agent builds on.
export { openSandboxShell } from './sandbox/persistent-shell.js';
export { readFirstTarEntry, tarOneFile, type TarHead } from './sandbox/tar.js';
export { killArgv, spawnArgv, spawnedPid } from './sandbox/spawn-protocol.js';
export {
  nextExecutionStatus,
  type ExecutionEvent,
  type IllegalExecutionEvent,
} from './conversation/execution-state.js';
export {
  parseReplayTrajectory,
  MAX_REPLAY_EVENTS,
  type ReplayPlan,
  type ReplayStep,
  type ReplayUserMessage,
} from './conversation/replay-trajectory.js';
export { applySettingsInput } from './settings/merge.js';
export { lexShell, splitShellWords, type ShellToken } from './shell-lexer.js';
export { cloneData } from './clone.js';
export { KeyedQueue } from './keyed-queue.js';
export { KeyedSemaphore } from './keyed-semaphore.js';
