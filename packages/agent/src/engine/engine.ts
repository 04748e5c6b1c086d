import { KeyedSemaphore, type DomainError } from '@acs/core';
import { storeUnavailable, type OwnedLease, type RecoveryReport, type StoreFailure } from '@acs/core/ports';
import type { ConversationRecord } from '@acs/core/schemas';
import { err, ok, ResultAsync, type Result } from 'neverthrow';
import { DEFAULT_CONDENSER_MAX_EVENTS } from '../condenser.js';
import { BUILTIN_TOOLS, Toolset } from '../toolset.js';
import { prepareRepository } from '../workspace-setup.js';
import { createActions } from './actions.js';
import { createConfirmation, type Confirmation } from './confirmation.js';
import { runLoop, type LoopDeps } from './loop.js';
import {
  DEFAULT_MAX_ITERATIONS,
  DEFAULT_MAX_MODEL_CALLS_PER_USER,
  type AgentEngine,
  type AgentEngineDeps,
} from './options.js';
import { createRecording, type Recording } from './recording.js';
import { closeInterrupted, type RecoveryDeps } from './recovery.js';
import { createReplayer } from './replay-run.js';
import { RunnerRegistry, type Runner, type StopReason } from './runner.js';
import { createStepper } from './step.js';

/**
 * What the engine's lifecycle functions below work with: the host's ports, the runners, the parts
 * that run a loop, and the engine's own state (shutting down, the takeover scan).
 */
interface EngineContext {
  host: AgentEngineDeps;
  runners: RunnerRegistry;
  recording: Recording;
  confirmation: Confirmation;
  /** What a conversation's run (its one loop, loop.ts) is made of. */
  loop: LoopDeps;
  recovery: RecoveryDeps;
  state: { shuttingDown: boolean; scan: { cancel(): void } | null; scanning: boolean };
}

/**
 * Builds the engine from its parts, each a file of its own (one idea each), each made here from
 * the parts it names in its deps:
 *
 *   recording (log appends, status) → actions (tools, MCP, observations) → step (model call,
 *   condenser, limits) · confirmation · replay-run → loop (a conversation's run: the lease and
 *   its turns) · recovery
 *
 * and answers the `AgentPort`: wake starts a conversation's loop (at most one at a time), pause
 * and forget stop it, shutdown stops them all, leaving their status `running` for the next
 * process's `recover()`.
 */
export function createAgentEngine(host: AgentEngineDeps): AgentEngine {
  const options = host.options ?? {};
  const builtinTools = options.tools ?? BUILTIN_TOOLS;
  const defaultMaxIterations = options.defaultMaxIterations ?? DEFAULT_MAX_ITERATIONS;
  const recording = createRecording(host);
  const actions = createActions({ host, options, builtinTools, recording });
  const confirmation = createConfirmation({
    host,
    recording,
    actions,
    wake: (userId, conversationId) => wake(ctx, userId, conversationId),
  });
  const stepper = createStepper({
    host,
    options,
    defaultMaxIterations,
    recording,
    actions,
    modelCalls: new KeyedSemaphore(options.maxModelCallsPerUser ?? DEFAULT_MAX_MODEL_CALLS_PER_USER),
  });
  const replayer = createReplayer({ host, defaultToolset: new Toolset(builtinTools), recording, actions });
  const ctx: EngineContext = {
    host,
    runners: new RunnerRegistry(),
    recording,
    confirmation,
    loop: { host, recording, actions, stepper, confirmation, replayer, accepting: () => accepting(ctx) },
    recovery: { recording, actions },
    state: { shuttingDown: false, scan: null, scanning: false },
  };
  watchLeases(ctx);
  return {
    prepareWorkspace: (request) =>
      prepareRepository({
        ...request,
        runtime: host.runtime,
        clock: host.clock,
        ...(options.workspace ? { options: options.workspace } : {}),
      }),
    wake: (userId, conversationId) => wake(ctx, userId, conversationId),
    shutdown: () => shutdown(ctx),
    pause: (userId, conversationId, reason) => pause(ctx, userId, conversationId, reason),
    forget: (userId, conversationId) => forget(ctx, userId, conversationId),
    recover: () => recover(ctx),
    respondToConfirmation: confirmation.respondToConfirmation,
    activeLoops: () => ctx.runners.all().filter((r) => r.running !== null).length,
    settingsDefaults: {
      max_iterations: defaultMaxIterations,
      condenser_max_size: options.condenser?.maxEvents ?? DEFAULT_CONDENSER_MAX_EVENTS,
    },
  };
}

