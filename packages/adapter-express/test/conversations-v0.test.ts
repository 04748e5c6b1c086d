import { afterEach, describe, expect, it } from 'vitest';
import {
  arr,
  createConversation,
  errorCode,
  HEX32,
  items,
  KEY_B,
  LLM_SETTINGS,
  obj,
  startAppConversation,
  startHarness,
  storeSettings,
  type Harness,
  type HarnessOptions,
} from './harness.js';

let harnesses: Harness[] = [];

async function harness(options: HarnessOptions = {}): Promise<Harness> {
  const h = await startHarness(options);
  harnesses.push(h);
  return h;
}

afterEach(async () => {
  await Promise.all(harnesses.map((h) => h.close()));
  harnesses = [];
});

async function getConversation(h: Harness, id: string, key?: string) {
  return h.call('GET', `/api/conversations/${id}`, key ? { key } : {});
}

async function conversationOk(h: Harness, id: string): Promise<Record<string, unknown>> {
  const r = await getConversation(h, id);
  expect(r.status, r.text).toBe(200);
  return obj(r.body);
}

async function sandbox(h: Harness, id: string): Promise<Record<string, unknown>> {
  const r = await h.call('GET', `/api/v1/sandboxes/${id}`);
  expect(r.status, r.text).toBe(200);
  return obj(r.body);
}

async function tasksOf(h: Harness, conversationId: string): Promise<Record<string, unknown>[]> {
  const r = await h.call('GET', `/api/v1/app-conversations/start-tasks/search?conversation_id__eq=${conversationId}`);
  expect(r.status, r.text).toBe(200);
  return items(r.body);
}

/** Nothing at all was stored or started for Alice. */
async function expectNothingStored(h: Harness): Promise<void> {
  await h.idle();
  expect((await h.call('GET', '/api/conversations')).body).toEqual({ results: [], next_page_id: null });
  expect((await h.call('GET', '/api/v1/app-conversations/search')).body).toEqual({ items: [], next_page_id: null });
  expect((await h.call('GET', '/api/v1/app-conversations/count')).body).toBe(0);
  expect((await h.call('GET', '/api/v1/app-conversations/start-tasks/count')).body).toBe(0);
  expect((await h.call('GET', '/api/v1/sandboxes/search')).body).toEqual({ items: [], next_page_id: null });
  expect(h.ports.runtime.calls).toEqual([]);
}

