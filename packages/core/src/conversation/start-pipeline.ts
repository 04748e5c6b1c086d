import { err, ok, type Result, type ResultAsync } from 'neverthrow';
import type { Clock } from '../clock.js';
import type { DomainError, DomainErrorOf } from '../errors.js';
import { resultAsync } from '../result.js';
import type { SandboxRecord, SandboxSpec } from '../sandbox/schema.js';
import type { SandboxServiceError } from '../sandbox/service.js';
import type { StoreFailure } from '../store-failure.js';
import type { ConversationRecords } from './records.js';
import type { ConversationServiceDeps } from './service-contract.js';
import { userMessageOf } from './requests.js';
import type { AppConversationStartRequest, ConversationRecord, StartTaskRecord } from './schema.js';

export type Plan = { kind: 'existing'; sandbox: SandboxRecord } | { kind: 'new'; spec: SandboxSpec };

/** Taking back a step of a start that failed later. */
type Undo = () => ResultAsync<unknown, DomainError> | Promise<Result<unknown, DomainError> | void>;

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

/** The conversation service's own deps (without its options), and the records' transitions. */
export interface StartPipelineDeps extends Omit<ConversationServiceDeps, 'options'> {
  /** Transitions, start-task updates, appending the first message. */
  records: ConversationRecords;
}

/** What a launch stored. */
interface Launched {
  conversation: ConversationRecord;
  task: StartTaskRecord;
}

/** What a launch can fail with: its sandbox step, a store, or its conversation step (`E`). */
type LaunchError<E> = SandboxServiceError<'reserve' | 'resume'> | StoreFailure | E;

/**
 * Starting a conversation: `launch` stores everything a start needs, all of it or none of it
 * (undoing the stored steps newest first when one fails), then the start pipeline brings the
 * sandbox up, has the agent prepare the workspace, and wakes the agent.
 */
export interface StartPipeline {
  /**
   * Stores everything a start needs, all of it or none of it: the sandbox (a new one reserved,
   * or a paused one resumed), the conversation (`storing`: inserted, or moved to STARTING), its
   * first message and its start task. Only then does anything run: the sandbox is brought up
   * and the start pipeline follows in the background. When a step fails, the steps before it
   * are undone, newest first, and the request fails with that step's error.
   */
  launch<E extends DomainError>(
    userId: string,
    conversation: Omit<ConversationRecord, 'sandbox_id'>,
    plan: Plan,
    request: AppConversationStartRequest,
    storing: ConversationStep<E>,
  ): ResultAsync<Launched, LaunchError<E>>;
  /** A new conversation is inserted (refused if its id is taken); undone with its events and tasks. */
  insertConversation(userId: string): ConversationStep<DomainErrorOf<'ConversationIdTaken' | 'StoreUnavailable'>>;
  /** A stopped conversation is moved to STARTING in its (new) sandbox; undone by restoring what it was. */
  restartConversation(
    userId: string,
    previous: ConversationRecord,
  ): ConversationStep<DomainErrorOf<'IllegalConversationTransition' | 'ConversationNotFound' | 'StoreUnavailable'>>;
  /** A new conversation's record, STARTING, with the defaults `fields` does not give. */
  newRecord(
    userId: string,
    id: string,
    fields: Partial<ConversationRecord> & Pick<ConversationRecord, 'launch' | 'conversation_version'>,
  ): Omit<ConversationRecord, 'sandbox_id'>;
}

export function createStartPipeline(deps: StartPipelineDeps): StartPipeline {
  return {
    launch: (userId, conversation, plan, request, storing) =>
      resultAsync(launch(deps, userId, conversation, plan, request, storing)),
    insertConversation: (userId) => insertConversation(deps, userId),
    restartConversation: (userId, previous) => restartConversation(deps, userId, previous),
    newRecord: (userId, id, fields) => newRecord(deps.clock, userId, id, fields),
  };
}

/** The steps a launch stored so far, newest last, each with how to take it back. */
type UndoStack = { step: string; run: Undo }[];

