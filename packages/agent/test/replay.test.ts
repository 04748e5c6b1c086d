/* eslint-disable @typescript-eslint/no-unsafe-assignment -- vitest's asymmetric matchers are typed any */
import { describe, expect, it } from 'vitest';
import { createAgentConversationService, parseReplayTrajectory, type AgentConversationService } from '@acs/core';
import type { ConversationEvent, SettingsInput } from '@acs/core/schemas';
import { sequentialIdGenerator } from '@acs/core/ports';
import { expectOk } from '@acs/core/testing';
import { eventsOf, conversationOf } from './conversation-reads.js';
import { createMemoryPorts, type ScriptedTurn } from '@acs/testing';
import { createAgent } from '../src/index.js';

const WORKDIR = '/workspace';
const LLM: SettingsInput = { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test-key' };

type Ports = ReturnType<typeof createMemoryPorts>;

// --- Hand-written trajectories in OpenHands' V0 event dict format (openhands/events/serialization/event.py) ---

let nextId = 0;
const ts = () => `2025-01-01T00:00:${String(nextId % 60).padStart(2, '0')}.000000`;
const userMessage = (content: string, extra: Record<string, unknown> = {}) => ({
  id: nextId++,
  timestamp: ts(),
  source: 'user',
  message: content,
  action: 'message',
  args: { content, image_urls: [], file_urls: [], wait_for_response: false, ...extra },
});
const agentMessage = (content: string) => ({
  id: nextId++,
  timestamp: ts(),
  source: 'agent',
  message: content,
  action: 'message',
  args: { content, image_urls: null, file_urls: null, wait_for_response: true },
});
const action = (type: string, args: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  id: nextId++,
  timestamp: ts(),
  source: 'agent',
  message: `${type} action`,
  action: type,
  args: { thought: '', security_risk: -1, ...args },
  ...extra,
});
const run = (command: string, extra: Record<string, unknown> = {}) =>
  action(
    'run',
    {
      command,
      is_input: false,
      blocking: false,
      is_static: false,
      cwd: null,
      hidden: false,
      confirmation_state: 'confirmed',
      ...extra,
    },
    { timeout: 120 },
  );
const observation = (type: string, content: string, extras: Record<string, unknown> = {}) => ({
  id: nextId++,
  timestamp: ts(),
  source: 'environment',
  message: content,
  cause: nextId - 2,
  observation: type,
  content,
  extras,
  success: true,
});
const systemAction = () => ({
  id: nextId++,
  timestamp: ts(),
  source: 'agent',
  message: 'system',
  action: 'system',
  args: { content: 'You are OpenHands agent…', tools: [], openhands_version: '0.40.0', agent_class: 'CodeActAgent' },
});
const stateChange = (state: string) => ({
  id: nextId++,
  timestamp: ts(),
  source: 'environment',
  message: '',
  observation: 'agent_state_changed',
  content: '',
  extras: { agent_state: state, reason: '' },
});

/** A realistic whole trajectory: writes a script, edits it, reads it, runs it, thinks and finishes. */
const fullTrajectory = () => [
  systemAction(),
  userMessage('Write a hello script and run it'),
  stateChange('running'),
  action('think', { thought: 'I will write hello.sh, then run it.' }),
  observation('think', 'Your thought has been logged.'),
  action('write', { path: `${WORKDIR}/hello.sh`, content: 'echo hello\n', start: 0, end: -1 }),
  observation('write', '', { path: `${WORKDIR}/hello.sh` }),
  action('edit', {
    path: `${WORKDIR}/hello.sh`,
    command: 'str_replace',
    old_str: 'echo hello',
    new_str: 'echo hello world',
    file_text: null,
    insert_line: null,
    content: '',
    start: 1,
    end: -1,
    impl_source: 'oh_aci',
  }),
  observation('edit', 'The file has been edited.', { path: `${WORKDIR}/hello.sh` }),
  action('edit', {
    path: `${WORKDIR}/notes.md`,
    command: 'create',
    file_text: '# Notes\n',
    old_str: null,
    new_str: null,
    insert_line: null,
    content: '',
    impl_source: 'oh_aci',
  }),
  action('edit', {
    path: `${WORKDIR}/notes.md`,
    command: 'insert',
    insert_line: 1,
    new_str: 'ran hello.sh',
    file_text: null,
    old_str: null,
    content: '',
    impl_source: 'oh_aci',
  }),
  action('read', { path: `${WORKDIR}/hello.sh`, start: 0, end: -1, impl_source: 'oh_aci', view_range: null }),
  observation('read', 'echo hello world'),
  run('bash hello.sh'),
  observation('run', 'hello world\n', { command: 'bash hello.sh', metadata: { exit_code: 0 } }),
  agentMessage('The script works.'),
  run('ls', { is_input: 'false' }),
  action('finish', { final_thought: 'hello.sh written and run', task_completed: 'true', outputs: {} }),
  stateChange('finished'),
];

