import { prepareRepository } from '../workspace-setup.js';
import { createActions } from './actions.js';
import { createEngineBase } from './base.js';
import { createConfirmation } from './confirmation.js';
import { createLoop } from './loop.js';
import type { AgentEngine, AgentEngineDeps } from './options.js';
import { createRecording } from './recording.js';
import { createRecovery } from './recovery.js';
import { createReplayer } from './replay-run.js';
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
  const { recover } = createRecovery(kit);
  let shuttingDown = false;

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
      if (r.abort.signal.aborted) {
        r.abort = new AbortController();
        r.stopReason = 'paused';
      }
      // r.loop is set before anything awaits, so a second wake cannot start a second loop.
      const running: Promise<void> = Promise.resolve()
        .then(() => loop(r))
        .finally(() => {
          r.loop = null;
          if (r.wakeRequested && !r.abort.signal.aborted) {
            // A wake that came in while the loop was ending: run again.
            r.wakeRequested = false;
            engine.wake(userId, conversationId);
            return;
          }
          // An agent at rest keeps no copy of its log (it is read again on the next run); the shell stays open.
          r.events = [];
          r.lastId = 0;
          r.handledUpTo = null;
        });
      r.loop = running;
      background.spawn(`agent ${conversationId}`, () => running);
    },

    shutdown: async () => {
      shuttingDown = true;
      const running = runners.all().filter((r) => r.loop !== null);
      for (const r of running) {
        r.stopReason = 'shutting down';
        r.abort.abort();
      }
      await Promise.all(running.map((r) => r.loop ?? Promise.resolve()));
      await Promise.all(runners.all().map((r) => release(r)));
    },

    pause: async (userId, conversationId, reason) => {
      const r = runners.get(userId, conversationId);
      if (!r) {
        // Not running in this process: only a record left "running" by a crash needs changing.
        const record = await conversations.get(userId, conversationId);
        if (record.isOk() && record.value?.execution_status === 'running') {
          await setStatus(runners.runnerFor(userId, conversationId), 'pause', reason).catch(() => undefined);
        }
        return;
      }
      r.stopReason = 'paused';
      r.abort.abort();
      await r.loop;
      await release(r);
      await setStatus(r, 'pause', reason).catch((error: unknown) => logger.warn({ conversationId, err: String(error) }, 'could not record the pause'));
    },

    forget: async (userId, conversationId) => {
      const r = runners.get(userId, conversationId);
      if (!r) return;
      r.abort.abort();
      await r.loop;
      await release(r);
      runners.delete(userId, conversationId);
    },

    recover,
    respondToConfirmation: confirmation.respondToConfirmation,
    activeLoops: () => runners.all().filter((r) => r.loop !== null).length,
  };
  return engine;
}
