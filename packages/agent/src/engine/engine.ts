import { DEFAULT_CONDENSER_MAX_EVENTS } from '../condenser.js';
import { prepareRepository } from '../workspace-setup.js';
import { createActions } from './actions.js';
import { createEngineBase } from './base.js';
import { createConfirmation } from './confirmation.js';
import { createLoop } from './loop.js';
import type { AgentEngine, AgentEngineDeps } from './options.js';
import { createRecording } from './recording.js';
import { createRecovery } from './recovery.js';
import { createReplayer } from './replay-run.js';
import { LeaseLostError, type Runner } from './runner.js';
import { RunnerLog } from './runner-log.js';
import { storeUnavailable, type OwnedLease, type RecoveryReport } from '@acs/core/ports';
import type { DomainError } from '@acs/core';
import type { ConversationRecord } from '@acs/core/schemas';
import { ResultAsync } from 'neverthrow';
import { createStepper } from './step.js';

/**
 * Builds the engine from its parts, each a file of its own (one idea each):
 *
 *   base (ports, options, runners) → recording (log appends, status) → actions (tools, MCP,
 *   observations) → step (model call, condenser, limits) · confirmation · replay-run →
 *   loop (one conversation's runs) · recovery (after a restart)
 *
 * and answers the `AgentPort`: wake starts a conversation's loop (at most one at a time), pause
 * and forget stop it, shutdown stops them all, leaving their status `running` for the next
 * process's `recover()`.
 */
