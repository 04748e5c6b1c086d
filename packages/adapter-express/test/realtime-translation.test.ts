import { afterEach, describe, expect, it } from 'vitest';
import type { ConversationEvent } from '@acs/core/schemas';
import type { ScriptedTurn } from '@acs/testing';
import { readWholeLog } from '../src/realtime/feed.js';
import { V0EventTranslator, agentStateOf } from '../src/realtime/v0-events.js';
import { countV1Frames, V1EventTranslator } from '../src/realtime/v1-events.js';
import { createConversation, LLM_SETTINGS, startHarness, storeSettings, type Harness } from './harness.js';
import { expectOpenHandsShape, openHandsProblems } from './openhands-shapes.js';

/**
 * The translation of our events into the forms the OpenHands UI renders: V0 (`oh_event` over
 * socket.io) and the agent-server's (V1 WebSocket frames). The log comes from a real
 * conversation on the memory adapters, so the translators meet events as the engine writes them.
 */

let harnesses: Harness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.map((h) => h.close()));
  harnesses = [];
});

const call = (name: string, args: Record<string, unknown>): ScriptedTurn => ({
  tool_calls: [{ name, arguments: args }],
  usage: { prompt_tokens: 100, completion_tokens: 10 },
});

/** A conversation that runs a command, creates and reads a file, thinks, fails a command, then finishes. */
async function conversationLog(): Promise<ConversationEvent[]> {
  const h = await startHarness();
  harnesses.push(h);
  await storeSettings(h, LLM_SETTINGS);
  h.ports.runtime.onExec(
    (argv) => argv[0] === 'bash',
    (request) =>
      request.command[2]!.includes('false')
        ? { stdout: 'nope\n', exit_code: 1 }
        : { stdout: 'a.txt\nb.txt\n', exit_code: 0 },
  );
  h.ports.llm.push(
    call('execute_bash', { command: 'ls' }),
    call('str_replace_editor', {
      command: 'create',
      path: '/workspace/hello.py',
      file_text: 'print("hi")\nprint("bye")',
    }),
    call('str_replace_editor', { command: 'view', path: '/workspace/hello.py' }),
    call('think', { thought: 'The file is there.' }),
    call('execute_bash', { command: 'false' }),
    call('finish', { message: 'All done.' }),
  );
  const id = await createConversation(h, { initial_user_msg: 'make hello.py' });
  await h.idle();
  const log = await readWholeLog(h.service, 'alice', id);
  if (log.isErr()) throw new Error(JSON.stringify(log.error));
  return log.value;
}

