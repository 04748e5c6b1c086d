import { err, errAsync, ok, okAsync, ResultAsync, type Result } from 'neverthrow';
import type { BackgroundTasks } from '../background.js';
import type { AgentPort, ConfirmationDecision } from './agent-port.js';
import { parseReplayTrajectory } from './replay-trajectory.js';
import type { EventListener, EventLog, EventSubscription } from '../events/log.js';
import type { ConfirmationEvent, EventPage, EventQuery, MessageEvent } from '../events/schema.js';
import type { Clock } from '../clock.js';
import { validationFailed, type DomainError, type DomainErrorOf, type DomainErrorType, type ErrorsOf } from '../errors.js';
import { normalizeId, type IdGenerator } from '../ids.js';
import type { Logger } from '../logger.js';
import type { Page, PageRequest } from '../pagination.js';
import type { SandboxRecord, SandboxSpec } from '../sandbox/schema.js';
import type { SandboxService, SandboxServiceError } from '../sandbox/service.js';
import { isSandboxLost, planSandboxAction } from '../sandbox/state.js';
import type { SandboxStore } from '../sandbox/store.js';
import type { StoredSettings } from '../settings/schema.js';
import type { SettingsService } from '../settings/service.js';
import type { StoreFailure } from '../store-failure.js';
import {
  toStartTask,
  type AppConversation,
  type AppConversationStartRequest,
  type ConversationInfo,
  type ConversationLaunch,
  type ConversationRecord,
  type ConversationStatus,
  type NewConversationRequest,
  type NewConversationResponse,
  type SendMessageRequest,
  type StartTask,
  type StartTaskRecord,
  type StartTaskStatus,
} from './schema.js';
import { nextExecutionStatus } from './execution-state.js';
import { effectiveConversationStatus, nextConversationStatus, type ConversationStatusEvent } from './state.js';
import type { ConversationFilter, ConversationStore, StartTaskFilter, StartTaskStore } from './store.js';
import { toAppConversation, toConversationInfo } from './view.js';
import { createMicroagentMessage, suggestedTaskMessage } from './first-message.js';

export interface ConversationServiceOptions {
  /** Accept `conversation_id` in V0 create requests. Default false (the field is then a 422). */
  allowClientConversationIds?: boolean;
  /** Models that need no API key (local or cloud-credential providers). */
  keylessModelPrefixes?: readonly string[];
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

/** Result of V0 start/stop. */
export interface ConversationStatusResponse {
  status: 'ok';
  conversation_id: string;
  message: string | null;
  conversation_status: ConversationStatus;
}

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
    'SettingsRequired',
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
    'SandboxNotFound',
    'IllegalSandboxTransition',
    'ConversationIdTaken',
    'SandboxCapReached',
    'SandboxesUnavailable',
    'SandboxRuntimeFailed',
    'StoreUnavailable',
  ],
  getInfo: ['ConversationNotFound', 'StoreUnavailable'],
  listInfo: ['StoreUnavailable'],
  search: ['StoreUnavailable'],
  getMany: ['StoreUnavailable'],
  count: ['StoreUnavailable'],
  delete: ['ConversationNotFound', 'StoreUnavailable'],
  stop: ['ConversationNotFound', 'IllegalConversationTransition', 'StoreUnavailable'],
  start: [
    'ConversationNotFound',
    'IllegalConversationTransition',
    'SettingsRequired',
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
  pauseAgent: ['ConversationNotFound', 'StoreUnavailable'],
  runAgent: ['ConversationNotFound', 'StoreUnavailable'],
  searchEvents: ['ConversationNotFound', 'StoreUnavailable'],
  subscribeEvents: ['ConversationNotFound', 'StoreUnavailable'],
} as const satisfies Record<string, readonly DomainErrorType[]>;

/** The error union of a conversation operation. */
export type ConversationServiceError<K extends keyof typeof ConversationServiceErrors> = ErrorsOf<(typeof ConversationServiceErrors)[K]>;

