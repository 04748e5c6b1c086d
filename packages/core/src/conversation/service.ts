import { errAsync, ok, okAsync, ResultAsync, type Result } from 'neverthrow';
import { validationFailed, type DomainErrorOf } from '../errors.js';
import { normalizeId } from '../ids.js';
import { isSandboxLost, planSandboxAction } from '../sandbox/state.js';
import type { StoredSettings } from '../settings/schema.js';
import { createConversationRecords } from './records.js';
import { parseReplayTrajectory } from './replay-trajectory.js';
import { initialMessageFromV0, normalizedTaskFilter, userMessageOf } from './requests.js';
import { suggestedTaskMessage } from './first-message.js';
import { toStartTask, type AppConversationStartRequest, type ConversationLaunch, type ConversationRecord, type StartTaskRecord } from './schema.js';
import { DEFAULT_KEYLESS_MODEL_PREFIXES, MAX_PENDING_MESSAGES, type ConversationService, type ConversationServiceDeps, type QueuedMessage } from './service-contract.js';
import { createStartPipeline, type Plan, type Planned } from './start-pipeline.js';
import { toConversationOverview, type ConversationOverview, type ConversationStatusChange } from './overview.js';

export * from './service-contract.js';

/**
 * The conversation service: V0 and V1 conversations over one record, composed from its parts
 * (`records.ts`: shared steps; `start-pipeline.ts`: storing a start and running it; the request
 * readers in `requests.ts`). The operations themselves are below, one entry each.
 */
