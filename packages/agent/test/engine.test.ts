/* eslint-disable @typescript-eslint/no-unsafe-assignment -- vitest's asymmetric matchers are typed any */
import { describe, expect, it, vi } from 'vitest';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import type { ConversationEvent, SettingsInput } from '@acs/core/schemas';
import { sequentialIdGenerator } from '@acs/core/ports';
import { expectOk, settlesWithin } from '@acs/core/testing';
import { eventsOf, conversationOf } from './conversation-reads.js';
import { createMemoryPorts, type ScriptedTurn } from '@acs/testing';
import { createAgent } from '../src/index.js';

const LLM: SettingsInput = { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test-key' };
const WORKDIR = '/workspace';

type Ports = ReturnType<typeof createMemoryPorts>;

async function setup(settings: SettingsInput = {}, turns: ScriptedTurn[] = [], ports: Ports = createMemoryPorts()) {
  ports.llm.push(...turns);
  const service = createAgentConversationService(
    { agent: createAgent(), ...ports, ids: sequentialIdGenerator() },
    { pollIntervalMs: 1 },
  );
  await expectOk(service.settings.store('alice', { ...LLM, ...settings }));
  return { service, ports, llm: ports.llm, runtime: ports.runtime };
}

async function converse(
  service: AgentConversationService,
  message = 'please do the task',
  extra: Record<string, unknown> = {},
) {
  const created = await expectOk(service.conversations.create('alice', { initial_user_msg: message, ...extra }));
  await service.idle();
  return created.conversation_id;
}

const call = (name: string, args: Record<string, unknown> | string): ScriptedTurn => ({
  tool_calls: [{ name, arguments: args }],
});
const kinds = (events: ConversationEvent[]) =>
  events.map((e) =>
    e.kind === 'status' ? `status:${e.execution_status}` : e.kind === 'message' ? `message:${e.source}` : e.kind,
  );
const observations = (events: ConversationEvent[]) => events.filter((e) => e.kind === 'observation');
const errors = (events: ConversationEvent[]) => events.filter((e) => e.kind === 'error');

describe('agent engine: tools', () => {
  it('writes a file with the editor, runs it with bash, finishes, and records each step in order', async () => {
    const { service, runtime, llm } = await setup({}, [
      call('str_replace_editor', {
        command: 'create',
        path: `${WORKDIR}/hello.sh`,
        file_text: 'echo hello from the agent\n',
      }),
      call('execute_bash', { command: 'bash hello.sh' }),
      {
        content: 'Done: the script prints hello.',
        tool_calls: [{ name: 'finish', arguments: { message: 'hello.sh written and run' } }],
      },
    ]);
    runtime.onExec(
      (argv) => argv.join(' ') === 'bash -c bash hello.sh',
      () => ({ stdout: 'hello from the agent\n', exit_code: 0 }),
    );
    const id = await converse(service, 'write and run a hello script');

    const events = await eventsOf(service, id);
    expect(kinds(events)).toEqual([
      'message:user',
      'status:running',
      'llm_call',
      'action',
      'observation',
      'llm_call',
      'action',
      'observation',
      'llm_call',
      'action',
      'observation',
      'status:finished',
    ]);
    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
    const sandboxId = (await conversationOf(service, id)).record.sandbox_id!;
    const file = await expectOk(runtime.readFile(sandboxId, `${WORKDIR}/hello.sh`));
    expect(new TextDecoder().decode(file.bytes)).toBe('echo hello from the agent\n');
    const [created, ran] = observations(events);
    expect(created).toMatchObject({ tool_name: 'str_replace_editor', is_error: false });
    expect(ran).toMatchObject({ tool_name: 'execute_bash', is_error: false, exit_code: 0 });
    expect(ran!.kind === 'observation' && ran!.content).toContain('hello from the agent');
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
    // The model saw each result before its next call, paired with its call.
    const second = llm.requests[1]!.messages;
    expect(second.at(-2)).toMatchObject({ role: 'assistant', tool_calls: [{ name: 'str_replace_editor' }] });
    expect(second.at(-1)).toMatchObject({
      role: 'tool',
      content: expect.stringContaining('File created successfully'),
    });
    expect(llm.requests[0]!.tools.map((t) => t.name)).toEqual([
      'execute_bash',
      'str_replace_editor',
      'think',
      'finish',
    ]);
  });

  it('opens a new shell for the next command after the model ended its shell', async () => {
    const { service, runtime } = await setup({}, [
      call('execute_bash', { command: 'exit 3' }),
      call('execute_bash', { command: 'pwd' }),
      call('finish', { message: 'ok' }),
    ]);
    const spawn = vi.spyOn(runtime, 'spawn');
    const id = await converse(service);
    const [exited, ran] = observations(await eventsOf(service, id));
    expect(exited).toMatchObject({ tool_name: 'execute_bash', exit_code: 3 });
    expect(ran).toMatchObject({ tool_name: 'execute_bash', is_error: false, exit_code: 0 });
    expect(ran!.kind === 'observation' && ran!.content).toContain(WORKDIR);
    expect(spawn).toHaveBeenCalledTimes(2);
  });

  it('edits with str_replace, insert, view and undo_edit', async () => {
    const path = `${WORKDIR}/app.py`;
    const { service, runtime } = await setup({}, [
      call('str_replace_editor', { command: 'create', path, file_text: 'a = 1\nb = 2\nc = 3\n' }),
      call('str_replace_editor', { command: 'str_replace', path, old_str: 'b = 2', new_str: 'b = 20' }),
      call('str_replace_editor', { command: 'insert', path, insert_line: 0, new_str: '# header' }),
      call('str_replace_editor', { command: 'view', path, view_range: [2, 3] }),
      call('str_replace_editor', { command: 'undo_edit', path }),
      call('str_replace_editor', { command: 'str_replace', path, old_str: 'x = 9', new_str: 'y' }),
      call('str_replace_editor', { command: 'create', path, file_text: 'again' }),
      call('str_replace_editor', { command: 'view', path: '.' }),
      call('finish', { message: 'ok' }),
    ]);
    const id = await converse(service);
    const results = observations(await eventsOf(service, id)).map((o) =>
      o.kind === 'observation' ? { error: o.is_error, content: o.content } : null,
    );
    expect(results[1]).toMatchObject({ error: false, content: expect.stringContaining('b = 20') });
    expect(results[3]).toMatchObject({ error: false, content: expect.stringMatching(/2\ta = 1\n\s+3\tb = 20/) });
    expect(results[4]).toMatchObject({ error: false });
    expect(results[5]).toMatchObject({ error: true, content: expect.stringContaining('does not appear verbatim') });
    expect(results[6]).toMatchObject({ error: true, content: expect.stringContaining('already exists') });
    expect(results[7]).toMatchObject({ error: false, content: expect.stringContaining(`${WORKDIR}/app.py`) });
    const sandboxId = (await conversationOf(service, id)).record.sandbox_id!;
    expect(new TextDecoder().decode((await expectOk(runtime.readFile(sandboxId, path))).bytes)).toBe(
      'a = 1\nb = 20\nc = 3\n',
    );
  });

  it('reads no more of a file than the editor handles, and says a directory is one', async () => {
    const big = `${WORKDIR}/big.txt`;
    const { service, runtime } = await setup({}, [
      call('str_replace_editor', { command: 'create', path: big, file_text: 'x'.repeat(10 * 1024 * 1024 + 1) }),
      call('str_replace_editor', { command: 'view', path: big }),
      call('str_replace_editor', { command: 'create', path: `${WORKDIR}/src/app.py`, file_text: 'pass\n' }),
      call('str_replace_editor', { command: 'str_replace', path: `${WORKDIR}/src`, old_str: 'pass', new_str: 'run()' }),
      call('finish', { message: 'ok' }),
    ]);
    const readFile = vi.spyOn(runtime, 'readFile');
    const id = await converse(service);
    const results = observations(await eventsOf(service, id)).map((o) =>
      o.kind === 'observation' ? { error: o.is_error, content: o.content } : null,
    );
    expect(results[1]).toEqual({
      error: true,
      content: expect.stringContaining(`${big} is 10485761 bytes, more than the editor handles (10485760)`),
    });
    expect(results[3]).toEqual({ error: true, content: expect.stringContaining(`${WORKDIR}/src is a directory`) });
    expect(readFile.mock.calls.map(([, path, options]) => [path, options])).toEqual(
      [big, big, `${WORKDIR}/src/app.py`, `${WORKDIR}/src`].map((path) => [path, { maxBytes: 10 * 1024 * 1024 }]),
    );
  });

  it('sends invalid tool calls back to the model as error observations and goes on', async () => {
    const { service, llm } = await setup({}, [
      call('open_browser', { url: 'https://example.com' }),
      call('execute_bash', '{"command": "ls" oops'),
      call('str_replace_editor', { command: 'explode', path: '/x' }),
      call('execute_bash', { is_input: 'maybe' }),
      { content: 'I will stop here.' },
    ]);
    const id = await converse(service);
    const events = await eventsOf(service, id);
    const results = observations(events);
    expect(results).toHaveLength(4);
    expect(results.every((o) => o.kind === 'observation' && o.is_error)).toBe(true);
    expect(results[0]!.kind === 'observation' && results[0]!.content).toMatch(
      /no tool named "open_browser".*execute_bash/,
    );
    expect(results[1]!.kind === 'observation' && results[1]!.content).toContain('not valid JSON');
    expect(results[2]!.kind === 'observation' && results[2]!.content).toContain('command');
    expect(results[3]!.kind === 'observation' && results[3]!.content).toContain('command');
    const malformed = events.find((e) => e.kind === 'action' && e.raw_arguments.includes('oops'));
    expect(malformed).toMatchObject({ arguments: null });
    // The reply without tools ends the run: the agent waits for the user.
    expect(events.at(-2)).toMatchObject({ kind: 'message', source: 'agent', text: 'I will stop here.' });
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
    expect(llm.requests).toHaveLength(5);
    expect(llm.requests[1]!.messages.at(-1)).toMatchObject({
      role: 'tool',
      content: expect.stringContaining('no tool named'),
    });
  });

  it('runs only the calls before finish in a response that has more', async () => {
    const { service } = await setup({}, [
      {
        tool_calls: [
          { name: 'think', arguments: { thought: 'plan' } },
          { name: 'finish', arguments: { message: 'done' } },
          { name: 'execute_bash', arguments: { command: 'rm -rf /' } },
        ],
      },
    ]);
    const id = await converse(service);
    const results = observations(await eventsOf(service, id));
    expect(results.map((o) => o.kind === 'observation' && [o.tool_name, o.is_error])).toEqual([
      ['think', false],
      ['finish', false],
      ['execute_bash', true],
    ]);
    expect(results[2]!.kind === 'observation' && results[2]!.content).toContain('finish was called');
  });
});

describe('agent engine: what a small model gets wrong', () => {
  it('runs no call of an answer cut off at the output token limit, and tells the model so', async () => {
    const cut = '{"command": "create", "path": "/workspace/big.py", "file_text": "print(1)\\nprint(';
    const { service, llm, runtime } = await setup({}, [
      {
        tool_calls: [
          { name: 'execute_bash', arguments: { command: 'touch first.txt' } },
          { name: 'str_replace_editor', arguments: cut },
        ],
        finish_reason: 'length',
      },
      call('finish', { message: 'done in smaller pieces' }),
    ]);
    const ran: string[] = [];
    runtime.onExec(
      (argv) => argv[0] === 'bash',
      (req) => {
        ran.push(req.command.join(' '));
        return { exit_code: 0 };
      },
    );
    const id = await converse(service);
    const events = await eventsOf(service, id);
    expect(ran).toEqual([]);
    const [first, second] = observations(events);
    for (const o of [first, second])
      expect(o).toMatchObject({ is_error: true, content: expect.stringContaining('output token limit') });
    expect(second!.kind === 'observation' && second!.content).toContain('smaller pieces');
    const sandboxId = (await conversationOf(service, id)).record.sandbox_id!;
    expect((await runtime.readFile(sandboxId, `${WORKDIR}/big.py`)).isErr()).toBe(true);
    // The model is told, next to each of its calls.
    const tools = llm.requests[1]!.messages.filter((m) => m.role === 'tool');
    expect(tools).toHaveLength(2);
    for (const m of tools) expect(m.content).toContain('output token limit');
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
  });

  it('keeps the text of a reply cut off at the output token limit, tells the model, and goes on', async () => {
    const { service, llm } = await setup({}, [
      { content: 'Here is the plan: 1. read main.py 2. fix the', finish_reason: 'length' },
      { content: 'the bug in parse(); done.' },
    ]);
    const id = await converse(service);
    const events = await eventsOf(service, id);
    expect(events.filter((e) => e.kind === 'message').map((e) => e.kind === 'message' && [e.source, e.text])).toEqual([
      ['user', 'please do the task'],
      ['agent', 'Here is the plan: 1. read main.py 2. fix the'],
      ['environment', expect.stringContaining('cut off at the output token limit')],
      ['agent', 'the bug in parse(); done.'],
    ]);
    expect(llm.requests[1]!.messages.at(-1)).toMatchObject({
      role: 'user',
      content: expect.stringContaining('smaller pieces'),
    });
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
  });

  it('notes a run of cut-off answers without calls once, not once per answer in the same user turn', async () => {
    const { service, llm } = await setup({}, [
      { content: null, finish_reason: 'length' },
      { content: null, finish_reason: 'length' },
      { content: 'short now' },
    ]);
    await converse(service);
    const last = llm.requests[2]!.messages.at(-1)!;
    expect(last.role).toBe('user');
    expect(JSON.stringify(last.content).split('cut off at the output token limit')).toHaveLength(2);
  });

  it('does not hold a cut-off answer for confirmation: accepting it would run a truncated call', async () => {
    const { service, llm } = await setup({ confirmation_mode: true }, [
      { tool_calls: [{ name: 'execute_bash', arguments: '{"command": "rm -rf bui' }], finish_reason: 'length' },
      { content: 'I will try again.' },
    ]);
    const id = await converse(service);
    const events = await eventsOf(service, id);
    expect(events.some((e) => e.kind === 'action' && e.requires_confirmation)).toBe(false);
    expect(observations(events)).toEqual([
      expect.objectContaining({ is_error: true, content: expect.stringContaining('output token limit') }),
    ]);
    expect(llm.calls).toBe(2);
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
  });

  it('shows the model the raw text of a call whose arguments are not JSON, and sends valid JSON in the history', async () => {
    const raw = '{"command": "ls" oops';
    const { service, llm } = await setup({}, [call('execute_bash', raw), { content: 'I will stop here.' }]);
    const id = await converse(service);
    const [observation] = observations(await eventsOf(service, id));
    expect(observation).toMatchObject({ is_error: true, content: expect.stringContaining(raw) });
    expect(observation!.kind === 'observation' && observation!.content).toContain('not valid JSON');
    const history = llm.requests[1]!.messages;
    const assistant = history.find((m) => m.role === 'assistant');
    expect(assistant).toMatchObject({ tool_calls: [{ name: 'execute_bash' }] });
    const sent = assistant!.role === 'assistant' ? assistant!.tool_calls[0]!.arguments : '';
    expect(() => JSON.parse(sent) as unknown).not.toThrow();
    expect(JSON.parse(sent)).toEqual({});
    expect(history.at(-1)).toMatchObject({ role: 'tool', content: expect.stringContaining(raw) });
  });

  it('uses the conversation’s working directory, never another, in the paths of the prompt and tool descriptions', async () => {
    const ports = createMemoryPorts({ specs: [{ id: 'app', image: 'acs/app:latest', working_dir: '/srv/app' }] });
    const { service, llm } = await setup({}, [{ content: 'hello' }], ports);
    await converse(service, 'hi');
    const { messages, tools } = llm.requests[0]!;
    const text = `${messages[0]!.content as string}\n${JSON.stringify(tools)}`;
    const paths = text.match(/(?<![\w.])\/[\w.-]+(?:\/[\w.-]+)*/g) ?? [];
    expect(paths.length).toBeGreaterThan(0);
    expect(paths.filter((path) => path !== '/srv/app' && !path.startsWith('/srv/app/'))).toEqual([]);
    const editor = tools.find((t) => t.name === 'str_replace_editor')!;
    expect(JSON.stringify(editor.parameters)).toContain('/srv/app/');
  });
});

describe('agent engine: limits', () => {
  it('stops at max_iterations with an error event and waits for the user, not in error; a new message runs it again', async () => {
    const { service, llm } = await setup({ max_iterations: 3 });
    let n = 0;
    llm.respondWith(() => call('think', { thought: `step ${n++}` }));
    const id = await converse(service);
    let events = await eventsOf(service, id);
    expect(events.filter((e) => e.kind === 'llm_call')).toHaveLength(3);
    expect(errors(events)).toEqual([
      expect.objectContaining({
        code: 'max_iterations_reached',
        fatal: true,
        message: expect.stringContaining('Send a message'),
      }),
    ]);
    expect(events.at(-1)).toMatchObject({ kind: 'status', execution_status: 'idle' });
    expect((await conversationOf(service, id)).record.execution_status).toBe('idle');

    llm.respondWith(null).push(call('think', { thought: 'again' }), { content: 'continuing, then done' });
    await expectOk(
      service.conversations.sendMessage('alice', id, {
        role: 'user',
        content: [{ type: 'text', text: 'go on' }],
        run: true,
      }),
    );
    await service.idle();
    events = await eventsOf(service, id);
    expect(llm.calls).toBe(5);
    expect(events.at(-2)).toMatchObject({ kind: 'message', source: 'agent', text: 'continuing, then done' });
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
  });

  it('defaults to 100 steps when max_iterations is unset', async () => {
    const { service, llm } = await setup();
    llm.respondWith((_, i) => call('think', { thought: `step ${i}` }));
    const id = await converse(service);
    const calls = await expectOk(
      service.conversations.searchEvents('alice', id, { after: 0, kinds: ['llm_call'], limit: 1000 }),
    );
    // 100 agent steps; the condenser's summaries on the way are not steps.
    expect(calls.items.filter((e) => e.kind === 'llm_call' && e.purpose === 'agent')).toHaveLength(100);
    expect(llm.calls).toBe(calls.items.length);
    expect((await conversationOf(service, id)).record.execution_status).toBe('idle');
  });

  it('stops before a call that would exceed max_budget_per_task, and shows the cost on the record', async () => {
    const ports = createMemoryPorts({ llm: { costPerCallUsd: 0.4 } });
    const { service, llm } = await setup({ max_budget_per_task: 1 }, [], ports);
    llm.respondWith((_, i) => call('think', { thought: `step ${i}` }));
    const id = await converse(service);
    const events = await eventsOf(service, id);
    expect(llm.calls).toBe(2);
    expect(errors(events)).toEqual([
      expect.objectContaining({ code: 'budget_exceeded', fatal: true, message: expect.stringContaining('0.8000 USD') }),
    ]);
    const { record } = await conversationOf(service, id);
    expect(record.execution_status).toBe('error');
    expect(record.metrics).toMatchObject({ accumulated_cost: 0.8, max_budget_per_task: 1 });
    expect(record.metrics!.prompt_tokens).toBeGreaterThan(0);
  });

  it('warns once that a budget cannot be enforced when the model price is unknown, and counts tokens', async () => {
    const { service } = await setup({ max_budget_per_task: 1 }, [
      call('think', { thought: 'a' }),
      call('think', { thought: 'b' }),
      { content: 'done' },
    ]);
    const id = await converse(service);
    const events = await eventsOf(service, id);
    expect(errors(events)).toEqual([expect.objectContaining({ code: 'budget_unenforceable', fatal: false })]);
    const { record } = await conversationOf(service, id);
    expect(record.execution_status).toBe('finished');
    expect(record.metrics).toMatchObject({ accumulated_cost: null });
    expect(record.metrics!.completion_tokens).toBeGreaterThan(0);
  });

  it('ends in stuck with an explanation when the same call keeps giving the same result', async () => {
    const { service, llm, runtime } = await setup();
    runtime.onExec(
      (argv) => argv[2] === 'ls',
      () => ({ stdout: 'a.txt\n', exit_code: 0 }),
    );
    llm.respondWith(() => call('execute_bash', { command: 'ls' }));
    const id = await converse(service);
    const events = await eventsOf(service, id);
    expect(llm.calls).toBe(4);
    expect(errors(events)).toEqual([
      expect.objectContaining({ code: 'stuck', message: expect.stringContaining('same execute_bash call 4 times') }),
    ]);
    expect((await conversationOf(service, id)).record.execution_status).toBe('stuck');
  });

  it('nudges a model that repeats a failing call, then calls it stuck if it goes on', async () => {
    const { service, llm } = await setup();
    llm.respondWith(() => call('str_replace_editor', { command: 'view', path: '/nope/missing.txt' }));
    const id = await converse(service);
    const events = await eventsOf(service, id);
    const nudge = events.find((e) => e.kind === 'message' && e.source === 'environment');
    expect(nudge).toMatchObject({ text: expect.stringContaining('same str_replace_editor call 3 times') });
    expect(llm.calls).toBe(4);
    expect(llm.requests[3]!.messages.at(-1)).toMatchObject({
      role: 'user',
      content: expect.stringContaining('Do not repeat it'),
    });
    expect((await conversationOf(service, id)).record.execution_status).toBe('stuck');
  });

  it('reports LLM failures with their code and recovers on the next message', async () => {
    const { service, llm } = await setup({}, [{ error: 'auth_failed', message: 'the key was refused', status: 401 }]);
    const id = await converse(service);
    let events = await eventsOf(service, id);
    expect(errors(events)).toEqual([
      expect.objectContaining({ code: 'llm_auth_failed', message: expect.stringContaining('HTTP 401') }),
    ]);
    expect((await conversationOf(service, id)).record.execution_status).toBe('error');
    llm.push({ content: 'now it works' });
    await expectOk(
      service.conversations.sendMessage('alice', id, {
        role: 'user',
        content: [{ type: 'text', text: 'retry' }],
        run: true,
      }),
    );
    await service.idle();
    events = await eventsOf(service, id);
    expect(events.at(-2)).toMatchObject({ kind: 'message', source: 'agent', text: 'now it works' });
  });
});

describe('agent engine: conversation flow', () => {
  it('puts the instructions in the system prompt and images in the user message', async () => {
    const { service, llm } = await setup();
    await converse(service, 'what is in this picture?', {
      conversation_instructions: 'Answer in French.',
      image_urls: ['https://example.com/cat.png'],
    });
    const [system, user] = llm.requests[0]!.messages;
    expect(system).toMatchObject({ role: 'system', content: expect.stringContaining('Answer in French.') });
    expect(system!.content).toContain(`The working directory is ${WORKDIR}`);
    expect(user).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'what is in this picture?' },
        { type: 'image_url', url: 'https://example.com/cat.png' },
      ],
    });
  });

  it('uses the conversation’s model with the user’s key and base URL', async () => {
    const { service, llm } = await setup({ llm_base_url: 'http://127.0.0.1:9/v1' });
    const start = await expectOk(
      service.conversations.startApp('alice', {
        initial_message: { role: 'user', content: [{ type: 'text', text: 'hi' }], run: true },
        llm_model: 'ollama/qwen3',
      }),
    );
    await service.idle();
    expect(start.app_conversation_id).toBeTruthy();
    expect(llm.requests[0]!.credentials).toEqual({
      model: 'ollama/qwen3',
      api_key: 'sk-test-key',
      base_url: 'http://127.0.0.1:9/v1',
    });
  });

  it('nudges a run of empty answers once, never with the same note twice in one message', async () => {
    const { service, llm } = await setup({}, [
      { content: null },
      { content: '   ' },
      { content: null },
      call('finish', { message: 'done' }),
    ]);
    const id = await converse(service);
    expect(llm.calls).toBe(4);
    const nudgesIn = (request: (typeof llm.requests)[number]) =>
      request.messages
        .filter((m) => m.role === 'user')
        .map((m) => JSON.stringify(m.content).split('Your last answer was empty').length - 1);
    expect(nudgesIn(llm.requests[0]!)).toEqual([0]);
    for (const request of llm.requests.slice(1)) expect(nudgesIn(request).reduce((a, b) => a + b, 0)).toBe(1);
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
  });

  it('stays idle without a first message, and runs when one is sent', async () => {
    const { service, llm } = await setup({}, [{ content: 'hello!' }]);
    const created = await expectOk(service.conversations.create('alice', {}));
    await service.idle();
    expect(llm.calls).toBe(0);
    expect((await conversationOf(service, created.conversation_id)).record.execution_status).toBe('idle');
    await expectOk(
      service.conversations.sendMessage('alice', created.conversation_id, {
        role: 'user',
        content: [{ type: 'text', text: 'hi' }],
        run: true,
      }),
    );
    await service.idle();
    expect(llm.calls).toBe(1);
    expect((await conversationOf(service, created.conversation_id)).record.execution_status).toBe('finished');
  });

  it('takes a message sent while the agent works into its next step', async () => {
    const { service, llm } = await setup({}, [
      { ...call('think', { thought: 'working' }), delayMs: 150 },
      { content: 'saw both' },
    ]);
    const created = await expectOk(service.conversations.create('alice', { initial_user_msg: 'first' }));
    while (llm.calls === 0) await new Promise((r) => setTimeout(r, 5));
    await expectOk(
      service.conversations.sendMessage('alice', created.conversation_id, {
        role: 'user',
        content: [{ type: 'text', text: 'second' }],
        run: true,
      }),
    );
    await service.idle();
    const prompt = llm.requests[1]!.messages;
    expect(JSON.stringify(llm.requests[0]!.messages)).not.toContain('second');
    expect(JSON.stringify(prompt.filter((m) => m.role === 'user'))).toContain('second');
    // The tool result stays right after its call even though the message was logged before it.
    const assistantAt = prompt.findIndex((m) => m.role === 'assistant');
    expect(prompt[assistantAt + 1]).toMatchObject({ role: 'tool' });
    expect(llm.calls).toBe(2);
  });

  it('answers a message that arrives after the model’s last call with another run', async () => {
    const { service, llm } = await setup({}, [{ content: 'first answer', delayMs: 100 }, { content: 'second answer' }]);
    const created = await expectOk(service.conversations.create('alice', { initial_user_msg: 'one' }));
    while (llm.calls === 0) await new Promise((r) => setTimeout(r, 5));
    await expectOk(
      service.conversations.sendMessage('alice', created.conversation_id, {
        role: 'user',
        content: [{ type: 'text', text: 'two' }],
        run: true,
      }),
    );
    await service.idle();
    expect(llm.calls).toBe(2);
    const events = await eventsOf(service, created.conversation_id);
    expect(events.filter((e) => e.kind === 'message').map((e) => e.kind === 'message' && e.text)).toEqual([
      'one',
      'two',
      'first answer',
      'second answer',
    ]);
  });

  it('rejects messages that are not from the user or are empty, and unknown conversations', async () => {
    const { service } = await setup();
    const id = await converse(service);
    // The request schema admits only "user"; a caller that skips it is refused by the service all the same.
    const asAgent = await service.conversations.sendMessage('alice', id, {
      role: 'assistant' as unknown as 'user',
      content: [{ type: 'text', text: 'x' }],
      run: true,
    });
    expect(asAgent.isErr() && asAgent.error.type).toBe('ValidationFailed');
    const empty = await service.conversations.sendMessage('alice', id, {
      role: 'user',
      content: [{ type: 'text', text: '  ' }],
      run: true,
    });
    expect(empty.isErr() && empty.error.type).toBe('ValidationFailed');
    const missing = await service.conversations.sendMessage('bob', id, {
      role: 'user',
      content: [{ type: 'text', text: 'x' }],
      run: true,
    });
    expect(missing.isErr() && missing.error.type).toBe('ConversationNotFound');
  });

  it('pauses on stop, interrupting a slow model call, and resumes on start', async () => {
    // The model takes 20 minutes: a stop that waited for it would not settle within 60 s.
    const { service, llm } = await setup({}, [
      { ...call('think', { thought: 'slow' }), delayMs: 1_200_000 },
      { content: 'finished after resume' },
    ]);
    const created = await expectOk(service.conversations.create('alice', { initial_user_msg: 'go' }));
    while (llm.calls === 0) await new Promise((r) => setTimeout(r, 5));
    expect(
      (
        await settlesWithin(
          service.conversations.stop('alice', created.conversation_id),
          'the stop (the model call should have been aborted)',
        )
      ).isOk(),
    ).toBe(true);
    await service.idle();
    let conversation = await conversationOf(service, created.conversation_id);
    expect(conversation.record.execution_status).toBe('paused');
    expect(conversation.status).toBe('STOPPED');

    await expectOk(service.conversations.start('alice', created.conversation_id));
    await service.idle();
    conversation = await conversationOf(service, created.conversation_id);
    expect(conversation.record.execution_status).toBe('finished');
    const events = await eventsOf(service, created.conversation_id);
    expect(kinds(events)).toEqual([
      'message:user',
      'status:running',
      'status:paused',
      'status:running',
      'llm_call',
      'message:agent',
      'status:finished',
    ]);
  });

  it('closes a tool call cut short by stop with an error observation', async () => {
    const { service, llm, runtime } = await setup({}, [
      call('execute_bash', { command: 'sleep 100', timeout: 60 }),
      { content: 'ok' },
    ]);
    runtime.onExec(
      (argv) => argv[2] === 'sleep 100',
      (_req, ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve({ exit_code: 130 }))),
    );
    const created = await expectOk(service.conversations.create('alice', { initial_user_msg: 'go' }));
    const id = created.conversation_id;
    for (;;) {
      const events = await eventsOf(service, id);
      if (events.some((e) => e.kind === 'action')) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    await expectOk(service.conversations.stop('alice', id));
    await service.idle();
    const events = await eventsOf(service, id);
    const observation = observations(events)[0];
    expect(observation).toMatchObject({
      is_error: true,
      content: expect.stringContaining('paused while this call was running'),
    });
    expect(llm.calls).toBe(1);
  });

  it('runs many conversations at once: a slow model call holds up no other conversation', async () => {
    const { service, llm } = await setup();
    llm.respondWith((request) => {
      const text = request.messages.find((m) => m.role === 'user')!.content as string;
      return text === 'slow' ? { content: 'slow done', delayMs: 1_500 } : { content: `${text} done` };
    });
    const slow = await expectOk(service.conversations.create('alice', { initial_user_msg: 'slow' }));
    const fast = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        expectOk(service.conversations.create('alice', { initial_user_msg: `fast ${i}` })),
      ),
    );
    const started = Date.now();
    for (;;) {
      const records = await Promise.all(fast.map((f) => conversationOf(service, f.conversation_id)));
      if (records.every((r) => r.record.execution_status === 'finished')) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const fastTime = Date.now() - started;
    expect((await conversationOf(service, slow.conversation_id)).record.execution_status).toBe('running');
    expect(fastTime).toBeLessThan(1_500);
    await service.idle();
    expect((await conversationOf(service, slow.conversation_id)).record.execution_status).toBe('finished');
  });

  it('forgets the agent and its log when the conversation is deleted', async () => {
    const { service, llm, ports } = await setup({}, [{ content: 'slow', delayMs: 10_000 }]);
    const created = await expectOk(service.conversations.create('alice', { initial_user_msg: 'go' }));
    while (llm.calls === 0) await new Promise((r) => setTimeout(r, 5));
    await expectOk(service.conversations.delete('alice', created.conversation_id));
    await service.idle();
    expect(service.agent.activeLoops()).toBe(0);
    expect(await expectOk(ports.events.readAfter('alice', created.conversation_id, 0, 10))).toEqual([]);
  });
});