describe('V0 translation', () => {
  it('numeric ids that are our ids; each observation names its action as cause; state changes as agent_state_changed', async () => {
    const log = await conversationLog();
    const translator = new V0EventTranslator();
    const events = log.flatMap((e) => translator.translate(e));
    const ours = new Set(log.map((e) => e.id));
    expect(events.every((e) => typeof e.id === 'number' && ours.has(e.id))).toBe(true);
    expect(events.map((e) => e.id)).toEqual([...events.map((e) => e.id)].sort((a, b) => a - b));
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);

    const actions = events.filter((e) => 'action' in e);
    expect(actions.map((e) => e.action)).toEqual(['message', 'run', 'edit', 'read', 'think', 'run', 'finish']);
    expect(actions[0]).toMatchObject({
      source: 'user',
      message: 'make hello.py',
      args: { content: 'make hello.py', image_urls: [] },
    });
    expect(actions[1]).toMatchObject({
      source: 'agent',
      message: 'Running command: ls',
      args: { command: 'ls', confirmation_state: 'confirmed', security_risk: -1 },
    });
    expect(actions[6]).toMatchObject({ message: 'All done.', args: { final_thought: 'All done.' } });

    const observations = events.filter((e) => 'observation' in e && e.observation !== 'agent_state_changed');
    expect(observations.map((e) => e.observation)).toEqual(['run', 'edit', 'read', 'think', 'run']);
    // Each answers the action just before it.
    for (const [i, o] of observations.entries()) expect(o.cause, String(o.observation)).toBe(actions[i + 1]!.id);
    expect(observations[0]).toMatchObject({
      content: expect.stringMatching(/^a\.txt\nb\.txt\n/) as unknown,
      success: true,
      extras: { command: 'ls', metadata: { exit_code: 0 } },
    });
    expect(observations[0]!.message).toBe('Command `ls` executed with exit code 0.');
    expect(observations[4]).toMatchObject({ extras: { metadata: { exit_code: 1 } } });
    expect(String((observations[1]!.extras as { diff: string }).diff).split('\n')).toEqual([
      '--- /workspace/hello.py',
      '+++ /workspace/hello.py',
      '+print("hi")',
      '+print("bye")',
    ]);
    expect(observations[2]).toMatchObject({ extras: { path: '/workspace/hello.py' } });

    // The running cost rides on the agent's actions once a model call reported it.
    // (Every field the UI's cost dialog reads: a missing one crashes it.)
    const calls = log.filter((e) => e.kind === 'llm_call');
    const first = calls[0]!;
    expect(actions[1]!.llm_metrics).toEqual({
      accumulated_cost: 0,
      max_budget_per_task: null,
      accumulated_token_usage: {
        prompt_tokens: first.prompt_tokens,
        completion_tokens: first.completion_tokens,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        context_window: 0,
        per_turn_token: first.prompt_tokens + first.completion_tokens,
      },
    });
    expect(
      (actions[6]!.llm_metrics as { accumulated_token_usage: { prompt_tokens: number } }).accumulated_token_usage
        .prompt_tokens,
    ).toBe(calls.reduce((n, c) => n + c.prompt_tokens, 0));
    // The latest agent state is the last event.
    expect(events.at(-1)).toMatchObject({ observation: 'agent_state_changed', extras: { agent_state: 'finished' } });
    // Model calls and setup steps have no V0 form.
    const silent = log.filter((e) => e.kind === 'llm_call');
    expect(silent.length).toBeGreaterThan(0);
    expect(events.some((e) => silent.some((s) => s.id === e.id))).toBe(false);
  });

  it('agent states in OpenHands words', () => {
    expect(agentStateOf(null)).toBe('awaiting_user_input');
    expect(agentStateOf('idle')).toBe('awaiting_user_input');
    expect(agentStateOf('waiting_for_confirmation')).toBe('awaiting_user_confirmation');
    expect(agentStateOf('stuck')).toBe('error');
    expect(agentStateOf('paused')).toBe('paused');
  });
});

describe('V1 translation', () => {
  it('agent-server kinds with string ids; observations point at their action; count equals the frames', async () => {
    const log = await conversationLog();
    const translator = new V1EventTranslator();
    const frames = log.flatMap((e) => translator.translate(e));
    expect(countV1Frames(log)).toBe(frames.length);
    expect(frames.every((f) => typeof f.id === 'string' && log.some((e) => String(e.id) === f.id))).toBe(true);

    const described = frames.map((f) => {
      const inner = (f.action ?? f.observation) as { kind: string } | undefined;
      return inner
        ? `${f.kind}:${inner.kind}`
        : f.kind === 'ConversationStateUpdateEvent'
          ? `state:${String(f.value)}`
          : `${f.kind}:${String(f.source)}`;
    });
    expect(described.filter((d) => !d.startsWith('state:'))).toEqual([
      'MessageEvent:user',
      'ActionEvent:ExecuteBashAction',
      'ObservationEvent:ExecuteBashObservation',
      'ActionEvent:StrReplaceEditorAction',
      'ObservationEvent:StrReplaceEditorObservation',
      'ActionEvent:StrReplaceEditorAction',
      'ObservationEvent:StrReplaceEditorObservation',
      'ActionEvent:ThinkAction',
      'ObservationEvent:ThinkObservation',
      'ActionEvent:ExecuteBashAction',
      'ObservationEvent:ExecuteBashObservation',
      // No finish observation: the UI would fold the finish message away in its place.
      'ActionEvent:FinishAction',
    ]);
    expect(described.at(-1)).toBe('state:finished');

    const actions = frames.filter((f) => f.kind === 'ActionEvent');
    const observations = frames.filter((f) => f.kind === 'ObservationEvent');
    expect(observations).toHaveLength(actions.length - 1);
    for (const [i, o] of observations.entries()) {
      expect(o.action_id).toBe(actions[i]!.id);
      expect(o.tool_call_id).toBe(actions[i]!.tool_call_id);
    }
    expect(actions[0]).toMatchObject({
      tool_name: 'execute_bash',
      security_risk: 'UNKNOWN',
      action: { command: 'ls', is_input: false },
    });
    expect(JSON.parse((actions[0]!.tool_call as { function: { arguments: string } }).function.arguments)).toEqual({
      command: 'ls',
    });
    expect(observations[0]).toMatchObject({
      source: 'environment',
      observation: { output: expect.stringMatching(/^a\.txt\nb\.txt\n/) as unknown, exit_code: 0, error: false },
    });
    expect(observations[4]).toMatchObject({ observation: { exit_code: 1 } });
    expect(observations[1]).toMatchObject({
      observation: {
        command: 'create',
        path: '/workspace/hello.py',
        prev_exist: false,
        new_content: 'print("hi")\nprint("bye")',
      },
    });
    expect(actions[5]).toMatchObject({ action: { kind: 'FinishAction', message: 'All done.' } });
    expect(frames[0]).toMatchObject({
      llm_message: { role: 'user', content: [{ type: 'text', text: 'make hello.py' }] },
    });
  });
});