describe('POST /api/conversations: refusals store nothing', () => {
  it('without settings → 400 SETTINGS_REQUIRED', async () => {
    const h = await harness();
    const r = await h.call('POST', '/api/conversations', { body: { initial_user_msg: 'hi' } });
    expect(r.status).toBe(400);
    expect(errorCode(r.body)).toBe('SETTINGS_REQUIRED');
    await expectNothingStored(h);
  });

  it('settings without llm_model → 400 LLM_MODEL_REQUIRED', async () => {
    const h = await harness();
    await storeSettings(h, { llm_api_key: 'k-000000000000' });
    const r = await h.call('POST', '/api/conversations', { body: {} });
    expect(r.status).toBe(400);
    expect(errorCode(r.body)).toBe('LLM_MODEL_REQUIRED');
    await expectNothingStored(h);
  });

  it('settings without llm_api_key (or a blank one) → 400 LLM_API_KEY_REQUIRED', async () => {
    const h = await harness();
    await storeSettings(h, { llm_model: 'openai/gpt-4o' });
    const r = await h.call('POST', '/api/conversations', { body: {} });
    expect(r.status).toBe(400);
    expect(errorCode(r.body)).toBe('LLM_API_KEY_REQUIRED');
    await storeSettings(h, { llm_api_key: '   ' });
    const blank = await h.call('POST', '/api/conversations', { body: {} });
    expect(blank.status).toBe(400);
    expect(errorCode(blank.body)).toBe('LLM_API_KEY_REQUIRED');
    await expectNothingStored(h);
  });

  it('a keyless model (ollama/, bedrock/) needs no key', async () => {
    const h = await harness();
    await storeSettings(h, { llm_model: 'ollama/llama3' });
    expect((await h.call('POST', '/api/conversations', { body: {} })).status).toBe(200);
  });

  it('unknown keys → 422 naming them', async () => {
    const h = await harness();
    await storeSettings(h);
    const r = await h.call('POST', '/api/conversations', { body: { initial_user_msg: 'hi', title: 'not a V0 field' } });
    expect(r.status).toBe(422);
    expect(errorCode(r.body)).toBe('VALIDATION_FAILED');
    expect(JSON.stringify(obj(r.body).issues)).toContain('title');
    await expectNothingStored(h);
  });

  it('conversation_id while the server does not allow client ids → 422', async () => {
    const h = await harness();
    await storeSettings(h);
    const r = await h.call('POST', '/api/conversations', { body: { conversation_id: 'abc123' } });
    expect(r.status).toBe(422);
    expect(errorCode(r.body)).toBe('VALIDATION_FAILED');
    expect(arr(obj(r.body).issues).map((i) => obj(i).path)).toContain('conversation_id');
    await expectNothingStored(h);
  });

  it.each([
    ['a file URL', ['file:///etc/passwd']],
    ['an ftp URL', ['ftp://example.com/a.png']],
    ['a non-image data URL', ['data:text/html;base64,PGgxPg==']],
    ['plain text', ['not a url']],
  ])('image_urls with %s → 422', async (_label, urls) => {
    const h = await harness();
    await storeSettings(h);
    const r = await h.call('POST', '/api/conversations', { body: { initial_user_msg: 'look', image_urls: urls } });
    expect(r.status).toBe(422);
    expect(arr(obj(r.body).issues).some((i) => String(obj(i).path).startsWith('image_urls'))).toBe(true);
    await expectNothingStored(h);
  });

  it('other invalid fields → 422: git_provider, repository, branch, suggested_task', async () => {
    const h = await harness();
    await storeSettings(h);
    for (const body of [
      { git_provider: 'sourceforge' },
      { repository: 'not a repo' },
      { selected_branch: 'bad..branch' },
      { suggested_task: { repo: 'o/r', issue_number: 'one', title: 't' } },
      { create_microagent: {} },
      { initial_user_msg: 42 },
    ]) {
      const r = await h.call('POST', '/api/conversations', { body });
      expect(r.status, JSON.stringify(body)).toBe(422);
    }
    await expectNothingStored(h);
  });
});

