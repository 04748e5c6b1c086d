import type { AgentHost, LlmCredentials, OwnedLease } from '@acs/core/ports';
import type { ActionEvent, ConfirmationEvent, ConversationRecord, StoredSettings } from '@acs/core/schemas';
import { securityPolicyOf } from '../security.js';
import type { Actions } from './actions.js';
import type { Confirmation } from './confirmation.js';
import { credentialsOf, decisionOn, lastHandledId, pendingConfirmation, streamsOf } from './log-reading.js';
import { refused, type Recording } from './recording.js';
import type { Replayer } from './replay-run.js';
import { answeredUpTo, ends, type Runner, type StepEnd } from './runner.js';
import type { Stepper } from './step.js';

/** What the loop needs: the record, the sandboxes, the settings, the leases and the logger; the engine's parts that do the work; whether the engine still starts runs. */
export interface LoopDeps {
  host: Pick<AgentHost, 'conversations' | 'sandboxes' | 'settings' | 'logger' | 'ownership'>;
  recording: Recording;
  actions: Pick<Actions, 'ensureMcp'>;
  stepper: Stepper;
  confirmation: Pick<Confirmation, 'settlePending'>;
  replayer: Replayer;
  /** False once the engine shuts down: a wake that comes in as a run ends then runs nothing more. */
  accepting: () => boolean;
}

/**
 * A conversation's run, the one loop of the agent: takes the lease (`taken`: already taken by a
 * recovery; held by another process, asks that one for another run and ends), then takes turns
 * while there is work: each from "there is work" to finished, error, stuck, paused or waiting for
 * confirmation, and again while messages arrive or wakes come in. Then it gives the lease up,
 * unless another process asked for a run meanwhile, and ends (`Runner.end`), unless a wake came
 * in as it did: then it takes the lease again.
 *
 * It keeps what the agent has answered (`handledUpTo`, the last event it acted on): a user
 * message after it needs another turn. That mark is the run's own: null until a turn reads the
 * log, then what each turn says it answered, written here and nowhere else.
 */
export async function runLoop(deps: LoopDeps, r: Runner, taken: OwnedLease | null): Promise<void> {
  const { ownership } = deps.host;
  let handledUpTo: number | null = null;
  let lease: OwnedLease | null = null;
  for (;;) {
    if (lease === null) {
      lease = taken ?? (await leaseToRun(deps, r));
      taken = null;
      if (lease === null) {
        if (r.end(deps.accepting())) return;
        continue;
      }
      r.hold(lease);
    }
    r.takeWake();
    if (r.stopped) return endStopped(deps, r, lease);
    handledUpTo = await turn(deps, r, handledUpTo);
    if (r.stopped) return endStopped(deps, r, lease);
    if (r.wakeRequested) continue;
    if ((await ownership.release(lease)) === 'again') continue;
    r.letGo();
    lease = null;
    if (r.end(deps.accepting())) return;
  }
}

/** The lease to run a conversation under; null when another process holds it, or when the lease store failed (logged: the next wake tries again). */
async function leaseToRun(deps: LoopDeps, r: Runner): Promise<OwnedLease | null> {
  const acquired = await deps.host.ownership.acquire(r.userId, r.conversationId);
  if (acquired.isErr()) {
    deps.host.logger.warn(
      { conversationId: r.conversationId, reason: acquired.error.message },
      'could not take the lease of a conversation to run it',
    );
    return null;
  }
  return acquired.value === 'elsewhere' ? null : acquired.value;
}

/** A stopped run ends: a lost lease is gone already (Runner.loseLease); a pause or a delete gives the lease up itself, after it has written the status; any other stop gives it up here. */
async function endStopped(deps: LoopDeps, r: Runner, lease: OwnedLease): Promise<void> {
  if (r.lease === lease && r.stopReason !== 'paused') {
    r.letGo();
    await deps.host.ownership.release(lease);
  }
  r.end(false);
}

/**
 * One turn; what the agent has answered after it. A message the model has not seen (it arrived
 * during the last call) asks for another turn, provided this one got somewhere (so a turn that
 * cannot start does not spin). A failure it cannot go on from (the store refuses a read or a
 * write) is caught here, the one place, and recorded as an internal error.
 */
async function turn(deps: LoopDeps, r: Runner, handledUpTo: number | null): Promise<number | null> {
  try {
    const answered = (await runOnce(deps, r, handledUpTo)) ?? handledUpTo;
    if (!r.stopped && answered !== null && answered !== handledUpTo) {
      await deps.recording.catchUp(r);
      if (r.log.lastUserMessageId > answered) r.requestWake();
    }
    return answered;
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    deps.host.logger.error({ conversationId: r.conversationId, err: why }, 'agent loop failed');
    const upTo = r.log.lastId;
    const failed = await deps.recording
      .fail(r, 'internal_error', `The agent stopped on an internal error: ${why}`)
      .catch(() => null);
    return failed?.upTo ?? upTo;
  }
}

/**
 * From "there is work" to finished, error, stuck, paused or waiting for confirmation: what the
 * agent has answered after it (`handledUpTo`, else the log's own record of it, when the turn read
 * the log); null when there was nothing to read (the conversation is not running).
 */
