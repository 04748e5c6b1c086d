import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  arr,
  errorCode,
  HEX32,
  items,
  obj,
  startAppConversation,
  startHarness,
  startSandbox,
  storeSettings,
  type Harness,
} from './harness.js';

let h: Harness;

beforeEach(async () => {
  // A manual clock: every timestamp is distinct and strictly increasing, so time filters are exact.
  h = await startHarness({ clock: 'manual' });
  await storeSettings(h);
});

afterEach(async () => {
  await h.close();
});

const message = (text: string) => ({ role: 'user', content: [{ type: 'text', text }] });

async function get(path: string): Promise<unknown> {
  const r = await h.call('GET', path);
  expect(r.status, `${path}: ${r.text}`).toBe(200);
  return r.body;
}

async function conversation(id: string): Promise<Record<string, unknown>> {
  return obj(await get(`/api/v1/app-conversations/${id}`));
}

async function expect422(path: string, issuePath?: string): Promise<void> {
  const r = await h.call('GET', path);
  expect(r.status, `${path}: ${r.text}`).toBe(422);
  expect(errorCode(r.body)).toBe('VALIDATION_FAILED');
  if (issuePath)
    expect(
      arr(obj(r.body).issues).map((i) => obj(i).path),
      path,
    ).toContain(issuePath);
}

describe('POST /api/v1/app-conversations', () => {
  it('returns a WORKING start task with the conversation and sandbox ids, which becomes READY', async () => {
    const r = await h.call('POST', '/api/v1/app-conversations', {
      body: {
        initial_message: message('hello'),
        selected_repository: 'octo/repo',
        selected_branch: 'dev',
        git_provider: 'gitlab',
        llm_model: 'openai/gpt-4o',
        unknown_key: 'ignored',
      },
    });
    expect(r.status, r.text).toBe(200);
    const task = obj(r.body);
    expect(task).toMatchObject({
      id: expect.stringMatching(HEX32) as string,
      created_by_user_id: 'alice',
      status: 'WORKING',
      detail: null,
      app_conversation_id: expect.stringMatching(HEX32) as string,
      sandbox_id: expect.stringMatching(HEX32) as string,
    });
    expect(obj(task.request)).toMatchObject({
      selected_repository: 'octo/repo',
      initial_message: { role: 'user', content: [{ type: 'text', text: 'hello' }] },
    });
    expect(obj(task.request)).not.toHaveProperty('unknown_key');

    await h.idle();
    const unknown = 'ffffffffffffffffffffffffffffffff';
    const batch = arr(await get(`/api/v1/app-conversations/start-tasks?ids=${task.id as string}&ids=${unknown}`));
    expect(batch).toHaveLength(2);
    expect(obj(batch[0])).toMatchObject({
      id: task.id,
      status: 'READY',
      app_conversation_id: task.app_conversation_id,
      sandbox_id: task.sandbox_id,
      detail: null,
    });
    expect(batch[1]).toBeNull();

    const c = await conversation(task.app_conversation_id as string);
    expect(c).toMatchObject({
      id: task.app_conversation_id,
      created_by_user_id: 'alice',
      sandbox_id: task.sandbox_id,
      sandbox_status: 'RUNNING',
      conversation_status: 'RUNNING',
      selected_repository: 'octo/repo',
      selected_branch: 'dev',
      git_provider: 'gitlab',
      llm_model: 'openai/gpt-4o',
    });
  });

  it('the model may come from the request when the settings have none', async () => {
    await storeSettings(h, { llm_model: '' });
    const refused = await h.call('POST', '/api/v1/app-conversations', { body: {} });
    expect(refused.status).toBe(400);
    expect(errorCode(refused.body)).toBe('LLM_MODEL_REQUIRED');
    const task = await startAppConversation(h, { llm_model: 'anthropic/claude-opus-4' });
    await h.idle();
    expect((await conversation(task.app_conversation_id as string)).llm_model).toBe('anthropic/claude-opus-4');
  });

  it('without settings → 400 SETTINGS_REQUIRED and nothing is stored', async () => {
    const fresh = await startHarness({ clock: 'manual' });
    try {
      const r = await fresh.call('POST', '/api/v1/app-conversations', { body: { initial_message: message('x') } });
      expect(r.status).toBe(400);
      expect(errorCode(r.body)).toBe('SETTINGS_REQUIRED');
      expect((await fresh.call('GET', '/api/v1/app-conversations/count')).body).toBe(0);
      expect((await fresh.call('GET', '/api/v1/app-conversations/start-tasks/count')).body).toBe(0);
      expect(fresh.ports.runtime.calls).toEqual([]);
    } finally {
      await fresh.close();
    }
  });

  it.each([
    ['content that is not a list', { initial_message: { content: 'hi' } }],
    ['an unknown content type', { initial_message: { content: [{ type: 'video', url: 'x' }] } }],
    [
      'an image with a file URL',
      { initial_message: { content: [{ type: 'image', image_urls: ['file:///etc/passwd'] }] } },
    ],
    ['an unknown role', { initial_message: { role: 'root', content: [] } }],
    ['an unknown git provider', { git_provider: 'svn' }],
    ['a bad agent_type', { agent_type: 'evil' }],
    ['a negative pr_number', { pr_number: [-1] }],
  ])('%s → 422, nothing stored', async (_label, body) => {
    const r = await h.call('POST', '/api/v1/app-conversations', { body });
    expect(r.status, r.text).toBe(422);
    expect(errorCode(r.body)).toBe('VALIDATION_FAILED');
    expect(await get('/api/v1/app-conversations/count')).toBe(0);
    expect(h.ports.runtime.calls).toEqual([]);
  });

  it('an unknown parent_conversation_id → 422 (not 500)', async () => {
    const r = await h.call('POST', '/api/v1/app-conversations', {
      body: { parent_conversation_id: 'ffffffffffffffffffffffffffffffff' },
    });
    expect(r.status).toBe(422);
    expect(arr(obj(r.body).issues).map((i) => obj(i).path)).toContain('parent_conversation_id');
  });

  it('a sub-conversation inherits its parent sandbox and is listed only with include_sub_conversations', async () => {
    const parent = await startAppConversation(h, { selected_repository: 'octo/repo' });
    await h.idle();
    const child = await startAppConversation(h, { parent_conversation_id: parent.app_conversation_id });
    expect(child.sandbox_id).toBe(parent.sandbox_id);
    await h.idle();
    expect((await conversation(child.app_conversation_id as string)).selected_repository).toBe('octo/repo');
    expect(items(await get('/api/v1/app-conversations/search')).map((c) => c.id)).toEqual([parent.app_conversation_id]);
    expect(
      items(await get('/api/v1/app-conversations/search?include_sub_conversations=true')).map((c) => c.id),
    ).toEqual([child.app_conversation_id, parent.app_conversation_id]);
    expect((await conversation(parent.app_conversation_id as string)).sub_conversation_ids).toEqual([
      child.app_conversation_id,
    ]);
  });
});

