// A conversation's life: created (V0) or started (V1) with its sandbox and start task, stopped,
// started again, deleted, and stopped when its sandbox is lost.
import { err, ok, type Result } from 'neverthrow';
import { validationFailed } from '../errors.js';
import { normalizeId } from '../ids.js';
import { isSandboxLost, planSandboxAction } from '../sandbox/state.js';
import type { StoredSettings } from '../settings/schema.js';
import { refusalOfMcpConfig } from '../settings/egress.js';
import { parseReplayTrajectory } from './replay-trajectory.js';
import { initialMessageFromV0 } from './requests.js';
import { suggestedTaskMessage } from './first-message.js';
import {
  toStartTask,
  type AppConversationStartRequest,
  type ConversationLaunch,
  type NewConversationRequest,
  type StartTask,
} from './schema.js';
import type { ConversationServiceError, CreatedConversation } from './service-contract.js';
import type { Plan } from './start-pipeline.js';
import type { ConversationStatusChange } from './overview.js';
import type { ConversationParts } from './parts.js';

/** V0 New Conversation: a new sandbox, the conversation, its first message and its start task, all of it or none of it. */
export async function createV0(
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
export async function startApp(
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

export async function deleteConversation(
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

export async function stop(
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

export async function start(
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

export async function handleSandboxGone(
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