/** Hears of leases this process lost (the run stops, writing nothing more) and of stop requests from other processes. */
function watchLeases(ctx: EngineContext): void {
  const { ownership, background } = ctx.host;
  const runnerOf = (lease: OwnedLease) => {
    const r = ctx.runners.get(lease.user_id, lease.conversation_id);
    return r && r.lease === lease ? r : null;
  };
  ownership.start({
    lost: (lease) => {
      const r = runnerOf(lease);
      if (!r) return;
      r.loseLease();
      background.spawn(`release ${r.conversationId} after its lease was lost`, () => r.release());
    },
    stopRequested: (lease) => {
      const r = runnerOf(lease);
      if (!r || !r.beginStopping()) return;
      background.spawn(`stop ${r.conversationId} for another process`, async () => {
        try {
          await pause(ctx, lease.user_id, lease.conversation_id, 'stopped by a request to another replica');
        } finally {
          r.endStopping();
        }
      });
    },
  });
}

/** Whether the engine starts runs: not once it shuts down or its host's background tasks are closed. */
const accepting = (ctx: EngineContext): boolean => !ctx.host.background.closed && !ctx.state.shuttingDown;

/** Something for the conversation's agent: its loop runs (it looks again before it ends, if it runs already). */
function wake(ctx: EngineContext, userId: string, conversationId: string): void {
  if (!accepting(ctx)) return;
  const r = ctx.runners.runnerFor(userId, conversationId);
  if (r.running) {
    r.requestWake();
    return;
  }
  start(ctx, r, null);
}

/** Starts the conversation's loop (`taken`: its lease, already taken by a recovery). */
function start(ctx: EngineContext, r: Runner, taken: OwnedLease | null): void {
  const running = r.begin(() => runLoop(ctx.loop, r, taken));
  ctx.host.background.spawn(`agent ${r.conversationId}`, () => running);
}

/** Stops a local loop and waits for it, and closes what it holds in the sandbox; the lease stays held (the caller writes a status, then gives it up). */
async function halt(r: Runner, why: StopReason): Promise<void> {
  r.stop(why);
  await r.running;
  await r.release();
}

/** Gives up the lease a halted runner still holds. */
async function letGo(ctx: EngineContext, r: Runner): Promise<void> {
  const lease = r.letGo();
  if (lease) await ctx.host.ownership.release(lease);
}

async function shutdown(ctx: EngineContext): Promise<void> {
  ctx.state.shuttingDown = true;
  ctx.state.scan?.cancel();
  const running = ctx.runners.all().filter((r) => r.running !== null);
  for (const r of running) r.stop('shutting down');
  await Promise.all(running.map((r) => r.running ?? Promise.resolve()));
  await Promise.all(ctx.runners.all().map((r) => r.release()));
  ctx.host.ownership.stop();
}

async function pause(ctx: EngineContext, userId: string, conversationId: string, reason: string): Promise<void> {
  const { ownership, logger, conversations } = ctx.host;
  const r = ctx.runners.get(userId, conversationId);
  if (!r?.lease) {
    // Not run by this process: ask the one that runs it (if any) to stop, and wait for it.
    if (!(await ownership.stopElsewhere(userId, conversationId))) {
      logger.warn(
        { conversationId },
        'the process running this conversation did not stop in time; recording the pause anyway',
      );
    }
  }
  if (r) {
    // Also at rest: the shell and MCP connections it keeps between runs are closed.
    await halt(r, 'paused');
    await recordPause(ctx, r, reason);
    await letGo(ctx, r);
    return;
  }
  // Only a record left "running" (by a crash, or a holder that did not write it) needs changing.
  const record = await conversations.get(userId, conversationId);
  if (record.isOk() && record.value?.execution_status === 'running')
    await recordPause(ctx, ctx.runners.runnerFor(userId, conversationId), reason);
}

/** The status `paused`; a store that refuses it is logged (the pause itself has happened, and nobody waits for an answer). */
async function recordPause(ctx: EngineContext, r: Runner, reason: string): Promise<void> {
  await ctx.recording
    .setStatus(r, 'pause', reason)
    .catch((error: unknown) =>
      ctx.host.logger.warn({ conversationId: r.conversationId, err: String(error) }, 'could not record the pause'),
    );
}