export interface ConversationService {
  /** V0 New Conversation. */
  create(userId: string, request: NewConversationRequest): ResultAsync<NewConversationResponse, ConversationServiceError<'create'>>;
  /** V1 start: returns the start task at once; the rest runs in the background. */
  startApp(userId: string, request: AppConversationStartRequest): ResultAsync<StartTask, ConversationServiceError<'startApp'>>;
  getInfo(userId: string, id: string): ResultAsync<ConversationInfo, ConversationServiceError<'getInfo'>>;
  listInfo(userId: string, filter: ConversationFilter, page: PageRequest): ResultAsync<Page<ConversationInfo>, ConversationServiceError<'listInfo'>>;
  search(userId: string, filter: ConversationFilter, page: PageRequest): ResultAsync<Page<AppConversation>, ConversationServiceError<'search'>>;
  getMany(userId: string, ids: readonly string[]): ResultAsync<(AppConversation | null)[], ConversationServiceError<'getMany'>>;
  count(userId: string, filter: ConversationFilter): ResultAsync<number, ConversationServiceError<'count'>>;
  delete(userId: string, id: string): ResultAsync<void, ConversationServiceError<'delete'>>;
  stop(userId: string, id: string): ResultAsync<ConversationStatusResponse, ConversationServiceError<'stop'>>;
  start(userId: string, id: string): ResultAsync<ConversationStatusResponse, ConversationServiceError<'start'>>;
  getStartTasks(userId: string, ids: readonly string[]): ResultAsync<(StartTask | null)[], ConversationServiceError<'getStartTasks'>>;
  searchStartTasks(
    userId: string,
    filter: StartTaskFilter,
    page: PageRequest,
    order: 'newest_first' | 'oldest_first',
  ): ResultAsync<Page<StartTask>, ConversationServiceError<'searchStartTasks'>>;
  countStartTasks(userId: string, filter: StartTaskFilter): ResultAsync<number, ConversationServiceError<'countStartTasks'>>;
  /**
   * Sends a user message to the agent. With `run: true` a running conversation acts on it
   * at once; with `run: false` (or a stopped conversation) it is kept, and the agent sees
   * it on its next run. An agent that is working sees it at its next step either way.
   */
  sendMessage(userId: string, id: string, message: SendMessageRequest): ResultAsync<MessageEvent, ConversationServiceError<'sendMessage'>>;
  /**
   * Accepts or rejects the actions waiting for confirmation (confirmation mode). Accepted ones
   * run; rejected ones get an observation saying so, and the agent waits for a message.
   * ConfirmationNotPending (409) when nothing waits.
   */
  respondToConfirmation(userId: string, id: string, decision: ConfirmationDecision): ResultAsync<ConfirmationEvent, ConversationServiceError<'respondToConfirmation'>>;
  /** Gives the conversation a new title. */
  rename(userId: string, id: string, title: string): ResultAsync<void, ConversationServiceError<'rename'>>;
  /**
   * Pauses the agent where it is (the model call in flight is aborted); the conversation and
   * its sandbox stay up, and `runAgent` (or a message with run) goes on from there.
   */
  pauseAgent(userId: string, id: string): ResultAsync<void, ConversationServiceError<'pauseAgent'>>;
  /** Lets a paused agent go on (a running conversation only; a stopped one is started with `start`). */
  runAgent(userId: string, id: string): ResultAsync<void, ConversationServiceError<'runAgent'>>;
  /** A page of the conversation's events after an id. */
  searchEvents(userId: string, id: string, query: EventQuery): ResultAsync<EventPage, ConversationServiceError<'searchEvents'>>;
  /**
   * Replays the events after `afterId`, then delivers new ones as they happen, each once, in
   * order. `onEnd` is called if the service ends the subscription (the conversation was deleted).
   */
  subscribeEvents(
    userId: string,
    id: string,
    afterId: number,
    listener: EventListener,
    onEnd?: (reason: string) => void,
  ): ResultAsync<EventSubscription, ConversationServiceError<'subscribeEvents'>>;
  /** Marks the conversations of a lost sandbox STOPPED. */
  handleSandboxGone(userId: string, sandboxId: string, reason: string): Promise<void>;
}

type Plan = { kind: 'existing'; sandbox: SandboxRecord } | { kind: 'new'; spec: SandboxSpec };
type Planned = { stored: StoredSettings | null; plan: Plan };

/** Taking back a step of a start that failed later. */
type Undo = () => ResultAsync<unknown, DomainError> | Promise<void>;

/**
 * How a start stores its conversation (inserted, or a stopped one moved to STARTING), what
 * that can fail with, and how it is undone when a later step fails.
 */
interface ConversationStep<E> {
  readonly name: string;
  store(record: ConversationRecord): ResultAsync<ConversationRecord, E>;
  undo(record: ConversationRecord): Undo;
  /** Whether the launch's initial message is appended (only to a new conversation). */
  readonly appendsInitialMessage: boolean;
}