async function launch<E extends DomainError>(
  deps: StartPipelineDeps,
  userId: string,
  conversation: Omit<ConversationRecord, 'sandbox_id'>,
  plan: Plan,
  request: AppConversationStartRequest,
  storing: ConversationStep<E>,
): Promise<Result<Launched, LaunchError<E>>> {
  const undo: UndoStack = [];
  const stored = await storeStart(deps, undo, userId, conversation, plan, request, storing);
  if (stored.isErr()) {
    await rollback(deps, undo, userId, conversation.id, stored.error);
    return err(stored.error);
  }
  const { saved, task, sandboxId, commit } = stored.value;
  // Everything is stored: now things may run.
  commit();
  deps.background.spawn(`start conversation ${saved.id}`, () => runStart(deps, userId, task, sandboxId));
  return ok({ conversation: saved, task });
}

/** Takes back what a failed start stored, newest first. */
async function rollback(
  deps: StartPipelineDeps,
  undo: UndoStack,
  userId: string,
  conversationId: string,
  error: DomainError,
): Promise<void> {
  for (const { step, run } of undo.reverse()) {
    const undone = await run();
    if (undone?.isErr())
      deps.logger.error({ conversationId, step, error: undone.error.type }, 'could not undo a step of a failed start');
  }
  deps.logger.warn(
    { conversationId, userId, error: error.type },
    'a conversation start failed; what it had stored was undone',
  );
}

/** Stores the sandbox, the conversation, its first message and its task, pushing each step's undo as it is stored. */
async function storeStart<E extends DomainError>(
  deps: StartPipelineDeps,
  undo: UndoStack,
  userId: string,
  conversation: Omit<ConversationRecord, 'sandbox_id'>,
  plan: Plan,
  request: AppConversationStartRequest,
  storing: ConversationStep<E>,
): Promise<
  Result<{ saved: ConversationRecord; task: StartTaskRecord; sandboxId: string; commit: () => void }, LaunchError<E>>
> {
  const sandbox = await holdSandbox(deps, undo, userId, conversation.id, plan);
  if (sandbox.isErr()) return err(sandbox.error);
  const { box, commit } = sandbox.value;
  const record: ConversationRecord = { ...conversation, sandbox_id: box.id };
  const saved = await storing.store(record);
  if (saved.isErr()) return err(saved.error);
  undo.push({ step: storing.name, run: storing.undo(record) });
  const initial = storing.appendsInitialMessage ? userMessageOf(saved.value.launch.initial_message) : null;
  if (initial) {
    // The first message is in the log before anything acts on it.
    const appended = await deps.records.appendUserMessage(userId, saved.value.id, initial);
    if (appended.isErr()) return err(appended.error);
  }
  const now = deps.clock.now();
  const task: StartTaskRecord = {
    id: deps.ids.next(),
    user_id: userId,
    status: 'WORKING',
    detail: null,
    app_conversation_id: saved.value.id,
    sandbox_id: box.id,
    request,
    created_at: now,
    updated_at: now,
  };
  const inserted = await deps.startTasks.insert(task);
  if (inserted.isErr()) return err(inserted.error);
  return ok({ saved: saved.value, task, sandboxId: box.id, commit });
}

/** The start's sandbox: a new one reserved (brought up on `commit`), a paused one resumed, or a running one as it is. */
async function holdSandbox(
  deps: StartPipelineDeps,
  undo: UndoStack,
  userId: string,
  conversationId: string,
  plan: Plan,
): Promise<Result<{ box: SandboxRecord; commit: () => void }, SandboxServiceError<'reserve' | 'resume'>>> {
  if (plan.kind === 'new') {
    const reservation = await deps.sandboxes.reserve(userId, plan.spec);
    if (reservation.isErr()) return err(reservation.error);
    undo.push({ step: 'reserve the sandbox', run: () => reservation.value.cancel() });
    return ok({ box: reservation.value.record, commit: () => reservation.value.commit() });
  }
  if (plan.sandbox.status !== 'PAUSED') return ok({ box: plan.sandbox, commit: () => {} });
  // Resumed now, not in the background, so a refusal (the user's limit) is this request's answer.
  const resumed = await deps.sandboxes.resume(userId, plan.sandbox.id);
  if (resumed.isErr()) return err(resumed.error);
  const sandboxId = plan.sandbox.id;
  undo.push({ step: 'resume the sandbox', run: () => pauseUnlessUsed(deps, userId, sandboxId, conversationId) });
  return ok({ box: plan.sandbox, commit: () => {} });
}

