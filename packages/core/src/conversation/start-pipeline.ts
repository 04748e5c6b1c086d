import { errAsync, ok, okAsync, ResultAsync, type Result } from 'neverthrow';
import type { DomainError, DomainErrorOf } from '../errors.js';
import type { SandboxRecord, SandboxSpec } from '../sandbox/schema.js';
import type { StoredSettings } from '../settings/schema.js';
import type { SandboxServiceError } from '../sandbox/service.js';
import type { StoreFailure } from '../store-failure.js';
import type { ConversationBase, ConversationRecords } from './records.js';
import { userMessageOf } from './requests.js';
import type { AppConversationStartRequest, ConversationRecord, StartTaskRecord } from './schema.js';

export type Plan = { kind: 'existing'; sandbox: SandboxRecord } | { kind: 'new'; spec: SandboxSpec };
export type Planned = { stored: StoredSettings | null; plan: Plan };

/** Taking back a step of a start that failed later. */
export type Undo = () => ResultAsync<unknown, DomainError> | Promise<void>;

/**
 * How a start stores its conversation (inserted, or a stopped one moved to STARTING), what
 * that can fail with, and how it is undone when a later step fails.
 */
export interface ConversationStep<E> {
  readonly name: string;
  store(record: ConversationRecord): ResultAsync<ConversationRecord, E>;
  undo(record: ConversationRecord): Undo;
  /** Whether the launch's initial message is appended (only to a new conversation). */
  readonly appendsInitialMessage: boolean;
}

/**
 * Starting a conversation: `launch` stores everything a start needs, all of it or none of it
 * (undoing the stored steps newest first when one fails), then the start pipeline brings the
 * sandbox up, has the agent prepare the workspace, and wakes the agent.
 */
export function createStartPipeline(kit: ConversationBase & ConversationRecords) {
  const { conversations, startTasks, log, agent, sandboxStore, sandboxes, settings, clock, ids, logger, background, transition, setTask, updateTask, appendUserMessage, othersUsing } = kit;

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
        await updateTask(userId, task.id, (t) => (t.status === 'WAITING_FOR_SANDBOX' ? { ...t, detail, updated_at: clock.now() } : t));
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

  return { prepareWorkspace, runStart, launch, insertConversation, restartConversation, newRecord };
}
