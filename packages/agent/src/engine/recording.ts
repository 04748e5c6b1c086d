import { nextExecutionStatus, type ExecutionEvent } from '@acs/core';
import type { AgentHost } from '@acs/core/ports';
import type {
  ConversationErrorCode,
  ConversationEvent,
  ConversationEventDraft,
  ConversationMetrics,
  ConversationRecord,
  ExecutionStatus,
} from '@acs/core/schemas';
import { ok, type Result } from 'neverthrow';
import type { Answered, Runner } from './runner.js';

/** What recording needs from the host: the record, the log, the time, the logger and the leases. */
export type RecordingDeps = Pick<AgentHost, 'conversations' | 'log' | 'clock' | 'logger' | 'ownership'>;

/**
 * How the agent writes what it does: appends that keep the runner's copy of the log complete
 * and in order, status moves through the state machine, metrics, errors.
 *
 * A runner whose lease another process holds now writes nothing: its first refused write stops
 * the run (`Runner.loseLease`), and every write after is skipped, so the loop ends at its next
 * look at `r.stopped` without anything thrown. A store that refuses a read or a write is thrown
 * (`refused`), each the same way, and caught in one place, the loop's turn (loop.ts), which
 * records it as an internal error: the record and the log would part if the agent went on.
 */
export interface Recording {
  /** Appends (under the runner's lease) and keeps the runner's copy of the log complete and in order; nothing once the lease is lost. */
  append: (r: Runner, drafts: ConversationEventDraft[]) => Promise<ConversationEvent[]>;
  /** Brings the runner's copy of the log up to date (messages may have been appended by requests). */
  catchUp: (r: Runner) => Promise<void>;
  now: () => string;
  /** Moves the execution status (and records why); a move the state machine refuses is a defect, logged and ignored. */
  setStatus: (
    r: Runner,
    event: ExecutionEvent,
    reason: string | null,
    extra?: Partial<Pick<ConversationRecord, 'metrics'>>,
  ) => Promise<ExecutionStatus | null>;
  /** Writes the conversation's metrics to its record. */
  saveMetrics: (r: Runner, metrics: ConversationMetrics) => Promise<void>;
  /** An error event: fatal when the agent stops because of it, else a warning. */
  errorEvent: (code: ConversationErrorCode, message: string, fatal?: boolean) => ConversationEventDraft;
  /** The agent stops on an error: a fatal error event, then the status `error`; it has answered what it read. */
  fail: (r: Runner, code: ConversationErrorCode, message: string) => Promise<Answered>;
  /**
   * The agent stops short of its task at a limit a message lifts (max_iterations): a fatal
   * error event says why, and it waits for the user (idle), whose next message runs it again.
   */
  stopUntilMessage: (r: Runner, code: ConversationErrorCode, message: string) => Promise<Answered>;
}

export function createRecording(deps: RecordingDeps): Recording {
  return {
    append: (r, drafts) => append(deps, r, drafts),
    catchUp: (r) => catchUp(deps, r),
    now: () => deps.clock.now(),
    setStatus: (r, event, reason, extra = {}) => setStatus(deps, r, event, reason, extra),
    saveMetrics: (r, metrics) => saveMetrics(deps, r, metrics),
    errorEvent: (code, message, fatal = false) => errorEvent(deps, code, message, fatal),
    fail: (r, code, message) => stopWithError(deps, r, code, message, 'fail'),
    stopUntilMessage: (r, code, message) => stopWithError(deps, r, code, message, 'await_message'),
  };
}

/** Before a write to the record: false (and the run stopped) when the runner's lease is no longer good. */
function holds(deps: RecordingDeps, r: Runner): boolean {
  if (r.leaseLost) return false;
  if (r.lease && !deps.ownership.holds(r.lease)) {
    deps.logger.warn(
      { conversationId: r.conversationId },
      'stopped a conversation whose lease was not renewed in time',
    );
    r.loseLease();
    return false;
  }
  return true;
}

