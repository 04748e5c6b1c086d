import { describe, expect, it } from 'vitest';
import {
  createAgentConversationService,
  explainDomainError,
  type AgentConversationService,
  type AgentConversationServiceOptions,
} from '../src/index.js';
import { manualClock } from '../src/ports.js';
import { MAKE_ROOM_GRACE_MS } from '../src/sandbox/room.js';
import { expectOk } from '../src/testing/index.js';
import { createMemoryPorts, type ScriptedTurn } from '@acs/testing';
import { createAgent } from '@acs/agent';

/**
 * Resources follow use (issue 27): a sandbox whose conversations have all finished or wait for
 * the user is paused after a short idle, and at the per-user limit it is paused to make room
 * for a new one; a sandbox whose agent works never is. Memory stores, the fake runtime, the
 * scripted model (a text reply: the agent finishes at once) and a manual clock.
 */
const MINUTE = 60_000;

async function world(options: AgentConversationServiceOptions = {}, settings: Record<string, unknown> = {}) {
  const ports = createMemoryPorts();
  const clock = manualClock();
  // Maintenance runs only when a test asks (pauseIdle), not on the clock's timer.
  const service = createAgentConversationService(
    { agent: createAgent(), ...ports, clock },
    { pollIntervalMs: 1, maintenanceIntervalMs: 24 * 60 * MINUTE, reconcileIntervalMs: 0, ...options },
  );
  await expectOk(service.settings.store('alice', { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test', ...settings }));
  return { ports, clock, service };
}

async function conversation(service: AgentConversationService, id: string) {
  return (await expectOk(service.conversations.get('alice', id))).record;
}

async function sandboxOf(service: AgentConversationService, id: string): Promise<string> {
  const sandboxId = (await conversation(service, id)).sandbox_id;
  if (!sandboxId) throw new Error(`conversation ${id} has no sandbox`);
  return sandboxId;
}

async function sandboxStatus(service: AgentConversationService, sandboxId: string) {
  return (await expectOk(service.sandboxes.get('alice', sandboxId))).status;
}

/** Creates a conversation and lets it run to its end (the scripted model's text reply finishes it). */
async function finishedConversation(service: AgentConversationService, message: string): Promise<string> {
  const created = await expectOk(service.conversations.create('alice', { initial_user_msg: message }));
  await service.idle();
  expect((await conversation(service, created.conversation_id)).execution_status).toBe('finished');
  return created.conversation_id;
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A model that holds every call until `release()`: its conversations' agents stay running. */
function heldModel(ports: ReturnType<typeof createMemoryPorts>) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  ports.llm.respondWith(async (): Promise<ScriptedTurn> => {
    await released;
    return { content: 'done at last' };
  });
  return { release };
}

describe('at the per-user limit, a sandbox whose conversations finished makes room (pause_finished, the default)', () => {
  it('five quick finished conversations, then a sixth starts: the least recently used sandbox is paused, not refused', async () => {
    const { service, clock } = await world({ maxRunningSandboxesPerUser: 5 });
    const ids: string[] = [];
    for (let i = 1; i <= 5; i++) {
      ids.push(await finishedConversation(service, `quick task ${i}`));
      clock.advance(1_000);
    }
    const boxes = await Promise.all(ids.map((id) => sandboxOf(service, id)));
    clock.advance(MAKE_ROOM_GRACE_MS);

    const sixth = await expectOk(service.conversations.create('alice', { initial_user_msg: 'quick task 6' }));
    await service.idle();

    expect(await sandboxStatus(service, boxes[0]!)).toBe('PAUSED');
    expect((await expectOk(service.sandboxes.get('alice', boxes[0]!))).status_detail).toMatch(
      /to make room for another sandbox of yours/,
    );
    for (const box of boxes.slice(1)) expect(await sandboxStatus(service, box)).toBe('RUNNING');
    expect((await conversation(service, sixth.conversation_id)).execution_status).toBe('finished');
    // The paused one's conversation shows STOPPED (its sandbox is paused), as after any pause.
    expect((await expectOk(service.conversations.get('alice', ids[0]!))).status).toBe('STOPPED');
    await service.close();
  });

  it('picks the least recently used: a finished conversation used again later is kept over an older idle one', async () => {
    const { service, clock } = await world({ maxRunningSandboxesPerUser: 2 });
    const first = await finishedConversation(service, 'one');
    clock.advance(1_000);
    const second = await finishedConversation(service, 'two');
    clock.advance(1_000);
    // A follow-up to the first makes it the more recently used.
    await expectOk(
      service.conversations.sendMessage('alice', first, {
        role: 'user',
        content: [{ type: 'text', text: 'and also this' }],
        run: true,
      }),
    );
    await service.idle();
    clock.advance(MAKE_ROOM_GRACE_MS);

    await expectOk(service.conversations.create('alice', { initial_user_msg: 'three' }));
    await service.idle();
    expect(await sandboxStatus(service, await sandboxOf(service, second))).toBe('PAUSED');
    expect(await sandboxStatus(service, await sandboxOf(service, first))).toBe('RUNNING');
    await service.close();
  });

  it('never pauses a sandbox whose agent is running: 429 saying why, and the agent goes on', async () => {
    const { service, ports, clock } = await world({ maxRunningSandboxesPerUser: 2 });
    const older = await finishedConversation(service, 'finished long ago');
    clock.advance(MINUTE);
    const model = heldModel(ports);
    const working = await expectOk(service.conversations.create('alice', { initial_user_msg: 'a long task' }));
    await until(
      async () => (await conversation(service, working.conversation_id)).execution_status === 'running',
      'the agent to run',
    );
    clock.advance(10 * MINUTE);

    // Room is made from the finished one, though the working one is the more idle sandbox.
    const third = await expectOk(service.conversations.create('alice', { initial_user_msg: 'a third' }));
    await until(
      async () => (await conversation(service, third.conversation_id)).execution_status === 'running',
      'the third agent to run',
    );
    expect(await sandboxStatus(service, await sandboxOf(service, older))).toBe('PAUSED');
    const workingBox = await sandboxOf(service, working.conversation_id);
    expect(await sandboxStatus(service, workingBox)).toBe('RUNNING');

    // Now both running sandboxes have an agent at work: refused, and nothing paused.
    clock.advance(10 * MINUTE);
    const refused = (await service.conversations.create('alice', { initial_user_msg: 'a fourth' }))._unsafeUnwrapErr();
    expect(refused).toEqual({ type: 'SandboxCapReached', limit: 2, why: 'none_at_rest' });
    expect(explainDomainError(refused).message).toMatch(/never while an agent works in it/);
    expect(await sandboxStatus(service, workingBox)).toBe('RUNNING');
    expect(await expectOk(service.conversations.count('alice', {}))).toBe(3);

    model.release();
    await service.idle();
    expect((await conversation(service, working.conversation_id)).execution_status).toBe('finished');
    await service.close();
  });

  it('does not take a conversation for finished in the seconds after it finished (its agent may be about to run again)', async () => {
    const { service, clock } = await world({ maxRunningSandboxesPerUser: 1 });
    const first = await finishedConversation(service, 'one');
    expect((await service.conversations.create('alice', { initial_user_msg: 'two' }))._unsafeUnwrapErr()).toEqual({
      type: 'SandboxCapReached',
      limit: 1,
      why: 'none_at_rest',
    });
    clock.advance(MAKE_ROOM_GRACE_MS);
    await expectOk(service.conversations.create('alice', { initial_user_msg: 'two' }));
    await service.idle();
    expect(await sandboxStatus(service, await sandboxOf(service, first))).toBe('PAUSED');
    await service.close();
  });

  it('takes a conversation waiting for confirmation as waiting for the user', async () => {
    const { service, ports, clock } = await world({ maxRunningSandboxesPerUser: 1 }, { confirmation_mode: true });
    ports.llm.push({ tool_calls: [{ name: 'execute_bash', arguments: { command: 'ls' } }] });
    const waiting = await expectOk(service.conversations.create('alice', { initial_user_msg: 'list the files' }));
    await service.idle();
    expect((await conversation(service, waiting.conversation_id)).execution_status).toBe('waiting_for_confirmation');
    clock.advance(MAKE_ROOM_GRACE_MS);
    await expectOk(service.conversations.create('alice', { initial_user_msg: 'another' }));
    await service.idle();
    expect(await sandboxStatus(service, await sandboxOf(service, waiting.conversation_id))).toBe('PAUSED');
    await service.close();
  });

  it('never pauses a sandbox started without a conversation for another', async () => {
    const { service, clock } = await world({ maxRunningSandboxesPerUser: 1 });
    const alone = await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    clock.advance(60 * MINUTE);
    expect((await service.conversations.create('alice', { initial_user_msg: 'one' }))._unsafeUnwrapErr()).toEqual({
      type: 'SandboxCapReached',
      limit: 1,
      why: 'none_at_rest',
    });
    expect(await sandboxStatus(service, alone.id)).toBe('RUNNING');
    await service.close();
  });

  it('a failed pause of the chosen sandbox is a refusal at the limit saying so, never an error about that other sandbox', async () => {
    const { service, ports, clock } = await world({ maxRunningSandboxesPerUser: 1 });
    const first = await finishedConversation(service, 'one');
    clock.advance(MAKE_ROOM_GRACE_MS);
    ports.runtime.failNext('pause', { message: 'the engine refused to freeze it' });
    const refused = (await service.conversations.create('alice', { initial_user_msg: 'two' }))._unsafeUnwrapErr();
    expect(refused).toEqual({ type: 'SandboxCapReached', limit: 1, why: 'pause_failed' });
    expect(explainDomainError(refused).message).toMatch(
      /pausing one whose conversations have finished, to make room, failed/,
    );
    expect(await sandboxStatus(service, await sandboxOf(service, first))).toBe('RUNNING');
    expect(await expectOk(service.conversations.count('alice', {}))).toBe(1);
    await service.close();
  });

  it('with atSandboxLimit: refuse, the sixth is a 429 as before', async () => {
    const { service, clock } = await world({ maxRunningSandboxesPerUser: 5, atSandboxLimit: 'refuse' });
    const ids: string[] = [];
    for (let i = 1; i <= 5; i++) ids.push(await finishedConversation(service, `quick task ${i}`));
    clock.advance(10 * MINUTE);
    const refused = (
      await service.conversations.create('alice', { initial_user_msg: 'quick task 6' })
    )._unsafeUnwrapErr();
    expect(refused).toEqual({ type: 'SandboxCapReached', limit: 5 });
    expect(explainDomainError(refused).message).toBe(
      'You already have 5 running sandboxes, the most allowed at once; pause or delete one, then try again.',
    );
    for (const id of ids) expect(await sandboxStatus(service, await sandboxOf(service, id))).toBe('RUNNING');
    expect(await expectOk(service.conversations.count('alice', {}))).toBe(5);
    await service.close();
  });

  it('concurrent creates of one user at the limit: exactly as many succeed as there were finished sandboxes to pause', async () => {
    const { service, clock } = await world({ maxRunningSandboxesPerUser: 3 });
    const finished: string[] = [];
    for (let i = 1; i <= 3; i++) finished.push(await finishedConversation(service, `task ${i}`));
    clock.advance(MAKE_ROOM_GRACE_MS);

    const results = await Promise.all(
      Array.from({ length: 7 }, (_, i) => service.conversations.create('alice', { initial_user_msg: `at once ${i}` })),
    );
    expect(results.filter((r) => r.isOk())).toHaveLength(3);
    expect(results.filter((r) => r.isErr()).map((r) => r._unsafeUnwrapErr())).toEqual(
      Array(4).fill({ type: 'SandboxCapReached', limit: 3, why: 'none_at_rest' }),
    );
    await service.idle();
    for (const id of finished) expect(await sandboxStatus(service, await sandboxOf(service, id))).toBe('PAUSED');
    const running = (await expectOk(service.sandboxes.search('alice', { limit: 100, after: null }))).items.filter(
      (s) => s.status === 'RUNNING',
    );
    expect(running).toHaveLength(3);
    expect(await expectOk(service.conversations.count('alice', {}))).toBe(6);
    await service.close();
  });
});

describe('a sandbox whose conversations finished is paused after idlePauseFinishedAfterMs', () => {
  it('after 5 minutes by default, not before, counted from the later of its last use and the finish', async () => {
    const { service, ports, clock } = await world();
    // The agent uses the sandbox (a command), then thinks for 3 minutes before it finishes.
    ports.llm.push({ tool_calls: [{ name: 'execute_bash', arguments: { command: 'make' } }] });
    ports.llm.respondWith(() => {
      clock.advance(3 * MINUTE);
      return { content: 'built' };
    });
    ports.runtime.onExec(
      (argv) => argv[0] === 'bash' && argv[2] === 'make',
      () => ({ stdout: 'ok\n', exit_code: 0 }),
    );
    const id = await finishedConversation(service, 'build it');
    const box = await sandboxOf(service, id);

    clock.advance(4 * MINUTE); // 7 min after the command, 4 after the finish
    expect(await service.sandboxes.pauseIdle()).toBe(0);
    clock.advance(1 * MINUTE + 1);
    expect(await service.sandboxes.pauseIdle()).toBe(1);
    const paused = await expectOk(service.sandboxes.get('alice', box));
    expect(paused.status).toBe('PAUSED');
    expect(paused.status_detail).toBe(
      'paused 5 min after its conversations finished or began to wait for you, without use since',
    );
    await service.close();
  });

  it('runs on the maintenance timer with its own setting, apart from the general idle pause', async () => {
    const { service, clock } = await world({
      idlePauseFinishedAfterMs: 2 * MINUTE,
      idlePauseAfterMs: 30 * MINUTE,
      maintenanceIntervalMs: 30_000,
    });
    const id = await finishedConversation(service, 'one');
    const box = await sandboxOf(service, id);
    const alone = await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    clock.advance(90_000);
    await service.idle();
    expect(await sandboxStatus(service, box)).toBe('RUNNING');
    clock.advance(60_000);
    await service.idle();
    expect(await sandboxStatus(service, box)).toBe('PAUSED');
    // Without a conversation only the general rule applies.
    expect(await sandboxStatus(service, alone.id)).toBe('RUNNING');
    clock.advance(30 * MINUTE);
    await service.idle();
    expect(await sandboxStatus(service, alone.id)).toBe('PAUSED');
    await service.close();
  });

  it('leaves a sandbox whose agent is running, however long; 0 turns the rule off', async () => {
    const held = await world();
    const model = heldModel(held.ports);
    const working = await expectOk(held.service.conversations.create('alice', { initial_user_msg: 'long' }));
    await until(
      async () => (await conversation(held.service, working.conversation_id)).execution_status === 'running',
      'the agent to run',
    );
    held.clock.advance(60 * MINUTE);
    expect(await held.service.sandboxes.pauseIdle()).toBe(0);
    model.release();
    await held.service.idle();
    await held.service.close();

    const off = await world({ idlePauseFinishedAfterMs: 0 });
    await finishedConversation(off.service, 'one');
    off.clock.advance(24 * 60 * MINUTE);
    expect(await off.service.sandboxes.pauseIdle()).toBe(0);
    await off.service.close();
  });

  it('counts a conversation waiting for confirmation as waiting: paused, and resumed by the answer', async () => {
    const { service, ports, clock } = await world({ maxRunningSandboxesPerUser: 1 }, { confirmation_mode: true });
    const ran: string[] = [];
    ports.runtime.onExec(
      (argv) => argv[0] === 'bash' && argv[1] === '-c',
      (request) => {
        ran.push(request.command[2]!);
        return { stdout: '', exit_code: 0 };
      },
    );
    ports.llm.push(
      { tool_calls: [{ name: 'execute_bash', arguments: { command: 'touch approved' } }] },
      { content: 'done' },
    );
    const created = await expectOk(service.conversations.create('alice', { initial_user_msg: 'touch a file' }));
    await service.idle();
    expect((await conversation(service, created.conversation_id)).execution_status).toBe('waiting_for_confirmation');
    const box = await sandboxOf(service, created.conversation_id);

    clock.advance(5 * MINUTE + 1);
    expect(await service.sandboxes.pauseIdle()).toBe(1);
    expect(await sandboxStatus(service, box)).toBe('PAUSED');

    await expectOk(service.conversations.respondToConfirmation('alice', created.conversation_id, { accept: true }));
    await service.idle();
    expect(await sandboxStatus(service, box)).toBe('RUNNING');
    expect(ran).toContain('touch approved');
    expect((await conversation(service, created.conversation_id)).execution_status).toBe('finished');
    await service.close();
  });
});

describe('a paused sandbox comes back when its conversation is given work', () => {
  it('a new message resumes it, with the workspace as it was, and the agent answers', async () => {
    const { service, ports, clock } = await world();
    ports.llm.push(
      {
        tool_calls: [
          {
            name: 'str_replace_editor',
            arguments: { command: 'create', path: '/workspace/notes.txt', file_text: 'kept\n' },
          },
        ],
      },
      { content: 'written' },
    );
    const id = await finishedConversation(service, 'write a note');
    const box = await sandboxOf(service, id);
    clock.advance(6 * MINUTE);
    expect(await service.sandboxes.pauseIdle()).toBe(1);
    expect(await sandboxStatus(service, box)).toBe('PAUSED');
    const calls = ports.llm.calls;

    await expectOk(
      service.conversations.sendMessage('alice', id, {
        role: 'user',
        content: [{ type: 'text', text: 'what did you write?' }],
        run: true,
      }),
    );
    await service.idle();
    expect(await sandboxStatus(service, box)).toBe('RUNNING');
    expect(ports.llm.calls).toBe(calls + 1);
    expect(JSON.stringify(ports.llm.requests.at(-1)!.messages)).toContain('what did you write?');
    expect((await conversation(service, id)).execution_status).toBe('finished');
    expect(new TextDecoder().decode((await expectOk(ports.runtime.readFile(box, '/workspace/notes.txt'))).bytes)).toBe(
      'kept\n',
    );
    await service.close();
  });

  it('at the limit, the resume pauses another finished sandbox to make room; a message with run: false resumes nothing', async () => {
    const { service, clock } = await world({ maxRunningSandboxesPerUser: 1 });
    const first = await finishedConversation(service, 'one');
    clock.advance(MAKE_ROOM_GRACE_MS);
    const second = await finishedConversation(service, 'two');
    const [firstBox, secondBox] = [await sandboxOf(service, first), await sandboxOf(service, second)];
    expect(await sandboxStatus(service, firstBox)).toBe('PAUSED');
    clock.advance(MAKE_ROOM_GRACE_MS);

    await expectOk(
      service.conversations.sendMessage('alice', first, {
        role: 'user',
        content: [{ type: 'text', text: 'later' }],
        run: false,
      }),
    );
    expect(await sandboxStatus(service, firstBox)).toBe('PAUSED');

    await expectOk(
      service.conversations.sendMessage('alice', first, {
        role: 'user',
        content: [{ type: 'text', text: 'one more thing' }],
        run: true,
      }),
    );
    await service.idle();
    expect(await sandboxStatus(service, firstBox)).toBe('RUNNING');
    expect(await sandboxStatus(service, secondBox)).toBe('PAUSED');
    expect((await conversation(service, first)).execution_status).toBe('finished');
    await service.close();
  });
});
