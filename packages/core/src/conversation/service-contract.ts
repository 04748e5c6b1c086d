import type { ResultAsync } from 'neverthrow';
import type { BackgroundTasks } from '../background.js';
import type { Clock } from '../clock.js';
import type { DomainErrorType, ErrorsOf } from '../errors.js';
import type { EventListener, EventLog, EventSubscription } from '../events/log.js';
import type { TransientListener } from '../events/transient.js';
import type { ConfirmationEvent, EventPage, EventQuery, MessageEvent } from '../events/schema.js';
import type { IdGenerator } from '../ids.js';
import type { Logger } from '../logger.js';
import type { Page, PageRequest } from '../pagination.js';
import type { SandboxService } from '../sandbox/service.js';
import type { SandboxStore } from '../sandbox/store.js';
import type { SettingsService } from '../settings/service.js';
import type { EgressOptions } from '../settings/egress.js';
import type { AgentPort, ConfirmationDecision } from './agent-port.js';
import type { ConversationKeyBinding } from './keys.js';
import type { ConversationOverview, ConversationStatusChange } from './overview.js';
import type { GitProvider } from '../settings/schema.js';
import type {
  AppConversationStartRequest,
  ConversationStatus,
  NewConversationRequest,
  SendMessageRequest,
  StartTask,
} from './schema.js';
import type { ConversationFilter, ConversationStore, StartTaskFilter, StartTaskStore } from './store.js';

export interface ConversationServiceOptions {
  /** Accept `conversation_id` in V0 create requests. Default false (the field is then a 422). */
  allowClientConversationIds?: boolean;
  /** Models that need no API key (local or cloud-credential providers). */
  keylessModelPrefixes?: readonly string[];
  /** The operator's allow-lists of the hosts model and MCP URLs may name (also the `mcp_config` of a V0 create); none: any host. */
  egress?: EgressOptions;
}

export const DEFAULT_KEYLESS_MODEL_PREFIXES = ['bedrock/', 'lemonade/', 'ollama/', 'ollama_chat/'] as const;

export interface ConversationServiceDeps {
  conversations: ConversationStore;
  startTasks: StartTaskStore;
  log: EventLog;
  agent: AgentPort;
  sandboxStore: SandboxStore;
  sandboxes: SandboxService;
  settings: SettingsService;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  background: BackgroundTasks;
  options?: ConversationServiceOptions;
}

/** What a V0 create stored: the conversation, and its status (STARTING while its sandbox comes up). */
export interface CreatedConversation {
  conversation_id: string;
  status: ConversationStatus;
}

/** What a conversation's owner may change of it; a field left out is kept, null clears it. */
export interface ConversationUpdate {
  /** null gives it back its default title. */
  title?: string | null;
  public?: boolean | null;
  /** Cleared (null) only with the branch and provider it had: clear those in the same update. */
  selected_repository?: string | null;
  selected_branch?: string | null;
  git_provider?: GitProvider | null;
}

/** A message queued for a conversation's agent, and where it stands among those waiting. */
export interface QueuedMessage {
  event: MessageEvent;
  /** 1-based: how many user messages wait for the agent, this one included. */
  position: number;
}

/** The most user messages that may wait for a conversation's agent when one more is queued (as OpenHands limits pending messages). */
export const MAX_PENDING_MESSAGES = 10;

/**
 * What each conversation operation can fail with (the compiler holds the implementation to it).
 *
 * A start (create, startApp, start) stores the sandbox first: a new one is reserved, a paused
 * one resumed, so it can fail as a sandbox start or resume does (SandboxServiceErrors.reserve
 * and .resume: the runtime, the user's limit). V0 create shares that path with the resume of
 * a paused sandbox, so its type keeps SandboxNotFound and IllegalSandboxTransition though a
 * create always reserves a new sandbox. Reads of conversations refresh their sandboxes from the
 * runtime, but a runtime that fails there is logged, not returned. IllegalConversationTransition
 * is listed for stop and start because the state machine's type allows it for every event,
 * though stop and start are legal from every status today.
 */
