// Work given to a conversation's agent (a message, a queued message, an answer to a
// confirmation, run and pause), its paused sandbox brought back first.
import { err, ok, type Result } from 'neverthrow';
import { validationFailed } from '../errors.js';
import type { ConfirmationEvent, MessageEvent } from '../events/schema.js';
import { normalizeId } from '../ids.js';
import type { ConfirmationDecision } from './agent-port.js';
import { userMessageOf } from './requests.js';
import type { ConversationRecord, SendMessageRequest } from './schema.js';
import { MAX_PENDING_MESSAGES, type ConversationServiceError, type QueuedMessage } from './service-contract.js';
import type { ConversationParts } from './parts.js';

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

export async function sendMessage(
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

export async function respondToConfirmation(
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

export async function queueMessage(
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

export async function pauseAgent(
  parts: ConversationParts,
  userId: string,
  id: string,
): Promise<Result<void, ConversationServiceError<'pauseAgent'>>> {
  const found = await parts.records.getRecord(userId, id);
  if (found.isErr()) return err(found.error);
  await parts.deps.agent.pause(userId, found.value.id, 'paused by the user');
  return ok(undefined);
}

export async function runAgent(
  parts: ConversationParts,
  userId: string,
  id: string,
): Promise<Result<void, ConversationServiceError<'runAgent'>>> {
  const found = await parts.records.getRecord(userId, id);
  if (found.isErr()) return err(found.error);
  if (found.value.status === 'RUNNING') await wakeRunning(parts, userId, found.value);
  return ok(undefined);
}