describe('POST /api/conversations: success', () => {
  it('with replay_json no settings are needed', async () => {
    const h = await harness();
    const trajectory = [{ source: 'user', action: 'message', args: { content: 'replay this' } }];
    const r = await h.call('POST', '/api/conversations', { body: { replay_json: JSON.stringify(trajectory) } });
    expect(r.status, r.text).toBe(200);
    expect(obj(r.body).conversation_status).toBe('STARTING');
  });

  it('answers {status ok, 32-hex id, STARTING, message null}, then runs in its own sandbox from the default spec', async () => {
    const h = await harness();
    await storeSettings(h);
    const r = await h.call('POST', '/api/conversations', {
      body: {
        initial_user_msg: 'fix the bug',
        repository: 'octo/repo',
        git_provider: 'github',
        selected_branch: 'main',
        image_urls: ['https://img.example.com/a.png', 'data:image/png;base64,iVBORw0KGgo='],
      },
    });
    expect(r.status, r.text).toBe(200);
    const body = obj(r.body);
    expect(body).toEqual({
      status: 'ok',
      conversation_id: expect.stringMatching(HEX32) as string,
      conversation_status: 'STARTING',
      message: null,
    });
    const id = body.conversation_id as string;

    await h.idle();
    const info = await conversationOk(h, id);
    expect(info).toMatchObject({
      conversation_id: id,
      status: 'RUNNING',
      selected_repository: 'octo/repo',
      selected_branch: 'main',
      git_provider: 'github',
      trigger: 'gui',
      conversation_version: 'V0',
    });
    expect(info.sandbox_id).toEqual(expect.stringMatching(HEX32));
    const box = await sandbox(h, info.sandbox_id as string);
    expect(box).toMatchObject({ status: 'RUNNING', sandbox_spec_id: 'bookworm' });
    expect(h.ports.runtime.calls.filter((c) => c.operation === 'create')).toEqual([
      { operation: 'create', sandboxId: info.sandbox_id },
    ]);

    // Its start task is READY.
    const tasks = await tasksOf(h, id);
    expect(tasks).toHaveLength(1);
    expect(tasks[0]).toMatchObject({
      status: 'READY',
      app_conversation_id: id,
      sandbox_id: info.sandbox_id,
      detail: null,
    });
  });

  it('uses sandbox_base_container_image from the settings as the sandbox image, where the operator allows it', async () => {
    const h = await harness({ service: { sandboxImages: { allowed: ['ghcr.io/acme/*'] } } });
    await storeSettings(h, { ...LLM_SETTINGS, sandbox_base_container_image: 'ghcr.io/acme/sandbox:7' });
    const id = await createConversation(h);
    await h.idle();
    const sandboxId = (await conversationOk(h, id)).sandbox_id as string;
    expect(h.ports.runtime.peek(sandboxId)?.request.spec.image).toBe('ghcr.io/acme/sandbox:7');
  });

  it('a V0 conversation is visible through V1 under the same id', async () => {
    const h = await harness();
    await storeSettings(h);
    const id = await createConversation(h);
    await h.idle();
    const v0 = await conversationOk(h, id);

    const batch = await h.call('GET', `/api/v1/app-conversations?ids=${id}`);
    expect(batch.status).toBe(200);
    expect(arr(batch.body)).toHaveLength(1);
    expect(obj(arr(batch.body)[0])).toMatchObject({
      id,
      sandbox_id: v0.sandbox_id,
      sandbox_status: 'RUNNING',
      conversation_status: 'RUNNING',
    });

    const search = await h.call('GET', '/api/v1/app-conversations/search');
    expect(items(search.body).map((c) => c.id)).toEqual([id]);

    const single = await h.call('GET', `/api/v1/app-conversations/${id}`);
    expect(single.status).toBe(200);
    expect(obj(single.body)).toMatchObject({ id, title: v0.title, sandbox_id: v0.sandbox_id });

    // The dashed UUID form names the same conversation.
    const dashed = `${id.slice(0, 8)}-${id.slice(8, 12)}-${id.slice(12, 16)}-${id.slice(16, 20)}-${id.slice(20)}`;
    expect(obj((await h.call('GET', `/api/v1/app-conversations/${dashed}`)).body).id).toBe(id);
    expect((await getConversation(h, dashed.toUpperCase())).status).toBe(200);
  });

  it('a V1 conversation is visible through V0 list and get', async () => {
    const h = await harness();
    await storeSettings(h);
    const task = await startAppConversation(h, { title: 'From V1' });
    const id = task.app_conversation_id as string;
    await h.idle();
    const list = await h.call('GET', '/api/conversations');
    expect(list.status).toBe(200);
    const results = arr(obj(list.body).results).map(obj);
    expect(results.map((c) => c.conversation_id)).toEqual([id]);
    expect(obj(list.body).next_page_id).toBeNull();
    const info = await conversationOk(h, id);
    expect(info).toMatchObject({
      conversation_id: id,
      title: 'From V1',
      status: 'RUNNING',
      conversation_version: 'V1',
      sandbox_id: task.sandbox_id,
    });
  });

  it('GET /api/conversations lists newest first in the {results, next_page_id} shape', async () => {
    const h = await harness({ clock: 'manual' });
    await storeSettings(h);
    const first = await createConversation(h);
    const second = await createConversation(h);
    await h.idle();
    const r = await h.call('GET', '/api/conversations?limit=1');
    expect(r.status).toBe(200);
    expect(arr(obj(r.body).results).map((c) => obj(c).conversation_id)).toEqual([second]);
    const next = obj(r.body).next_page_id as string;
    expect(typeof next).toBe('string');
    const page2 = await h.call('GET', `/api/conversations?limit=1&page_id=${encodeURIComponent(next)}`);
    expect(arr(obj(page2.body).results).map((c) => obj(c).conversation_id)).toEqual([first]);
    expect(obj(page2.body).next_page_id).toBeNull();
  });
});