async function runOnce(deps: LoopDeps, r: Runner, handledUpTo: number | null): Promise<number | null> {
  const { conversations, sandboxes, settings } = deps.host;
  const { catchUp, setStatus } = deps.recording;
  const found = await conversations.get(r.userId, r.conversationId);
  if (found.isErr()) refused('load the conversation', found.error);
  const record = found.value;
  if (!record || record.status !== 'RUNNING' || !record.sandbox_id) return null;
  r.setForcedCondensation(false);
  await catchUp(r);
  const handled = handledUpTo ?? lastHandledId(r.log.events);
  const unseen = r.log.lastUserMessageId > handled;
  const pending = pendingConfirmation(r.log.events);
  const decision = pending.length > 0 ? decisionOn(r.log.events, pending) : null;
  const wasRunning = record.execution_status === 'running' || record.execution_status === 'paused';
  if (!wasRunning && !decision && !unseen) return handled;

  const sandboxId = record.sandbox_id;
  const live = await sandboxes.liveRecords(r.userId, [sandboxId]);
  const box = live.isOk() ? live.value.get(sandboxId) : undefined;
  if (!box || box.status !== 'RUNNING') {
    // It runs again when the conversation is started and its sandbox is up.
    await setStatus(r, 'pause', `the sandbox is ${box ? box.status : 'gone'}`);
    return handled;
  }
  const stored = await settings.loadWithSecrets(r.userId);
  // With a repository, the agent works in its clone (and a replay runs where the model would).
  const work: Work = {
    record,
    stored: stored.isOk() ? stored.value : null,
    sandboxId,
    workingDir: record.workspace?.repository_dir ?? box.spec.working_dir,
    pending,
    decision,
  };

  if (pending.length > 0 && !decision && !unseen) {
    // Still undecided (the conversation was paused or restarted while it waited): wait again.
    if (record.execution_status !== 'waiting_for_confirmation') {
      await setStatus(r, 'run', 'resumed');
      await setStatus(
        r,
        'await_confirmation',
        `${pending.length} action(s) still wait for the user to accept or reject them`,
      );
    }
    return handled;
  }
  if (pending.length > 0 && decision && !decision.accept) return reject(deps, r, work, decision);

  await setStatus(
    r,
    'run',
    decision?.accept ? 'the user accepted the actions' : unseen ? 'a message from the user' : 'resumed',
  );
  return steps(deps, r, work, handled);
}

/** What a turn works on, read once when it starts. */
interface Work {
  record: ConversationRecord;
  stored: StoredSettings | null;
  sandboxId: string;
  workingDir: string;
  /** Actions that waited for confirmation, and the user's decision on them, if any. */
  pending: ActionEvent[];
  decision: ConfirmationEvent | null;
}

/** The user rejected the actions that waited: they get observations saying so, and the agent waits for a message. */
async function reject(deps: LoopDeps, r: Runner, work: Work, decision: ConfirmationEvent): Promise<number> {
  const { record, pending, sandboxId, workingDir } = work;
  await deps.confirmation.settlePending(r, pending, decision, sandboxId, workingDir);
  await deps.recording.setStatus(
    r,
    record.execution_status === 'waiting_for_confirmation' ? 'reject' : 'pause',
    'the user rejected the actions; the agent waits for a message',
  );
  // Answered up to the rejected response: a message sent around the rejection still gets a turn.
  return pending[pending.length - 1]!.id;
}

/** The turn's work: a replay's remaining steps, the decided actions, then the model's steps until one ends the turn; what the agent has answered after them. */
async function steps(deps: LoopDeps, r: Runner, work: Work, handled: number): Promise<number> {
  const { record, stored, sandboxId, workingDir, pending, decision } = work;
  const credentials = credentialsOf(record, stored);
  let answered = handled;
  if (record.launch.replay_json) {
    const replayed = await deps.replayer.replay(r, record.launch.replay_json, credentials, sandboxId, workingDir);
    answered = answeredUpTo(replayed, answered);
    if (ends(replayed)) return answered;
  }
  if (!credentials) {
    const failed = await deps.recording.fail(
      r,
      'llm_not_configured',
      'No model is configured: store llm_model (and llm_api_key) in the settings, then send a message.',
    );
    return failed.upTo;
  }
  await deps.actions.ensureMcp(r, record, stored, sandboxId, workingDir);
  if (pending.length > 0) {
    const settled = await deps.confirmation.settlePending(r, pending, decision, sandboxId, workingDir);
    answered = answeredUpTo(settled, answered);
    if (ends(settled)) return answered;
  }
  const input = {
    record,
    stored,
    policy: securityPolicyOf(stored),
    credentials,
    stream: streamsOf(record, stored),
    sandboxId,
    workingDir,
  };
  while (!r.stopped) {
    const end: StepEnd = await deps.stepper.step(r, input);
    answered = answeredUpTo(end, answered);
    if (ends(end)) break;
    Object.assign(input, await latestModel(deps, r, input));
  }
  return answered;
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