/** Pauses the sandbox unless a conversation other than this one still needs it (or that cannot be told). */
async function pauseUnlessUsed(
  deps: StartPipelineDeps,
  userId: string,
  sandboxId: string,
  conversationId: string,
): Promise<void> {
  const others = await deps.records.othersUsing(userId, sandboxId, conversationId);
  await deps.sandboxes.pauseIfUnused(
    userId,
    sandboxId,
    others.isErr() || others.value.some((c) => c.status !== 'STOPPED'),
  );
}

function insertConversation(
  deps: StartPipelineDeps,
  userId: string,
): ConversationStep<DomainErrorOf<'ConversationIdTaken' | 'StoreUnavailable'>> {
  return {
    name: 'store the conversation',
    appendsInitialMessage: true,
    store: (record) => resultAsync(insertNew(deps, record)),
    // Its events and tasks go with it (the first message is appended next).
    undo: (record) => () => deleteInserted(deps, userId, record.id),
  };
}

async function insertNew(
  deps: StartPipelineDeps,
  record: ConversationRecord,
): Promise<Result<ConversationRecord, DomainErrorOf<'ConversationIdTaken' | 'StoreUnavailable'>>> {
  const outcome = await deps.conversations.insert(record);
  if (outcome.isErr()) return err(outcome.error);
  if (outcome.value !== 'inserted') return err({ type: 'ConversationIdTaken', conversationId: record.id });
  return ok(record);
}

async function deleteInserted(
  deps: StartPipelineDeps,
  userId: string,
  conversationId: string,
): Promise<Result<boolean, StoreFailure>> {
  const events = await deps.log.deleteConversation(userId, conversationId);
  if (events.isErr()) return err(events.error);
  const tasks = await deps.startTasks.deleteByConversation(userId, conversationId);
  if (tasks.isErr()) return err(tasks.error);
  return deps.conversations.delete(userId, conversationId);
}

function restartConversation(
  deps: StartPipelineDeps,
  userId: string,
  previous: ConversationRecord,
): ConversationStep<DomainErrorOf<'IllegalConversationTransition' | 'ConversationNotFound' | 'StoreUnavailable'>> {
  return {
    name: 'mark the conversation starting',
    appendsInitialMessage: false,
    store: (record) => resultAsync(markStarting(deps, userId, record)),
    undo: (record) => () =>
      deps.conversations.update(userId, record.id, (c): Result<ConversationRecord, never> =>
        ok({
          ...c,
          status: previous.status,
          status_detail: previous.status_detail,
          sandbox_id: previous.sandbox_id,
          updated_at: deps.clock.now(),
        }),
      ),
  };
}

async function markStarting(
  deps: StartPipelineDeps,
  userId: string,
  record: ConversationRecord,
): Promise<
  Result<
    ConversationRecord,
    DomainErrorOf<'IllegalConversationTransition' | 'ConversationNotFound' | 'StoreUnavailable'>
  >
> {
  const moved = await deps.records.transition(userId, record.id, 'start', {
    status_detail: null,
    sandbox_id: record.sandbox_id,
  });
  if (moved.isErr()) return err(moved.error);
  if (!moved.value) return err({ type: 'ConversationNotFound', conversationId: record.id });
  return ok(moved.value);
}

function newRecord(
  clock: Clock,
  userId: string,
  id: string,
  fields: Partial<ConversationRecord> & Pick<ConversationRecord, 'launch' | 'conversation_version'>,
): Omit<ConversationRecord, 'sandbox_id'> {
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
}