describe('GET /api/conversations filters', () => {
  it('selected_repository and conversation_trigger filter the list; a bad trigger is 422', async () => {
    const h = await harness();
    await storeSettings(h);
    const inRepo = await createConversation(h, { repository: 'octo/repo' });
    const other = await createConversation(h, { repository: 'octo/other' });
    const microagent = await createConversation(h, { create_microagent: { repo: 'octo/agents', title: 'm' } });
    await h.idle();
    const ids = async (query: string) =>
      arr(obj((await h.call('GET', `/api/conversations?${query}`)).body).results).map((c) => obj(c).conversation_id);
    expect(await ids('selected_repository=octo/repo')).toEqual([inRepo]);
    expect(await ids('selected_repository=octo/agents')).toEqual([microagent]);
    expect((await ids('conversation_trigger=gui')).sort()).toEqual([inRepo, other].sort());
    expect(await ids('conversation_trigger=microagent_management')).toEqual([microagent]);
    expect(await ids('conversation_trigger=slack')).toEqual([]);
    expect((await h.call('GET', '/api/conversations?conversation_trigger=nope')).status).toBe(422);
  });
});

describe('GET and DELETE /api/conversations/{id}', () => {
  it('unknown id → 404 CONVERSATION_NOT_FOUND (not 200 null)', async () => {
    const h = await harness();
    for (const id of ['0123456789abcdef0123456789abcdef', 'nope']) {
      const get = await getConversation(h, id);
      expect(get.status).toBe(404);
      expect(errorCode(get.body)).toBe('CONVERSATION_NOT_FOUND');
      const del = await h.call('DELETE', `/api/conversations/${id}`);
      expect(del.status).toBe(404);
      expect(errorCode(del.body)).toBe('CONVERSATION_NOT_FOUND');
      for (const action of ['start', 'stop']) {
        const r = await h.call('POST', `/api/conversations/${id}/${action}`);
        expect(r.status, action).toBe(404);
        expect(errorCode(r.body)).toBe('CONVERSATION_NOT_FOUND');
      }
    }
  });

  it('an over-long id → 422', async () => {
    const h = await harness();
    const r = await getConversation(h, 'a'.repeat(101));
    expect(r.status).toBe(422);
  });

  it('DELETE → 200 true, then 404; its sandbox and start tasks are deleted', async () => {
    const h = await harness();
    await storeSettings(h);
    const id = await createConversation(h);
    await h.idle();
    const sandboxId = (await conversationOk(h, id)).sandbox_id as string;

    const del = await h.call('DELETE', `/api/conversations/${id}`);
    expect(del.status).toBe(200);
    expect(del.body).toBe(true);
    expect((await getConversation(h, id)).status).toBe(404);
    expect((await h.call('DELETE', `/api/conversations/${id}`)).status).toBe(404);
    expect((await h.call('GET', `/api/v1/app-conversations?ids=${id}`)).body).toEqual([null]);

    const box = await h.call('GET', `/api/v1/sandboxes/${sandboxId}`);
    expect(box.status).toBe(404);
    expect(errorCode(box.body)).toBe('SANDBOX_NOT_FOUND');
    expect(h.ports.runtime.peek(sandboxId)).toBeUndefined();
    expect(h.ports.runtime.calls).toContainEqual({ operation: 'delete', sandboxId });
    expect(await tasksOf(h, id)).toEqual([]);
  });

  it('DELETE keeps a sandbox another conversation still uses', async () => {
    const h = await harness();
    await storeSettings(h);
    const id = await createConversation(h);
    await h.idle();
    const sandboxId = (await conversationOk(h, id)).sandbox_id as string;
    const other = await startAppConversation(h, { sandbox_id: sandboxId });
    await h.idle();
    expect((await h.call('DELETE', `/api/conversations/${id}`)).body).toBe(true);
    expect((await sandbox(h, sandboxId)).status).toBe('RUNNING');
    expect((await conversationOk(h, other.app_conversation_id as string)).status).toBe('RUNNING');
    expect(h.ports.runtime.calls.filter((c) => c.operation === 'delete')).toEqual([]);
  });

  it('DELETE while the conversation is still starting leaves no sandbox behind', async () => {
    const h = await harness();
    await storeSettings(h);
    h.ports.runtime.hold();
    const id = await createConversation(h);
    expect((await h.call('DELETE', `/api/conversations/${id}`)).body).toBe(true);
    h.ports.runtime.release();
    await h.idle();
    expect(h.ports.runtime.size).toBe(0);
    expect((await h.call('GET', '/api/v1/sandboxes/search')).body).toEqual({ items: [], next_page_id: null });
  });
});