export function createConversationService(deps: ConversationServiceDeps): ConversationService {
  const { conversations, startTasks, log, agent, sandboxStore, sandboxes, settings, clock, ids, logger, background } = deps;
  const keyless = deps.options?.keylessModelPrefixes ?? DEFAULT_KEYLESS_MODEL_PREFIXES;

  /** Refuses to start an agent that could not call its model. */
  const requireLlmSettings = (
    stored: StoredSettings | null,
    modelOverride: string | null,
  ): Result<StoredSettings | null, DomainErrorOf<'SettingsRequired'>> => {
    if (!stored) return err({ type: 'SettingsRequired', missing: 'settings' });
    const model = modelOverride ?? stored.llm_model;
    if (!model) return err({ type: 'SettingsRequired', missing: 'llm_model' });
    const keyRequired = !keyless.some((prefix) => model.startsWith(prefix));
    if (keyRequired && !stored.llm_api_key?.trim()) return err({ type: 'SettingsRequired', missing: 'llm_api_key' });
    return ok(stored);
  };

  const specFor = (stored: StoredSettings | null): ResultAsync<SandboxSpec, StoreFailure> =>
    stored?.sandbox_base_container_image ? sandboxes.specForImage(stored.sandbox_base_container_image) : sandboxes.defaultSpec();

  /** Transition a stored conversation; returns null when it no longer exists. */
  const transition = (
    userId: string,
    id: string,
    event: ConversationStatusEvent,
    patch: Partial<Pick<ConversationRecord, 'status_detail' | 'execution_status' | 'sandbox_id'>> = {},
  ): ResultAsync<ConversationRecord | null, DomainErrorOf<'IllegalConversationTransition' | 'StoreUnavailable'>> =>
    conversations.update(userId, id, (current): Result<ConversationRecord, DomainErrorOf<'IllegalConversationTransition'>> =>
      nextConversationStatus(current.status, event)
        .mapErr((e): DomainErrorOf<'IllegalConversationTransition'> => ({ type: 'IllegalConversationTransition', conversationId: id, from: e.from, event: e.event }))
        .map((status) => {
          // The agent learns its sandbox is ready: idle the first time, otherwise it keeps its status.
          const ready = event === 'sandbox_ready' ? nextExecutionStatus(current.execution_status, 'ready').unwrapOr(current.execution_status) : current.execution_status;
          const agent = ready !== current.execution_status ? { execution_status: ready } : {};
          return status === current.status && Object.keys(patch).length === 0 && Object.keys(agent).length === 0
            ? current
            : { ...current, ...patch, ...agent, status, updated_at: clock.now() };
        }),
    );

  /** Moves a start task on; a detail (progress of the step before) does not carry over to the next step. */
  const setTask = (userId: string, taskId: string, status: StartTaskStatus, extra: Partial<StartTaskRecord> = {}) =>
    startTasks.update(userId, taskId, (t): Result<StartTaskRecord, never> =>
      ok({ ...t, ...(status === t.status ? {} : { detail: null }), ...extra, status, updated_at: clock.now() }),
    );

  /** Puts a user message in the log; the agent picks it up when it is woken (now, or when its sandbox is ready). */
  const appendUserMessage = (userId: string, conversationId: string, message: { text: string; image_urls: readonly string[] }): ResultAsync<MessageEvent, StoreFailure> =>
    log
      .append(userId, conversationId, [{ kind: 'message', source: 'user', timestamp: clock.now(), text: message.text, image_urls: [...message.image_urls] }])
      .map((events) => events[0] as MessageEvent);

  /** Other conversations that still need this sandbox. */
  const othersUsing = (userId: string, sandboxId: string, exceptId: string) =>
    conversations.listBySandbox(userId, sandboxId).map((list) => list.filter((c) => c.id !== exceptId));

  /**
   * Has the agent clone the conversation's repository into its running sandbox (`AgentPort.prepareWorkspace`).
   * Returns false, with the conversation STOPPED and the task in ERROR saying why, when it cannot.
   */
  const prepareWorkspace = async (userId: string, task: StartTaskRecord, box: SandboxRecord): Promise<boolean> => {
    const found = await conversations.get(userId, task.app_conversation_id);
    const record = found.isOk() ? found.value : null;
    if (!record?.selected_repository) return true;
    const stored = await settings.loadWithSecrets(userId);
    const at = () => clock.now();
    const result = await agent.prepareWorkspace({
      sandboxId: box.id,
      workingDir: box.spec.working_dir,
      conversationId: record.id,
      repository: record.selected_repository,
      branch: record.selected_branch,
      provider: record.git_provider,
      settings: stored.isOk() ? stored.value : null,
      onStep: async (step) => void (await setTask(userId, task.id, step)),
      onReport: async (report) => void (await log.append(userId, record.id, [{ kind: 'setup', source: 'environment', timestamp: at(), ...report }])),
    });
    if (result.ok) {
      const saved = await conversations.update(userId, record.id, (c): Result<ConversationRecord, never> => ok({ ...c, workspace: result.workspace, updated_at: at() }));
      if (saved.isOk()) return true;
      logger.warn({ conversationId: record.id, operation: saved.error.operation, errorClass: saved.error.errorClass }, 'could not record the prepared repository');
    }
    const detail = result.ok ? 'could not record the prepared repository' : result.reason;
    logger.warn({ conversationId: record.id, sandboxId: box.id, detail }, 'could not prepare the repository of a conversation');
    // Not fatal for the agent: started again (say with a fixed token), it acts on the waiting message.
    await log.append(userId, record.id, [{ kind: 'error', source: 'environment', timestamp: at(), code: 'repository_setup_failed', message: detail, fatal: false }]);
    await transition(userId, record.id, 'start_failed', { status_detail: detail });
    await setTask(userId, task.id, 'ERROR', { detail });
    return false;
  };

  /** Brings the conversation's sandbox up and marks the conversation RUNNING, recording each step on the task. */
  const runStart = async (userId: string, task: StartTaskRecord, sandboxId: string): Promise<void> => {
    await setTask(userId, task.id, 'WAITING_FOR_SANDBOX', { sandbox_id: sandboxId });
    const current = (await sandboxStore.get(userId, sandboxId)).unwrapOr(null);
    if (current?.status === 'PAUSED') {
      const resumed = await sandboxes.resume(userId, sandboxId);
      if (resumed.isErr()) logger.warn({ sandboxId, error: resumed.error.type }, 'could not resume sandbox for conversation');
    }
    // A slow start-up (an image being built) says what it is doing on the task.
    const settled = await sandboxes.whenSettled(userId, sandboxId, (detail) => {
      background.spawn(`record start progress of ${task.app_conversation_id}`, async () => {
        await startTasks.update(userId, task.id, (t): Result<StartTaskRecord, never> =>
          ok(t.status === 'WAITING_FOR_SANDBOX' ? { ...t, detail, updated_at: clock.now() } : t),
        );
      });
    });
    if (settled?.status !== 'RUNNING') {
      const detail = settled
        ? `sandbox ${sandboxId} is ${settled.status === 'DELETED' ? 'deleted' : settled.status}${settled.status_detail && settled.status !== 'DELETED' ? `: ${settled.status_detail}` : ''}`
        : `sandbox ${sandboxId} no longer exists`;
      await transition(userId, task.app_conversation_id, 'start_failed', { status_detail: detail });
      await setTask(userId, task.id, 'ERROR', { detail });
      return;
    }
    if (!(await prepareWorkspace(userId, task, settled))) return;
    await setTask(userId, task.id, 'STARTING_CONVERSATION');
    const ready = await transition(userId, task.app_conversation_id, 'sandbox_ready', { status_detail: null });
    if (ready.isErr() || ready.value === null) {
      const others = await othersUsing(userId, sandboxId, task.app_conversation_id);
      await sandboxes.pauseIfUnused(userId, sandboxId, others.isErr() || others.value.some((c) => c.status !== 'STOPPED'));
      const detail =
        ready.isErr() && ready.error.type === 'IllegalConversationTransition'
          ? 'the conversation was stopped while it was starting'
          : ready.isErr()
            ? `could not record the conversation as running (${ready.error.type})`
            : 'the conversation was deleted while it was starting';
      await setTask(userId, task.id, 'ERROR', { detail });
      return;
    }
    await setTask(userId, task.id, 'READY');
    agent.wake(userId, task.app_conversation_id);
  };

  /**
   * Stores everything a start needs, all of it or none of it: the sandbox (a new one reserved,
   * or a paused one resumed), the conversation (`storing`: inserted, or moved to STARTING), its
   * first message and its start task. Only then does anything run: the sandbox is brought up
   * and the start pipeline follows in the background. When a step fails, the steps before it
   * are undone, newest first, and the request fails with that step's error.
   */
  const launch = <E extends DomainError>(
    userId: string,
    conversation: Omit<ConversationRecord, 'sandbox_id'>,
    plan: Plan,
    request: AppConversationStartRequest,
    storing: ConversationStep<E>,
  ): ResultAsync<{ conversation: ConversationRecord; task: StartTaskRecord }, SandboxServiceError<'reserve' | 'resume'> | StoreFailure | E> => {
    const undo: { step: string; run: Undo }[] = [];
    let commit = (): void => {};
    const rollback = async (error: DomainError): Promise<void> => {
      for (const { step, run } of undo.reverse()) {
        const undone = await run();
        if (undone?.isErr()) logger.error({ conversationId: conversation.id, step, error: undone.error.type }, 'could not undo a step of a failed start');
      }
      logger.warn({ conversationId: conversation.id, userId, error: error.type }, 'a conversation start failed; what it had stored was undone');
    };
    const undoable = <T, F>(step: string, result: ResultAsync<T, F>, undoOf: (value: T) => Undo | null) =>
      result.map((value) => {
        const run = undoOf(value);
        if (run) undo.push({ step, run });
        return value;
      });

    const sandbox: ResultAsync<SandboxRecord, SandboxServiceError<'reserve' | 'resume'>> =
      plan.kind === 'new'
        ? undoable('reserve the sandbox', sandboxes.reserve(userId, plan.spec), (reservation) => () => reservation.cancel()).map((reservation) => {
            commit = () => reservation.commit();
            return reservation.record;
          })
        : plan.sandbox.status === 'PAUSED'
          ? // Resumed now, not in the background, so a refusal (the user's limit) is this request's answer.
            undoable('resume the sandbox', sandboxes.resume(userId, plan.sandbox.id), () => async () => {
              const others = await othersUsing(userId, plan.sandbox.id, conversation.id);
              await sandboxes.pauseIfUnused(userId, plan.sandbox.id, others.isErr() || others.value.some((c) => c.status !== 'STOPPED'));
            }).map(() => plan.sandbox)
          : okAsync(plan.sandbox);

    const work = sandbox.andThen((box) => {
      const record: ConversationRecord = { ...conversation, sandbox_id: box.id };
      const stored = undoable(storing.name, storing.store(record), () => storing.undo(record));
      const withMessage = stored.andThen((saved) => {
        const initial = storing.appendsInitialMessage ? userMessageOf(saved.launch.initial_message) : null;
        // The first message is in the log before anything acts on it.
        return initial ? appendUserMessage(userId, saved.id, initial).map(() => saved) : okAsync(saved);
      });
      return withMessage.andThen((saved) => {
        const now = clock.now();
        const task: StartTaskRecord = {
          id: ids.next(),
          user_id: userId,
          status: 'WORKING',
          detail: null,
          app_conversation_id: saved.id,
          sandbox_id: box.id,
          request,
          created_at: now,
          updated_at: now,
        };
        return startTasks.insert(task).map(() => ({ conversation: saved, task, sandboxId: box.id }));
      });
    });

    return work
      .map(({ conversation: saved, task, sandboxId }) => {
        // Everything is stored: now things may run.
        commit();
        background.spawn(`start conversation ${saved.id}`, () => runStart(userId, task, sandboxId));
        return { conversation: saved, task };
      })
      .orElse((error) => ResultAsync.fromSafePromise(rollback(error)).andThen(() => errAsync(error)));
  };

  /** A new conversation is inserted (refused if its id is taken); undone with its events and tasks. */
  const insertConversation = (userId: string): ConversationStep<DomainErrorOf<'ConversationIdTaken' | 'StoreUnavailable'>> => ({
    name: 'store the conversation',
    appendsInitialMessage: true,
    store: (record) =>
      conversations
        .insert(record)
        .andThen((outcome) =>
          outcome === 'inserted' ? okAsync(record) : errAsync<ConversationRecord, DomainErrorOf<'ConversationIdTaken'>>({ type: 'ConversationIdTaken', conversationId: record.id }),
        ),
    // Its events and tasks go with it (the first message is appended next).
    undo: (record) => () =>
      log
        .deleteConversation(userId, record.id)
        .andThen(() => startTasks.deleteByConversation(userId, record.id))
        .andThen(() => conversations.delete(userId, record.id)),
  });

  /** A stopped conversation is moved to STARTING in its (new) sandbox; undone by restoring what it was. */
  const restartConversation = (
    userId: string,
    previous: ConversationRecord,
  ): ConversationStep<DomainErrorOf<'IllegalConversationTransition' | 'ConversationNotFound' | 'StoreUnavailable'>> => ({
    name: 'mark the conversation starting',
    appendsInitialMessage: false,
    store: (record) =>
      transition(userId, record.id, 'start', { status_detail: null, sandbox_id: record.sandbox_id }).andThen((c) =>
        c ? okAsync(c) : errAsync<ConversationRecord, DomainErrorOf<'ConversationNotFound'>>({ type: 'ConversationNotFound', conversationId: record.id }),
      ),
    undo: (record) => () =>
      conversations.update(userId, record.id, (c): Result<ConversationRecord, never> =>
        ok({ ...c, status: previous.status, status_detail: previous.status_detail, sandbox_id: previous.sandbox_id, updated_at: clock.now() }),
      ),
  });

  const newRecord = (
    userId: string,
    id: string,
    fields: Partial<ConversationRecord> & Pick<ConversationRecord, 'launch' | 'conversation_version'>,
  ): Omit<ConversationRecord, 'sandbox_id'> => {
    const now = clock.now();
    return {
      id,
      user_id: userId,
      title: `Conversation ${id.slice(0, 5)}`,
      status: 'STARTING',
      status_detail: null,
      execution_status: null,
      selected_repository: null,
      selected_branch: null,
      git_provider: null,
      trigger: null,
      pr_number: [],
      llm_model: null,
      parent_conversation_id: null,
      created_at: now,
      updated_at: now,
      ...fields,
    };
  };

  /** Sandbox records for a batch of conversations, refreshed from the runtime, keyed by id. */
  const sandboxesOf = (userId: string, records: readonly ConversationRecord[]) =>
    sandboxes.liveRecords(
      userId,
      records.map((r) => r.sandbox_id).filter((x): x is string => x !== null),
    );

  const withContext = (userId: string, records: readonly ConversationRecord[]) =>
    ResultAsync.combine([sandboxesOf(userId, records), conversations.childrenOf(userId, records.map((r) => r.id))] as const).map(
      ([boxes, children]) =>
        records.map((r) => ({
          record: r,
          sandbox: r.sandbox_id ? (boxes.get(r.sandbox_id) ?? null) : null,
          children: children.get(r.id) ?? [],
        })),
    );

  const getRecord = (userId: string, id: string) =>
    conversations
      .get(userId, normalizeId(id))
      .andThen((r) => (r ? okAsync(r) : errAsync<ConversationRecord, DomainErrorOf<'ConversationNotFound'>>({ type: 'ConversationNotFound', conversationId: id })));

  const statusOf = (userId: string, record: ConversationRecord) =>
    sandboxes.liveRecords(userId, record.sandbox_id ? [record.sandbox_id] : []).map((boxes) => {
      const box = record.sandbox_id ? boxes.get(record.sandbox_id) : undefined;
      return effectiveConversationStatus(record.status, box?.status ?? null);
    });

  const service: ConversationService = {
    create: (userId, request) => {
      if (request.conversation_id !== undefined && !deps.options?.allowClientConversationIds) {
        return errAsync(
          validationFailed([
            { path: 'conversation_id', message: 'this server does not accept client-chosen conversation ids; omit the field' },
          ]),
        );
      }
      if (request.replay_json) {
        // A trajectory that cannot be replayed is refused before anything is stored. Its first
        // user message is the conversation's first message (it wins over initial_user_msg, as in OpenHands).
        const plan = parseReplayTrajectory(request.replay_json);
        if (plan.isErr()) return errAsync(plan.error);
        request = { ...request, initial_user_msg: plan.value.initial.text, image_urls: plan.value.initial.image_urls };
      }
      const id = request.conversation_id !== undefined ? normalizeId(request.conversation_id) : ids.next();
      return settings
        .loadWithSecrets(userId)
        .andThen((stored) => (request.replay_json ? ok(stored) : requireLlmSettings(stored, null)))
        .andThen((stored) =>
          (request.conversation_id !== undefined ? conversations.get(userId, id) : okAsync(null)).andThen((existing) =>
            existing ? errAsync<StoredSettings | null, DomainErrorOf<'ConversationIdTaken'>>({ type: 'ConversationIdTaken', conversationId: id }) : okAsync(stored),
          ),
        )
        .andThen((stored) => specFor(stored).map((spec) => ({ stored, spec })))
        .andThen(({ stored, spec }) => {
          const repository = request.repository ?? request.create_microagent?.repo ?? request.suggested_task?.repo ?? null;
          const trigger = request.suggested_task ? 'suggested_task' : request.create_microagent ? 'microagent_management' : 'gui';
          const initial = initialMessageFromV0(request);
          const launchInfo: ConversationLaunch = {
            initial_message: initial,
            conversation_instructions: request.conversation_instructions ?? null,
            mcp_config: request.mcp_config ?? null,
            suggested_task: request.suggested_task ?? null,
            create_microagent: request.create_microagent ?? null,
            replay_json: request.replay_json ?? null,
            agent_type: 'default',
          };
          const record = newRecord(userId, id, {
            selected_repository: repository,
            selected_branch: request.selected_branch ?? null,
            git_provider: request.git_provider ?? null,
            trigger,
            llm_model: stored?.llm_model ?? null,
            launch: launchInfo,
            conversation_version: 'V0',
          });
          const asV1: AppConversationStartRequest = {
            initial_message: initial,
            selected_repository: repository,
            selected_branch: request.selected_branch ?? null,
            git_provider: request.git_provider ?? null,
            trigger,
          };
          return launch(userId, record, { kind: 'new', spec }, asV1, insertConversation(userId));
        })
        .map(({ conversation }) => ({
          status: 'ok' as const,
          conversation_id: conversation.id,
          message: null,
          conversation_status: conversation.status,
        }));
    },

    startApp: (userId, request) => {
      const parentId = request.parent_conversation_id ? normalizeId(request.parent_conversation_id) : null;
      const parent: ResultAsync<ConversationRecord | null, DomainErrorOf<'ValidationFailed' | 'StoreUnavailable'>> = parentId
        ? conversations.get(userId, parentId).andThen((p) =>
            p
              ? okAsync(p)
              : errAsync<ConversationRecord | null, DomainErrorOf<'ValidationFailed'>>(
                  validationFailed([{ path: 'parent_conversation_id', message: `conversation ${parentId} does not exist` }]),
                ),
          )
        : okAsync(null);
      return parent.andThen((parentRecord) => {
        const llmModel = request.llm_model ?? parentRecord?.llm_model ?? null;
        const sandboxId = request.sandbox_id ?? parentRecord?.sandbox_id ?? null;
        return settings
          .loadWithSecrets(userId)
          .andThen((stored) => requireLlmSettings(stored, llmModel))
          .andThen((stored) => {
            if (!sandboxId) return specFor(stored).map((spec): Planned => ({ stored, plan: { kind: 'new', spec } }));
            return sandboxStore.get(userId, sandboxId).andThen((box) => {
              if (!box || box.status === 'DELETED') return errAsync<Planned, DomainErrorOf<'SandboxNotFound'>>({ type: 'SandboxNotFound', sandboxId });
              const usable = planSandboxAction(box.status, 'attach');
              if (usable.isErr()) {
                return errAsync<Planned, DomainErrorOf<'IllegalSandboxTransition'>>({
                  type: 'IllegalSandboxTransition',
                  sandboxId,
                  from: box.status,
                  action: 'attach',
                });
              }
              return okAsync<Planned, never>({ stored, plan: { kind: 'existing', sandbox: box } });
            });
          })
          .andThen(({ stored, plan }) => {
            const id = ids.next();
            const record = newRecord(userId, id, {
              ...(request.title ? { title: request.title } : {}),
              selected_repository: request.selected_repository ?? parentRecord?.selected_repository ?? null,
              selected_branch: request.selected_branch ?? parentRecord?.selected_branch ?? null,
              git_provider: request.git_provider ?? parentRecord?.git_provider ?? null,
              trigger: request.trigger ?? null,
              pr_number: request.pr_number ?? [],
              llm_model: llmModel ?? stored?.llm_model ?? null,
              parent_conversation_id: parentRecord?.id ?? null,
              launch: {
                initial_message: request.initial_message ?? null,
                conversation_instructions: null,
                mcp_config: null,
                suggested_task: null,
                create_microagent: null,
                replay_json: null,
                agent_type: request.agent_type ?? 'default',
              },
              conversation_version: 'V1',
            });
            return launch(userId, record, plan, request, insertConversation(userId));
          })
          .map(({ task }) => toStartTask(task));
      });
    },

    getInfo: (userId, id) =>
      getRecord(userId, id)
        .andThen((record) => withContext(userId, [record]))
        .map(([entry]) => toConversationInfo(entry!.record, entry!.sandbox, entry!.children)),

    listInfo: (userId, filter, page) =>
      conversations.search(userId, filter, page).andThen((p) =>
        withContext(userId, p.items).map((entries) => ({
          items: entries.map((e) => toConversationInfo(e.record, e.sandbox, e.children)),
          next_page_id: p.next_page_id,
        })),
      ),

    search: (userId, filter, page) =>
      conversations.search(userId, filter, page).andThen((p) =>
        withContext(userId, p.items).map((entries) => ({
          items: entries.map((e) => toAppConversation(e.record, e.sandbox, e.children)),
          next_page_id: p.next_page_id,
        })),
      ),

    getMany: (userId, idList) =>
      conversations.getMany(userId, idList.map(normalizeId)).andThen((records) => {
        const present = records.filter((r): r is ConversationRecord => r !== null);
        return withContext(userId, present).map((entries) => {
          const byId = new Map(entries.map((e) => [e.record.id, toAppConversation(e.record, e.sandbox, e.children)]));
          return records.map((r) => (r ? (byId.get(r.id) ?? null) : null));
        });
      }),

    count: (userId, filter) => conversations.count(userId, filter),

    delete: (userId, id) =>
      getRecord(userId, id).andThen((record) =>
        conversations
          .delete(userId, record.id)
          .andThen(() => startTasks.deleteByConversation(userId, record.id))
          .andThen(() => ResultAsync.fromSafePromise(agent.forget(userId, record.id)))
          .andThen(() => log.deleteConversation(userId, record.id))
          .andThen(() => (record.sandbox_id ? othersUsing(userId, record.sandbox_id, record.id) : okAsync([])))
          .andThen((others) => {
            if (!record.sandbox_id || others.length > 0) return okAsync(undefined);
            const sandboxId = record.sandbox_id;
            // The conversation is gone either way; a sandbox that cannot be removed now is logged, not fatal.
            return sandboxes.delete(userId, sandboxId).orElse((e) => {
              if (e.type !== 'SandboxNotFound' && e.type !== 'IllegalSandboxTransition') {
                logger.warn({ sandboxId, error: e.type }, 'could not delete the sandbox of a deleted conversation');
              }
              return okAsync(undefined);
            });
          }),
      ),

    stop: (userId, id) =>
      getRecord(userId, id).andThen((record) =>
        ResultAsync.fromSafePromise(agent.pause(userId, record.id, 'the conversation was stopped'))
          .andThen(() => transition(userId, record.id, 'stop', { status_detail: 'stopped by the user' }))
          .andThen(() => (record.sandbox_id ? othersUsing(userId, record.sandbox_id, record.id) : okAsync([])))
          .andThen((others) => {
            if (!record.sandbox_id) return okAsync(undefined);
            const sandboxId = record.sandbox_id;
            const stillNeeded = others.some((c) => c.status !== 'STOPPED');
            const pause = () => sandboxes.pauseIfUnused(userId, sandboxId, stillNeeded);
            return sandboxStore.get(userId, sandboxId).andThen((box) => {
              if (box?.status !== 'STARTING') return ResultAsync.fromSafePromise(pause());
              // Still starting: pause it once it is up, without holding this request.
              background.spawn(`pause sandbox ${sandboxId}`, pause);
              return okAsync(undefined);
            });
          })
          .map(() => ({
            status: 'ok' as const,
            conversation_id: record.id,
            message: record.status === 'STOPPED' ? 'Conversation was not running' : 'Conversation stopped',
            conversation_status: 'STOPPED' as const,
          })),
      ),

    start: (userId, id) =>
      getRecord(userId, id).andThen((record) =>
        statusOf(userId, record).andThen((status) => {
          if (status !== 'STOPPED') {
            return okAsync({ status: 'ok' as const, conversation_id: record.id, message: 'Conversation is already running', conversation_status: status });
          }
          return settings
            .loadWithSecrets(userId)
            .andThen((stored) => (record.launch.replay_json ? ok(stored) : requireLlmSettings(stored, record.llm_model)))
            .andThen((stored) =>
              (record.sandbox_id ? sandboxStore.get(userId, record.sandbox_id) : okAsync(null)).andThen((box) =>
                box && !isSandboxLost(box.status)
                  ? okAsync<Plan, never>({ kind: 'existing', sandbox: box })
                  : specFor(stored).map((spec): Plan => ({ kind: 'new', spec })),
              ),
            )
            .andThen((plan) =>
              launch(userId, record, plan, { selected_repository: record.selected_repository, selected_branch: record.selected_branch }, restartConversation(userId, record)),
            )
            .map(() => ({ status: 'ok' as const, conversation_id: record.id, message: 'Conversation is starting', conversation_status: 'STARTING' as const }));
        }),
      ),

    getStartTasks: (userId, idList) =>
      startTasks.getMany(userId, idList.map(normalizeId)).map((tasks) => tasks.map((t) => (t ? toStartTask(t) : null))),

    searchStartTasks: (userId, filter, page, order) =>
      startTasks
        .search(userId, normalizedTaskFilter(filter), page, order)
        .map((p) => ({ items: p.items.map(toStartTask), next_page_id: p.next_page_id })),

    countStartTasks: (userId, filter) =>
      startTasks.count(userId, normalizedTaskFilter(filter)),

    sendMessage: (userId, id, message) => {
      if (message.role !== 'user') {
        return errAsync(validationFailed([{ path: 'role', message: `only messages from the user can be sent; got role ${message.role}` }]));
      }
      const content = userMessageOf(message);
      if (!content) return errAsync(validationFailed([{ path: 'content', message: 'the message has no text and no images' }]));
      return getRecord(userId, id).andThen((record) =>
        appendUserMessage(userId, record.id, content).map((event) => {
          // run: false only records the message; the agent sees it on its next run.
          if (record.status === 'RUNNING' && message.run) agent.wake(userId, record.id);
          return event;
        }),
      );
    },

    respondToConfirmation: (userId, id, decision) => getRecord(userId, id).andThen((record) => agent.respondToConfirmation(userId, record.id, decision)),

    rename: (userId, id, title) =>
      getRecord(userId, id)
        .andThen((record) => conversations.update(userId, record.id, (c): Result<ConversationRecord, never> => ok({ ...c, title, updated_at: clock.now() })))
        .map(() => undefined),

    pauseAgent: (userId, id) =>
      getRecord(userId, id).andThen((record) => ResultAsync.fromSafePromise(agent.pause(userId, record.id, 'paused by the user'))),

    runAgent: (userId, id) =>
      getRecord(userId, id).map((record) => {
        if (record.status === 'RUNNING') agent.wake(userId, record.id);
      }),

    searchEvents: (userId, id, query) =>
      getRecord(userId, id).andThen((record) => log.search(userId, record.id, query)),

    subscribeEvents: (userId, id, afterId, listener, onEnd) =>
      getRecord(userId, id).andThen((record) => log.subscribe(userId, record.id, afterId, listener, onEnd)),

    handleSandboxGone: async (userId, sandboxId, reason) => {
      const affected = await conversations.listBySandbox(userId, sandboxId);
      if (affected.isErr()) {
        logger.error({ sandboxId, operation: affected.error.operation, errorClass: affected.error.errorClass }, 'could not load the conversations of a lost sandbox');
        return;
      }
      for (const conversation of affected.value) {
        if (conversation.status === 'STOPPED') continue;
        // Not awaited: this may be called from inside the agent's own loop (a tool found the sandbox gone).
        background.spawn(`pause agent ${conversation.id}`, () => agent.pause(userId, conversation.id, reason));
        const updated = await transition(userId, conversation.id, 'sandbox_lost', { status_detail: reason });
        if (updated.isErr()) logger.warn({ conversationId: conversation.id, error: updated.error.type }, 'could not stop a conversation whose sandbox was lost');
      }
    },
  };
  return service;
}

