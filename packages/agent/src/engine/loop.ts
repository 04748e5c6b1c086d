import type { LlmCredentials } from '@acs/core/ports';
import { securityPolicyOf } from '../security.js';
import type { Actions } from './actions.js';
import type { EngineBase } from './base.js';
import type { Confirmation } from './confirmation.js';
import { credentialsOf, decisionOn, pendingConfirmation } from './log-reading.js';
import type { Recording } from './recording.js';
import type { Replayer } from './replay-run.js';
import { LeaseLostError, type Runner } from './runner.js';
import type { Stepper } from './step.js';

/** One conversation's loop: from "there is work" to finished, error, stuck, paused or waiting for confirmation, and again while messages arrive. */
export function createLoop(kit: EngineBase & Recording & Actions & Stepper & Confirmation & Replayer) {
  const { conversations, sandboxes, settings, logger, hasUnseenMessage, catchUp, setStatus, fail, ensureMcp, step, settlePending, replay } = kit;

  /** One run: from "there is work" to finished, error, stuck, paused or waiting for confirmation. */
  const runOnce = async (r: Runner): Promise<void> => {
    const found = await conversations.get(r.userId, r.conversationId);
    if (found.isErr()) throw new Error(`could not load the conversation: ${found.error.message}`);
    const record = found.value;
    if (!record || record.status !== 'RUNNING' || !record.sandbox_id) return;
    r.forcedCondensation = false;
    await catchUp(r);
    const pending = pendingConfirmation(r.log.events);
    const decision = pending.length > 0 ? decisionOn(r.log.events, pending) : null;
    const wasRunning = record.execution_status === 'running' || record.execution_status === 'paused';
    if (!wasRunning && !decision && !hasUnseenMessage(r)) return;

    const sandboxId = record.sandbox_id;
    const live = await sandboxes.liveRecords(r.userId, [sandboxId]);
    const box = live.isOk() ? live.value.get(sandboxId) : undefined;
    if (!box || box.status !== 'RUNNING') {
      // It runs again when the conversation is started and its sandbox is up.
      await setStatus(r, 'pause', `the sandbox is ${box ? box.status : 'gone'}`);
      return;
    }
    const stored = await settings.loadWithSecrets(r.userId);
    const storedSettings = stored.isOk() ? stored.value : null;
    const credentials = credentialsOf(record, storedSettings);
    // With a repository, the agent works in its clone (and a replay runs where the model would).
    const workingDir = record.workspace?.repository_dir ?? box.spec.working_dir;

    if (pending.length > 0 && !decision && !hasUnseenMessage(r)) {
      // Still undecided (the conversation was paused or restarted while it waited): wait again.
      if (record.execution_status !== 'waiting_for_confirmation') {
        await setStatus(r, 'run', 'resumed');
        await setStatus(r, 'await_confirmation', `${pending.length} action(s) still wait for the user to accept or reject them`);
      }
      return;
    }
    if (pending.length > 0 && decision && !decision.accept) {
      await settlePending(r, pending, decision, sandboxId, workingDir);
      // Handled up to the rejected response: a message sent around the rejection still gets a run.
      r.handledUpTo = pending[pending.length - 1]!.id;
      await setStatus(r, record.execution_status === 'waiting_for_confirmation' ? 'reject' : 'pause', 'the user rejected the actions; the agent waits for a message');
      return;
    }

    await setStatus(r, 'run', decision?.accept ? 'the user accepted the actions' : hasUnseenMessage(r) ? 'a message from the user' : 'resumed');
    if (record.launch.replay_json && (await replay(r, record.launch.replay_json, credentials, sandboxId, workingDir)) === 'stop') return;
    if (!credentials) {
      await fail(r, 'llm_not_configured', 'No model is configured: store llm_model (and llm_api_key) in the settings, then send a message.');
      return;
    }
    await ensureMcp(r, record, storedSettings, sandboxId, workingDir);
    if (pending.length > 0 && (await settlePending(r, pending, decision, sandboxId, workingDir)) === 'stop') return;
    const policy = securityPolicyOf(storedSettings);
    let current = credentials;
    while (!r.abort.signal.aborted) {
      const end = await step(r, record, storedSettings, policy, current, sandboxId, workingDir);
      if (end === 'stop') break;
      current = await latestCredentials(r, current);
    }
  };

  /**
   * The model for the next step, read again: a switch to another LLM profile (or a new key in the
   * settings) takes effect from the next model call. If the record cannot be read, the last ones.
   */
  const latestCredentials = async (r: Runner, last: LlmCredentials): Promise<LlmCredentials> => {
    const [record, stored] = await Promise.all([conversations.get(r.userId, r.conversationId), settings.loadWithSecrets(r.userId)]);
    if (record.isErr() || !record.value || stored.isErr()) return last;
    return credentialsOf(record.value, stored.value) ?? last;
  };

  const loop = async (r: Runner): Promise<void> => {
    try {
      do {
        r.wakeRequested = false;
        if (r.abort.signal.aborted) break;
        const handledBefore = r.handledUpTo;
        await runOnce(r);
        // A message the model has not seen (it arrived during the last call) gets another run,
        // provided this run got somewhere (so a run that cannot start does not spin).
        if (!r.abort.signal.aborted && r.handledUpTo !== handledBefore) {
          await catchUp(r);
          if (hasUnseenMessage(r)) r.wakeRequested = true;
        }
      } while (r.wakeRequested && !r.abort.signal.aborted);
    } catch (error) {
      if (error instanceof LeaseLostError) {
        // Another process runs the conversation now; anything written from here would be refused.
        logger.warn({ conversationId: r.conversationId, reason: error.message }, 'stopped a conversation whose lease was lost');
        return;
      }
      logger.error({ conversationId: r.conversationId, err: error instanceof Error ? error.message : String(error) }, 'agent loop failed');
      await fail(r, 'internal_error', `The agent stopped on an internal error: ${error instanceof Error ? error.message : String(error)}`).catch(() => undefined);
    }
  };

  return { runOnce, loop };
}