async function forget(ctx: EngineContext, userId: string, conversationId: string): Promise<void> {
  const r = ctx.runners.get(userId, conversationId);
  if (r) {
    await halt(r, 'paused');
    await letGo(ctx, r);
    ctx.runners.delete(userId, conversationId);
  }
  await ctx.host.ownership.stopElsewhere(userId, conversationId);
  await ctx.host.ownership.forget(userId, conversationId);
}

/**
 * Resumes a conversation found running (or waiting for the user) with nobody at it: takes its
 * lease (never from a live holder), closes the calls the stop cut short, runs the loop. How
 * many calls it closed; null when another process holds it or this one runs it already.
 */
async function resume(ctx: EngineContext, record: ConversationRecord): Promise<Result<number | null, StoreFailure>> {
  const { ownership, background } = ctx.host;
  const r = ctx.runners.runnerFor(record.user_id, record.id);
  if (r.running || background.closed || ctx.state.shuttingDown) return ok(null);
  const acquired = await ownership.acquire(record.user_id, record.id, false);
  if (acquired.isErr()) return err(acquired.error);
  const lease = acquired.value;
  if (lease === 'elsewhere') return ok(null);
  if (r.running) {
    await ownership.release(lease);
    return ok(null);
  }
  r.hold(lease);
  try {
    const closed = await closeInterrupted(ctx.recovery, r, record.execution_status);
    // Lost while closing them: another process has it now.
    if (r.leaseLost) return ok(null);
    start(ctx, r, lease);
    return ok(closed);
  } catch (error) {
    // The log refused a read or a write (the one kind of failure the agent throws, see loop.ts).
    r.letGo();
    await ownership.release(lease);
    throw error;
  }
}

/** After a restart: closes the tool calls the crash cut short and resumes the conversations that were running; then, with other processes on the store, watches for conversations nobody holds. */
function recover(ctx: EngineContext): ResultAsync<RecoveryReport, DomainError> {
  const { conversations, ownership, clock } = ctx.host;
  const resumeAll = async (records: ConversationRecord[]): Promise<Result<RecoveryReport, DomainError>> => {
    let interrupted = 0;
    for (const record of records) {
      const resumed = await resume(ctx, record);
      if (resumed.isErr()) return err(resumed.error);
      interrupted += resumed.value ?? 0;
    }
    if (ownership.shared && !ctx.state.scan && !ctx.state.shuttingDown)
      ctx.state.scan = clock.every(ownership.scanMs, () => void takeOver(ctx));
    return ok({ resumed: records.length, interrupted_calls: interrupted });
  };
  const toDomain = (error: unknown): DomainError => storeUnavailable('resume running conversations', error);
  return conversations
    .listByExecutionStatus(['running', 'waiting_for_confirmation'])
    .andThen(
      (records) =>
        new ResultAsync(
          resumeAll(records).catch((error: unknown) => err<RecoveryReport, DomainError>(toDomain(error))),
        ),
    );
}

/** With other processes on the store: takes over, every scan, the running conversations nobody holds (their process died). */
async function takeOver(ctx: EngineContext): Promise<void> {
  const { conversations, ownership, background, logger } = ctx.host;
  if (ctx.state.scanning || background.closed || ctx.state.shuttingDown) return;
  ctx.state.scanning = true;
  try {
    const running = await conversations.listByExecutionStatus(['running']);
    if (running.isErr()) return;
    const idle = running.value.filter((record) => !ctx.runners.get(record.user_id, record.id)?.running);
    for (const record of await ownership.unheld(idle)) {
      const couldNot = (why: string) => {
        logger.warn({ conversationId: record.id, err: why }, 'could not take over a conversation');
        return null;
      };
      const closed = await resume(ctx, record).then(
        (resumed) => (resumed.isOk() ? resumed.value : couldNot(resumed.error.message)),
        (error: unknown) => couldNot(error instanceof Error ? error.message : String(error)),
      );
      if (closed !== null)
        logger.info(
          { conversationId: record.id, interruptedCalls: closed },
          'took over a running conversation nobody held',
        );
    }
  } finally {
    ctx.state.scanning = false;
  }
}
