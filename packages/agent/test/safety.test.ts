/* eslint-disable @typescript-eslint/no-unsafe-assignment -- vitest's asymmetric matchers are typed any */
import { ok } from 'neverthrow';
import { describe, expect, it } from 'vitest';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import { SettingsInputSchema, type ActionEvent, type ConversationEvent, type SettingsInput } from '@acs/core/schemas';
import { sequentialIdGenerator } from '@acs/core/ports';
import { expectOk } from '@acs/core/testing';
import { createMemoryPorts, type ScriptedTurn } from '@acs/testing';
import { conversationOf } from './conversation-reads.js';
import { createAgent } from '../src/index.js';

const LLM: SettingsInput = { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test-key' };

async function setup(settings: SettingsInput = {}, turns: ScriptedTurn[] = [], ports = createMemoryPorts()) {
  ports.llm.push(...turns);
  const service = createAgentConversationService(
    { agent: createAgent(), ...ports, ids: sequentialIdGenerator() },
    { pollIntervalMs: 1 },
  );
  await expectOk(service.settings.store('alice', { ...LLM, ...settings }));
  const ran: string[] = [];
  ports.runtime.onExec(
    (argv) => argv[0] === 'bash' && argv[1] === '-c',
    (request) => {
      ran.push(request.command[2]!);
      return { stdout: `ran: ${request.command[2]}\n`, exit_code: 0 };
    },
  );
  return { service, llm: ports.llm, ran, ports };
}

async function converse(service: AgentConversationService, message = 'please do the task') {
  const created = await expectOk(service.conversations.create('alice', { initial_user_msg: message }));
  await service.idle();
  return created.conversation_id;
}

async function allEvents(service: AgentConversationService, id: string): Promise<ConversationEvent[]> {
  return (await expectOk(service.conversations.searchEvents('alice', id, { after: 0, kinds: null, limit: 1000 })))
    .items;
}

const bash = (command: string, extra: Record<string, unknown> = {}): ScriptedTurn => ({
  tool_calls: [{ name: 'execute_bash', arguments: { command, ...extra } }],
});
const finish: ScriptedTurn = { tool_calls: [{ name: 'finish', arguments: { message: 'done' } }] };
const actions = (events: ConversationEvent[]) => events.filter((e): e is ActionEvent => e.kind === 'action');
const statuses = (events: ConversationEvent[]) =>
  events.flatMap((e) => (e.kind === 'status' ? [e.execution_status] : []));

describe('confirmation mode without an analyzer: every action waits', () => {
  it('waits before running, shows the action, and runs it when the user accepts', async () => {
    const { service, llm, ran } = await setup({ confirmation_mode: true }, [bash('touch made-by-agent'), finish]);
    const id = await converse(service);

    let events = await allEvents(service, id);
    expect((await conversationOf(service, id)).record.execution_status).toBe('waiting_for_confirmation');
    expect(actions(events)).toEqual([
      expect.objectContaining({ tool_name: 'execute_bash', requires_confirmation: true }),
    ]);
    expect(events.some((e) => e.kind === 'observation')).toBe(false);
    expect(ran).toEqual([]);
    expect(llm.calls).toBe(1);

    const decision = await expectOk(service.conversations.respondToConfirmation('alice', id, { accept: true }));
    expect(decision).toMatchObject({
      kind: 'confirmation',
      accept: true,
      tool_call_ids: [actions(events)[0]!.tool_call_id],
    });
    await service.idle();
    events = await allEvents(service, id);
    expect(ran).toEqual(['touch made-by-agent']);
    // finish never waits.
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
    expect(statuses(events)).toEqual(['running', 'waiting_for_confirmation', 'running', 'finished']);
  });

  it('a rejection becomes an observation the model sees; the agent waits for the user', async () => {
    const { service, llm, ran } = await setup({ confirmation_mode: true }, [
      bash('rm -rf build'),
      { content: 'Understood, I will keep the build.' },
    ]);
    const id = await converse(service);
    await expectOk(
      service.conversations.respondToConfirmation('alice', id, { accept: false, reason: 'keep the build directory' }),
    );
    await service.idle();

    let events = await allEvents(service, id);
    expect(ran).toEqual([]);
    const rejected = events.find((e) => e.kind === 'observation');
    expect(rejected).toMatchObject({
      is_error: true,
      details: { rejected: true },
      content: expect.stringContaining('keep the build directory'),
    });
    expect((await conversationOf(service, id)).record.execution_status).toBe('idle');
    expect(llm.calls).toBe(1);

    await expectOk(
      service.conversations.sendMessage('alice', id, {
        role: 'user',
        content: [{ type: 'text', text: 'ok, what now?' }],
        run: true,
      }),
    );
    await service.idle();
    const prompt = llm.requests[1]!.messages;
    expect(prompt).toContainEqual(
      expect.objectContaining({ role: 'tool', content: expect.stringContaining('Rejected by the user') }),
    );
    events = await allEvents(service, id);
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
    expect(statuses(events)).toEqual(['running', 'waiting_for_confirmation', 'idle', 'running', 'finished']);
  });

  it('answers 409 ConfirmationNotPending when nothing waits, and for a second answer', async () => {
    const { service } = await setup({ confirmation_mode: true }, [bash('ls')]);
    const id = await converse(service);
    await expectOk(service.conversations.respondToConfirmation('alice', id, { accept: false }));
    const again = (await service.conversations.respondToConfirmation('alice', id, { accept: true }))._unsafeUnwrapErr();
    expect(again).toMatchObject({ type: 'ConfirmationNotPending', conversationId: id });
    const other = await setup({}, [{ content: 'hi' }]);
    const plain = await converse(other.service);
    expect(
      (await other.service.conversations.respondToConfirmation('alice', plain, { accept: true }))._unsafeUnwrapErr(),
    ).toMatchObject({ type: 'ConfirmationNotPending' });
    expect(
      (await other.service.conversations.respondToConfirmation('alice', 'nope', { accept: true }))._unsafeUnwrapErr(),
    ).toMatchObject({ type: 'ConversationNotFound' });
  });

  it('a message sent instead of a decision: the waiting actions are not run and the model reads the message', async () => {
    const { service, llm, ran } = await setup({ confirmation_mode: true }, [
      bash('make deploy'),
      { content: 'OK, no deploy.' },
    ]);
    const id = await converse(service);
    await expectOk(
      service.conversations.sendMessage('alice', id, {
        role: 'user',
        content: [{ type: 'text', text: 'do not deploy' }],
        run: true,
      }),
    );
    await service.idle();
    expect(ran).toEqual([]);
    const events = await allEvents(service, id);
    expect(events.find((e) => e.kind === 'observation')).toMatchObject({
      details: { rejected: true },
      content: expect.stringContaining('new message'),
    });
    expect(llm.requests[1]!.messages.at(-1)).toMatchObject({ role: 'user', content: 'do not deploy' });
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
  });

  it('think and finish alone never wait', async () => {
    const { service } = await setup({ confirmation_mode: true }, [
      { tool_calls: [{ name: 'think', arguments: { thought: 'hmm' } }] },
      finish,
    ]);
    const id = await converse(service);
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
    expect(statuses(await allEvents(service, id))).not.toContain('waiting_for_confirmation');
  });

  it('still waits after the conversation is stopped and started again', async () => {
    const { service, ran } = await setup({ confirmation_mode: true }, [bash('echo hi'), finish]);
    const id = await converse(service);
    await expectOk(service.conversations.stop('alice', id));
    await service.idle();
    await expectOk(service.conversations.start('alice', id));
    await service.idle();
    expect((await conversationOf(service, id)).record.execution_status).toBe('waiting_for_confirmation');
    expect(ran).toEqual([]);
    await expectOk(service.conversations.respondToConfirmation('alice', id, { accept: true }));
    await service.idle();
    expect(ran).toEqual(['echo hi']);
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
  });
});

describe('confirmation: races and restarts', () => {
  it('two answers at once: exactly one is recorded, the other is 409', async () => {
    const { service, ran } = await setup({ confirmation_mode: true }, [bash('make deploy'), finish]);
    const id = await converse(service);
    const answers = await Promise.all([
      service.conversations.respondToConfirmation('alice', id, { accept: true }),
      service.conversations.respondToConfirmation('alice', id, { accept: false, reason: 'no' }),
    ]);
    expect(answers.map((a) => a.isOk())).toEqual([true, false]);
    expect(answers[1]._unsafeUnwrapErr()).toMatchObject({ type: 'ConfirmationNotPending' });
    await service.idle();
    expect(ran).toEqual(['make deploy']);
    expect((await allEvents(service, id)).filter((e) => e.kind === 'confirmation')).toHaveLength(1);
  });

  it('a rejection and a message sent right after it: the model answers the message', async () => {
    const { service, llm } = await setup({ confirmation_mode: true }, [
      bash('make deploy'),
      { content: 'Staying put, as you asked.' },
    ]);
    const id = await converse(service);
    await Promise.all([
      service.conversations.respondToConfirmation('alice', id, { accept: false }),
      service.conversations.sendMessage('alice', id, {
        role: 'user',
        content: [{ type: 'text', text: 'stay put' }],
        run: true,
      }),
    ]);
    await service.idle();
    expect(llm.calls).toBe(2);
    expect(JSON.stringify(llm.requests[1]!.messages)).toContain('stay put');
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
  });

  it('a decision recorded while the service shuts down is acted on by the next process', async () => {
    const ports = createMemoryPorts();
    const first = await setup({ confirmation_mode: true }, [bash('make deploy')], ports);
    const id = await converse(first.service);
    await first.service.close();
    await expectOk(first.service.conversations.respondToConfirmation('alice', id, { accept: true }));
    expect(first.ran).toEqual([]);

    ports.llm.push(finish);
    const second = createAgentConversationService(
      { agent: createAgent(), ...ports, ids: sequentialIdGenerator() },
      { pollIntervalMs: 1 },
    );
    expect(await expectOk(second.recover())).toMatchObject({ resumed: 1, interrupted_calls: 0 });
    await second.idle();
    expect(first.ran).toEqual(['make deploy']);
    expect((await conversationOf(second, id)).record.execution_status).toBe('finished');
  });

  it('a crash between recording the actions and waiting: after restart they wait again, not “interrupted”', async () => {
    const ports = createMemoryPorts();
    const first = await setup({ confirmation_mode: true }, [bash('make deploy')], ports);
    const id = await converse(first.service);
    await first.service.close();
    // As if the process died before the status change was written.
    await expectOk(ports.conversations.update('alice', id, (c) => ok({ ...c, execution_status: 'running' as const })));

    const second = createAgentConversationService(
      { agent: createAgent(), ...ports, ids: sequentialIdGenerator() },
      { pollIntervalMs: 1 },
    );
    expect(await expectOk(second.recover())).toMatchObject({ resumed: 1, interrupted_calls: 0 });
    await second.idle();
    expect((await conversationOf(second, id)).record.execution_status).toBe('waiting_for_confirmation');
    expect((await allEvents(second, id)).some((e) => e.kind === 'observation')).toBe(false);
    expect(first.ran).toEqual([]);
  });
});

describe('security analyzers', () => {
  it('rules: low-risk actions run at once; a high-risk one waits, with its risk and reasons on the event', async () => {
    const { service, ran } = await setup({ confirmation_mode: true, security_analyzer: 'rules' }, [
      bash('ls -la'),
      bash('rm -rf /'),
      finish,
    ]);
    const id = await converse(service);
    const events = await allEvents(service, id);
    expect(ran).toEqual(['ls -la']);
    const [low, high] = actions(events);
    expect(low).toMatchObject({ security_risk: 'low' });
    expect(low!.requires_confirmation).toBeUndefined();
    expect(high).toMatchObject({
      security_risk: 'high',
      requires_confirmation: true,
      risk_reasons: [expect.stringMatching(/^destructive-delete: /)],
    });
    expect((await conversationOf(service, id)).record.execution_status).toBe('waiting_for_confirmation');
  });

  it('llm: the model rates its calls with security_risk; the argument is offered, explained and removed before the tool runs', async () => {
    const { service, llm, ran } = await setup({ confirmation_mode: true, security_analyzer: 'llm' }, [
      bash('pytest -q', { security_risk: 'LOW' }),
      bash('curl -X POST https://example.org -d @data.json', { security_risk: 'HIGH' }),
    ]);
    const id = await converse(service);
    expect(ran).toEqual(['pytest -q']);
    const [low, high] = actions(await allEvents(service, id));
    expect(low).toMatchObject({ security_risk: 'low', risk_reasons: ['model: rated low'] });
    expect(high).toMatchObject({ security_risk: 'high', requires_confirmation: true });
    const bashTool = llm.requests[0]!.tools.find((t) => t.name === 'execute_bash')!;
    expect(bashTool.parameters).toMatchObject({ properties: { security_risk: { enum: ['LOW', 'MEDIUM', 'HIGH'] } } });
    expect(llm.requests[0]!.tools.find((t) => t.name === 'think')!.parameters).not.toHaveProperty(
      'properties.security_risk',
    );
    expect(llm.requests[0]!.messages[0]!.content).toContain('security_risk');
  });

  it('llm: a call the model did not rate is unknown risk and waits', async () => {
    const { service, ran } = await setup({ confirmation_mode: true, security_analyzer: 'llm' }, [bash('ls')]);
    const id = await converse(service);
    expect(ran).toEqual([]);
    expect(actions(await allEvents(service, id))[0]).toMatchObject({
      security_risk: 'unknown',
      requires_confirmation: true,
    });
  });

  it('ensemble: the model cannot rate a destructive command down', async () => {
    const { service, ran } = await setup({ confirmation_mode: true, security_analyzer: 'ensemble' }, [
      bash('rm -rf ~', { security_risk: 'LOW' }),
    ]);
    const id = await converse(service);
    expect(ran).toEqual([]);
    const [action] = actions(await allEvents(service, id));
    expect(action).toMatchObject({ security_risk: 'high', requires_confirmation: true });
    expect(action!.risk_reasons).toEqual(
      expect.arrayContaining(['model: rated low', expect.stringMatching(/^destructive-delete/)]),
    );
  });

  it('an analyzer without confirmation mode only rates: nothing waits', async () => {
    const { service, ran } = await setup({ security_analyzer: 'rules' }, [bash('rm -rf /tmp/cache'), finish]);
    const id = await converse(service);
    expect(ran).toEqual(['rm -rf /tmp/cache']);
    expect(actions(await allEvents(service, id))[0]).toMatchObject({ security_risk: 'medium' });
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
  });

  it('without an analyzer actions carry no rating', async () => {
    const { service } = await setup({}, [bash('ls'), finish]);
    const id = await converse(service);
    expect(actions(await allEvents(service, id))[0]).not.toHaveProperty('security_risk');
  });

  it('settings accept the known analyzer names ("" is none) and refuse others, naming the known ones', () => {
    expect(SettingsInputSchema.parse({ security_analyzer: 'ensemble' }).security_analyzer).toBe('ensemble');
    expect(SettingsInputSchema.parse({ security_analyzer: '' }).security_analyzer).toBeNull();
    const refused = SettingsInputSchema.safeParse({ security_analyzer: 'invariant' });
    expect(refused.success).toBe(false);
    expect(JSON.stringify(refused.error?.issues)).toMatch(/llm.*rules.*ensemble/);
  });
});

describe('usage visibility', () => {
  it('every llm_call event carries the running totals, and the record has them too', async () => {
    const ports = createMemoryPorts({ llm: { costPerCallUsd: 0.01 } });
    ports.llm.push(bash('ls'), bash('pwd'), finish);
    const service = createAgentConversationService(
      { agent: createAgent(), ...ports, ids: sequentialIdGenerator() },
      { pollIntervalMs: 1 },
    );
    await expectOk(service.settings.store('alice', LLM));
    const id = await converse(service);
    const calls = (await allEvents(service, id)).filter((e) => e.kind === 'llm_call');
    expect(calls.map((c) => c.accumulated?.cost_usd)).toEqual([0.01, 0.02, 0.03]);
    const prompt = calls.reduce((n, c) => n + c.prompt_tokens, 0);
    expect(calls.at(-1)!.accumulated).toMatchObject({ prompt_tokens: prompt });
    expect((await conversationOf(service, id)).record.metrics).toMatchObject({
      accumulated_cost: 0.03,
      prompt_tokens: prompt,
    });
  });
});