describe('sandbox_id on start', () => {
  it('an existing sandbox is reused, not created again', async () => {
    const box = await startSandbox(h);
    await h.idle();
    const creates = () => h.ports.runtime.calls.filter((c) => c.operation === 'create').length;
    const before = creates();
    const task = await startAppConversation(h, { sandbox_id: box.id });
    expect(task.sandbox_id).toBe(box.id);
    await h.idle();
    expect(creates()).toBe(before);
    const c = await conversation(task.app_conversation_id as string);
    expect(c).toMatchObject({ sandbox_id: box.id, sandbox_status: 'RUNNING', conversation_status: 'RUNNING' });
  });

  it('a paused sandbox is resumed for the new conversation', async () => {
    const box = await startSandbox(h);
    await h.idle();
    expect((await h.call('POST', `/api/v1/sandboxes/${box.id as string}/pause`)).status).toBe(200);
    const task = await startAppConversation(h, { sandbox_id: box.id });
    await h.idle();
    expect(obj(arr(await get(`/api/v1/app-conversations/start-tasks?ids=${task.id as string}`))[0]).status).toBe(
      'READY',
    );
    expect(obj(await get(`/api/v1/sandboxes/${box.id as string}`)).status).toBe('RUNNING');
  });

  it('an unknown or deleted sandbox → 404 SANDBOX_NOT_FOUND, nothing stored', async () => {
    const unknown = await h.call('POST', '/api/v1/app-conversations', { body: { sandbox_id: 'no-such-sandbox' } });
    expect(unknown.status).toBe(404);
    expect(errorCode(unknown.body)).toBe('SANDBOX_NOT_FOUND');

    const box = await startSandbox(h);
    await h.idle();
    expect((await h.call('DELETE', `/api/v1/sandboxes/${box.id as string}`)).status).toBe(200);
    const deleted = await h.call('POST', '/api/v1/app-conversations', { body: { sandbox_id: box.id } });
    expect(deleted.status).toBe(404);
    expect(errorCode(deleted.body)).toBe('SANDBOX_NOT_FOUND');
    expect(await get('/api/v1/app-conversations/count')).toBe(0);
    expect(await get('/api/v1/app-conversations/start-tasks/count')).toBe(0);
  });

  it('a sandbox in ERROR → 409 ILLEGAL_SANDBOX_TRANSITION, nothing stored', async () => {
    const box = await startSandbox(h);
    await h.idle();
    h.ports.runtime.crash(box.id as string);
    expect(obj(await get(`/api/v1/sandboxes/${box.id as string}`)).status).toBe('ERROR');
    const r = await h.call('POST', '/api/v1/app-conversations', { body: { sandbox_id: box.id } });
    expect(r.status).toBe(409);
    expect(errorCode(r.body)).toBe('ILLEGAL_SANDBOX_TRANSITION');
    expect(await get('/api/v1/app-conversations/count')).toBe(0);
  });

  it('a sandbox that fails to start makes the task ERROR with detail', async () => {
    h.ports.runtime.failNext('create', { message: 'no space left on device' });
    const task = await startAppConversation(h);
    await h.idle();
    const done = obj(arr(await get(`/api/v1/app-conversations/start-tasks?ids=${task.id as string}`))[0]);
    expect(done.status).toBe('ERROR');
    expect(done.detail).toContain('no space left on device');
    expect(await conversation(task.app_conversation_id as string)).toMatchObject({
      conversation_status: 'STOPPED',
      sandbox_status: 'ERROR',
    });
  });
});