/** Brings the conversation's sandbox up and marks the conversation RUNNING, recording each step on the task. */
async function runStart(
  deps: StartPipelineDeps,
  userId: string,
  task: StartTaskRecord,
  sandboxId: string,
): Promise<void> {
  const { records } = deps;
  await records.setTask(userId, task.id, 'WAITING_FOR_SANDBOX', { sandbox_id: sandboxId });
  const current = (await deps.sandboxStore.get(userId, sandboxId)).unwrapOr(null);
  if (current?.status === 'PAUSED') {
    const resumed = await deps.sandboxes.resume(userId, sandboxId);
    if (resumed.isErr())
      deps.logger.warn({ sandboxId, error: resumed.error.type }, 'could not resume sandbox for conversation');
  }
  // A slow start-up (an image being built) says what it is doing on the task.
  const settled = await deps.sandboxes.whenSettled(userId, sandboxId, (detail) => {
    deps.background.spawn(`record start progress of ${task.app_conversation_id}`, async () => {
      await records.updateTask(userId, task.id, (t) =>
        t.status === 'WAITING_FOR_SANDBOX' ? { ...t, detail, updated_at: deps.clock.now() } : t,
      );
    });
  });
  if (settled?.status !== 'RUNNING') {
    const detail = settled
      ? `sandbox ${sandboxId} is ${settled.status === 'DELETED' ? 'deleted' : settled.status}${settled.status_detail && settled.status !== 'DELETED' ? `: ${settled.status_detail}` : ''}`
      : `sandbox ${sandboxId} no longer exists`;
    await records.transition(userId, task.app_conversation_id, 'start_failed', { status_detail: detail });
    await records.setTask(userId, task.id, 'ERROR', { detail });
    return;
  }
  if (!(await prepareWorkspace(deps, userId, task, settled))) return;
  await records.setTask(userId, task.id, 'STARTING_CONVERSATION');
  const ready = await records.transition(userId, task.app_conversation_id, 'sandbox_ready', { status_detail: null });
  if (ready.isErr() || ready.value === null) {
    await pauseUnlessUsed(deps, userId, sandboxId, task.app_conversation_id);
    const detail =
      ready.isErr() && ready.error.type === 'IllegalConversationTransition'
        ? 'the conversation was stopped while it was starting'
        : ready.isErr()
          ? `could not record the conversation as running (${ready.error.type})`
          : 'the conversation was deleted while it was starting';
    await records.setTask(userId, task.id, 'ERROR', { detail });
    return;
  }
  await records.setTask(userId, task.id, 'READY');
  deps.agent.wake(userId, task.app_conversation_id);
}

/**
 * Has the agent clone the conversation's repository into its running sandbox (`AgentPort.prepareWorkspace`).
 * Returns false, with the conversation STOPPED and the task in ERROR saying why, when it cannot.
 */
async function prepareWorkspace(
  deps: StartPipelineDeps,
  userId: string,
  task: StartTaskRecord,
  box: SandboxRecord,
): Promise<boolean> {
  const found = await deps.conversations.get(userId, task.app_conversation_id);
  const record = found.isOk() ? found.value : null;
  if (!record?.selected_repository) return true;
  const stored = await deps.settings.loadWithSecrets(userId);
  const at = () => deps.clock.now();
  const result = await deps.agent.prepareWorkspace({
    sandboxId: box.id,
    workingDir: box.spec.working_dir,
    conversationId: record.id,
    repository: record.selected_repository,
    branch: record.selected_branch,
    provider: record.git_provider,
    settings: stored.isOk() ? stored.value : null,
    onStep: async (step) => void (await deps.records.setTask(userId, task.id, step)),
    onReport: async (report) =>
      void (await deps.log.append(userId, record.id, [
        { kind: 'setup', source: 'environment', timestamp: at(), ...report },
      ])),
  });
  if (result.ok) {
    const saved = await deps.conversations.update(userId, record.id, (c): Result<ConversationRecord, never> =>
      ok({ ...c, workspace: result.workspace, updated_at: at() }),
    );
    if (saved.isOk()) return true;
    deps.logger.warn(
      { conversationId: record.id, operation: saved.error.operation, errorClass: saved.error.errorClass },
      'could not record the prepared repository',
    );
  }
  const detail = result.ok ? 'could not record the prepared repository' : result.reason;
  deps.logger.warn(
    { conversationId: record.id, sandboxId: box.id, detail },
    'could not prepare the repository of a conversation',
  );
  // Not fatal for the agent: started again (say with a fixed token), it acts on the waiting message.
  await deps.log.append(userId, record.id, [
    {
      kind: 'error',
      source: 'environment',
      timestamp: at(),
      code: 'repository_setup_failed',
      message: detail,
      fatal: false,
    },
  ]);
  await deps.records.transition(userId, record.id, 'start_failed', { status_detail: detail });
  await deps.records.setTask(userId, task.id, 'ERROR', { detail });
  return false;
}
