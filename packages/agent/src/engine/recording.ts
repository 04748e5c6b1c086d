import { nextExecutionStatus, type ExecutionEvent } from '@acs/core';
import type { ConversationErrorCode, ConversationEvent, ConversationEventDraft, ConversationMetrics, ConversationRecord, ExecutionStatus } from '@acs/core/schemas';
import { ok, type Result } from 'neverthrow';
import type { EngineBase } from './base.js';
import { lastHandledId } from './log-reading.js';
import { LeaseLostError, type Runner } from './runner.js';

/**
 * How the agent writes what it does: appends that keep the runner's copy of the log complete
 * and in order, status moves through the state machine, errors, and closing what a
 * conversation holds in its sandbox.
 */
export function createRecording(kit: EngineBase) {
  const { conversations, log, clock, logger, ownership } = kit;

  /** Before a write to the record: a runner whose lease is no longer good writes nothing (its appends are fenced by the store). */
  const mustHold = (r: Runner) => {
    if (r.lease && !ownership.holds(r.lease)) throw new LeaseLostError(r.conversationId, 'not renewed within its time');
  };

  /** Appends (under the runner's lease) and keeps the runner's copy of the log complete and in order. */
  const append = async (r: Runner, drafts: ConversationEventDraft[]): Promise<ConversationEvent[]> => {
    if (drafts.length === 0) return [];
    const appended = await log.appendAsOwner(r.userId, r.conversationId, r.lease?.fence ?? null, drafts);
    if (appended.isErr()) {
      if (appended.error.type === 'LeaseLost') throw new LeaseLostError(r.conversationId, appended.error.message);
      throw new Error(`could not append to the event log: ${appended.error.message}`);
    }
    const events = appended.value;
    if (events.length > 0 && events[0]!.id === r.log.lastId + 1) {
      r.log.add(events);
    } else {
      await catchUp(r); // someone else appended in between (a user message): read it all in order
    }
    return events;
  };

  /** A user message the agent has not seen yet. */
  const hasUnseenMessage = (r: Runner): boolean => {
    r.handledUpTo ??= lastHandledId(r.log.events);
    return r.log.lastUserMessageId > r.handledUpTo;
  };

  /** Brings the runner's copy of the log up to date (messages may have been appended by requests). */
  const catchUp = async (r: Runner): Promise<void> => {
    const fresh = await log.readAll(r.userId, r.conversationId, r.log.lastId);
    if (fresh.isErr()) throw new Error(`could not read the event log: ${fresh.error.message}`);
    r.log.add(fresh.value);
  };

  const now = () => clock.now();

  /** Moves the execution status (and records why); a move the state machine refuses is a defect. */
  const setStatus = async (
    r: Runner,
    event: ExecutionEvent,
    reason: string | null,
    extra: Partial<Pick<ConversationRecord, 'metrics'>> = {},
  ): Promise<ExecutionStatus | null> => {
    let changed: { from: ExecutionStatus | null; to: ExecutionStatus } | null = null;
    mustHold(r);
    const updated = await conversations.update(r.userId, r.conversationId, (current): Result<ConversationRecord, never> => {
      const next = nextExecutionStatus(current.execution_status, event);
      if (next.isErr()) {
        logger.warn({ conversationId: r.conversationId, from: current.execution_status, event }, 'ignored an execution status change the state machine refuses');
        return ok(current);
      }
      if (next.value === current.execution_status && Object.keys(extra).length === 0) return ok(current);
      if (next.value !== current.execution_status) changed = { from: current.execution_status, to: next.value };
      return ok({ ...current, ...extra, execution_status: next.value, updated_at: now() });
    });
    if (updated.isErr()) throw new Error(`could not record the execution status: ${updated.error.message}`);
    const move = changed as { from: ExecutionStatus | null; to: ExecutionStatus } | null;
    if (move) await append(r, [{ kind: 'status', source: 'environment', timestamp: now(), execution_status: move.to, reason }]);
    return updated.value?.execution_status ?? null;
  };

  const saveMetrics = async (r: Runner, metrics: ConversationMetrics) => {
    mustHold(r);
    await conversations.update(r.userId, r.conversationId, (c): Result<ConversationRecord, never> => ok({ ...c, metrics, updated_at: now() }));
  };

  /** An error event: fatal when the agent stops because of it, else a warning. */
  const errorEvent = (code: ConversationErrorCode, message: string, fatal = false): ConversationEventDraft => ({
    kind: 'error',
    source: 'environment',
    timestamp: now(),
    code,
    message,
    fatal,
  });

  const fail = async (r: Runner, code: ConversationErrorCode, message: string) => {
    r.handledUpTo = r.log.lastId;
    await append(r, [errorEvent(code, message, true)]);
    await setStatus(r, 'fail', message);
  };

  /**
   * The agent stops short of its task at a limit a message lifts (max_iterations): a fatal
   * error event says why, and it waits for the user (idle), whose next message runs it again.
   */
  const stopUntilMessage = async (r: Runner, code: ConversationErrorCode, message: string) => {
    r.handledUpTo = r.log.lastId;
    await append(r, [errorEvent(code, message, true)]);
    await setStatus(r, 'await_message', message);
  };

  const closeShell = async (r: Runner) => {
    const pending = r.shell;
    r.shell = null;
    if (!pending) return;
    const shell = await pending;
    if (shell.isOk()) await shell.value.close().catch(() => undefined);
  };

  const closeMcp = async (r: Runner) => {
    const open = r.mcp;
    r.mcp = null;
    if (open) await open.session.close();
  };

  /** Closes what a conversation holds in its sandbox: the shell and the MCP connections (and their processes). */
  const release = async (r: Runner) => {
    await closeShell(r);
    await closeMcp(r);
  };

  return { append, hasUnseenMessage, catchUp, now, setStatus, saveMetrics, errorEvent, fail, stopUntilMessage, closeShell, closeMcp, release };
}

export type Recording = ReturnType<typeof createRecording>;