export const ConversationServiceErrors = {
  create: [
    'ValidationFailed',
    'HostNotAllowed',
    'SettingsRequired',
    'SandboxImageNotAllowed',
    'ConversationIdTaken',
    'SandboxCapReached',
    'SandboxNotFound',
    'IllegalSandboxTransition',
    'SandboxesUnavailable',
    'SandboxRuntimeFailed',
    'StoreUnavailable',
  ],
  startApp: [
    'ValidationFailed',
    'SettingsRequired',
    'SandboxImageNotAllowed',
    'SandboxNotFound',
    'IllegalSandboxTransition',
    'ConversationIdTaken',
    'SandboxCapReached',
    'SandboxesUnavailable',
    'SandboxRuntimeFailed',
    'StoreUnavailable',
  ],
  get: ['ConversationNotFound', 'StoreUnavailable'],
  search: ['StoreUnavailable'],
  getMany: ['StoreUnavailable'],
  count: ['StoreUnavailable'],
  delete: ['ConversationNotFound', 'StoreUnavailable'],
  stop: ['ConversationNotFound', 'IllegalConversationTransition', 'StoreUnavailable'],
  start: [
    'ConversationNotFound',
    'IllegalConversationTransition',
    'SettingsRequired',
    'SandboxImageNotAllowed',
    'SandboxCapReached',
    'SandboxNotFound',
    'IllegalSandboxTransition',
    'SandboxesUnavailable',
    'SandboxRuntimeFailed',
    'StoreUnavailable',
  ],
  getStartTasks: ['StoreUnavailable'],
  searchStartTasks: ['StoreUnavailable'],
  countStartTasks: ['StoreUnavailable'],
  sendMessage: ['ValidationFailed', 'ConversationNotFound', 'StoreUnavailable'],
  respondToConfirmation: ['ConversationNotFound', 'ConfirmationNotPending', 'StoreUnavailable'],
  rename: ['ConversationNotFound', 'StoreUnavailable'],
  switchProfile: ['ConversationNotFound', 'SettingsNotFound', 'ProfileNotFound', 'StoreUnavailable'],
  update: ['ValidationFailed', 'ConversationNotFound', 'StoreUnavailable'],
  queueMessage: ['ValidationFailed', 'ConversationNotFound', 'TooManyPendingMessages', 'StoreUnavailable'],
  followStartTask: ['StartTaskNotFound', 'StoreUnavailable'],
  pauseAgent: ['ConversationNotFound', 'StoreUnavailable'],
  runAgent: ['ConversationNotFound', 'StoreUnavailable'],
  searchEvents: ['ConversationNotFound', 'StoreUnavailable'],
  subscribeEvents: ['ConversationNotFound', 'StoreUnavailable'],
  keyBinding: ['ConversationNotFound', 'StoreUnavailable'],
  rotateKey: ['ConversationNotFound', 'StoreUnavailable'],
} as const satisfies Record<string, readonly DomainErrorType[]>;

/** The error union of a conversation operation. */
export type ConversationServiceError<K extends keyof typeof ConversationServiceErrors> = ErrorsOf<
  (typeof ConversationServiceErrors)[K]
>;

