import type { AgentHost, LlmCredentials } from '@acs/core/ports';
import { securityPolicyOf } from '../security.js';
import type { Actions } from './actions.js';
import type { Confirmation } from './confirmation.js';
import { credentialsOf, decisionOn, pendingConfirmation, streamsOf } from './log-reading.js';
import type { Recording } from './recording.js';
import type { Replayer } from './replay-run.js';
import type { Runner } from './runner.js';
import type { Stepper } from './step.js';

/** What the loop needs: the record, the sandboxes, the settings and the logger; and the engine's parts that do the work. */
export interface LoopDeps {
  host: Pick<AgentHost, 'conversations' | 'sandboxes' | 'settings' | 'logger'>;
  recording: Recording;
  actions: Pick<Actions, 'ensureMcp'>;
  stepper: Stepper;
  confirmation: Pick<Confirmation, 'settlePending'>;
  replayer: Replayer;
}

/**
 * One conversation's loop: from "there is work" to finished, error, stuck, paused or waiting for
 * confirmation, and again while messages arrive. A failure it cannot go on from (the store
 * refuses a read or a write) is caught here, the one place, and recorded as an internal error.
 */
export async function runLoop(deps: LoopDeps, r: Runner): Promise<void> {
  const { hasUnseenMessage, catchUp, fail } = deps.recording;
  try {
    do {
      r.takeWake();
      if (r.stopped) break;
      const handledBefore = r.handledUpTo;
      await runOnce(deps, r);
      // A message the model has not seen (it arrived during the last call) gets another run,
      // provided this run got somewhere (so a run that cannot start does not spin).
      if (!r.stopped && r.handledUpTo !== handledBefore) {
        await catchUp(r);
        if (hasUnseenMessage(r)) r.requestWake();
      }
    } while (r.wakeRequested && !r.stopped);
  } catch (error) {
    deps.host.logger.error(
      { conversationId: r.conversationId, err: error instanceof Error ? error.message : String(error) },
      'agent loop failed',
    );
    await fail(
      r,
      'internal_error',
      `The agent stopped on an internal error: ${error instanceof Error ? error.message : String(error)}`,
    ).catch(() => undefined);
  }
}

/** One run: from "there is work" to finished, error, stuck, paused or waiting for confirmation. */
async function runOnce(deps: LoopDeps, r: Runner): Promise<void> {
  const { conversations, sandboxes, settings } = deps.host;
  const { hasUnseenMessage, catchUp, setStatus, fail } = deps.recording;
  const { settlePending } = deps.confirmation;
  const found = await conversations.get(r.userId, r.conversationId);
  if (found.isErr()) throw new Error(`could not load the conversation: ${found.error.message}`);
  const record = found.value;
  if (!record || record.status !== 'RUNNING' || !record.sandbox_id) return;
  r.setForcedCondensation(false);
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
      await setStatus(
        r,
        'await_confirmation',
        `${pending.length} action(s) still wait for the user to accept or reject them`,
      );
    }
    return;
  }
  if (pending.length > 0 && decision && !decision.accept) {
    await settlePending(r, pending, decision, sandboxId, workingDir);
    // Handled up to the rejected response: a message sent around the rejection still gets a run.
    r.handled(pending[pending.length - 1]!.id);
    await setStatus(
      r,
      record.execution_status === 'waiting_for_confirmation' ? 'reject' : 'pause',
      'the user rejected the actions; the agent waits for a message',
    );
    return;
  }

  await setStatus(
    r,
    'run',
    decision?.accept ? 'the user accepted the actions' : hasUnseenMessage(r) ? 'a message from the user' : 'resumed',
  );
  if (
    record.launch.replay_json &&
    (await deps.replayer.replay(r, record.launch.replay_json, credentials, sandboxId, workingDir)) === 'stop'
  )
    return;
  if (!credentials) {
    await fail(
      r,
      'llm_not_configured',
      'No model is configured: store llm_model (and llm_api_key) in the settings, then send a message.',
    );
    return;
  }
  await deps.actions.ensureMcp(r, record, storedSettings, sandboxId, workingDir);
  if (pending.length > 0 && (await settlePending(r, pending, decision, sandboxId, workingDir)) === 'stop') return;
  const policy = securityPolicyOf(storedSettings);
  const stream = streamsOf(record, storedSettings);
  const input = { record, stored: storedSettings, policy, credentials, stream, sandboxId, workingDir };
  while (!r.stopped) {
    const end = await deps.stepper.step(r, input);
    if (end === 'stop') break;
    Object.assign(input, await latestModel(deps, r, input));
  }
}

/** The model a step calls, and whether its answer streams. */
interface ModelChoice {
  credentials: LlmCredentials;
  stream: boolean;
}

/**
 * The model for the next step, read again: a switch to another LLM profile (or a new key, or
 * streaming turned off, in the settings) takes effect from the next model call. If the record
 * cannot be read, the last ones.
 */
async function latestModel(deps: LoopDeps, r: Runner, last: ModelChoice): Promise<ModelChoice> {
  const { conversations, settings } = deps.host;
  const [record, stored] = await Promise.all([
    conversations.get(r.userId, r.conversationId),
    settings.loadWithSecrets(r.userId),
  ]);
  if (record.isErr() || !record.value || stored.isErr()) return { credentials: last.credentials, stream: last.stream };
  return {
    credentials: credentialsOf(record.value, stored.value) ?? last.credentials,
    stream: streamsOf(record.value, stored.value),
  };
}
