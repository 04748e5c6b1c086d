import { err, ok, type Result } from 'neverthrow';
import { validationFailed } from '../errors.js';
import type { EventListener, EventSubscription } from '../events/log.js';
import type { TransientListener } from '../events/transient.js';
import type { EventPage, EventQuery } from '../events/schema.js';
import { normalizeId } from '../ids.js';
import type { Page, PageRequest } from '../pagination.js';
import { resultAsync } from '../result.js';
import { resolveEgress } from '../settings/egress.js';
import { keyBinding, rotateKey } from './keys.js';
import { createConversationRecords } from './records.js';
import { normalizedTaskFilter } from './requests.js';
import { toStartTask, type ConversationRecord, type StartTask, type StartTaskRecord } from './schema.js';
import {
  DEFAULT_KEYLESS_MODEL_PREFIXES,
  type ConversationService,
  type ConversationServiceDeps,
  type ConversationServiceError,
  type ConversationUpdate,
} from './service-contract.js';
import { createStartPipeline } from './start-pipeline.js';
import type { ConversationFilter } from './store.js';
import { toConversationOverview, type ConversationOverview } from './overview.js';
import type { ConversationParts } from './parts.js';
import { createV0, deleteConversation, handleSandboxGone, start, startApp, stop } from './lifecycle.js';
import { pauseAgent, queueMessage, respondToConfirmation, runAgent, sendMessage } from './agent-work.js';

export * from './service-contract.js';

/**
 * V0 and V1 conversations over one record: one entry per operation, each a function over the
 * parts: reads and edits below, a conversation's life in `lifecycle.ts`, work for its agent in
 * `agent-work.ts`.
 */
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