const planOf = (result: ReturnType<typeof parseReplayTrajectory>) => {
  if (result.isErr()) throw new Error(`expected the trajectory to parse, got: ${JSON.stringify(result.error)}`);
  return result.value;
};

const issuesOf = (json: string) => {
  const result = parseReplayTrajectory(json);
  if (result.isOk()) throw new Error('expected the trajectory to be refused');
  expect(result.error.type).toBe('ValidationFailed');
  return result.error.type === 'ValidationFailed' ? result.error.issues : [];
};

describe('replay_json: parsing an OpenHands trajectory', () => {
  it('keeps agent actions and messages in order, drops environment events, observations and the system action', () => {
    const plan = planOf(parseReplayTrajectory(JSON.stringify(fullTrajectory())));
    expect(plan.initial).toEqual({ text: 'Write a hello script and run it', image_urls: [] });
    expect(plan.endsWithFinish).toBe(true);
    expect(
      plan.steps.map((s) =>
        s.kind === 'message'
          ? `message:${s.source}`
          : `${s.tool_name}${'command' in s.arguments && s.tool_name === 'str_replace_editor' ? `:${String(s.arguments.command)}` : ''}`,
      ),
    ).toEqual([
      'think',
      'str_replace_editor:create',
      'str_replace_editor:str_replace',
      'str_replace_editor:create',
      'str_replace_editor:insert',
      'str_replace_editor:view',
      'execute_bash',
      'message:agent',
      'execute_bash',
      'finish',
    ]);
    const [think, write, replace, , insert, read, bash, message, ls, finish] = plan.steps;
    expect(think).toMatchObject({ arguments: { thought: 'I will write hello.sh, then run it.' } });
    expect(write).toMatchObject({
      arguments: { command: 'create', path: `${WORKDIR}/hello.sh`, file_text: 'echo hello\n', overwrite: true },
    });
    expect(replace).toMatchObject({
      arguments: { command: 'str_replace', old_str: 'echo hello', new_str: 'echo hello world' },
    });
    expect(insert).toMatchObject({ arguments: { command: 'insert', insert_line: 1, new_str: 'ran hello.sh' } });
    expect(read!.kind === 'tool' && read!.arguments).toEqual({ command: 'view', path: `${WORKDIR}/hello.sh` });
    expect(bash!.kind === 'tool' && bash!.arguments).toEqual({
      command: 'bash hello.sh',
      is_input: false,
      timeout: 120,
    });
    expect(message).toMatchObject({ kind: 'message', source: 'agent', text: 'The script works.' });
    expect(ls).toMatchObject({ arguments: { command: 'ls', is_input: false } });
    expect(finish).toMatchObject({ arguments: { message: 'hello.sh written and run' } });
  });

  it('maps read ranges, is_input strings, later user messages, finish outputs, and thoughts', () => {
    const plan = planOf(
      parseReplayTrajectory(
        JSON.stringify([
          userMessage('start', { image_urls: ['https://img.example.com/a.png'] }),
          action('read', { path: 'a.txt', start: 2, end: 5 }),
          action('read', { path: 'b.txt', view_range: [1, -1] }),
          action('run', { command: 'C-c', is_input: 'true', thought: 'stop the server' }),
          userMessage('now the second part'),
          action('edit', { path: 'a.txt', command: 'undo_edit', content: '' }),
          action('finish', { outputs: { content: 'from outputs' } }),
        ]),
      ),
    );
    expect(plan.initial).toEqual({ text: 'start', image_urls: ['https://img.example.com/a.png'] });
    expect(plan.steps.map((s) => (s.kind === 'tool' ? s.arguments : { [s.source]: s.text }))).toEqual([
      { command: 'view', path: 'a.txt', view_range: [3, 5] },
      { command: 'view', path: 'b.txt', view_range: [1, -1] },
      { command: 'C-c', is_input: true },
      { user: 'now the second part' },
      { command: 'undo_edit', path: 'a.txt' },
      { message: 'from outputs' },
    ]);
    expect(plan.steps[2]).toMatchObject({ thought: 'stop the server' });
  });

  it('accepts a trajectory without finish (the model goes on after it)', () => {
    const plan = planOf(parseReplayTrajectory(JSON.stringify([userMessage('go'), run('ls')])));
    expect(plan.endsWithFinish).toBe(false);
    expect(planOf(parseReplayTrajectory(JSON.stringify([userMessage('only a message')]))).steps).toEqual([]);
  });

  it('refuses malformed trajectories with the place and the reason', () => {
    const cases: [unknown, string, RegExp][] = [
      ['not json', 'replay_json', /not valid JSON/],
      [{ events: [] }, 'replay_json', /must be a JSON array/],
      [[], 'replay_json', /no user message/],
      [[run('ls')], 'replay_json[0]', /first replayed event must be a message action from the user/],
      [[agentMessage('hi'), userMessage('x')], 'replay_json[0]', /first replayed event must be a message action/],
      [[stateChange('running'), observation('run', 'x')], 'replay_json', /no user message/],
      [[userMessage('go'), 42], 'replay_json[1]', /must be an event object/],
      [[userMessage('go'), { source: 'agent', args: {} }], 'replay_json[1]', /either "action" or "observation"/],
      [
        [userMessage('go'), { source: 'robot', action: 'run', args: { command: 'ls' } }],
        'replay_json[1].source',
        /must be/,
      ],
      [[userMessage('go'), action('run', { command: 42 })], 'replay_json[1].args.command', /string/],
      [[userMessage('go'), action('run', { is_input: 'maybe' })], 'replay_json[1].args.command', /string/],
      [
        [userMessage('go'), action('browse', { url: 'https://x' })],
        'replay_json[1].action',
        /"browse" cannot be replayed/,
      ],
      [
        [userMessage('go'), action('run_ipython', { code: 'print(1)' })],
        'replay_json[1].action',
        /"run_ipython" cannot be replayed/,
      ],
      [
        [userMessage('go'), action('edit', { path: '/a', content: 'LLM edit', command: '' })],
        'replay_json[1].args.content',
        /LLM-based edit/,
      ],
      [
        [userMessage('go'), action('edit', { path: '/a', command: 'explode' })],
        'replay_json[1].args.command',
        /must be one of/,
      ],
      [
        [userMessage('go'), action('edit', { path: '/a', command: 'create' })],
        'replay_json[1].args.file_text',
        /required for command create/,
      ],
      [
        [userMessage('go'), action('edit', { path: '/a', command: 'str_replace', old_str: '' })],
        'replay_json[1].args.old_str',
        /required/,
      ],
      [
        [userMessage('go'), action('edit', { path: '/a', command: 'insert', new_str: 'x' })],
        'replay_json[1].args.insert_line',
        /required/,
      ],
      [
        [userMessage('go'), action('write', { path: '/a', content: 'x', start: 3, end: 5 })],
        'replay_json[1].args.start',
        /partial writes/,
      ],
      [[userMessage('go'), action('write', { path: '', content: 'x' })], 'replay_json[1].args.path', /.+/],
      [[userMessage('go'), action('read', { path: '/a', view_range: [1] })], 'replay_json[1].args.view_range', /.+/],
      [
        [userMessage('go'), { ...run('ls'), source: 'user' }],
        'replay_json[1].source',
        /from the user cannot be replayed/,
      ],
      [[userMessage('   ')], 'replay_json[0].args.content', /no text and no images/],
      [
        [userMessage('go', { image_urls: ['file:///etc/passwd'] })],
        'replay_json[0].args.image_urls[0]',
        /http\(s\) URL/,
      ],
    ];
    for (const [input, path, message] of cases) {
      const issues = issuesOf(typeof input === 'string' ? input : JSON.stringify(input));
      expect(issues[0], JSON.stringify(input)).toMatchObject({ path, message: expect.stringMatching(message) });
    }
  });

  it('reports every bad event, not just the first', () => {
    const issues = issuesOf(JSON.stringify([userMessage('go'), action('run', {}), action('browse', {}), run('ls')]));
    expect(issues.map((i) => i.path)).toEqual(['replay_json[1].args.command', 'replay_json[2].action']);
  });
});

