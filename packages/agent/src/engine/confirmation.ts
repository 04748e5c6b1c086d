import type { ActionEvent, ConfirmationEvent } from '@acs/core/schemas';
import type { AgentHost, AgentPort, ConfirmationDecision, ConfirmationFailure } from '@acs/core/ports';
import { err, ok, ResultAsync, type Result } from 'neverthrow';
import type { Actions } from './actions.js';
import { decisionOn, pendingConfirmation } from './log-reading.js';
import type { Recording } from './recording.js';
import { RunnerRegistry, type Runner, type StepEnd } from './runner.js';

/** What confirmation needs: the record and the log, recording and actions, and a way to wake the conversation's agent. */
export interface ConfirmationDeps {
  host: Pick<AgentHost, 'conversations' | 'log'>;
  recording: Recording;
  actions: Actions;
  wake: AgentPort['wake'];
}

/**
 * Confirmation: the user's decision on actions held for it is appended to the log (one at a
 * time per conversation), and the loop settles it: accepted actions run, rejected ones get an
 * observation saying so.
 */
export interface Confirmation {
  /**
   * Actions that waited for confirmation, now decided: accepted ones run ('continue' when the
   * agent goes on), rejected ones get an observation and the agent waits for the user ('stop').
   * A message sent instead of a decision counts as a rejection, and the agent answers it.
   */
  settlePending: (
    r: Runner,
    pending: ActionEvent[],
    decision: ConfirmationEvent | null,
    sandboxId: string,
    workingDir: string,
  ) => Promise<StepEnd>;
  /** Records the user's answer to the actions waiting for confirmation and wakes the agent; one decision at a time per conversation. */
  respondToConfirmation: AgentPort['respondToConfirmation'];
}

export function createConfirmation(deps: ConfirmationDeps): Confirmation {
  /** The decision being recorded per conversation (respondToConfirmation runs one at a time). */
  const deciding = new Map<string, Promise<void>>();
  return {
    settlePending: (r, pending, decision, sandboxId, workingDir) =>
      settlePending(deps, r, pending, decision, sandboxId, workingDir),
    respondToConfirmation: (userId, conversationId, decision) =>
      oneAtATime(
        deciding,
        RunnerRegistry.keyOf(userId, conversationId),
        () => new ResultAsync(decide(deps, userId, conversationId, decision)),
      ),
  };
}

async function settlePending(
  deps: ConfirmationDeps,
  r: Runner,
  pending: ActionEvent[],
  decision: ConfirmationEvent | null,
  sandboxId: string,
  workingDir: string,
): Promise<StepEnd> {
  const { actions } = deps;
  if (decision?.accept) {
    const calls = pending.map((a) => ({ id: a.tool_call_id, name: a.tool_name, arguments: a.raw_arguments }));
    const outcome = await actions.runActions(
      r,
      pending,
      calls,
      sandboxId,
      actions.toolContext(r, sandboxId, workingDir),
      actions.toolsetOf(r, workingDir),
    );
    return actions.afterActions(r, outcome, sandboxId);
  }
  const why = decision
    ? `Rejected by the user: this call was not run.${decision.reason?.trim() ? ` The user said: ${decision.reason.trim()}` : ''} Do not run it again unless the user asks for it.`
    : 'Not run: the user sent a new message instead of confirming this call. Read the message before doing anything else.';
  await deps.recording.append(
    r,
    pending.map((a) => ({ ...actions.interruptedObservation(a, why), details: { rejected: true } })),
  );
  return decision ? 'stop' : 'continue';
}

/** Appends the decision when actions wait for one (ConfirmationNotPending otherwise), then wakes the agent. */
async function decide(
  deps: ConfirmationDeps,
  userId: string,
  conversationId: string,
  decision: ConfirmationDecision,
): Promise<Result<ConfirmationEvent, ConfirmationFailure>> {
  const { conversations, log } = deps.host;
  const record = await conversations.get(userId, conversationId);
  if (record.isErr()) return err(record.error);
  if (!record.value) return err({ type: 'ConversationNotFound', conversationId });
  const events = await log.readAll(userId, conversationId, 0);
  if (events.isErr()) return err(events.error);
  const pending = pendingConfirmation(events.value);
  if (pending.length === 0 || decisionOn(events.value, pending) !== null) {
    return err({ type: 'ConfirmationNotPending', conversationId, executionStatus: record.value.execution_status });
  }
  const appended = await log.append(userId, conversationId, [
    {
      kind: 'confirmation',
      source: 'user',
      timestamp: deps.recording.now(),
      accept: decision.accept,
      reason: decision.reason?.trim() || null,
      tool_call_ids: pending.map((a) => a.tool_call_id),
    },
  ]);
  if (appended.isErr()) return err(appended.error);
  deps.wake(userId, conversationId);
  return ok(appended.value[0] as ConfirmationEvent);
}

/** Runs `work` once the previous one under the same key has settled (so two answers cannot both pass the check). */
function oneAtATime<T, E>(
  queue: Map<string, Promise<void>>,
  key: string,
  work: () => ResultAsync<T, E>,
): ResultAsync<T, E> {
  const previous = queue.get(key) ?? Promise.resolve();
  const result = previous.then(work);
  const settled = result.then(() => undefined);
  queue.set(key, settled);
  void settled.then(() => {
    if (queue.get(key) === settled) queue.delete(key);
  });
  return new ResultAsync(result);
}