describe('V1 translation, sdk dialect (the OpenHands 1.11 app server’s Event union)', () => {
  it('every frame is an Event of the 1.11 models, with the SDK 1.34 kinds', async () => {
    const log = await conversationLog();
    const translator = new V1EventTranslator('sdk');
    const frames = log.flatMap((e) => translator.translate(e));
    for (const frame of frames) expectOpenHandsShape('Event', frame);
    const described = frames.map((f) => {
      const inner = (f.action ?? f.observation) as { kind: string } | undefined;
      return inner ? `${f.kind}:${inner.kind}` : f.kind;
    });
    expect(described.filter((d) => d.includes(':'))).toEqual([
      'ActionEvent:TerminalAction',
      'ObservationEvent:TerminalObservation',
      'ActionEvent:FileEditorAction',
      'ObservationEvent:FileEditorObservation',
      'ActionEvent:FileEditorAction',
      'ObservationEvent:FileEditorObservation',
      'ActionEvent:ThinkAction',
      'ObservationEvent:ThinkObservation',
      'ActionEvent:TerminalAction',
      'ObservationEvent:TerminalObservation',
      'ActionEvent:FinishAction',
    ]);
    const observations = frames.filter((f) => f.kind === 'ObservationEvent');
    expect(observations[0]).toMatchObject({
      observation: {
        content: [{ type: 'text', text: expect.stringMatching(/^a\.txt\nb\.txt\n/) as unknown }],
        exit_code: 0,
        is_error: false,
      },
    });
    expect(frames.find((f) => f.kind === 'ActionEvent')).toMatchObject({
      tool_call: { name: 'execute_bash', origin: 'completion' },
    });
    expect(frames[0]).toMatchObject({ kind: 'MessageEvent', activated_skills: [] });
    // The ui dialect is not an Event of 1.11 (its kinds are those of the 0.62 UI).
    const ui = log.flatMap((e) => new V1EventTranslator().translate(e));
    expect(ui.filter((f) => f.kind === 'ActionEvent').some((f) => openHandsProblems('Event', f).length > 0)).toBe(true);
  });

  it('a fatal error is a ConversationErrorEvent with our code; a translator reading a log keeps no action once it has its observation', () => {
    const translator = new V1EventTranslator('sdk');
    const at = '2026-01-01T00:00:00.000Z';
    const [error] = translator.translate({
      id: 3,
      kind: 'error',
      source: 'environment',
      timestamp: at,
      code: 'llm_auth_failed',
      message: 'the key was refused',
      fatal: true,
    });
    expect(error).toEqual({
      id: '3',
      timestamp: at,
      kind: 'ConversationErrorEvent',
      source: 'environment',
      code: 'llm_auth_failed',
      detail: 'the key was refused',
    });
    expectOpenHandsShape('Event', error);
    const action = {
      id: 4,
      kind: 'action',
      source: 'agent',
      timestamp: at,
      tool_call_id: 'c1',
      tool_name: 'think',
      arguments: { thought: 't' },
      raw_arguments: '{"thought":"t"}',
      thought: null,
      response_id: 'r1',
    } as const;
    translator.translate(action);
    const observation = {
      id: 5,
      kind: 'observation',
      source: 'environment',
      timestamp: at,
      tool_call_id: 'c1',
      tool_name: 'think',
      content: 'ok',
      is_error: false,
      exit_code: null,
      details: {},
    } as const;
    expect(translator.translate(observation)[0]).toMatchObject({ action_id: '4' });
    // Its action was let go: the same observation again has no action to point at.
    expect(translator.translate({ ...observation, id: 6 })[0]).toMatchObject({ action_id: '' });
  });
});