export function createAgentEngine(deps: AgentEngineDeps): AgentEngine {
  const base = createEngineBase(deps);
  const { runners, conversations, runtime, clock, logger, background } = base;
  const recording = createRecording(base);
  const { setStatus, release } = recording;
  const actions = createActions({ ...base, ...recording });
  const kit = { ...base, ...recording, ...actions, wake: (userId: string, conversationId: string) => engine.wake(userId, conversationId) };
  const confirmation = createConfirmation(kit);
  const stepper = createStepper(kit);
  const replayer = createReplayer(kit);
  const { loop } = createLoop({ ...kit, ...stepper, ...confirmation, ...replayer });
  const { closeInterrupted } = createRecovery(kit);
  let shuttingDown = false;
  const { ownership } = base;

  /**
   * Runs a conversation's loop under its lease: takes it (or, held by another process, asks
   * that one for another run and leaves), runs, and gives it up, unless another process asked
   * for a run meanwhile. `taken`: the lease, already taken by a recovery.
   */
  const own = async (r: Runner, taken: OwnedLease | null): Promise<void> => {
    const lease = taken ?? (await ownership.acquire(r.userId, r.conversationId));
    if (lease === 'elsewhere') return;
    r.lease = lease;
    try {
      for (;;) {
        r.wakeRequested = false;
        await loop(r);
        if (r.abort.signal.aborted) break;
        if (r.wakeRequested) continue;
        if ((await ownership.release(lease)) === 'again') continue;
        r.lease = null;
        return;
      }
    } finally {
      // (A lost lease ends the loop inside it: loop() catches the refused write and stops.)
      // A pause or a delete gives the lease up itself, after it has written the status.
      if (r.lease === lease && r.stopReason !== 'paused') {
        r.lease = null;
        if (r.stopReason !== 'lease lost') await ownership.release(lease);
      }
    }
  };

  const start = (r: Runner, taken: OwnedLease | null) => {
    if (r.abort.signal.aborted) {
      r.abort = new AbortController();
      r.stopReason = 'paused';
    }
    // r.loop is set before anything awaits, so a second wake cannot start a second loop.
    const running: Promise<void> = Promise.resolve()
      .then(() => own(r, taken))
      .finally(() => {
        r.loop = null;
        if (r.wakeRequested && !r.abort.signal.aborted) {
          // A wake that came in while the loop was ending: run again.
          r.wakeRequested = false;
          engine.wake(r.userId, r.conversationId);
          return;
        }
        // An agent at rest keeps no copy of its log (it is read again on the next run); the shell stays open.
        r.log = new RunnerLog();
        r.handledUpTo = null;
      });
    r.loop = running;
    background.spawn(`agent ${r.conversationId}`, () => running);
  };

  /** Stops a local loop and waits for it; the lease stays held (the caller writes a status, then gives it up). */
  const halt = async (r: Runner, why: Runner['stopReason']) => {
    r.stopReason = why;
    r.abort.abort();
    await r.loop;
    await release(r);
  };

  /** Gives up the lease a halted runner still holds. */
  const letGo = async (r: Runner) => {
    const lease = r.lease;
    r.lease = null;
    if (lease) await ownership.release(lease);
  };

  ownership.start({
    lost: (lease) => {
      const r = runners.get(lease.user_id, lease.conversation_id);
      if (!r || r.lease !== lease) return;
      r.lease = null;
      r.stopReason = 'lease lost';
      r.abort.abort();
      background.spawn(`release ${r.conversationId} after its lease was lost`, () => release(r));
    },
    stopRequested: (lease) => {
      const r = runners.get(lease.user_id, lease.conversation_id);
      if (!r || r.lease !== lease || r.stopping) return;
      r.stopping = true;
      background.spawn(`stop ${r.conversationId} for another process`, async () => {
        try {
          await engine.pause(lease.user_id, lease.conversation_id, 'stopped by a request to another replica');
        } finally {
          r.stopping = false;
        }
      });
    },
  });

  /**
   * Resumes a conversation found running (or waiting for the user) with nobody at it: takes its
   * lease (never from a live holder), closes the calls the stop cut short, runs the loop. How
   * many calls it closed; null when another process holds it or this one runs it already.
   */
  const resume = async (record: ConversationRecord): Promise<number | null> => {
    const r = runners.runnerFor(record.user_id, record.id);
    if (r.loop || background.closed || shuttingDown) return null;
    const lease = await ownership.acquire(record.user_id, record.id, false);
    if (lease === 'elsewhere') return null;
    if (r.loop) {
      await ownership.release(lease);
      return null;
    }
    r.lease = lease;
    try {
      const closed = await closeInterrupted(r, record.execution_status);
      start(r, lease);
      return closed;
    } catch (error) {
      r.lease = null;
      if (!(error instanceof LeaseLostError)) await ownership.release(lease);
      throw error;
    }
  };

  /** After a restart: closes the tool calls the crash cut short and resumes the conversations that were running. */
  const recover = (): ResultAsync<RecoveryReport, DomainError> =>
    conversations.listByExecutionStatus(['running', 'waiting_for_confirmation']).andThen((records) =>
      ResultAsync.fromPromise(
        (async () => {
          let interrupted = 0;
          for (const record of records) interrupted += (await resume(record)) ?? 0;
          return { resumed: records.length, interrupted_calls: interrupted };
        })(),
        (error): DomainError => storeUnavailable('resume running conversations', error),
      ),
    );

  /** With other processes on the store: takes over, every scan, the running conversations nobody holds (their process died). */
  let scan: { cancel(): void } | null = null;
  let scanning = false;
  const takeOver = async () => {
    if (scanning || background.closed || shuttingDown) return;
    scanning = true;
    try {
      const running = await conversations.listByExecutionStatus(['running']);
      if (running.isErr()) return;
      const idle = running.value.filter((record) => !runners.get(record.user_id, record.id)?.loop);
      for (const record of await ownership.unheld(idle)) {
        const closed = await resume(record).catch((error: unknown) => {
          logger.warn({ conversationId: record.id, err: error instanceof Error ? error.message : String(error) }, 'could not take over a conversation');
          return null;
        });
        if (closed !== null) logger.info({ conversationId: record.id, interruptedCalls: closed }, 'took over a running conversation nobody held');
      }
    } finally {
      scanning = false;
    }
  };

  const engine: AgentEngine = {
    prepareWorkspace: (request) =>
      prepareRepository({ ...request, runtime, clock, ...(deps.options?.workspace ? { options: deps.options.workspace } : {}) }),

    wake: (userId, conversationId) => {
      if (background.closed || shuttingDown) return;
      const r = runners.runnerFor(userId, conversationId);
      if (r.loop) {
        r.wakeRequested = true;
        return;
      }
      start(r, null);
    },

    shutdown: async () => {
      shuttingDown = true;
      scan?.cancel();
      const running = runners.all().filter((r) => r.loop !== null);
      for (const r of running) {
        r.stopReason = 'shutting down';
        r.abort.abort();
      }
      await Promise.all(running.map((r) => r.loop ?? Promise.resolve()));
      await Promise.all(runners.all().map((r) => release(r)));
      ownership.stop();
    },

    pause: async (userId, conversationId, reason) => {
      const r = runners.get(userId, conversationId);
      if (!r?.lease) {
        // Not run by this process: ask the one that runs it (if any) to stop, and wait for it.
        if (!(await ownership.stopElsewhere(userId, conversationId))) {
          logger.warn({ conversationId }, 'the process running this conversation did not stop in time; recording the pause anyway');
        }
      }
      if (r) {
        // Also at rest: the shell and MCP connections it keeps between runs are closed.
        await halt(r, 'paused');
        await setStatus(r, 'pause', reason).catch((error: unknown) => logger.warn({ conversationId, err: String(error) }, 'could not record the pause'));
        await letGo(r);
        return;
      }
      // Only a record left "running" (by a crash, or a holder that did not write it) needs changing.
      const record = await conversations.get(userId, conversationId);
      if (record.isOk() && record.value?.execution_status === 'running') {
        await setStatus(runners.runnerFor(userId, conversationId), 'pause', reason).catch(() => undefined);
      }
    },

    forget: async (userId, conversationId) => {
      const r = runners.get(userId, conversationId);
      if (r) {
        await halt(r, 'paused');
        await letGo(r);
        runners.delete(userId, conversationId);
      }
      await ownership.stopElsewhere(userId, conversationId);
      await ownership.forget(userId, conversationId);
    },

    recover: () =>
      recover().map((report) => {
        if (ownership.shared && !scan && !shuttingDown) scan = clock.every(ownership.scanMs, () => void takeOver());
        return report;
      }),
    respondToConfirmation: confirmation.respondToConfirmation,
    activeLoops: () => runners.all().filter((r) => r.loop !== null).length,
    settingsDefaults: {
      max_iterations: base.defaultMaxIterations,
      condenser_max_size: deps.options?.condenser?.maxEvents ?? DEFAULT_CONDENSER_MAX_EVENTS,
    },
  };
  return engine;
}