export function createConversationService(deps: ConversationServiceDeps): ConversationService {
  const base = { ...deps, keyless: deps.options?.keylessModelPrefixes ?? DEFAULT_KEYLESS_MODEL_PREFIXES };
  const records = createConversationRecords(base);
  const pipeline = createStartPipeline({ ...base, ...records });
  const { conversations, startTasks, log, agent, sandboxStore, sandboxes, settings, clock, ids, logger, background, requireLlmSettings, specFor, transition, appendUserMessage, othersUsing, withContext, getRecord, statusOf, launch, insertConversation, restartConversation, newRecord, watchTask } = { ...base, ...records, ...pipeline };

  const overviewOf = (userId: string, record: ConversationRecord) =>
    withContext(userId, [record]).map(([entry]) => toConversationOverview(entry!.record, entry!.sandbox, entry!.children));

  /** The conversation a queued message is for: its id, or `task-<id>` of the task that starts it. */
  const queueTarget = (userId: string, target: string): ResultAsync<ConversationRecord, DomainErrorOf<'ConversationNotFound' | 'StoreUnavailable'>> => {
    const task = /^task-(.+)$/.exec(target);
    if (!task) return getRecord(userId, target);
    return startTasks.get(userId, normalizeId(task[1]!)).andThen((found) =>
      found ? getRecord(userId, found.app_conversation_id) : errAsync<ConversationRecord, DomainErrorOf<'ConversationNotFound'>>({ type: 'ConversationNotFound', conversationId: target }),
    );
  };

  /** How many user messages wait for the agent: those after its last event (read in pages, counting only). */
  const waitingMessages = (userId: string, conversationId: string) => {
    const countFrom = (after: number, waiting: number): ResultAsync<number, DomainErrorOf<'StoreUnavailable'>> =>
      log.search(userId, conversationId, { after, kinds: ['message', 'action'], limit: 100 }).andThen((page) => {
        let now = waiting;
        for (const event of page.items) now = event.source === 'user' ? now + 1 : event.source === 'agent' ? 0 : now;
        return page.next_after === null ? okAsync(now) : countFrom(page.next_after, now);
      });
    return countFrom(0, 0);
  };

  /**
   * Before a conversation's agent is given work (a message, a decision, a run): a conversation
   * that runs by intent but whose sandbox was paused (idle, finished, to make room for another)
   * gets it back, within the user's limit, so the agent acts at once as it would have before the
   * pause. True when the caller wakes the agent now; false when the sandbox resumes slowly (a
   * pod scheduled again) and `wakeLater` runs once it is up. A refused resume (the limit, the
   * engine) is logged and leaves the work waiting for the conversation's start: what the user
   * sent is stored either way. A stopped conversation stays stopped.
   */
  const bringSandboxBack = (userId: string, record: ConversationRecord, wakeLater: () => void): ResultAsync<boolean, never> =>
    ResultAsync.fromSafePromise(
      (async () => {
        const sandboxId = record.sandbox_id;
        const box = record.status === 'RUNNING' && sandboxId ? (await sandboxStore.get(userId, sandboxId)).unwrapOr(null) : null;
        if (!box || !sandboxId || box.status !== 'PAUSED') {
          // So the sandbox is not taken for resting in the moment before the agent's run begins.
          if (box?.status === 'RUNNING') sandboxes.touch(userId, box.id);
          return true;
        }
        const resumed = await sandboxes.resume(userId, sandboxId);
        if (resumed.isErr()) {
          logger.warn({ conversationId: record.id, sandboxId, error: resumed.error.type }, 'could not resume the paused sandbox of a conversation given work; it waits until the conversation is started');
          return true;
        }
        if ((await sandboxStore.get(userId, sandboxId)).unwrapOr(null)?.status !== 'STARTING') return true;
        background.spawn(`wake ${record.id} once its sandbox is back`, async () => {
          if ((await sandboxes.whenSettled(userId, sandboxId))?.status === 'RUNNING') wakeLater();
        });
        return false;
      })(),
    );

  const service: ConversationService = {
    acceptsClientIds: deps.options?.allowClientConversationIds === true,
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
        .map(({ conversation }) => ({ conversation_id: conversation.id, status: conversation.status }));
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
            const id = request.conversation_id ? normalizeId(request.conversation_id) : ids.next();
            const task = request.suggested_task ?? null;
            const record = newRecord(userId, id, {
              ...(request.title ? { title: request.title } : {}),
              selected_repository: request.selected_repository ?? task?.repo ?? parentRecord?.selected_repository ?? null,
              selected_branch: request.selected_branch ?? parentRecord?.selected_branch ?? null,
              git_provider: request.git_provider ?? task?.git_provider ?? parentRecord?.git_provider ?? null,
              trigger: request.trigger ?? (task ? 'suggested_task' : null),
              pr_number: request.pr_number ?? [],
              llm_model: llmModel ?? stored?.llm_model ?? null,
              parent_conversation_id: parentRecord?.id ?? null,
              public: request.public ?? null,
              launch: {
                initial_message: task ? { role: 'user', content: [{ type: 'text', text: suggestedTaskMessage(task) }], run: true } : (request.initial_message ?? null),
                conversation_instructions: request.system_message_suffix ?? null,
                mcp_config: null,
                suggested_task: task,
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

    get: (userId, id) =>
      getRecord(userId, id)
        .andThen((record) => withContext(userId, [record]))
        .map(([entry]) => toConversationOverview(entry!.record, entry!.sandbox, entry!.children)),

    search: (userId, filter, page) =>
      conversations.search(userId, filter, page).andThen((p) =>
        withContext(userId, p.items).map((entries) => ({
          items: entries.map((e) => toConversationOverview(e.record, e.sandbox, e.children)),
          next_page_id: p.next_page_id,
        })),
      ),

    getMany: (userId, idList) =>
      conversations.getMany(userId, idList.map(normalizeId)).andThen((records) => {
        const present = records.filter((r): r is ConversationRecord => r !== null);
        return withContext(userId, present).map((entries) => {
          const byId = new Map(entries.map((e) => [e.record.id, toConversationOverview(e.record, e.sandbox, e.children)]));
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
          .map((): ConversationStatusChange => ({
            conversation_id: record.id,
            status: 'STOPPED',
            outcome: record.status === 'STOPPED' ? 'was_not_running' : 'stopped',
          })),
      ),

    start: (userId, id) =>
      getRecord(userId, id).andThen((record) =>
        statusOf(userId, record).andThen((status) => {
          if (status !== 'STOPPED') {
            return okAsync<ConversationStatusChange, never>({ conversation_id: record.id, status, outcome: 'was_running' });
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
            .map((): ConversationStatusChange => ({ conversation_id: record.id, status: 'STARTING', outcome: 'starting' }));
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
        // The request schema admits only "user"; this holds for callers that skip it.
        return errAsync(validationFailed([{ path: 'role', message: `only messages from the user can be sent; got role ${String(message.role as unknown)}` }]));
      }
      const content = userMessageOf(message);
      if (!content) return errAsync(validationFailed([{ path: 'content', message: 'the message has no text and no images' }]));
      return getRecord(userId, id).andThen((record) =>
        appendUserMessage(userId, record.id, content).andThen((event) => {
          // run: false only records the message; the agent sees it on its next run.
          if (record.status !== 'RUNNING' || !message.run) return okAsync(event);
          const wake = () => agent.wake(userId, record.id);
          return bringSandboxBack(userId, record, wake).map((now) => {
            if (now) wake();
            return event;
          });
        }),
      );
    },

    respondToConfirmation: (userId, id, decision) =>
      getRecord(userId, id).andThen((record) =>
        // The answer wakes the agent, so its sandbox (paused while it waited) comes back first.
        (record.execution_status === 'waiting_for_confirmation' ? bringSandboxBack(userId, record, () => agent.wake(userId, record.id)) : okAsync(true)).andThen(() =>
          agent.respondToConfirmation(userId, record.id, decision),
        ),
      ),

    rename: (userId, id, title) =>
      getRecord(userId, id)
        .andThen((record) => conversations.update(userId, record.id, (c): Result<ConversationRecord, never> => ok({ ...c, title, updated_at: clock.now() })))
        .map(() => undefined),

    switchProfile: (userId, id, profileName) =>
      getRecord(userId, id)
        .andThen((record) =>
          settings.loadWithSecrets(userId).andThen((stored) => {
            if (!stored) return errAsync<never, DomainErrorOf<'SettingsNotFound'>>({ type: 'SettingsNotFound' });
            const profile = stored.llm_profiles.profiles.find((p) => p.name === profileName);
            if (!profile) return errAsync<never, DomainErrorOf<'ProfileNotFound'>>({ type: 'ProfileNotFound', name: profileName });
            return conversations.update(userId, record.id, (c): Result<ConversationRecord, never> =>
              ok({ ...c, llm_profile_id: profile.id, llm_model: profile.model ?? c.llm_model, updated_at: clock.now() }),
            );
          }),
        )
        .map(() => undefined),
    update: (userId, id, patch) => {
      if (patch.selected_repository === null && ((patch.selected_branch ?? null) !== null || (patch.git_provider ?? null) !== null)) {
        return errAsync(validationFailed([{ path: 'selected_repository', message: 'clearing the repository clears its branch and provider too: send them as null (or leave them out)' }]));
      }
      return getRecord(userId, id)
        .andThen((record) =>
          conversations.update(userId, record.id, (c): Result<ConversationRecord, never> =>
            ok({
              ...c,
              ...(patch.title !== undefined ? { title: patch.title ?? `Conversation ${c.id.slice(0, 5)}` } : {}),
              ...(patch.public !== undefined ? { public: patch.public } : {}),
              ...(patch.selected_repository !== undefined ? { selected_repository: patch.selected_repository } : {}),
              ...(patch.selected_branch !== undefined ? { selected_branch: patch.selected_branch } : {}),
              ...(patch.git_provider !== undefined ? { git_provider: patch.git_provider } : {}),
              updated_at: clock.now(),
            }),
          ),
        )
        .andThen((updated) => (updated ? overviewOf(userId, updated) : errAsync<ConversationOverview, DomainErrorOf<'ConversationNotFound'>>({ type: 'ConversationNotFound', conversationId: id })));
    },

    queueMessage: (userId, target, message) =>
      queueTarget(userId, target).andThen((record) =>
        waitingMessages(userId, record.id).andThen((waiting) =>
          waiting >= MAX_PENDING_MESSAGES
            ? errAsync<QueuedMessage, DomainErrorOf<'TooManyPendingMessages'>>({ type: 'TooManyPendingMessages', conversationId: record.id, limit: MAX_PENDING_MESSAGES })
            : service.sendMessage(userId, record.id, { ...message, run: true }).map((event) => ({ event, position: waiting + 1 })),
        ),
      ),

    followStartTask: (userId, taskId, listener, onEnd) => {
      const id = normalizeId(taskId);
      let last: StartTaskRecord | null = null;
      let stop = () => {};
      let ended = false;
      const end = (reason: string) => {
        if (ended) return;
        ended = true;
        stop();
        background.signal.removeEventListener('abort', closing);
        onEnd(reason);
      };
      const closing = () => end('the service is shutting down');
      /** Each change once, in order: a state older than one already delivered is dropped. */
      const deliver = (task: StartTaskRecord) => {
        if (ended) return;
        if (last && (task.updated_at < last.updated_at || (task.updated_at === last.updated_at && task.status === last.status && task.detail === last.detail))) return;
        last = task;
        listener(toStartTask(task));
        if (task.status === 'READY' || task.status === 'ERROR') end('finished');
      };
      stop = watchTask(userId, id, deliver);
      return startTasks.get(userId, id).andThen((current) => {
        if (!current) {
          stop();
          return errAsync<{ close(): void }, DomainErrorOf<'StartTaskNotFound'>>({ type: 'StartTaskNotFound', taskId });
        }
        deliver(current);
        if (background.closed) closing();
        else if (!ended) background.signal.addEventListener('abort', closing, { once: true });
        return okAsync({ close: () => end('closed') });
      });
    },

    pauseAgent: (userId, id) =>
      getRecord(userId, id).andThen((record) => ResultAsync.fromSafePromise(agent.pause(userId, record.id, 'paused by the user'))),

    runAgent: (userId, id) =>
      getRecord(userId, id).andThen((record) => {
        if (record.status !== 'RUNNING') return okAsync(undefined);
        const wake = () => agent.wake(userId, record.id);
        return bringSandboxBack(userId, record, wake).map((now) => {
          if (now) wake();
        });
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
