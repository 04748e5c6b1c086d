import type { ActionEvent, ConfirmationEvent, ConversationEvent } from '@acs/core/schemas';
import type { AgentPort, ConfirmationDecision, ConfirmationFailure } from '@acs/core/ports';
import { errAsync, ResultAsync } from 'neverthrow';
import type { Actions } from './actions.js';
import type { EngineBase } from './base.js';
import { decisionOn, pendingConfirmation } from './log-reading.js';
import type { Recording } from './recording.js';
import { RunnerRegistry, type Runner, type StepEnd } from './runner.js';

/**
 * Confirmation: the user's decision on actions held for it is appended to the log (one at a
 * time per conversation), and the loop settles it: accepted actions run, rejected ones get an
 * observation saying so.
 */
export function createConfirmation(kit: EngineBase & Recording & Actions & Pick<AgentPort, 'wake'>) {
  const { conversations, log, append, now, toolsetOf, toolContext, interruptedObservation, runActions, afterActions, wake } = kit;

  /** The decision being recorded per conversation (respondToConfirmation runs one at a time). */
  const deciding = new Map<string, Promise<void>>();

  /**
   * Actions that waited for confirmation, now decided: accepted ones run ('continue' when the
   * agent goes on), rejected ones get an observation and the agent waits for the user ('stop').
   * A message sent instead of a decision counts as a rejection, and the agent answers it.
   */
  const settlePending = async (
    r: Runner,
    pending: ActionEvent[],
    decision: ConfirmationEvent | null,
    sandboxId: string,
    workingDir: string,
  ): Promise<StepEnd> => {
    if (decision?.accept) {
      const calls = pending.map((a) => ({ id: a.tool_call_id, name: a.tool_name, arguments: a.raw_arguments }));
      const outcome = await runActions(r, pending, calls, sandboxId, toolContext(r, sandboxId, workingDir), toolsetOf(r, workingDir));
      return afterActions(r, outcome, sandboxId);
    }
    const why = decision
      ? `Rejected by the user: this call was not run.${decision.reason?.trim() ? ` The user said: ${decision.reason.trim()}` : ''} Do not run it again unless the user asks for it.`
      : 'Not run: the user sent a new message instead of confirming this call. Read the message before doing anything else.';
    await append(r, pending.map((a) => ({ ...interruptedObservation(a, why), details: { rejected: true } })));
    return decision ? 'stop' : 'continue';
  };

  /** Appends the decision when actions wait for one (ConfirmationNotPending otherwise). */
  function decide(userId: string, conversationId: string, decision: ConfirmationDecision): ResultAsync<ConfirmationEvent, ConfirmationFailure> {
    return conversations
        .get(userId, conversationId)
        .andThen((record) => {
          if (!record) return errAsync<ConversationEvent[], ConfirmationFailure>({ type: 'ConversationNotFound', conversationId });
          return log.readAll(userId, conversationId, 0).andThen((events) => {
            const pending = pendingConfirmation(events);
            if (pending.length === 0 || decisionOn(events, pending) !== null) {
              return errAsync<ConversationEvent[], ConfirmationFailure>({ type: 'ConfirmationNotPending', conversationId, executionStatus: record.execution_status });
            }
            return log.append(userId, conversationId, [
              {
                kind: 'confirmation',
                source: 'user',
                timestamp: now(),
                accept: decision.accept,
                reason: decision.reason?.trim() || null,
                tool_call_ids: pending.map((a) => a.tool_call_id),
              },
            ]);
          });
        })
        .map((appended) => {
          wake(userId, conversationId);
          return appended[0] as ConfirmationEvent;
        });
  }

  /** Records the user's answer to the actions waiting for confirmation and wakes the agent; one decision at a time per conversation. */
  const respondToConfirmation = (userId: string, conversationId: string, decision: ConfirmationDecision): ResultAsync<ConfirmationEvent, ConfirmationFailure> => {
    // One decision at a time per conversation, so two answers cannot both pass the check.
    const key = RunnerRegistry.keyOf(userId, conversationId);
    const previous = deciding.get(key) ?? Promise.resolve();
    const result = previous.then(() => decide(userId, conversationId, decision));
    const settled = result.then(() => undefined);
    deciding.set(key, settled);
    void settled.then(() => {
      if (deciding.get(key) === settled) deciding.delete(key);
    });
    return new ResultAsync(result);
  };

  return { settlePending, respondToConfirmation };
}

export type Confirmation = ReturnType<typeof createConfirmation>;