describe('live sandbox status on app conversations', () => {
  it('pausing the sandbox shows sandbox_status PAUSED and conversation_status STOPPED; resuming shows RUNNING', async () => {
    const task = await startAppConversation(h);
    await h.idle();
    const id = task.app_conversation_id as string;
    const sandboxId = task.sandbox_id as string;
    expect(await conversation(id)).toMatchObject({
      sandbox_id: sandboxId,
      sandbox_status: 'RUNNING',
      conversation_status: 'RUNNING',
    });

    expect((await h.call('POST', `/api/v1/sandboxes/${sandboxId}/pause`)).body).toEqual({ success: true });
    expect(await conversation(id)).toMatchObject({ sandbox_status: 'PAUSED', conversation_status: 'STOPPED' });
    expect(obj(arr(await get(`/api/v1/app-conversations?ids=${id}`))[0])).toMatchObject({
      sandbox_status: 'PAUSED',
      conversation_status: 'STOPPED',
    });
    expect(items(await get('/api/v1/app-conversations/search'))[0]).toMatchObject({
      sandbox_status: 'PAUSED',
      conversation_status: 'STOPPED',
    });
    expect(obj(await get(`/api/conversations/${id}`)).status).toBe('STOPPED');

    expect((await h.call('POST', `/api/v1/sandboxes/${sandboxId}/resume`)).body).toEqual({ success: true });
    await h.idle();
    expect(await conversation(id)).toMatchObject({ sandbox_status: 'RUNNING', conversation_status: 'RUNNING' });

    expect((await h.call('DELETE', `/api/v1/sandboxes/${sandboxId}`)).body).toEqual({ success: true });
    expect(await conversation(id)).toMatchObject({ sandbox_status: 'MISSING', conversation_status: 'STOPPED' });
  });

  it('sandbox_status is live: a sandbox that died shows ERROR and the conversation STOPPED without fetching the sandbox first', async () => {
    const task = await startAppConversation(h);
    await h.idle();
    const id = task.app_conversation_id as string;
    h.ports.runtime.crash(task.sandbox_id as string, 'killed by the OOM killer');
    // Only conversation routes are read here; nobody has asked GET /api/v1/sandboxes/{id} yet.
    expect(await conversation(id)).toMatchObject({ sandbox_status: 'ERROR', conversation_status: 'STOPPED' });
    expect(obj(arr(await get(`/api/v1/app-conversations?ids=${id}`))[0])).toMatchObject({ sandbox_status: 'ERROR' });
    expect(obj(await get(`/api/conversations/${id}`)).status).toBe('STOPPED');
  });

  it('GET /api/v1/app-conversations/{id} of an unknown id → 404 CONVERSATION_NOT_FOUND', async () => {
    const r = await h.call('GET', '/api/v1/app-conversations/ffffffffffffffffffffffffffffffff');
    expect(r.status).toBe(404);
    expect(errorCode(r.body)).toBe('CONVERSATION_NOT_FOUND');
  });
});

