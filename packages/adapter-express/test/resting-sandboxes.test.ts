import { afterEach, describe, expect, it } from 'vitest';
import type { manualClock } from '@acs/core/ports';
import type { ScriptedTurn } from '@acs/testing';
import {
  arr,
  createConversation,
  errorCode,
  obj,
  startAppConversation,
  startHarness,
  storeSettings,
  type Harness,
} from './harness.js';

/**
 * Resources follow use (issue 27) through real HTTP: at the per-user limit a start pauses the
 * user's least recently used sandbox whose conversations have finished instead of answering
 * 429; a paused one comes back when its conversation gets a message. The scripted model's text
 * reply finishes each conversation at once; a manual clock moves time past the few seconds a
 * finish must be old before it counts.
 */
const SECOND = 1_000;

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const advance = (harness: Harness, ms: number) => (harness.clock as ReturnType<typeof manualClock>).advance(ms);

async function appConversation(harness: Harness, id: string): Promise<Record<string, unknown>> {
  const r = await harness.call('GET', `/api/v1/app-conversations?ids=${id}`);
  expect(r.status, r.text).toBe(200);
  return obj(arr(r.body)[0]);
}

/** Starts a V1 conversation with a first message and waits until its agent has finished. */
async function finishedAppConversation(harness: Harness, text: string): Promise<{ id: string; sandboxId: string }> {
  const task = await startAppConversation(harness, {
    initial_message: { role: 'user', content: [{ type: 'text', text }] },
  });
  await harness.idle();
  const id = task.app_conversation_id as string;
  const conversation = await appConversation(harness, id);
  expect(conversation).toMatchObject({ execution_status: 'finished', sandbox_status: 'RUNNING' });
  return { id, sandboxId: conversation.sandbox_id as string };
}

async function sandboxStatus(harness: Harness, sandboxId: string): Promise<string> {
  const r = await harness.call('GET', `/api/v1/sandboxes?id=${sandboxId}`);
  expect(r.status, r.text).toBe(200);
  return obj(arr(r.body)[0]).status as string;
}

describe('at the sandbox limit, over HTTP', () => {
  it('POST /api/v1/app-conversations pauses the least recently used finished sandbox instead of 429, and a message brings it back', async () => {
    h = await startHarness({ clock: 'manual', service: { maxRunningSandboxesPerUser: 2 } });
    await storeSettings(h);
    const first = await finishedAppConversation(h, 'first task');
    advance(h, SECOND);
    const second = await finishedAppConversation(h, 'second task');
    advance(h, 10 * SECOND);

    const third = await h.call('POST', '/api/v1/app-conversations', {
      body: { initial_message: { role: 'user', content: [{ type: 'text', text: 'third task' }] } },
    });
    expect(third.status, third.text).toBe(200);
    await h.idle();
    expect(await appConversation(h, obj(third.body).app_conversation_id as string)).toMatchObject({
      execution_status: 'finished',
      sandbox_status: 'RUNNING',
    });
    expect(await sandboxStatus(h, first.sandboxId)).toBe('PAUSED');
    expect(await sandboxStatus(h, second.sandboxId)).toBe('RUNNING');
    // V0 clients see the paused one's conversation STOPPED, as after any pause.
    expect(obj((await h.call('GET', `/api/conversations/${first.id}`)).body).status).toBe('STOPPED');

    // A message to the paused one resumes its sandbox (pausing the next least recently used to
    // stay within the limit) and its agent answers at once.
    advance(h, 10 * SECOND);
    const sent = await h.call('POST', `/api/v1/app-conversations/${first.id}/send-message`, {
      body: { role: 'user', content: [{ type: 'text', text: 'one more thing' }] },
    });
    expect(sent.status, sent.text).toBe(200);
    expect(sent.body).toMatchObject({ success: true, sandbox_status: 'RUNNING', message: null });
    await h.idle();
    expect(await sandboxStatus(h, first.sandboxId)).toBe('RUNNING');
    expect(await sandboxStatus(h, second.sandboxId)).toBe('PAUSED');
    expect(JSON.stringify(h.ports.llm.requests.at(-1)!.messages)).toContain('one more thing');
    expect(await appConversation(h, first.id)).toMatchObject({
      execution_status: 'finished',
      conversation_status: 'RUNNING',
    });
  });

  it('a running agent is never paused for another: 429 SANDBOX_LIMIT_REACHED saying why', async () => {
    h = await startHarness({ clock: 'manual', service: { maxRunningSandboxesPerUser: 1 } });
    await storeSettings(h);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    h.ports.llm.respondWith(async (): Promise<ScriptedTurn> => {
      await released;
      return { content: 'done' };
    });
    const working = await createConversation(h, { initial_user_msg: 'a long task' });
    const harness = h;
    for (let i = 0; i < 2_000 && (await appConversation(harness, working)).execution_status !== 'running'; i++)
      await new Promise((resolve) => setTimeout(resolve, 5));
    expect((await appConversation(h, working)).execution_status).toBe('running');
    advance(h, 60 * 60 * SECOND);

    const refused = await h.call('POST', '/api/conversations', { body: { initial_user_msg: 'another' } });
    expect(refused.status).toBe(429);
    expect(errorCode(refused.body)).toBe('SANDBOX_LIMIT_REACHED');
    expect(obj(refused.body).message).toMatch(/none could be paused to make room.*never while an agent works in it/);
    expect((await appConversation(h, working)).sandbox_status).toBe('RUNNING');
    release();
    await h.idle();
  });

  it('with atSandboxLimit: refuse, 429 as before, nothing paused', async () => {
    h = await startHarness({ clock: 'manual', service: { maxRunningSandboxesPerUser: 1, atSandboxLimit: 'refuse' } });
    await storeSettings(h);
    const first = await finishedAppConversation(h, 'first task');
    advance(h, 60 * SECOND);
    const refused = await h.call('POST', '/api/v1/app-conversations', { body: {} });
    expect(refused.status).toBe(429);
    expect(obj(refused.body)).toMatchObject({
      code: 'SANDBOX_LIMIT_REACHED',
      message: 'You already have 1 running sandbox, the most allowed at once; pause or delete one, then try again.',
    });
    expect(await sandboxStatus(h, first.sandboxId)).toBe('RUNNING');
  });
});