/** Conversation ids in a start-task filter, in the stored (32 hex) form. */
function normalizedTaskFilter(filter: StartTaskFilter): StartTaskFilter {
  return filter.app_conversation_id ? { ...filter, app_conversation_id: normalizeId(filter.app_conversation_id) } : filter;
}

/** The text and images of a message, or null when it has neither. */
function userMessageOf(message: SendMessageRequest | null): { text: string; image_urls: string[] } | null {
  if (!message) return null;
  const text = message.content
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n\n');
  const image_urls = message.content.flatMap((c) => (c.type === 'image' ? c.image_urls : []));
  return text.trim() === '' && image_urls.length === 0 ? null : { text, image_urls };
}

/** A suggested task or microagent request becomes the first message; the user's own text follows it. */
function initialMessageFromV0(request: NewConversationRequest): SendMessageRequest | null {
  const content: SendMessageRequest['content'] = [];
  const template = request.suggested_task
    ? suggestedTaskMessage(request.suggested_task)
    : request.create_microagent
      ? createMicroagentMessage(request.create_microagent)
      : null;
  if (template) content.push({ type: 'text', text: template });
  if (request.initial_user_msg) content.push({ type: 'text', text: template ? `Also, from the user:\n${request.initial_user_msg}` : request.initial_user_msg });
  if (request.image_urls && request.image_urls.length > 0) content.push({ type: 'image', image_urls: request.image_urls });
  return content.length > 0 ? { role: 'user', content, run: true } : null;
}