describe('stop, start and sandbox loss', () => {
  it('stop → STOPPED and the sandbox PAUSED; start → STARTING then RUNNING with the same sandbox', async () => {
    const h = await harness();
    await storeSettings(h);
    const id = await createConversation(h);
    await h.idle();
    const sandboxId = (await conversationOk(h, id)).sandbox_id as string;

    const stop = await h.call('POST', `/api/conversations/${id}/stop`);
    expect(stop.status).toBe(200);
    expect(obj(stop.body)).toMatchObject({ status: 'ok', conversation_id: id, conversation_status: 'STOPPED' });
    expect((await conversationOk(h, id)).status).toBe('STOPPED');
    expect((await sandbox(h, sandboxId)).status).toBe('PAUSED');

    // Stopping again is harmless.
    const again = await h.call('POST', `/api/conversations/${id}/stop`);
    expect(again.status).toBe(200);
    expect(obj(again.body).conversation_status).toBe('STOPPED');

    const start = await h.call('POST', `/api/conversations/${id}/start`, { body: {} });
    expect(start.status, start.text).toBe(200);
    expect(obj(start.body)).toMatchObject({ status: 'ok', conversation_id: id, conversation_status: 'STARTING' });
    await h.idle();
    const info = await conversationOk(h, id);
    expect(info.status).toBe('RUNNING');
    expect(info.sandbox_id).toBe(sandboxId);
    expect((await sandbox(h, sandboxId)).status).toBe('RUNNING');
    expect(await tasksOf(h, id)).toHaveLength(2);

    // Starting a running conversation is harmless and says so.
    const running = await h.call('POST', `/api/conversations/${id}/start`);
    expect(running.status).toBe(200);
    expect(obj(running.body).conversation_status).toBe('RUNNING');
  });

  it('stop while the sandbox is still starting: the conversation stays STOPPED and its sandbox does not keep running', async () => {
    const h = await harness();
    await storeSettings(h);
    h.ports.runtime.hold();
    const id = await createConversation(h);
    const stop = await h.call('POST', `/api/conversations/${id}/stop`);
    expect(stop.status).toBe(200);
    expect(obj(stop.body).conversation_status).toBe('STOPPED');
    h.ports.runtime.release();
    await h.idle();
    const info = await conversationOk(h, id);
    expect(info.status).toBe('STOPPED');
    const tasks = await tasksOf(h, id);
    expect(tasks[0]?.status).toBe('ERROR');
    // Stop means "pause its sandbox": one that came up after the stop must not be left running.
    expect((await sandbox(h, info.sandbox_id as string)).status).toBe('PAUSED');
  });

  it('a crashed sandbox is ERROR on refresh and its conversation becomes STOPPED', async () => {
    const h = await harness();
    await storeSettings(h);
    const id = await createConversation(h);
    await h.idle();
    const sandboxId = (await conversationOk(h, id)).sandbox_id as string;
    h.ports.runtime.crash(sandboxId, 'out of memory');

    const box = await sandbox(h, sandboxId);
    expect(box.status).toBe('ERROR');
    expect(box.status_detail).toContain('out of memory');
    const info = await conversationOk(h, id);
    expect(info.status).toBe('STOPPED');
    expect(info.status_detail).toContain('out of memory');
    const v1 = obj(arr((await h.call('GET', `/api/v1/app-conversations?ids=${id}`)).body)[0]);
    expect(v1).toMatchObject({ sandbox_status: 'ERROR', conversation_status: 'STOPPED' });

    // Starting it again gets a new sandbox.
    const start = await h.call('POST', `/api/conversations/${id}/start`);
    expect(start.status, start.text).toBe(200);
    await h.idle();
    const restarted = await conversationOk(h, id);
    expect(restarted.status).toBe('RUNNING');
    expect(restarted.sandbox_id).not.toBe(sandboxId);
  });

  it('a sandbox that vanished is MISSING on refresh and its conversation becomes STOPPED', async () => {
    const h = await harness();
    await storeSettings(h);
    const id = await createConversation(h);
    await h.idle();
    const sandboxId = (await conversationOk(h, id)).sandbox_id as string;
    h.ports.runtime.vanish(sandboxId);
    expect((await sandbox(h, sandboxId)).status).toBe('MISSING');
    expect((await conversationOk(h, id)).status).toBe('STOPPED');
  });

  it('a sandbox that fails to start: conversation STOPPED with the reason, start task ERROR with detail', async () => {
    const h = await harness();
    await storeSettings(h);
    h.ports.runtime.failNext('create', { message: 'image acs-sandbox:bookworm not found' });
    const r = await h.call('POST', '/api/conversations', { body: {} });
    expect(r.status).toBe(200);
    const id = obj(r.body).conversation_id as string;
    await h.idle();
    const info = await conversationOk(h, id);
    expect(info.status).toBe('STOPPED');
    expect(info.status_detail).toContain('image acs-sandbox:bookworm not found');
    const tasks = await tasksOf(h, id);
    expect(tasks).toHaveLength(1);
    expect(tasks[0]?.status).toBe('ERROR');
    expect(tasks[0]?.detail).toContain('image acs-sandbox:bookworm not found');
    expect((await sandbox(h, info.sandbox_id as string)).status).toBe('ERROR');
  });

  it('start refuses with 400 when the settings no longer allow it', async () => {
    const h = await harness();
    await storeSettings(h);
    const id = await createConversation(h);
    await h.idle();
    await h.call('POST', `/api/conversations/${id}/stop`);
    await storeSettings(h, { llm_api_key: '' });
    const r = await h.call('POST', `/api/conversations/${id}/start`);
    expect(r.status).toBe(400);
    expect(errorCode(r.body)).toBe('LLM_API_KEY_REQUIRED');
    expect((await conversationOk(h, id)).status).toBe('STOPPED');
  });
});

