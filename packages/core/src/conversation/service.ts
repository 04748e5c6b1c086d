import { err, ok, type Result } from 'neverthrow';
import { validationFailed } from '../errors.js';
import type { EventListener, EventSubscription } from '../events/log.js';
import type { TransientListener } from '../events/transient.js';
import type { ConfirmationEvent, EventPage, EventQuery, MessageEvent } from '../events/schema.js';
import { normalizeId } from '../ids.js';
import type { Page, PageRequest } from '../pagination.js';
import { resultAsync } from '../result.js';
import { isSandboxLost, planSandboxAction } from '../sandbox/state.js';
import type { StoredSettings } from '../settings/schema.js';
import { refusalOfMcpConfig, resolveEgress, type EgressPolicy } from '../settings/egress.js';
import type { ConfirmationDecision } from './agent-port.js';
import { keyBinding, rotateKey } from './keys.js';
import { createConversationRecords, type ConversationRecords } from './records.js';
import { parseReplayTrajectory } from './replay-trajectory.js';
import { initialMessageFromV0, normalizedTaskFilter, userMessageOf } from './requests.js';
import { suggestedTaskMessage } from './first-message.js';
import {
  toStartTask,
  type AppConversationStartRequest,
  type ConversationLaunch,
  type ConversationRecord,
  type NewConversationRequest,
  type SendMessageRequest,
  type StartTask,
  type StartTaskRecord,
} from './schema.js';
import {
  DEFAULT_KEYLESS_MODEL_PREFIXES,
  MAX_PENDING_MESSAGES,
  type ConversationService,
  type ConversationServiceDeps,
  type ConversationServiceError,
  type ConversationUpdate,
  type CreatedConversation,
  type QueuedMessage,
} from './service-contract.js';
import { createStartPipeline, type Plan, type StartPipeline } from './start-pipeline.js';
import type { ConversationFilter } from './store.js';
import { toConversationOverview, type ConversationOverview, type ConversationStatusChange } from './overview.js';

export * from './service-contract.js';

/**
 * The conversation service's parts: `records.ts` (shared steps: settings checks, transitions,
 * start tasks, records with their sandboxes) and `start-pipeline.ts` (storing a start, all of it
 * or none of it, and running it); the request readers are in `requests.ts`.
 */
interface ConversationParts {
  readonly deps: ConversationServiceDeps;
  readonly records: ConversationRecords;
  readonly pipeline: StartPipeline;
  /** The operator's allow-lists, resolved once (a V0 create's `mcp_config` is checked against them). */
  readonly egress: EgressPolicy;
}