export interface ConversationService {
  /**
   * Whether conversation ids may be chosen by the client (allowClientConversationIds): then an
   * id need not be a UUID, and readers by id (the V1 batch read) take any id a create accepted.
   */
  readonly acceptsClientIds: boolean;
  /** V0 New Conversation. */
  create(
    userId: string,
    request: NewConversationRequest,
  ): ResultAsync<CreatedConversation, ConversationServiceError<'create'>>;
  /** V1 start: returns the start task at once; the rest runs in the background. */
  startApp(
    userId: string,
    request: AppConversationStartRequest,
  ): ResultAsync<StartTask, ConversationServiceError<'startApp'>>;
  /** One conversation with its sandbox's live status. */
  get(userId: string, id: string): ResultAsync<ConversationOverview, ConversationServiceError<'get'>>;
  /** A page of the user's conversations, newest first. */
  search(
    userId: string,
    filter: ConversationFilter,
    page: PageRequest,
  ): ResultAsync<Page<ConversationOverview>, ConversationServiceError<'search'>>;
  /** The conversations with these ids, in their order; null for one that does not exist. */
  getMany(
    userId: string,
    ids: readonly string[],
  ): ResultAsync<(ConversationOverview | null)[], ConversationServiceError<'getMany'>>;
  count(userId: string, filter: ConversationFilter): ResultAsync<number, ConversationServiceError<'count'>>;
  delete(userId: string, id: string): ResultAsync<void, ConversationServiceError<'delete'>>;
  stop(userId: string, id: string): ResultAsync<ConversationStatusChange, ConversationServiceError<'stop'>>;
  start(userId: string, id: string): ResultAsync<ConversationStatusChange, ConversationServiceError<'start'>>;
  getStartTasks(
    userId: string,
    ids: readonly string[],
  ): ResultAsync<(StartTask | null)[], ConversationServiceError<'getStartTasks'>>;
  searchStartTasks(
    userId: string,
    filter: StartTaskFilter,
    page: PageRequest,
    order: 'newest_first' | 'oldest_first',
  ): ResultAsync<Page<StartTask>, ConversationServiceError<'searchStartTasks'>>;
  countStartTasks(
    userId: string,
    filter: StartTaskFilter,
  ): ResultAsync<number, ConversationServiceError<'countStartTasks'>>;
  /**
   * Sends a user message to the agent. With `run: true` a running conversation acts on it
   * at once; with `run: false` (or a stopped conversation) it is kept, and the agent sees
   * it on its next run. An agent that is working sees it at its next step either way.
   */
  sendMessage(
    userId: string,
    id: string,
    message: SendMessageRequest,
  ): ResultAsync<MessageEvent, ConversationServiceError<'sendMessage'>>;
  /**
   * Accepts or rejects the actions waiting for confirmation (confirmation mode). Accepted ones
   * run; rejected ones get an observation saying so, and the agent waits for a message.
   * ConfirmationNotPending (409) when nothing waits.
   */
  respondToConfirmation(
    userId: string,
    id: string,
    decision: ConfirmationDecision,
  ): ResultAsync<ConfirmationEvent, ConversationServiceError<'respondToConfirmation'>>;
  /** Gives the conversation a new title. */
  rename(userId: string, id: string, title: string): ResultAsync<void, ConversationServiceError<'rename'>>;
  /** Changes what the owner may change of a conversation (its metadata: nothing runs). */
  update(
    userId: string,
    id: string,
    update: ConversationUpdate,
  ): ResultAsync<ConversationOverview, ConversationServiceError<'update'>>;
  /**
   * Queues a message for the agent of a conversation, also while it is still starting: `target`
   * is the conversation's id, or `task-<start task id>` (the start task's conversation). The
   * message is appended to its log and the agent acts on it as with `sendMessage` and `run:
   * true` (a starting conversation's agent, once it is ready). TooManyPendingMessages when
   * MAX_PENDING_MESSAGES already wait (user messages after the agent's last event).
   */
  queueMessage(
    userId: string,
    target: string,
    message: SendMessageRequest,
  ): ResultAsync<QueuedMessage, ConversationServiceError<'queueMessage'>>;
  /**
   * Follows a start task of this process: `listener` gets its current state, then each change,
   * until READY or ERROR (then `onEnd('finished')`), or until the service closes
   * (`onEnd` with why). StartTaskNotFound for a task the user does not have.
   */
  followStartTask(
    userId: string,
    taskId: string,
    listener: (task: StartTask) => void,
    onEnd: (reason: string) => void,
  ): ResultAsync<{ close(): void }, ConversationServiceError<'followStartTask'>>;
  /**
   * Switches the conversation to one of the user's LLM profiles: its next model calls (the one
   * in flight finishes as it began) use the profile's model, base URL and key, the settings' key
   * when the profile has none. `llm_model` shows the profile's model.
   */
  switchProfile(
    userId: string,
    id: string,
    profileName: string,
  ): ResultAsync<void, ConversationServiceError<'switchProfile'>>;
  /**
   * Pauses the agent where it is (the model call in flight is aborted); the conversation and
   * its sandbox stay up, and `runAgent` (or a message with run) goes on from there.
   */
  pauseAgent(userId: string, id: string): ResultAsync<void, ConversationServiceError<'pauseAgent'>>;
  /** Lets a paused agent go on (a running conversation only; a stopped one is started with `start`). */
  runAgent(userId: string, id: string): ResultAsync<void, ConversationServiceError<'runAgent'>>;
  /** A page of the conversation's events after an id. */
  searchEvents(
    userId: string,
    id: string,
    query: EventQuery,
  ): ResultAsync<EventPage, ConversationServiceError<'searchEvents'>>;
  /**
   * Replays the events after `afterId`, then delivers new ones as they happen, each once, in
   * order. `onEnd` is called if the service ends the subscription (the conversation was deleted).
   * `onTransient` hears the pieces of answers being written from the end of the replay on
   * (never stored, never replayed: a later subscriber gets the stored event instead).
   */
  subscribeEvents(
    userId: string,
    id: string,
    afterId: number,
    listener: EventListener,
    onEnd?: (reason: string) => void,
    onTransient?: TransientListener,
  ): ResultAsync<EventSubscription, ConversationServiceError<'subscribeEvents'>>;
  /**
   * What the conversation's own key is bound to now (its sandbox, the key's generation, whether
   * the sandbox was deleted), for an edge that checks a presented key: read from the stores
   * only, never from the runtime.
   */
  keyBinding(userId: string, id: string): ResultAsync<ConversationKeyBinding, ConversationServiceError<'keyBinding'>>;
  /** Gives the conversation's key a new generation: every key given out before opens nothing from now on. */
  rotateKey(userId: string, id: string): ResultAsync<ConversationKeyBinding, ConversationServiceError<'rotateKey'>>;
  /** Marks the conversations of a lost sandbox STOPPED. */
  handleSandboxGone(userId: string, sandboxId: string, reason: string): Promise<void>;
}