describe('client-chosen conversation ids (allowClientConversationIds)', () => {
  it('accepts a client id, refuses to reuse it with 409 CONVERSATION_ID_TAKEN, and refuses bad characters with 422', async () => {
    const h = await harness({ service: { allowClientConversationIds: true } });
    await storeSettings(h);
    const r = await h.call('POST', '/api/conversations', { body: { conversation_id: 'my-conv_1' } });
    expect(r.status, r.text).toBe(200);
    expect(obj(r.body)).toMatchObject({ status: 'ok', conversation_id: 'my-conv_1', conversation_status: 'STARTING' });
    await h.idle();
    expect((await conversationOk(h, 'my-conv_1')).status).toBe('RUNNING');
    const createsBefore = h.ports.runtime.calls.filter((c) => c.operation === 'create').length;

    const again = await h.call('POST', '/api/conversations', { body: { conversation_id: 'my-conv_1' } });
    expect(again.status).toBe(409);
    expect(errorCode(again.body)).toBe('CONVERSATION_ID_TAKEN');
    await h.idle();
    expect(h.ports.runtime.calls.filter((c) => c.operation === 'create').length).toBe(createsBefore);
    expect(arr(obj((await h.call('GET', '/api/conversations')).body).results)).toHaveLength(1);

    for (const bad of ['bad id', '../etc', 'a/b', '-leading-dash', 'x'.repeat(101), '', 'ümlaut']) {
      const refused = await h.call('POST', '/api/conversations', { body: { conversation_id: bad } });
      expect(refused.status, bad).toBe(422);
      expect(errorCode(refused.body)).toBe('VALIDATION_FAILED');
    }
    expect(arr(obj((await h.call('GET', '/api/conversations')).body).results)).toHaveLength(1);
  });

  it('the V1 batch read takes a client-chosen id that is not a UUID (a server of only its own ids refuses it with 400)', async () => {
    const h = await harness({ service: { allowClientConversationIds: true } });
    await storeSettings(h);
    expect((await h.call('POST', '/api/conversations', { body: { conversation_id: 'Mine_1' } })).status).toBe(200);
    await h.idle();
    const batch = await h.call('GET', '/api/v1/app-conversations?ids=Mine_1&ids=other');
    expect(batch.status, batch.text).toBe(200);
    expect(arr(batch.body).map((c) => (c === null ? null : obj(c).id))).toEqual(['Mine_1', null]);

    const strict = await harness();
    const refused = await strict.call('GET', '/api/v1/app-conversations?ids=Mine_1');
    expect(refused.status).toBe(400);
    expect(errorCode(refused.body)).toBe('INVALID_IDS');
  });

  it('concurrent creates with the same id: exactly one wins, the others get 409 and leave no sandbox behind', async () => {
    const h = await harness({ service: { allowClientConversationIds: true } });
    await storeSettings(h);
    const results = await Promise.all(
      Array.from({ length: 6 }, () => h.call('POST', '/api/conversations', { body: { conversation_id: 'race' } })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409, 409, 409, 409]);
    for (const r of results.filter((x) => x.status === 409)) expect(errorCode(r.body)).toBe('CONVERSATION_ID_TAKEN');
    await h.idle();
    const sandboxId = (await conversationOk(h, 'race')).sandbox_id as string;
    expect(items((await h.call('GET', '/api/v1/sandboxes/search')).body).map((b) => b.id)).toEqual([sandboxId]);
    expect(h.ports.runtime.size).toBe(1);
  });

  it('another user may use the same id: taken ids are per user and do not reveal anything', async () => {
    const h = await harness({ service: { allowClientConversationIds: true } });
    await storeSettings(h);
    await storeSettings(h, LLM_SETTINGS, KEY_B);
    expect((await h.call('POST', '/api/conversations', { body: { conversation_id: 'shared-name' } })).status).toBe(200);
    const bob = await h.call('POST', '/api/conversations', { key: KEY_B, body: { conversation_id: 'shared-name' } });
    expect(bob.status, bob.text).toBe(200);
    await h.idle();
    const alice = await conversationOk(h, 'shared-name');
    const bobs = obj((await getConversation(h, 'shared-name', KEY_B)).body);
    expect(alice.sandbox_id).not.toBe(bobs.sandbox_id);
  });
});