// --- The engine replays with the memory adapters ---

async function service(ports: Ports, settings: SettingsInput | null = LLM, turns: ScriptedTurn[] = []) {
  ports.llm.push(...turns);
  const svc = createAgentConversationService(
    { agent: createAgent(), ...ports, ids: sequentialIdGenerator() },
    { pollIntervalMs: 1 },
  );
  if (settings) await expectOk(svc.settings.store('alice', settings));
  return svc;
}

async function fileOf(svc: AgentConversationService, ports: Ports, id: string, path: string): Promise<string | null> {
  const sandboxId = (await conversationOf(svc, id)).record.sandbox_id!;
  const bytes = await ports.runtime.readFile(sandboxId, path);
  return bytes.isOk() ? new TextDecoder().decode(bytes.value.bytes) : null;
}

const kinds = (events: ConversationEvent[]) =>
  events.map((e) =>
    e.kind === 'status'
      ? `status:${e.execution_status}`
      : e.kind === 'message'
        ? `message:${e.source}`
        : e.kind === 'action'
          ? `action:${e.tool_name}`
          : e.kind,
  );

describe('replay_json: the engine replays without a model', () => {
  it('runs the actions in the sandbox in order, records new observations, makes no model call, and finishes', async () => {
    const ports = createMemoryPorts();
    const commands: string[] = [];
    ports.runtime.onExec(
      (argv) => argv[0] === 'bash' && argv[1] === '-c',
      (req) => {
        commands.push(req.command[2]!);
        return req.command[2] === 'bash hello.sh'
          ? { stdout: 'hello world (fresh run)\n', exit_code: 0 }
          : { stdout: 'hello.sh\nnotes.md\n', exit_code: 0 };
      },
    );
    const svc = await service(ports);
    const created = await expectOk(
      svc.conversations.create('alice', {
        replay_json: JSON.stringify(fullTrajectory()),
        initial_user_msg: 'ignored: the trajectory’s message wins',
      }),
    );
    await svc.idle();
    const id = created.conversation_id;

    const events = await eventsOf(svc, id);
    expect(kinds(events)).toEqual([
      'message:user',
      'status:running',
      'action:think',
      'observation',
      'action:str_replace_editor',
      'observation',
      'action:str_replace_editor',
      'observation',
      'action:str_replace_editor',
      'observation',
      'action:str_replace_editor',
      'observation',
      'action:str_replace_editor',
      'observation',
      'action:execute_bash',
      'observation',
      'message:agent',
      'action:execute_bash',
      'observation',
      'action:finish',
      'observation',
      'status:finished',
    ]);
    expect(events[0]).toMatchObject({ kind: 'message', source: 'user', text: 'Write a hello script and run it' });
    expect(ports.llm.calls).toBe(0);
    expect(events.some((e) => e.kind === 'llm_call')).toBe(false);
    expect(commands).toEqual(['bash hello.sh', 'ls']);
    expect(await fileOf(svc, ports, id, `${WORKDIR}/hello.sh`)).toBe('echo hello world\n');
    expect(await fileOf(svc, ports, id, `${WORKDIR}/notes.md`)).toBe('# Notes\nran hello.sh\n');

    // Observations are new (from running again), not the trajectory's.
    const observations = events.filter((e) => e.kind === 'observation');
    expect(observations.every((o) => o.kind === 'observation' && !o.is_error)).toBe(true);
    const ran = observations.find((o) => o.kind === 'observation' && o.tool_name === 'execute_bash');
    expect(ran).toMatchObject({ exit_code: 0, content: expect.stringContaining('hello world (fresh run)') });
    const actions = events.filter((e) => e.kind === 'action');
    expect(actions.map((a) => a.kind === 'action' && a.replay_step)).toEqual([0, 1, 2, 3, 4, 5, 6, 8, 9]);
    expect(
      actions.every(
        (a) => a.kind === 'action' && a.response_id.startsWith('replay_') && a.tool_call_id === a.response_id,
      ),
    ).toBe(true);
    const record = await conversationOf(svc, id);
    expect(record.record.execution_status).toBe('finished');
    expect(record.record.metrics?.prompt_tokens ?? 0).toBe(0);
  });

  it('overwrites an existing file on write, as OpenHands does', async () => {
    const ports = createMemoryPorts();
    const svc = await service(ports);
    const path = `${WORKDIR}/config.txt`;
    const trajectory = [
      userMessage('write twice'),
      action('write', { path, content: 'first\n' }),
      action('write', { path, content: 'second\n' }),
      action('finish', { final_thought: 'done' }),
    ];
    const created = await expectOk(svc.conversations.create('alice', { replay_json: JSON.stringify(trajectory) }));
    await svc.idle();
    expect(await fileOf(svc, ports, created.conversation_id, path)).toBe('second\n');
    const observations = (await eventsOf(svc, created.conversation_id)).filter((e) => e.kind === 'observation');
    expect(observations[1]).toMatchObject({ is_error: false, content: expect.stringContaining('overwritten') });
  });

  it('hands over to the model when the trajectory does not end with finish, limits applied', async () => {
    const ports = createMemoryPorts();
    const svc = await service(ports, { ...LLM, max_iterations: 5 }, [{ content: 'I took over after the replay.' }]);
    ports.runtime.onExec(
      (argv) => argv[2] === 'echo replayed',
      () => ({ stdout: 'replayed\n', exit_code: 0 }),
    );
    const trajectory = [userMessage('continue this'), run('echo replayed'), userMessage('and now summarize')];
    const created = await expectOk(svc.conversations.create('alice', { replay_json: JSON.stringify(trajectory) }));
    await svc.idle();
    const events = await eventsOf(svc, created.conversation_id);
    expect(kinds(events)).toEqual([
      'message:user',
      'status:running',
      'action:execute_bash',
      'observation',
      'message:user',
      'llm_call',
      'message:agent',
      'status:finished',
    ]);
    expect(ports.llm.calls).toBe(1);
    // The model saw the replayed call and its fresh result, then the later user message.
    const prompt = ports.llm.requests[0]!.messages;
    expect(prompt.at(-3)).toMatchObject({ role: 'assistant', tool_calls: [{ name: 'execute_bash' }] });
    expect(prompt.at(-2)).toMatchObject({ role: 'tool', content: expect.stringContaining('replayed') });
    expect(prompt.at(-1)).toMatchObject({ role: 'user', content: 'and now summarize' });
  });

  it('ends waiting for the user when the trajectory ends with an agent message, even with a model configured', async () => {
    const ports = createMemoryPorts();
    const svc = await service(ports);
    const created = await expectOk(
      svc.conversations.create('alice', {
        replay_json: JSON.stringify([
          userMessage('hi'),
          action('think', { thought: 'easy' }),
          agentMessage('Hello! What next?'),
        ]),
      }),
    );
    await svc.idle();
    const events = await eventsOf(svc, created.conversation_id);
    expect(kinds(events)).toEqual([
      'message:user',
      'status:running',
      'action:think',
      'observation',
      'message:agent',
      'status:finished',
    ]);
    expect(ports.llm.calls).toBe(0);

    // The user's answer goes to the model, which sees the replayed history.
    ports.llm.push({ content: 'Answered by the model.' });
    await expectOk(
      svc.conversations.sendMessage('alice', created.conversation_id, {
        role: 'user',
        content: [{ type: 'text', text: 'tell me more' }],
        run: true,
      }),
    );
    await svc.idle();
    expect(ports.llm.calls).toBe(1);
    expect(ports.llm.requests[0]!.messages.slice(-2)).toMatchObject([
      { role: 'assistant', content: 'Hello! What next?' },
      { role: 'user', content: 'tell me more' },
    ]);
    expect((await eventsOf(svc, created.conversation_id)).at(-2)).toMatchObject({
      kind: 'message',
      source: 'agent',
      text: 'Answered by the model.',
    });
  });

  it('pauses on stop in the middle of the replay and goes on from the next step on start', async () => {
    const ports = createMemoryPorts();
    const commands: string[] = [];
    ports.runtime.onExec(
      (argv) => argv[2] === 'slow step',
      (req, ctx) => {
        commands.push(req.command[2]!);
        return new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve({ exit_code: 130 })));
      },
    );
    ports.runtime.onExec(
      (argv) => argv[2] === 'last step',
      (req) => {
        commands.push(req.command[2]!);
        return { exit_code: 0 };
      },
    );
    const svc = await service(ports, null);
    const trajectory = [
      userMessage('go'),
      run('slow step', { timeout: 600 }),
      run('last step'),
      action('finish', { final_thought: 'ok' }),
    ];
    const created = await expectOk(svc.conversations.create('alice', { replay_json: JSON.stringify(trajectory) }));
    const id = created.conversation_id;
    while (!commands.includes('slow step')) await new Promise((r) => setTimeout(r, 5));
    await expectOk(svc.conversations.stop('alice', id));
    await svc.idle();
    expect((await conversationOf(svc, id)).record.execution_status).toBe('paused');

    await expectOk(svc.conversations.start('alice', id));
    await svc.idle();
    expect(commands).toEqual(['slow step', 'last step']);
    const events = await eventsOf(svc, id);
    expect(events.find((e) => e.kind === 'observation' && e.tool_call_id === 'replay_1')).toMatchObject({
      is_error: true,
      content: expect.stringContaining('paused'),
    });
    expect((await conversationOf(svc, id)).record.execution_status).toBe('finished');
  });

  it('without a model configured, ends finished after the replay with a note, not an error', async () => {
    const ports = createMemoryPorts();
    const svc = await service(ports, null);
    ports.runtime.onExec(
      (argv) => argv[2] === 'touch marker',
      () => ({ exit_code: 0 }),
    );
    const created = await expectOk(
      svc.conversations.create('alice', { replay_json: JSON.stringify([userMessage('go'), run('touch marker')]) }),
    );
    await svc.idle();
    const events = await eventsOf(svc, created.conversation_id);
    expect(kinds(events)).toEqual([
      'message:user',
      'status:running',
      'action:execute_bash',
      'observation',
      'status:finished',
    ]);
    expect(events.at(-1)).toMatchObject({ reason: expect.stringContaining('no model is configured') });
    expect(events.some((e) => e.kind === 'error')).toBe(false);
    expect((await conversationOf(svc, created.conversation_id)).record.execution_status).toBe('finished');
  });

  it('refuses a malformed trajectory at creation with a 422 reason, storing nothing', async () => {
    const ports = createMemoryPorts();
    const svc = await service(ports, null);
    const result = await svc.conversations.create('alice', {
      replay_json: JSON.stringify([userMessage('go'), action('browse', { url: 'https://x' })]),
    });
    expect(result.isErr()).toBe(true);
    if (result.isErr()) {
      expect(result.error).toMatchObject({ type: 'ValidationFailed', issues: [{ path: 'replay_json[1].action' }] });
      expect(result.error.type === 'ValidationFailed' && result.error.message).toContain('"browse" cannot be replayed');
    }
    expect(await expectOk(svc.conversations.count('alice', {}))).toBe(0);
    expect(ports.runtime.calls.filter((c) => c.operation === 'create')).toHaveLength(0);
  });

  it('resumes after a restart from the log: steps already replayed are not run again', async () => {
    const ports = createMemoryPorts();
    const commands: string[] = [];
    ports.runtime.onExec(
      (argv) => argv[2] === 'step one' || argv[2] === 'step three',
      (req) => {
        commands.push(req.command[2]!);
        return { exit_code: 0 };
      },
    );
    // The second command never returns: the process "dies" while it runs.
    ports.runtime.onExec(
      (argv) => argv[2] === 'step two',
      (req) => {
        commands.push(req.command[2]!);
        return new Promise(() => {});
      },
    );
    const first = await service(ports);
    const trajectory = [
      userMessage('go'),
      run('step one'),
      run('step two', { timeout: 600 }),
      run('step three'),
      action('finish', { final_thought: 'all steps' }),
    ];
    const created = await expectOk(first.conversations.create('alice', { replay_json: JSON.stringify(trajectory) }));
    const id = created.conversation_id;
    while (!commands.includes('step two')) await new Promise((r) => setTimeout(r, 5));

    const second = createAgentConversationService(
      { agent: createAgent(), ...ports, ids: sequentialIdGenerator() },
      { pollIntervalMs: 1 },
    );
    expect(await expectOk(second.recover())).toEqual({ resumed: 1, interrupted_calls: 1 });
    await second.idle();
    expect(commands).toEqual(['step one', 'step two', 'step three']);
    const events = await eventsOf(second, id);
    const interrupted = events.find((e) => e.kind === 'observation' && e.tool_call_id === 'replay_2');
    expect(interrupted).toMatchObject({ is_error: true, content: expect.stringContaining('service restarted') });
    expect(events.filter((e) => e.kind === 'action').map((a) => a.kind === 'action' && a.replay_step)).toEqual([
      0, 1, 2, 3,
    ]);
    expect(ports.llm.calls).toBe(0);
    expect((await conversationOf(second, id)).record.execution_status).toBe('finished');
    await second.close();
  });
});