async function append(deps: RecordingDeps, r: Runner, drafts: ConversationEventDraft[]): Promise<ConversationEvent[]> {
  if (drafts.length === 0 || r.leaseLost) return [];
  const appended = await deps.log.appendAsOwner(r.userId, r.conversationId, r.lease?.fence ?? null, drafts);
  if (appended.isErr()) {
    if (appended.error.type === 'LeaseLost') {
      // Another process runs the conversation now; anything written from here would be refused.
      deps.logger.warn(
        { conversationId: r.conversationId, reason: appended.error.message },
        'stopped a conversation whose lease was lost',
      );
      r.loseLease();
      return [];
    }
    refused('append to the event log', appended.error);
  }
  const events = appended.value;
  if (events.length > 0 && events[0]!.id === r.log.lastId + 1) {
    r.log.add(events);
  } else {
    await catchUp(deps, r); // someone else appended in between (a user message): read it all in order
  }
  return events;
}

async function catchUp(deps: RecordingDeps, r: Runner): Promise<void> {
  const fresh = await deps.log.readAll(r.userId, r.conversationId, r.log.lastId);
  if (fresh.isErr()) refused('read the event log', fresh.error);
  r.log.add(fresh.value);
}

async function setStatus(
  deps: RecordingDeps,
  r: Runner,
  event: ExecutionEvent,
  reason: string | null,
  extra: Partial<Pick<ConversationRecord, 'metrics'>>,
): Promise<ExecutionStatus | null> {
  if (!holds(deps, r)) return null;
  let changed: { from: ExecutionStatus | null; to: ExecutionStatus } | null = null;
  const updated = await deps.conversations.update(
    r.userId,
    r.conversationId,
    (current): Result<ConversationRecord, never> => {
      const next = nextExecutionStatus(current.execution_status, event);
      if (next.isErr()) {
        deps.logger.warn(
          { conversationId: r.conversationId, from: current.execution_status, event },
          'ignored an execution status change the state machine refuses',
        );
        return ok(current);
      }
      if (next.value === current.execution_status && Object.keys(extra).length === 0) return ok(current);
      if (next.value !== current.execution_status) changed = { from: current.execution_status, to: next.value };
      return ok({ ...current, ...extra, execution_status: next.value, updated_at: deps.clock.now() });
    },
  );
  if (updated.isErr()) refused('record the execution status', updated.error);
  const move = changed as { from: ExecutionStatus | null; to: ExecutionStatus } | null;
  if (move)
    await append(deps, r, [
      { kind: 'status', source: 'environment', timestamp: deps.clock.now(), execution_status: move.to, reason },
    ]);
  return updated.value?.execution_status ?? null;
}

async function saveMetrics(deps: RecordingDeps, r: Runner, metrics: ConversationMetrics): Promise<void> {
  if (!holds(deps, r)) return;
  const updated = await deps.conversations.update(r.userId, r.conversationId, (c): Result<ConversationRecord, never> =>
    ok({ ...c, metrics, updated_at: deps.clock.now() }),
  );
  if (updated.isErr()) refused('record the metrics', updated.error);
}

function errorEvent(
  deps: Pick<RecordingDeps, 'clock'>,
  code: ConversationErrorCode,
  message: string,
  fatal: boolean,
): ConversationEventDraft {
  return { kind: 'error', source: 'environment', timestamp: deps.clock.now(), code, message, fatal };
}

/** A fatal error event, then the status move (`fail`: error; `await_message`: idle until the user writes). */
async function stopWithError(
  deps: RecordingDeps,
  r: Runner,
  code: ConversationErrorCode,
  message: string,
  move: 'fail' | 'await_message',
): Promise<Answered> {
  // The error answers what the agent has read: a message that comes in as it is written still gets a turn.
  const upTo = r.log.lastId;
  await append(deps, r, [errorEvent(deps, code, message, true)]);
  await setStatus(deps, r, move, message, {});
  return { upTo, then: 'stop' };
}

/** A store refused a read or a write in the middle of a run: thrown, for the loop's turn to record (see Recording). */
export function refused(what: string, failure: { message: string }): never {
  throw new Error(`could not ${what}: ${failure.message}`);
}