describe('start tasks: batch, search and count', () => {
  it('search sorts, filters by conversation_id__eq and created_at__gte; count returns a bare integer', async () => {
    const t1 = await startAppConversation(h);
    const t2 = await startAppConversation(h);
    const t3 = await startAppConversation(h);
    await h.idle();
    // A second task for the first conversation (V0 stop + start).
    const c1 = t1.app_conversation_id as string;
    await h.call('POST', `/api/conversations/${c1}/stop`);
    expect((await h.call('POST', `/api/conversations/${c1}/start`)).status).toBe(200);
    await h.idle();

    const all = items(await get('/api/v1/app-conversations/start-tasks/search'));
    expect(all).toHaveLength(4);
    const createdDesc = all.map((t) => t.created_at as string);
    expect(createdDesc).toEqual([...createdDesc].sort().reverse());
    expect(all.slice(1).map((t) => t.id)).toEqual([t3.id, t2.id, t1.id]);
    const t4 = all[0] as Record<string, unknown>;
    expect(t4.app_conversation_id).toBe(c1);

    expect(
      items(await get('/api/v1/app-conversations/start-tasks/search?sort_order=CREATED_AT_DESC')).map((t) => t.id),
    ).toEqual(all.map((t) => t.id));
    expect(
      items(await get('/api/v1/app-conversations/start-tasks/search?sort_order=CREATED_AT')).map((t) => t.id),
    ).toEqual([...all].reverse().map((t) => t.id));
    await expect422('/api/v1/app-conversations/start-tasks/search?sort_order=TITLE', 'query.sort_order');

    const ofC1 = items(await get(`/api/v1/app-conversations/start-tasks/search?conversation_id__eq=${c1}`));
    expect(ofC1.map((t) => t.id)).toEqual([t4.id, t1.id]);
    expect(await get(`/api/v1/app-conversations/start-tasks/count?conversation_id__eq=${c1}`)).toBe(2);
    expect(
      items(
        await get('/api/v1/app-conversations/start-tasks/search?conversation_id__eq=ffffffffffffffffffffffffffffffff'),
      ),
    ).toEqual([]);

    const since = t2.created_at as string;
    const recent = items(
      await get(`/api/v1/app-conversations/start-tasks/search?created_at__gte=${encodeURIComponent(since)}`),
    );
    expect(recent.map((t) => t.id)).toEqual([t4.id, t3.id, t2.id]);
    expect(await get(`/api/v1/app-conversations/start-tasks/count?created_at__gte=${encodeURIComponent(since)}`)).toBe(
      3,
    );

    const count = await h.call('GET', '/api/v1/app-conversations/start-tasks/count');
    expect(count.text).toBe('4');
    expect(count.body).toBe(4);
    await expect422('/api/v1/app-conversations/start-tasks/count?created_at__gte=yesterday', 'query.created_at__gte');
  });

  it('batch get needs UUID ids (missing, empty or not a UUID → 422), at most 100 (more → 400 INVALID_IDS, as OpenHands 1.11)', async () => {
    await expect422('/api/v1/app-conversations/start-tasks', 'query.ids');
    await expect422('/api/v1/app-conversations/start-tasks?ids=', 'query.ids');
    await expect422('/api/v1/app-conversations/start-tasks?ids=nope', 'query.ids.0');
    const many = Array.from({ length: 101 }, (_, i) => `ids=${i.toString(16).padStart(32, '0')}`).join('&');
    const tooMany = await h.call('GET', `/api/v1/app-conversations/start-tasks?${many}`);
    expect(tooMany.status).toBe(400);
    expect(errorCode(tooMany.body)).toBe('INVALID_IDS');
    expect(obj(tooMany.body).detail).toContain('at most 100');
    const hundred = Array.from({ length: 100 }, (_, i) => i.toString(16).padStart(32, '0')).join(',');
    const ok = arr(await get(`/api/v1/app-conversations/start-tasks?ids=${hundred}`));
    expect(ok).toHaveLength(100);
    expect(ok.every((x) => x === null)).toBe(true);
  });
});

