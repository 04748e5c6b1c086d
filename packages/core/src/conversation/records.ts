import { err, ok, type Result, type ResultAsync } from 'neverthrow';
import type { Clock } from '../clock.js';
import type { DomainErrorOf } from '../errors.js';
import type { EventLog } from '../events/log.js';
import type { MessageEvent } from '../events/schema.js';
import { normalizeId } from '../ids.js';
import { resultAsync } from '../result.js';
import type { SandboxRecord, SandboxSpec } from '../sandbox/schema.js';
import type { SandboxService } from '../sandbox/service.js';
import type { StoredSettings } from '../settings/schema.js';
import type { StoreFailure } from '../store-failure.js';
import { nextExecutionStatus } from './execution-state.js';
import type { ConversationRecord, ConversationStatus, StartTaskRecord, StartTaskStatus } from './schema.js';
import { effectiveConversationStatus, nextConversationStatus, type ConversationStatusEvent } from './state.js';
import type { ConversationStore, StartTaskStore } from './store.js';

export interface ConversationRecordsDeps {
  conversations: ConversationStore;
  startTasks: StartTaskStore;
  log: EventLog;
  sandboxes: SandboxService;
  clock: Clock;
  /** Model prefixes that need no API key (`keylessModelPrefixes` with its default). */
  keyless: readonly string[];
}

/** A conversation with what its overview shows besides the record: its sandbox (refreshed) and its children. */
interface ConversationInContext {
  record: ConversationRecord;
  sandbox: SandboxRecord | null;
  children: string[];
}

/** The conversation service's shared steps: settings checks, status transitions, start-task updates, reading records with their sandboxes. */
export interface ConversationRecords {
  /** Refuses to start an agent that could not call its model. */
  requireLlmSettings(
    stored: StoredSettings | null,
    modelOverride: string | null,
  ): Result<StoredSettings | null, DomainErrorOf<'SettingsRequired'>>;
  /** The spec of a new sandbox: the user's `sandbox_base_container_image`, or the default. */
  specFor(
    stored: StoredSettings | null,
  ): ResultAsync<SandboxSpec, DomainErrorOf<'SandboxImageNotAllowed'> | StoreFailure>;
  /** Transition a stored conversation; returns null when it no longer exists. */
  transition(
    userId: string,
    id: string,
    event: ConversationStatusEvent,
    patch?: Partial<Pick<ConversationRecord, 'status_detail' | 'execution_status' | 'sandbox_id'>>,
  ): ResultAsync<ConversationRecord | null, DomainErrorOf<'IllegalConversationTransition' | 'StoreUnavailable'>>;
  /** Moves a start task on; a detail (progress of the step before) does not carry over to the next step. */
  setTask(
    userId: string,
    taskId: string,
    status: StartTaskStatus,
    extra?: Partial<StartTaskRecord>,
  ): ResultAsync<StartTaskRecord | null, StoreFailure>;
  /** Changes a start task, and tells those who follow it. */
  updateTask(
    userId: string,
    taskId: string,
    mutate: (task: StartTaskRecord) => StartTaskRecord,
  ): ResultAsync<StartTaskRecord | null, StoreFailure>;
  /** Follows a start task's stored changes made in this process; returns how to stop. */
  watchTask(userId: string, taskId: string, watcher: (task: StartTaskRecord) => void): () => void;
  /** Puts a user message in the log; the agent picks it up when it is woken (now, or when its sandbox is ready). */
  appendUserMessage(
    userId: string,
    conversationId: string,
    message: { text: string; image_urls: readonly string[] },
  ): ResultAsync<MessageEvent, StoreFailure>;
  /** Other conversations that still need this sandbox. */
  othersUsing(userId: string, sandboxId: string, exceptId: string): ResultAsync<ConversationRecord[], StoreFailure>;
  /** Each record with its sandbox (refreshed from the runtime) and its children. */
  withContext(
    userId: string,
    records: readonly ConversationRecord[],
  ): ResultAsync<ConversationInContext[], StoreFailure>;
  getRecord(
    userId: string,
    id: string,
  ): ResultAsync<ConversationRecord, DomainErrorOf<'ConversationNotFound' | 'StoreUnavailable'>>;
  /** The conversation's status as its sandbox now has it (a conversation whose sandbox was lost is STOPPED). */
  statusOf(userId: string, record: ConversationRecord): ResultAsync<ConversationStatus, StoreFailure>;
}

/** Who follows which start task in this process (`followStartTask`), keyed by user and task. */
type TaskWatchers = Map<string, Set<(task: StartTaskRecord) => void>>;

