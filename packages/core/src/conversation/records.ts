import { err, errAsync, ok, okAsync, ResultAsync, type Result } from 'neverthrow';
import type { DomainErrorOf } from '../errors.js';
import type { MessageEvent } from '../events/schema.js';
import { normalizeId } from '../ids.js';
import type { SandboxSpec } from '../sandbox/schema.js';
import type { StoredSettings } from '../settings/schema.js';
import type { StoreFailure } from '../store-failure.js';
import { nextExecutionStatus } from './execution-state.js';
import type { ConversationRecord, StartTaskRecord, StartTaskStatus } from './schema.js';
import type { ConversationServiceDeps } from './service-contract.js';
import { effectiveConversationStatus, nextConversationStatus, type ConversationStatusEvent } from './state.js';

/** What the conversation service is built from, the option defaults applied. */
export type ConversationBase = ConversationServiceDeps & { keyless: readonly string[] };

/** The conversation service's shared steps: settings checks, status transitions, start-task updates, reading records with their sandboxes. */
export function createConversationRecords(kit: ConversationBase) {
  const { conversations, startTasks, log, sandboxes, clock, keyless } = kit;

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

  /** Who follows which start task in this process (`followStartTask`), keyed by user and task. */
  const taskWatchers = new Map<string, Set<(task: StartTaskRecord) => void>>();
  const taskKey = (userId: string, taskId: string) => `${userId}\u0000${taskId}`;

  /** Follows a start task's stored changes made in this process; returns how to stop. */
  const watchTask = (userId: string, taskId: string, watcher: (task: StartTaskRecord) => void): (() => void) => {
    const key = taskKey(userId, taskId);
    const watchers = taskWatchers.get(key) ?? new Set();
    watchers.add(watcher);
    taskWatchers.set(key, watchers);
    return () => {
      watchers.delete(watcher);
      if (watchers.size === 0) taskWatchers.delete(key);
    };
  };

  /** Changes a start task, and tells those who follow it. */
  const updateTask = (userId: string, taskId: string, mutate: (task: StartTaskRecord) => StartTaskRecord) =>
    startTasks.update(userId, taskId, (t): Result<StartTaskRecord, never> => ok(mutate(t))).map((updated) => {
      if (updated) for (const watcher of [...(taskWatchers.get(taskKey(userId, taskId)) ?? [])]) watcher(updated);
      return updated;
    });

  /** Moves a start task on; a detail (progress of the step before) does not carry over to the next step. */
  const setTask = (userId: string, taskId: string, status: StartTaskStatus, extra: Partial<StartTaskRecord> = {}) =>
    updateTask(userId, taskId, (t) => ({ ...t, ...(status === t.status ? {} : { detail: null }), ...extra, status, updated_at: clock.now() }));

  /** Puts a user message in the log; the agent picks it up when it is woken (now, or when its sandbox is ready). */
  const appendUserMessage = (userId: string, conversationId: string, message: { text: string; image_urls: readonly string[] }): ResultAsync<MessageEvent, StoreFailure> =>
    log
      .append(userId, conversationId, [{ kind: 'message', source: 'user', timestamp: clock.now(), text: message.text, image_urls: [...message.image_urls] }])
      .map((events) => events[0] as MessageEvent);

  /** Other conversations that still need this sandbox. */
  const othersUsing = (userId: string, sandboxId: string, exceptId: string) =>
    conversations.listBySandbox(userId, sandboxId).map((list) => list.filter((c) => c.id !== exceptId));

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

  return { requireLlmSettings, specFor, transition, setTask, updateTask, watchTask, appendUserMessage, othersUsing, sandboxesOf, withContext, getRecord, statusOf };
}

export type ConversationRecords = ReturnType<typeof createConversationRecords>;