describe('app conversations: list, search, count, filters and batch get', () => {
  let created: Record<string, unknown>[];

  beforeEach(async () => {
    for (const title of ['Alpha report', 'beta ALPHA', 'Gamma', 'delta']) await startAppConversation(h, { title });
    await h.idle();
    created = items(await get('/api/v1/app-conversations/search'));
    expect(created).toHaveLength(4);
  });

  const ids = (page: unknown) => items(page).map((c) => c.id);

  it('lists newest first; list, search and count agree', async () => {
    expect(created.map((c) => c.title)).toEqual(['delta', 'Gamma', 'beta ALPHA', 'Alpha report']);
    expect(ids(await get('/api/v1/app-conversations'))).toEqual(created.map((c) => c.id));
    expect(await get('/api/v1/app-conversations/count')).toBe(4);
    for (const c of created) expect(c.sandbox_id).toEqual(expect.stringMatching(HEX32));
  });

  it('title__contains is a case-insensitive substring match', async () => {
    for (const base of ['/api/v1/app-conversations', '/api/v1/app-conversations/search']) {
      expect(items(await get(`${base}?title__contains=alpha`)).map((c) => c.title)).toEqual([
        'beta ALPHA',
        'Alpha report',
      ]);
      expect(items(await get(`${base}?title__contains=GAMMA`)).map((c) => c.title)).toEqual(['Gamma']);
      expect(items(await get(`${base}?title__contains=zzz`))).toEqual([]);
    }
    expect(await get('/api/v1/app-conversations/count?title__contains=ALPHA')).toBe(2);
  });

  it('created_at__gte is inclusive, created_at__lt exclusive, on list, search and count', async () => {
    const pivot = created[1]?.created_at as string; // Gamma
    const newer = created.slice(0, 2).map((c) => c.id);
    const older = created.slice(2).map((c) => c.id);
    for (const base of ['/api/v1/app-conversations', '/api/v1/app-conversations/search']) {
      expect(ids(await get(`${base}?created_at__gte=${encodeURIComponent(pivot)}`))).toEqual(newer);
      expect(ids(await get(`${base}?created_at__lt=${encodeURIComponent(pivot)}`))).toEqual(older);
    }
    expect(await get(`/api/v1/app-conversations/count?created_at__gte=${encodeURIComponent(pivot)}`)).toBe(2);
    expect(await get(`/api/v1/app-conversations/count?created_at__lt=${encodeURIComponent(pivot)}`)).toBe(2);
    const first = created[3]?.created_at as string;
    const last = created[0]?.created_at as string;
    expect(
      ids(
        await get(
          `/api/v1/app-conversations/search?created_at__gte=${encodeURIComponent(first)}&created_at__lt=${encodeURIComponent(last)}`,
        ),
      ),
    ).toEqual(created.slice(1).map((c) => c.id));
    // The same instant written with an offset, and a date without time.
    const withOffset = new Date(Date.parse(pivot)).toISOString().replace('Z', '+00:00');
    expect(
      ids(await get(`/api/v1/app-conversations/search?created_at__gte=${encodeURIComponent(withOffset)}`)),
    ).toEqual(newer);
    expect(await get('/api/v1/app-conversations/count?created_at__gte=2026-01-01')).toBe(4);
    expect(await get('/api/v1/app-conversations/count?created_at__lt=2026-01-01')).toBe(0);
  });

  it('updated_at__gte / __lt filter on the last update', async () => {
    // Stop the oldest one: it becomes the most recently updated.
    const oldest = created[3]?.id as string;
    expect((await h.call('POST', `/api/conversations/${oldest}/stop`)).status).toBe(200);
    const updated = obj(await get(`/api/v1/app-conversations/${oldest}`)).updated_at as string;
    for (const c of created.slice(0, 3)) expect((c.updated_at as string) < updated).toBe(true);
    expect(ids(await get(`/api/v1/app-conversations/search?updated_at__gte=${encodeURIComponent(updated)}`))).toEqual([
      oldest,
    ]);
    expect(ids(await get(`/api/v1/app-conversations/search?updated_at__lt=${encodeURIComponent(updated)}`))).toEqual(
      created.slice(0, 3).map((c) => c.id),
    );
    expect(await get(`/api/v1/app-conversations/count?updated_at__gte=${encodeURIComponent(updated)}`)).toBe(1);
    expect(await get(`/api/v1/app-conversations/count?updated_at__lt=${encodeURIComponent(updated)}`)).toBe(3);
    expect(ids(await get(`/api/v1/app-conversations?updated_at__gte=${encodeURIComponent(updated)}`))).toEqual([
      oldest,
    ]);
  });

  it.each(['yesterday', '2026-13-01', '2026-01-01T25:00:00Z', '1700000000', '2026/01/01', '2026-01-01T00:00:00+5'])(
    'a bad timestamp (%s) → 422',
    async (bad) => {
      for (const field of ['created_at__gte', 'created_at__lt', 'updated_at__gte', 'updated_at__lt']) {
        for (const base of [
          '/api/v1/app-conversations',
          '/api/v1/app-conversations/search',
          '/api/v1/app-conversations/count',
        ]) {
          await expect422(`${base}?${field}=${encodeURIComponent(bad)}`, `query.${field}`);
        }
      }
    },
  );

  it('batch get by ids keeps the order and has null holes; comma-separated and dashed ids work', async () => {
    const [a, b] = [created[0]?.id as string, created[2]?.id as string];
    const unknown = 'ffffffffffffffffffffffffffffffff';
    const batch = arr(await get(`/api/v1/app-conversations?ids=${b}&ids=${unknown}&ids=${a}`));
    expect(batch.map((c) => (c === null ? null : obj(c).id))).toEqual([b, null, a]);
    const commas = arr(await get(`/api/v1/app-conversations?ids=${a},${unknown},${b}`));
    expect(commas.map((c) => (c === null ? null : obj(c).id))).toEqual([a, null, b]);
    const dashed = `${a.slice(0, 8)}-${a.slice(8, 12)}-${a.slice(12, 16)}-${a.slice(16, 20)}-${a.slice(20)}`;
    expect(obj(arr(await get(`/api/v1/app-conversations?ids=${dashed}`))[0]).id).toBe(a);
    const batchItem = obj(batch[0]);
    expect(batchItem).toMatchObject({ sandbox_id: expect.stringMatching(HEX32) as string, sandbox_status: 'RUNNING' });
  });

  it('100 ids or more, or an id that is not a UUID → 400 INVALID_IDS (as OpenHands 1.11), with our error body', async () => {
    const idsOf = (n: number) =>
      Array.from({ length: n }, (_, i) => `ids=${i.toString(16).padStart(32, '0')}`).join('&');
    expect(arr(await get(`/api/v1/app-conversations?${idsOf(99)}`))).toHaveLength(99);
    for (const query of [idsOf(100), idsOf(101), 'ids=nope', `ids=${created[0]?.id as string}&ids=abc`]) {
      const r = await h.call('GET', `/api/v1/app-conversations?${query}`);
      expect(r.status, query).toBe(400);
      expect(errorCode(r.body)).toBe('INVALID_IDS');
      expect(obj(r.body).detail).toBe(obj(r.body).message);
    }
    expect(obj((await h.call('GET', '/api/v1/app-conversations?ids=nope')).body).detail).toBe(
      'ids: not a UUID: "nope"',
    );
    expect(obj((await h.call('GET', `/api/v1/app-conversations?${idsOf(100)}`)).body).detail).toBe(
      'ids: at most 99 ids per request; got 100',
    );
  });
});