export function createConversationRecords(deps: ConversationRecordsDeps): ConversationRecords {
  const watchers: TaskWatchers = new Map();
  return {
    requireLlmSettings: (stored, modelOverride) => requireLlmSettings(deps.keyless, stored, modelOverride),
    specFor: (stored) =>
      stored?.sandbox_base_container_image
        ? deps.sandboxes.specForImage(stored.sandbox_base_container_image)
        : deps.sandboxes.defaultSpec(),
    transition: (userId, id, event, patch = {}) => transition(deps, userId, id, event, patch),
    setTask: (userId, taskId, status, extra = {}) =>
      updateTask(deps, watchers, userId, taskId, (t) => ({
        ...t,
        ...(status === t.status ? {} : { detail: null }),
        ...extra,
        status,
        updated_at: deps.clock.now(),
      })),
    updateTask: (userId, taskId, mutate) => updateTask(deps, watchers, userId, taskId, mutate),
    watchTask: (userId, taskId, watcher) => watchTask(watchers, userId, taskId, watcher),
    appendUserMessage: (userId, conversationId, message) =>
      deps.log
        .append(userId, conversationId, [
          {
            kind: 'message',
            source: 'user',
            timestamp: deps.clock.now(),
            text: message.text,
            image_urls: [...message.image_urls],
          },
        ])
        .map((events) => events[0] as MessageEvent),
    othersUsing: (userId, sandboxId, exceptId) =>
      deps.conversations.listBySandbox(userId, sandboxId).map((list) => list.filter((c) => c.id !== exceptId)),
    withContext: (userId, records) => resultAsync(withContext(deps, userId, records)),
    getRecord: (userId, id) => resultAsync(getRecord(deps, userId, id)),
    statusOf: (userId, record) =>
      deps.sandboxes.liveRecords(userId, record.sandbox_id ? [record.sandbox_id] : []).map((boxes) => {
        const box = record.sandbox_id ? boxes.get(record.sandbox_id) : undefined;
        return effectiveConversationStatus(record.status, box?.status ?? null);
      }),
  };
}

function requireLlmSettings(
  keyless: readonly string[],
  stored: StoredSettings | null,
  modelOverride: string | null,
): Result<StoredSettings | null, DomainErrorOf<'SettingsRequired'>> {
  if (!stored) return err({ type: 'SettingsRequired', missing: 'settings' });
  const model = modelOverride ?? stored.llm_model;
  if (!model) return err({ type: 'SettingsRequired', missing: 'llm_model' });
  const keyRequired = !keyless.some((prefix) => model.startsWith(prefix));
  if (keyRequired && !stored.llm_api_key?.trim()) return err({ type: 'SettingsRequired', missing: 'llm_api_key' });
  return ok(stored);
}

function transition(
  deps: ConversationRecordsDeps,
  userId: string,
  id: string,
  event: ConversationStatusEvent,
  patch: Partial<Pick<ConversationRecord, 'status_detail' | 'execution_status' | 'sandbox_id'>>,
): ResultAsync<ConversationRecord | null, DomainErrorOf<'IllegalConversationTransition' | 'StoreUnavailable'>> {
  return deps.conversations.update(
    userId,
    id,
    (current): Result<ConversationRecord, DomainErrorOf<'IllegalConversationTransition'>> => {
      const status = nextConversationStatus(current.status, event);
      if (status.isErr())
        return err({
          type: 'IllegalConversationTransition',
          conversationId: id,
          from: status.error.from,
          event: status.error.event,
        });
      // The agent learns its sandbox is ready: idle the first time, otherwise it keeps its status.
      const ready =
        event === 'sandbox_ready'
          ? nextExecutionStatus(current.execution_status, 'ready').unwrapOr(current.execution_status)
          : current.execution_status;
      const agent = ready !== current.execution_status ? { execution_status: ready } : {};
      if (status.value === current.status && Object.keys(patch).length === 0 && Object.keys(agent).length === 0)
        return ok(current);
      return ok({ ...current, ...patch, ...agent, status: status.value, updated_at: deps.clock.now() });
    },
  );
}

const taskKey = (userId: string, taskId: string) => `${userId}\u0000${taskId}`;

function watchTask(
  watchers: TaskWatchers,
  userId: string,
  taskId: string,
  watcher: (task: StartTaskRecord) => void,
): () => void {
  const key = taskKey(userId, taskId);
  const ofTask = watchers.get(key) ?? new Set();
  ofTask.add(watcher);
  watchers.set(key, ofTask);
  return () => {
    ofTask.delete(watcher);
    if (ofTask.size === 0) watchers.delete(key);
  };
}

function updateTask(
  deps: ConversationRecordsDeps,
  watchers: TaskWatchers,
  userId: string,
  taskId: string,
  mutate: (task: StartTaskRecord) => StartTaskRecord,
): ResultAsync<StartTaskRecord | null, StoreFailure> {
  return deps.startTasks
    .update(userId, taskId, (t): Result<StartTaskRecord, never> => ok(mutate(t)))
    .map((updated) => {
      if (updated) for (const watcher of [...(watchers.get(taskKey(userId, taskId)) ?? [])]) watcher(updated);
      return updated;
    });
}

async function withContext(
  deps: ConversationRecordsDeps,
  userId: string,
  records: readonly ConversationRecord[],
): Promise<Result<ConversationInContext[], StoreFailure>> {
  const sandboxIds = records.map((r) => r.sandbox_id).filter((x): x is string => x !== null);
  // Both at once: the sandboxes (refreshed from the runtime) and the children.
  const [boxes, children] = await Promise.all([
    deps.sandboxes.liveRecords(userId, sandboxIds),
    deps.conversations.childrenOf(
      userId,
      records.map((r) => r.id),
    ),
  ]);
  if (boxes.isErr()) return err(boxes.error);
  if (children.isErr()) return err(children.error);
  return ok(
    records.map((r) => ({
      record: r,
      sandbox: r.sandbox_id ? (boxes.value.get(r.sandbox_id) ?? null) : null,
      children: children.value.get(r.id) ?? [],
    })),
  );
}

async function getRecord(
  deps: ConversationRecordsDeps,
  userId: string,
  id: string,
): Promise<Result<ConversationRecord, DomainErrorOf<'ConversationNotFound' | 'StoreUnavailable'>>> {
  const record = await deps.conversations.get(userId, normalizeId(id));
  if (record.isErr()) return err(record.error);
  if (!record.value) return err({ type: 'ConversationNotFound', conversationId: id });
  return ok(record.value);
}
