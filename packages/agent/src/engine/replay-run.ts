import { parseReplayTrajectory } from '@acs/core';
import type { ActionEvent } from '@acs/core/schemas';
import type { LlmCredentials } from '@acs/core/ports';
import { nextReplayStep, replayCallId, replayEndIndex } from '../replay.js';
import type { AgentHost } from '@acs/core/ports';
import type { Toolset } from '../toolset.js';
import type { Actions } from './actions.js';
import type { Recording } from './recording.js';
import type { Answered, Runner, StepEnd } from './runner.js';

/** What a replay needs: the sandboxes (to mark them used), the tools every conversation has, recording and actions. */
export interface ReplayerDeps {
  host: Pick<AgentHost, 'sandboxes'>;
  defaultToolset: Toolset;
  recording: Recording;
  actions: Actions;
}

/** Running a `replay_json` trajectory's remaining steps instead of calling the model. */
export interface Replayer {
  /**
   * A `replay_json` conversation: runs the trajectory's remaining steps (the log shows which ran,
   * by `replay_step`) instead of calling the model, each tool call exactly as a model's call would
   * run, with no llm_call event (so no cost). A stop when the turn ends here (the trajectory
   * finished, the agent was paused, or there is no model to go on with); 'continue' when the
   * model takes over.
   */
  replay: (
    r: Runner,
    json: string,
    credentials: LlmCredentials | null,
    sandboxId: string,
    workingDir: string,
  ) => Promise<StepEnd>;
}

export function createReplayer(deps: ReplayerDeps): Replayer {
  return {
    replay: (r, json, credentials, sandboxId, workingDir) => replay(deps, r, json, credentials, sandboxId, workingDir),
  };
}

async function replay(
  deps: ReplayerDeps,
  r: Runner,
  json: string,
  credentials: LlmCredentials | null,
  sandboxId: string,
  workingDir: string,
): Promise<StepEnd> {
  const { append, catchUp, now, fail } = deps.recording;
  const { toolContext, runActions } = deps.actions;
  const plan = parseReplayTrajectory(json);
  if (plan.isErr()) {
    return fail(
      r,
      'internal_error',
      `The stored replay_json cannot be replayed: ${plan.error.type === 'ValidationFailed' ? plan.error.message : plan.error.type}`,
    );
  }
  const { steps } = plan.value;
  const context = toolContext(r, sandboxId, workingDir);
  for (let n = nextReplayStep(r.log.events); n < steps.length; n++) {
    await catchUp(r);
    if (r.stopped) return 'stop';
    const step = steps[n]!;
    if (step.kind === 'message') {
      await append(r, [
        {
          kind: 'message',
          source: step.source,
          timestamp: now(),
          text: step.text,
          image_urls: step.image_urls,
          replay_step: n,
        },
      ]);
      continue;
    }
    const id = replayCallId(step);
    const raw = JSON.stringify(step.arguments);
    const appended = await append(r, [
      {
        kind: 'action',
        source: 'agent',
        timestamp: now(),
        tool_call_id: id,
        tool_name: step.tool_name,
        arguments: step.arguments,
        raw_arguments: raw,
        thought: step.thought,
        response_id: id,
        replay_step: n,
      },
    ]);
    const actions = appended.filter((e): e is ActionEvent => e.kind === 'action');
    const outcome = await runActions(
      r,
      actions,
      [{ id, name: step.tool_name, arguments: raw }],
      sandboxId,
      context,
      deps.defaultToolset,
    );
    deps.host.sandboxes.touch(r.userId, sandboxId);
    if (outcome === 'paused') return 'stop';
    if (outcome === 'sandbox_lost') {
      return fail(
        r,
        'sandbox_unavailable',
        `The sandbox ${sandboxId} stopped answering during the replay, so it cannot go on. Start the conversation again.`,
      );
    }
    if (outcome === 'finished') return finished(deps, r, 'the replayed trajectory called finish');
  }
  // The user wrote after the replay: the model answers (or the usual error says that none is configured).
  const end = replayEndIndex(r.log.events);
  if (r.log.events.slice(end + 1).some((e) => e.kind === 'message' && e.source === 'user')) return 'continue';
  const last = steps.at(-1);
  // Ending on the agent's message: it waits for the user, as a model's reply without tools does.
  const awaitsUser = last?.kind === 'message' && last.source === 'agent';
  if (credentials && !awaitsUser && !plan.value.endsWithFinish) return 'continue';
  return finished(
    deps,
    r,
    plan.value.endsWithFinish
      ? 'the replayed trajectory called finish'
      : awaitsUser
        ? 'the replayed trajectory ended with a message from the agent, which waits for the user'
        : 'the trajectory was replayed; no model is configured, so the agent stops here',
  );
}

/** The replay has finished the conversation: it answers everything the agent has read. */
async function finished(deps: ReplayerDeps, r: Runner, reason: string): Promise<Answered> {
  const upTo = r.log.lastId;
  await deps.recording.setStatus(r, 'finish', reason);
  return { upTo, then: 'stop' };
}