/** V0 and V1 conversations over one record: one entry per operation, each a function below over the parts. */
export function createConversationService(deps: ConversationServiceDeps): ConversationService {
  const records = createConversationRecords({
    conversations: deps.conversations,
    startTasks: deps.startTasks,
    log: deps.log,
    sandboxes: deps.sandboxes,
    clock: deps.clock,
    keyless: deps.options?.keylessModelPrefixes ?? DEFAULT_KEYLESS_MODEL_PREFIXES,
  });
  const pipeline = createStartPipeline({
    conversations: deps.conversations,
    startTasks: deps.startTasks,
    log: deps.log,
    agent: deps.agent,
    sandboxStore: deps.sandboxStore,
    sandboxes: deps.sandboxes,
    settings: deps.settings,
    clock: deps.clock,
    ids: deps.ids,
    logger: deps.logger,
    background: deps.background,
    records,
  });
  const parts: ConversationParts = { deps, records, pipeline, egress: resolveEgress(deps.options?.egress) };
  return {
    acceptsClientIds: deps.options?.allowClientConversationIds === true,
    create: (userId, request) => resultAsync(createV0(parts, userId, request)),
    startApp: (userId, request) => resultAsync(startApp(parts, userId, request)),
    get: (userId, id) => resultAsync(get(parts, userId, id)),
    search: (userId, filter, page) => resultAsync(search(parts, userId, filter, page)),
    getMany: (userId, idList) => resultAsync(getMany(parts, userId, idList)),
    count: (userId, filter) => deps.conversations.count(userId, filter),
    delete: (userId, id) => resultAsync(deleteConversation(parts, userId, id)),
    stop: (userId, id) => resultAsync(stop(parts, userId, id)),
    start: (userId, id) => resultAsync(start(parts, userId, id)),
    getStartTasks: (userId, idList) =>
      deps.startTasks
        .getMany(userId, idList.map(normalizeId))
        .map((tasks) => tasks.map((t) => (t ? toStartTask(t) : null))),
    searchStartTasks: (userId, filter, page, order) =>
      deps.startTasks
        .search(userId, normalizedTaskFilter(filter), page, order)
        .map((p) => ({ items: p.items.map(toStartTask), next_page_id: p.next_page_id })),
    countStartTasks: (userId, filter) => deps.startTasks.count(userId, normalizedTaskFilter(filter)),
    sendMessage: (userId, id, message) => resultAsync(sendMessage(parts, userId, id, message)),
    respondToConfirmation: (userId, id, decision) => resultAsync(respondToConfirmation(parts, userId, id, decision)),
    rename: (userId, id, title) => resultAsync(rename(parts, userId, id, title)),
    switchProfile: (userId, id, profileName) => resultAsync(switchProfile(parts, userId, id, profileName)),
    update: (userId, id, patch) => resultAsync(update(parts, userId, id, patch)),
    queueMessage: (userId, target, message) => resultAsync(queueMessage(parts, userId, target, message)),
    followStartTask: (userId, taskId, listener, onEnd) =>
      resultAsync(followStartTask(parts, userId, taskId, listener, onEnd)),
    pauseAgent: (userId, id) => resultAsync(pauseAgent(parts, userId, id)),
    runAgent: (userId, id) => resultAsync(runAgent(parts, userId, id)),
    searchEvents: (userId, id, query) => resultAsync(searchEvents(parts, userId, id, query)),
    subscribeEvents: (userId, id, afterId, listener, onEnd, onTransient) =>
      resultAsync(subscribeEvents(parts, userId, id, afterId, listener, onEnd, onTransient)),
    keyBinding: (userId, id) => resultAsync(keyBinding(deps, userId, id)),
    rotateKey: (userId, id) => resultAsync(rotateKey(deps, userId, id)),
    handleSandboxGone: (userId, sandboxId, reason) => handleSandboxGone(parts, userId, sandboxId, reason),
  };
}