describe('agent engine: durability', () => {
  it('resumes a conversation that was running at a crash, from its log, closing the interrupted call', async () => {
    const ports = createMemoryPorts();
    // First process: the agent starts a command that never returns, then the process "dies"
    // (its service is dropped without stop or close, so nothing gets to clean up).
    const first = await setup({}, [call('execute_bash', { command: 'make build', timeout: 600 })], ports);
    ports.runtime.onExec(
      (argv) => argv[2] === 'make build',
      () => new Promise(() => {}),
    );
    const created = await expectOk(first.service.conversations.create('alice', { initial_user_msg: 'build it' }));
    const id = created.conversation_id;
    for (;;) {
      const events = await expectOk(ports.events.readAfter('alice', id, 0, 100));
      if (events.some((e) => e.kind === 'action')) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    expect((await conversationOf(first.service, id)).record.execution_status).toBe('running');

    // Second process over the same stores and sandboxes.
    const secondLlm = ports.llm;
    secondLlm.push({ content: 'recovered and done' });
    const second = createAgentConversationService(
      { agent: createAgent(), ...ports, ids: sequentialIdGenerator() },
      { pollIntervalMs: 1 },
    );
    const report = await expectOk(second.recover());
    expect(report).toEqual({ resumed: 1, interrupted_calls: 1 });
    await second.idle();
    const events = await eventsOf(second, id);
    const interrupted = observations(events)[0];
    expect(interrupted).toMatchObject({
      tool_name: 'execute_bash',
      is_error: true,
      content: expect.stringContaining('service restarted'),
    });
    expect(errors(events)).toEqual([expect.objectContaining({ code: 'restart_interrupted', fatal: false })]);
    expect(events.at(-2)).toMatchObject({ kind: 'message', source: 'agent', text: 'recovered and done' });
    expect((await conversationOf(second, id)).record.execution_status).toBe('finished');
    // The model saw the interrupted call answered, and the same sandbox was used.
    const prompt = secondLlm.requests.at(-1)!.messages;
    expect(prompt.at(-1)).toMatchObject({ role: 'tool', content: expect.stringContaining('service restarted') });
  });
});

describe('agent engine: shutdown', () => {
  it('stops agents promptly on close and leaves them running, so the next process resumes them', async () => {
    const ports = createMemoryPorts();
    // The model takes 20 minutes: a close that waited for it would not settle within 60 s.
    const first = await setup({}, [{ ...call('think', { thought: 'slow' }), delayMs: 1_200_000 }], ports);
    const created = await expectOk(first.service.conversations.create('alice', { initial_user_msg: 'go' }));
    while (ports.llm.calls === 0) await new Promise((r) => setTimeout(r, 5));
    await settlesWithin(first.service.close(), 'the service to close (the model call should have been aborted)');
    expect((await conversationOf(first.service, created.conversation_id)).record.execution_status).toBe('running');

    ports.llm.push({ content: 'picked up again' });
    const second = createAgentConversationService(
      { agent: createAgent(), ...ports, ids: sequentialIdGenerator() },
      { pollIntervalMs: 1 },
    );
    expect(await expectOk(second.recover())).toMatchObject({ resumed: 1 });
    await second.idle();
    const events = await eventsOf(second, created.conversation_id);
    expect(events.at(-2)).toMatchObject({ kind: 'message', source: 'agent', text: 'picked up again' });
    await second.close();
  });
});

describe('event log', () => {
  it('pages events after an id and filters by kind', async () => {
    const { service } = await setup({}, [
      call('think', { thought: 'a' }),
      call('think', { thought: 'b' }),
      { content: 'done' },
    ]);
    const id = await converse(service);
    const all = await eventsOf(service, id);
    const first = await expectOk(service.conversations.searchEvents('alice', id, { after: 0, kinds: null, limit: 3 }));
    expect(first.items.map((e) => e.id)).toEqual([1, 2, 3]);
    expect(first.next_after).toBe(3);
    const rest = await expectOk(service.conversations.searchEvents('alice', id, { after: 3, kinds: null, limit: 100 }));
    expect([...first.items, ...rest.items]).toEqual(all);
    expect(rest.next_after).toBeNull();
    const actions = await expectOk(
      service.conversations.searchEvents('alice', id, { after: 0, kinds: ['action', 'message'], limit: 100 }),
    );
    expect(actions.items.map((e) => e.kind)).toEqual(['message', 'action', 'action', 'message']);
  });

  it('ends live subscriptions when the conversation is deleted', async () => {
    const { service } = await setup();
    const id = await converse(service);
    const ends: string[] = [];
    const seen: number[] = [];
    const sub = await expectOk(
      service.conversations.subscribeEvents(
        'alice',
        id,
        0,
        (e) => seen.push(e.id),
        (why) => ends.push(why),
      ),
    );
    expect(seen.length).toBeGreaterThan(0);
    await expectOk(service.conversations.delete('alice', id));
    expect(ends).toEqual(['the conversation was deleted']);
    sub.close(); // closing again is harmless
    expect(ends).toHaveLength(1);
  });

  it('streams: replays after an id, follows live, never twice, and a reconnect resumes exactly', async () => {
    const { service, llm } = await setup({}, [
      { ...call('think', { thought: 'one' }), delayMs: 50 },
      { ...call('think', { thought: 'two' }), delayMs: 50 },
      { content: 'done', delayMs: 50 },
    ]);
    const created = await expectOk(service.conversations.create('alice', { initial_user_msg: 'go' }));
    const id = created.conversation_id;
    while (llm.calls === 0) await new Promise((r) => setTimeout(r, 2));
    const seen: number[] = [];
    const sub = await expectOk(service.conversations.subscribeEvents('alice', id, 0, (e) => seen.push(e.id)));
    // Drop the connection part-way, then reconnect from the last id seen.
    while (seen.length < 4) await new Promise((r) => setTimeout(r, 2));
    sub.close();
    const resumedFrom = sub.lastId;
    const again: number[] = [];
    const sub2 = await expectOk(
      service.conversations.subscribeEvents('alice', id, resumedFrom, (e) => again.push(e.id)),
    );
    await service.idle();
    const total = (await eventsOf(service, id)).length;
    sub2.close();
    expect([...seen.filter((n) => n <= resumedFrom), ...again]).toEqual(Array.from({ length: total }, (_, i) => i + 1));
  });
});