/** V0 New Conversation: a new sandbox, the conversation, its first message and its start task, all of it or none of it. */
async function createV0(
  parts: ConversationParts,
  userId: string,
  request: NewConversationRequest,
): Promise<Result<CreatedConversation, ConversationServiceError<'create'>>> {
  const { deps, records, pipeline } = parts;
  if (request.conversation_id !== undefined && !deps.options?.allowClientConversationIds) {
    return err(
      validationFailed([
        {
          path: 'conversation_id',
          message: 'this server does not accept client-chosen conversation ids; omit the field',
        },
      ]),
    );
  }
  if (request.replay_json) {
    // A trajectory that cannot be replayed is refused before anything is stored. Its first
    // user message is the conversation's first message (it wins over initial_user_msg, as in OpenHands).
    const plan = parseReplayTrajectory(request.replay_json);
    if (plan.isErr()) return err(plan.error);
    request = { ...request, initial_user_msg: plan.value.initial.text, image_urls: plan.value.initial.image_urls };
  }
  const refused = refusalOfMcpConfig(parts.egress, request.mcp_config);
  if (refused) return err(refused);
  const id = request.conversation_id !== undefined ? normalizeId(request.conversation_id) : deps.ids.next();
  const stored = await deps.settings.loadWithSecrets(userId);
  if (stored.isErr()) return err(stored.error);
  const usable = request.replay_json ? ok(stored.value) : records.requireLlmSettings(stored.value, null);
  if (usable.isErr()) return err(usable.error);
  if (request.conversation_id !== undefined) {
    const existing = await deps.conversations.get(userId, id);
    if (existing.isErr()) return err(existing.error);
    if (existing.value) return err({ type: 'ConversationIdTaken', conversationId: id });
  }
  const spec = await records.specFor(stored.value);
  if (spec.isErr()) return err(spec.error);
  const repository = request.repository ?? request.create_microagent?.repo ?? request.suggested_task?.repo ?? null;
  const trigger = request.suggested_task
    ? 'suggested_task'
    : request.create_microagent
      ? 'microagent_management'
      : 'gui';
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
  const record = pipeline.newRecord(userId, id, {
    selected_repository: repository,
    selected_branch: request.selected_branch ?? null,
    git_provider: request.git_provider ?? null,
    trigger,
    llm_model: stored.value?.llm_model ?? null,
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
  const launched = await pipeline.launch(
    userId,
    record,
    { kind: 'new', spec: spec.value },
    asV1,
    pipeline.insertConversation(userId),
  );
  if (launched.isErr()) return err(launched.error);
  return ok({ conversation_id: launched.value.conversation.id, status: launched.value.conversation.status });
}

/** V1 start: the conversation (in a new sandbox, or the one named, or its parent's) with its start task; the rest runs in the background. */
async function startApp(
  parts: ConversationParts,
  userId: string,
  request: AppConversationStartRequest,
): Promise<Result<StartTask, ConversationServiceError<'startApp'>>> {
  const { deps, records, pipeline } = parts;
  const parentId = request.parent_conversation_id ? normalizeId(request.parent_conversation_id) : null;
  const parentFound = parentId ? await deps.conversations.get(userId, parentId) : ok(null);
  if (parentFound.isErr()) return err(parentFound.error);
  const parentRecord = parentFound.value;
  if (parentId && !parentRecord)
    return err(
      validationFailed([{ path: 'parent_conversation_id', message: `conversation ${parentId} does not exist` }]),
    );
  const llmModel = request.llm_model ?? parentRecord?.llm_model ?? null;
  const stored = await deps.settings.loadWithSecrets(userId);
  if (stored.isErr()) return err(stored.error);
  const usable = records.requireLlmSettings(stored.value, llmModel);
  if (usable.isErr()) return err(usable.error);
  const plan = await planSandbox(parts, userId, request.sandbox_id ?? parentRecord?.sandbox_id ?? null, stored.value);
  if (plan.isErr()) return err(plan.error);
  const id = request.conversation_id ? normalizeId(request.conversation_id) : deps.ids.next();
  const task = request.suggested_task ?? null;
  const record = pipeline.newRecord(userId, id, {
    ...(request.title ? { title: request.title } : {}),
    selected_repository: request.selected_repository ?? task?.repo ?? parentRecord?.selected_repository ?? null,
    selected_branch: request.selected_branch ?? parentRecord?.selected_branch ?? null,
    git_provider: request.git_provider ?? task?.git_provider ?? parentRecord?.git_provider ?? null,
    trigger: request.trigger ?? (task ? 'suggested_task' : null),
    pr_number: request.pr_number ?? [],
    llm_model: llmModel ?? stored.value?.llm_model ?? null,
    parent_conversation_id: parentRecord?.id ?? null,
    public: request.public ?? null,
    launch: {
      initial_message: task
        ? { role: 'user', content: [{ type: 'text', text: suggestedTaskMessage(task) }], run: true }
        : (request.initial_message ?? null),
      conversation_instructions: request.system_message_suffix ?? null,
      mcp_config: null,
      suggested_task: task,
      create_microagent: null,
      replay_json: null,
      agent_type: request.agent_type ?? 'default',
    },
    conversation_version: 'V1',
  });
  const launched = await pipeline.launch(userId, record, plan.value, request, pipeline.insertConversation(userId));
  if (launched.isErr()) return err(launched.error);
  return ok(toStartTask(launched.value.task));
}

/** A V1 start's sandbox: a new one of the user's spec, or the one named, which must exist and take another conversation. */
async function planSandbox(
  parts: ConversationParts,
  userId: string,
  sandboxId: string | null,
  stored: StoredSettings | null,
): Promise<Result<Plan, ConversationServiceError<'startApp'>>> {
  if (!sandboxId) {
    const spec = await parts.records.specFor(stored);
    if (spec.isErr()) return err(spec.error);
    return ok({ kind: 'new', spec: spec.value });
  }
  const box = await parts.deps.sandboxStore.get(userId, sandboxId);
  if (box.isErr()) return err(box.error);
  if (!box.value || box.value.status === 'DELETED') return err({ type: 'SandboxNotFound', sandboxId });
  if (planSandboxAction(box.value.status, 'attach').isErr())
    return err({ type: 'IllegalSandboxTransition', sandboxId, from: box.value.status, action: 'attach' });
  return ok({ kind: 'existing', sandbox: box.value });
}

/** Overviews of these records, each with its sandbox (refreshed) and children. */
async function overviewsOf(
  parts: ConversationParts,
  userId: string,
  list: readonly ConversationRecord[],
): Promise<Result<ConversationOverview[], ConversationServiceError<'search'>>> {
  const entries = await parts.records.withContext(userId, list);
  if (entries.isErr()) return err(entries.error);
  return ok(entries.value.map((e) => toConversationOverview(e.record, e.sandbox, e.children)));
}

async function get(
  parts: ConversationParts,
  userId: string,
  id: string,
): Promise<Result<ConversationOverview, ConversationServiceError<'get'>>> {
  const record = await parts.records.getRecord(userId, id);
  if (record.isErr()) return err(record.error);
  const overviews = await overviewsOf(parts, userId, [record.value]);
  if (overviews.isErr()) return err(overviews.error);
  return ok(overviews.value[0]!);
}

async function search(
  parts: ConversationParts,
  userId: string,
  filter: ConversationFilter,
  page: PageRequest,
): Promise<Result<Page<ConversationOverview>, ConversationServiceError<'search'>>> {
  const found = await parts.deps.conversations.search(userId, filter, page);
  if (found.isErr()) return err(found.error);
  const overviews = await overviewsOf(parts, userId, found.value.items);
  if (overviews.isErr()) return err(overviews.error);
  return ok({ items: overviews.value, next_page_id: found.value.next_page_id });
}

async function getMany(
  parts: ConversationParts,
  userId: string,
  idList: readonly string[],
): Promise<Result<(ConversationOverview | null)[], ConversationServiceError<'getMany'>>> {
  const found = await parts.deps.conversations.getMany(userId, idList.map(normalizeId));
  if (found.isErr()) return err(found.error);
  const entries = await parts.records.withContext(
    userId,
    found.value.filter((r): r is ConversationRecord => r !== null),
  );
  if (entries.isErr()) return err(entries.error);
  const byId = new Map(
    entries.value.map((e) => [e.record.id, toConversationOverview(e.record, e.sandbox, e.children)]),
  );
  return ok(found.value.map((r) => (r ? (byId.get(r.id) ?? null) : null)));
}

async function deleteConversation(
  parts: ConversationParts,
  userId: string,
  id: string,
): Promise<Result<void, ConversationServiceError<'delete'>>> {
  const { deps } = parts;
  const found = await parts.records.getRecord(userId, id);
  if (found.isErr()) return err(found.error);
  const record = found.value;
  const deleted = await deps.conversations.delete(userId, record.id);
  if (deleted.isErr()) return err(deleted.error);
  const tasks = await deps.startTasks.deleteByConversation(userId, record.id);
  if (tasks.isErr()) return err(tasks.error);
  await deps.agent.forget(userId, record.id);
  const events = await deps.log.deleteConversation(userId, record.id);
  if (events.isErr()) return err(events.error);
  if (!record.sandbox_id) return ok(undefined);
  const sandboxId = record.sandbox_id;
  const others = await parts.records.othersUsing(userId, sandboxId, record.id);
  if (others.isErr()) return err(others.error);
  if (others.value.length > 0) return ok(undefined);
  // The conversation is gone either way; a sandbox that cannot be removed now is logged, not fatal.
  const removed = await deps.sandboxes.delete(userId, sandboxId);
  if (
    removed.isErr() &&
    removed.error.type !== 'SandboxNotFound' &&
    removed.error.type !== 'IllegalSandboxTransition'
  ) {
    deps.logger.warn(
      { sandboxId, error: removed.error.type },
      'could not delete the sandbox of a deleted conversation',
    );
  }
  return ok(undefined);
}

async function stop(
  parts: ConversationParts,
  userId: string,
  id: string,
): Promise<Result<ConversationStatusChange, ConversationServiceError<'stop'>>> {
  const { deps } = parts;
  const found = await parts.records.getRecord(userId, id);
  if (found.isErr()) return err(found.error);
  const record = found.value;
  await deps.agent.pause(userId, record.id, 'the conversation was stopped');
  const stopped = await parts.records.transition(userId, record.id, 'stop', { status_detail: 'stopped by the user' });
  if (stopped.isErr()) return err(stopped.error);
  const change: ConversationStatusChange = {
    conversation_id: record.id,
    status: 'STOPPED',
    outcome: record.status === 'STOPPED' ? 'was_not_running' : 'stopped',
  };
  if (!record.sandbox_id) return ok(change);
  const sandboxId = record.sandbox_id;
  const others = await parts.records.othersUsing(userId, sandboxId, record.id);
  if (others.isErr()) return err(others.error);
  const stillNeeded = others.value.some((c) => c.status !== 'STOPPED');
  const box = await deps.sandboxStore.get(userId, sandboxId);
  if (box.isErr()) return err(box.error);
  const pause = () => deps.sandboxes.pauseIfUnused(userId, sandboxId, stillNeeded);
  // Still starting: pause it once it is up, without holding this request.
  if (box.value?.status === 'STARTING') deps.background.spawn(`pause sandbox ${sandboxId}`, pause);
  else await pause();
  return ok(change);
}

async function start(
  parts: ConversationParts,
  userId: string,
  id: string,
): Promise<Result<ConversationStatusChange, ConversationServiceError<'start'>>> {
  const { deps, records, pipeline } = parts;
  const found = await records.getRecord(userId, id);
  if (found.isErr()) return err(found.error);
  const record = found.value;
  const status = await records.statusOf(userId, record);
  if (status.isErr()) return err(status.error);
  if (status.value !== 'STOPPED')
    return ok({ conversation_id: record.id, status: status.value, outcome: 'was_running' });
  const stored = await deps.settings.loadWithSecrets(userId);
  if (stored.isErr()) return err(stored.error);
  const usable = record.launch.replay_json
    ? ok(stored.value)
    : records.requireLlmSettings(stored.value, record.llm_model);
  if (usable.isErr()) return err(usable.error);
  const box = record.sandbox_id ? await deps.sandboxStore.get(userId, record.sandbox_id) : ok(null);
  if (box.isErr()) return err(box.error);
  let plan: Plan;
  if (box.value && !isSandboxLost(box.value.status)) plan = { kind: 'existing', sandbox: box.value };
  else {
    const spec = await records.specFor(stored.value);
    if (spec.isErr()) return err(spec.error);
    plan = { kind: 'new', spec: spec.value };
  }
  const request = { selected_repository: record.selected_repository, selected_branch: record.selected_branch };
  const launched = await pipeline.launch(userId, record, plan, request, pipeline.restartConversation(userId, record));
  if (launched.isErr()) return err(launched.error);
  return ok({ conversation_id: record.id, status: 'STARTING', outcome: 'starting' });
}

/**
 * Before a conversation's agent is given work (a message, a decision, a run): a conversation
 * that runs by intent but whose sandbox was paused (idle, finished, to make room for another)
 * gets it back, within the user's limit, so the agent acts at once as it would have before the
 * pause. True when the caller wakes the agent now; false when the sandbox resumes slowly (a
 * pod scheduled again) and `wakeLater` runs once it is up. A refused resume (the limit, the
 * engine) is logged and leaves the work waiting for the conversation's start: what the user
 * sent is stored either way. A stopped conversation stays stopped.
 */
async function bringSandboxBack(
  parts: ConversationParts,
  userId: string,
  record: ConversationRecord,
  wakeLater: () => void,
): Promise<boolean> {
  const { deps } = parts;
  const sandboxId = record.sandbox_id;
  const box =
    record.status === 'RUNNING' && sandboxId ? (await deps.sandboxStore.get(userId, sandboxId)).unwrapOr(null) : null;
  if (!box || !sandboxId || box.status !== 'PAUSED') {
    // So the sandbox is not taken for resting in the moment before the agent's run begins.
    if (box?.status === 'RUNNING') deps.sandboxes.touch(userId, box.id);
    return true;
  }
  const resumed = await deps.sandboxes.resume(userId, sandboxId);
  if (resumed.isErr()) {
    deps.logger.warn(
      { conversationId: record.id, sandboxId, error: resumed.error.type },
      'could not resume the paused sandbox of a conversation given work; it waits until the conversation is started',
    );
    return true;
  }
  if ((await deps.sandboxStore.get(userId, sandboxId)).unwrapOr(null)?.status !== 'STARTING') return true;
  deps.background.spawn(`wake ${record.id} once its sandbox is back`, async () => {
    if ((await deps.sandboxes.whenSettled(userId, sandboxId))?.status === 'RUNNING') wakeLater();
  });
  return false;
}

/** Wakes the agent of a running conversation, its sandbox brought back first when paused. */
async function wakeRunning(parts: ConversationParts, userId: string, record: ConversationRecord): Promise<void> {
  const wake = () => parts.deps.agent.wake(userId, record.id);
  if (await bringSandboxBack(parts, userId, record, wake)) wake();
}

async function sendMessage(
  parts: ConversationParts,
  userId: string,
  id: string,
  message: SendMessageRequest,
): Promise<Result<MessageEvent, ConversationServiceError<'sendMessage'>>> {
  if (message.role !== 'user') {
    // The request schema admits only "user"; this holds for callers that skip it.
    return err(
      validationFailed([
        {
          path: 'role',
          message: `only messages from the user can be sent; got role ${String(message.role as unknown)}`,
        },
      ]),
    );
  }
  const content = userMessageOf(message);
  if (!content) return err(validationFailed([{ path: 'content', message: 'the message has no text and no images' }]));
  const found = await parts.records.getRecord(userId, id);
  if (found.isErr()) return err(found.error);
  const record = found.value;
  const event = await parts.records.appendUserMessage(userId, record.id, content);
  if (event.isErr()) return err(event.error);
  // run: false only records the message; the agent sees it on its next run.
  if (record.status === 'RUNNING' && message.run) await wakeRunning(parts, userId, record);
  return ok(event.value);
}

async function respondToConfirmation(
  parts: ConversationParts,
  userId: string,
  id: string,
  decision: ConfirmationDecision,
): Promise<Result<ConfirmationEvent, ConversationServiceError<'respondToConfirmation'>>> {
  const found = await parts.records.getRecord(userId, id);
  if (found.isErr()) return err(found.error);
  const record = found.value;
  // The answer wakes the agent, so its sandbox (paused while it waited) comes back first.
  if (record.execution_status === 'waiting_for_confirmation')
    await bringSandboxBack(parts, userId, record, () => parts.deps.agent.wake(userId, record.id));
  return parts.deps.agent.respondToConfirmation(userId, record.id, decision);
}

async function rename(
  parts: ConversationParts,
  userId: string,
  id: string,
  title: string,
): Promise<Result<void, ConversationServiceError<'rename'>>> {
  const found = await parts.records.getRecord(userId, id);
  if (found.isErr()) return err(found.error);
  const renamed = await parts.deps.conversations.update(
    userId,
    found.value.id,
    (c): Result<ConversationRecord, never> => ok({ ...c, title, updated_at: parts.deps.clock.now() }),
  );
  if (renamed.isErr()) return err(renamed.error);
  return ok(undefined);
}

async function switchProfile(
  parts: ConversationParts,
  userId: string,
  id: string,
  profileName: string,
): Promise<Result<void, ConversationServiceError<'switchProfile'>>> {
  const { deps } = parts;
  const found = await parts.records.getRecord(userId, id);
  if (found.isErr()) return err(found.error);
  const stored = await deps.settings.loadWithSecrets(userId);
  if (stored.isErr()) return err(stored.error);
  if (!stored.value) return err({ type: 'SettingsNotFound' });
  const profile = stored.value.llm_profiles.profiles.find((p) => p.name === profileName);
  if (!profile) return err({ type: 'ProfileNotFound', name: profileName });
  const switched = await deps.conversations.update(userId, found.value.id, (c): Result<ConversationRecord, never> =>
    ok({ ...c, llm_profile_id: profile.id, llm_model: profile.model ?? c.llm_model, updated_at: deps.clock.now() }),
  );
  if (switched.isErr()) return err(switched.error);
  return ok(undefined);
}

async function update(
  parts: ConversationParts,
  userId: string,
  id: string,
  patch: ConversationUpdate,
): Promise<Result<ConversationOverview, ConversationServiceError<'update'>>> {
  if (
    patch.selected_repository === null &&
    ((patch.selected_branch ?? null) !== null || (patch.git_provider ?? null) !== null)
  ) {
    return err(
      validationFailed([
        {
          path: 'selected_repository',
          message: 'clearing the repository clears its branch and provider too: send them as null (or leave them out)',
        },
      ]),
    );
  }
  const found = await parts.records.getRecord(userId, id);
  if (found.isErr()) return err(found.error);
  const updated = await parts.deps.conversations.update(
    userId,
    found.value.id,
    (c): Result<ConversationRecord, never> =>
      ok({
        ...c,
        ...(patch.title !== undefined ? { title: patch.title ?? `Conversation ${c.id.slice(0, 5)}` } : {}),
        ...(patch.public !== undefined ? { public: patch.public } : {}),
        ...(patch.selected_repository !== undefined ? { selected_repository: patch.selected_repository } : {}),
        ...(patch.selected_branch !== undefined ? { selected_branch: patch.selected_branch } : {}),
        ...(patch.git_provider !== undefined ? { git_provider: patch.git_provider } : {}),
        updated_at: parts.deps.clock.now(),
      }),
  );
  if (updated.isErr()) return err(updated.error);
  if (!updated.value) return err({ type: 'ConversationNotFound', conversationId: id });
  const overviews = await overviewsOf(parts, userId, [updated.value]);
  if (overviews.isErr()) return err(overviews.error);
  return ok(overviews.value[0]!);
}

/** The conversation a queued message is for: its id, or `task-<id>` of the task that starts it. */
async function queueTarget(
  parts: ConversationParts,
  userId: string,
  target: string,
): Promise<Result<ConversationRecord, ConversationServiceError<'queueMessage'>>> {
  const task = /^task-(.+)$/.exec(target);
  if (!task) return parts.records.getRecord(userId, target);
  const found = await parts.deps.startTasks.get(userId, normalizeId(task[1]!));
  if (found.isErr()) return err(found.error);
  if (!found.value) return err({ type: 'ConversationNotFound', conversationId: target });
  return parts.records.getRecord(userId, found.value.app_conversation_id);
}

/** How many user messages wait for the agent: those after its last event (read in pages, counting only). */
async function waitingMessages(
  parts: ConversationParts,
  userId: string,
  conversationId: string,
): Promise<Result<number, ConversationServiceError<'queueMessage'>>> {
  let waiting = 0;
  for (let after: number | null = 0; after !== null;) {
    const page = await parts.deps.log.search(userId, conversationId, {
      after,
      kinds: ['message', 'action'],
      limit: 100,
    });
    if (page.isErr()) return err(page.error);
    for (const event of page.value.items)
      waiting = event.source === 'user' ? waiting + 1 : event.source === 'agent' ? 0 : waiting;
    after = page.value.next_after;
  }
  return ok(waiting);
}

async function queueMessage(
  parts: ConversationParts,
  userId: string,
  target: string,
  message: SendMessageRequest,
): Promise<Result<QueuedMessage, ConversationServiceError<'queueMessage'>>> {
  const record = await queueTarget(parts, userId, target);
  if (record.isErr()) return err(record.error);
  const waiting = await waitingMessages(parts, userId, record.value.id);
  if (waiting.isErr()) return err(waiting.error);
  if (waiting.value >= MAX_PENDING_MESSAGES)
    return err({ type: 'TooManyPendingMessages', conversationId: record.value.id, limit: MAX_PENDING_MESSAGES });
  const sent = await sendMessage(parts, userId, record.value.id, { ...message, run: true });
  if (sent.isErr()) return err(sent.error);
  return ok({ event: sent.value, position: waiting.value + 1 });
}

async function followStartTask(
  parts: ConversationParts,
  userId: string,
  taskId: string,
  listener: (task: StartTask) => void,
  onEnd: (reason: string) => void,
): Promise<Result<{ close(): void }, ConversationServiceError<'followStartTask'>>> {
  const { background } = parts.deps;
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
    if (
      last &&
      (task.updated_at < last.updated_at ||
        (task.updated_at === last.updated_at && task.status === last.status && task.detail === last.detail))
    )
      return;
    last = task;
    listener(toStartTask(task));
    if (task.status === 'READY' || task.status === 'ERROR') end('finished');
  };
  stop = parts.records.watchTask(userId, id, deliver);
  const current = await parts.deps.startTasks.get(userId, id);
  if (current.isErr()) {
    stop();
    return err(current.error);
  }
  if (!current.value) {
    stop();
    return err({ type: 'StartTaskNotFound', taskId });
  }
  deliver(current.value);
  if (background.closed) closing();
  else if (!ended) background.signal.addEventListener('abort', closing, { once: true });
  return ok({ close: () => end('closed') });
}

async function pauseAgent(
  parts: ConversationParts,
  userId: string,
  id: string,
): Promise<Result<void, ConversationServiceError<'pauseAgent'>>> {
  const found = await parts.records.getRecord(userId, id);
  if (found.isErr()) return err(found.error);
  await parts.deps.agent.pause(userId, found.value.id, 'paused by the user');
  return ok(undefined);
}

async function runAgent(
  parts: ConversationParts,
  userId: string,
  id: string,
): Promise<Result<void, ConversationServiceError<'runAgent'>>> {
  const found = await parts.records.getRecord(userId, id);
  if (found.isErr()) return err(found.error);
  if (found.value.status === 'RUNNING') await wakeRunning(parts, userId, found.value);
  return ok(undefined);
}

async function searchEvents(
  parts: ConversationParts,
  userId: string,
  id: string,
  query: EventQuery,
): Promise<Result<EventPage, ConversationServiceError<'searchEvents'>>> {
  const found = await parts.records.getRecord(userId, id);
  if (found.isErr()) return err(found.error);
  return parts.deps.log.search(userId, found.value.id, query);
}

async function subscribeEvents(
  parts: ConversationParts,
  userId: string,
  id: string,
  afterId: number,
  listener: EventListener,
  onEnd?: (reason: string) => void,
  onTransient?: TransientListener,
): Promise<Result<EventSubscription, ConversationServiceError<'subscribeEvents'>>> {
  const found = await parts.records.getRecord(userId, id);
  if (found.isErr()) return err(found.error);
  return parts.deps.log.subscribe(userId, found.value.id, afterId, listener, onEnd, onTransient);
}

async function handleSandboxGone(
  parts: ConversationParts,
  userId: string,
  sandboxId: string,
  reason: string,
): Promise<void> {
  const { deps } = parts;
  const affected = await deps.conversations.listBySandbox(userId, sandboxId);
  if (affected.isErr()) {
    deps.logger.error(
      { sandboxId, operation: affected.error.operation, errorClass: affected.error.errorClass },
      'could not load the conversations of a lost sandbox',
    );
    return;
  }
  for (const conversation of affected.value) {
    if (conversation.status === 'STOPPED') continue;
    // Not awaited: this may be called from inside the agent's own loop (a tool found the sandbox gone).
    deps.background.spawn(`pause agent ${conversation.id}`, () => deps.agent.pause(userId, conversation.id, reason));
    const updated = await parts.records.transition(userId, conversation.id, 'sandbox_lost', { status_detail: reason });
    if (updated.isErr())
      deps.logger.warn(
        { conversationId: conversation.id, error: updated.error.type },
        'could not stop a conversation whose sandbox was lost',
      );
  }
}
