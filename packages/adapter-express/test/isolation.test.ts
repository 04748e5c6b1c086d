import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  arr,
  createConversation,
  errorCode,
  items,
  KEY_A,
  KEY_B,
  obj,
  startAppConversation,
  startHarness,
  startSandbox,
  storeSettings,
  type CallResult,
  type Harness,
} from './harness.js';

/** Alice's world, as Alice sees it. */
async function snapshot(h: Harness): Promise<unknown> {
  const paths = [
    '/api/settings',
    '/api/conversations',
    '/api/v1/app-conversations/search',
    '/api/v1/app-conversations/count',
    '/api/v1/app-conversations/start-tasks/search',
    '/api/v1/app-conversations/start-tasks/count',
    '/api/v1/sandboxes/search',
  ];
  const out: Record<string, unknown> = {};
  for (const path of paths) {
    const r = await h.call('GET', path, { key: KEY_A });
    expect(r.status, path).toBe(200);
    out[path] = r.body;
  }
  return out;
}

describe('cross-user isolation', () => {
  let h: Harness;
  let v0: string;
  let v1: string;
  let task: Record<string, unknown>;
  let sandboxV0: string;
  let spare: string;
  let paused: string;
  let before: unknown;
  const statuses: number[] = [];
  const UNKNOWN = 'ffffffffffffffffffffffffffffffff';

  /** A call as Bob; every status is recorded to check that none is 403. */
  const bob = async (method: string, path: string, body?: unknown): Promise<CallResult> => {
    const r = await h.call(method, path, { key: KEY_B, ...(body !== undefined ? { body } : {}) });
    statuses.push(r.status);
    return r;
  };

  /** Bob's answer about Alice's record is the answer about a record that does not exist at all. */
  const sameAsUnknown = async (method: string, pathFor: (id: string) => string, aliceId: string, body?: unknown) => {
    const foreign = await bob(method, pathFor(aliceId), body);
    const unknown = await bob(method, pathFor(UNKNOWN), body);
    expect(foreign.status, `${method} ${pathFor(aliceId)}`).toBe(unknown.status);
    expect(foreign.status).not.toBe(403);
    if (foreign.status >= 400) {
      expect(errorCode(foreign.body)).toBe(errorCode(unknown.body));
      expect(String(obj(foreign.body).message).replaceAll(aliceId, 'ID')).toBe(
        String(obj(unknown.body).message).replaceAll(UNKNOWN, 'ID'),
      );
    } else {
      expect(foreign.body).toEqual(unknown.body);
    }
    return foreign;
  };

  beforeAll(async () => {
    h = await startHarness();
    await storeSettings(h, {
      llm_model: 'anthropic/claude-sonnet-4',
      llm_api_key: 'alice-llm-key-000000',
      language: 'en',
      secrets_store: {
        provider_tokens: { github: { token: 'ghp_alice', host: null } },
        custom_secrets: { ALICE_SECRET: { secret: 's' } },
      },
    });
    v0 = await createConversation(h);
    task = await startAppConversation(h, { title: 'Alice V1' });
    v1 = task.app_conversation_id as string;
    spare = (await startSandbox(h)).id as string;
    paused = (await startSandbox(h)).id as string;
    await h.idle();
    expect((await h.call('POST', `/api/v1/sandboxes/${paused}/pause`)).status).toBe(200);
    sandboxV0 = obj((await h.call('GET', `/api/conversations/${v0}`)).body).sandbox_id as string;
    before = await snapshot(h);
  });

  afterAll(async () => {
    await h.close();
  });

  it("Bob cannot load Alice's settings, and storing his own does not touch hers", async () => {
    const r = await bob('GET', '/api/settings');
    expect(r.status).toBe(404);
    expect(errorCode(r.body)).toBe('SETTINGS_NOT_FOUND');
    await storeSettings(h, { llm_model: 'openai/gpt-4o', llm_api_key: 'bob-llm-key-00000000', language: 'fr' }, KEY_B);
    const mine = obj((await bob('GET', '/api/settings')).body);
    expect(mine.language).toBe('fr');
    expect(mine.provider_tokens_set).toEqual({});
    expect(obj(mine.secrets_store).custom_secrets).toEqual({});
    expect(obj((await h.call('GET', '/api/settings')).body).language).toBe('en');
  });

  it("Bob's lists and counts do not include Alice's records", async () => {
    expect((await bob('GET', '/api/conversations')).body).toEqual({ results: [], next_page_id: null });
    expect((await bob('GET', '/api/v1/app-conversations')).body).toEqual({ items: [], next_page_id: null });
    expect((await bob('GET', '/api/v1/app-conversations/search')).body).toEqual({ items: [], next_page_id: null });
    expect((await bob('GET', '/api/v1/app-conversations/search?title__contains=Alice')).body).toEqual({
      items: [],
      next_page_id: null,
    });
    expect((await bob('GET', '/api/v1/app-conversations/count')).body).toBe(0);
    expect((await bob('GET', '/api/v1/app-conversations/start-tasks/search')).body).toEqual({
      items: [],
      next_page_id: null,
    });
    expect((await bob('GET', `/api/v1/app-conversations/start-tasks/search?conversation_id__eq=${v1}`)).body).toEqual({
      items: [],
      next_page_id: null,
    });
    expect((await bob('GET', '/api/v1/app-conversations/start-tasks/count')).body).toBe(0);
    expect((await bob('GET', `/api/v1/app-conversations/start-tasks/count?conversation_id__eq=${v1}`)).body).toBe(0);
    expect((await bob('GET', '/api/v1/sandboxes/search')).body).toEqual({ items: [], next_page_id: null });
  });

  it("Bob's batch gets return null for Alice's ids", async () => {
    expect((await bob('GET', `/api/v1/app-conversations?ids=${v0}&ids=${v1}`)).body).toEqual([null, null]);
    expect((await bob('GET', `/api/v1/app-conversations/start-tasks?ids=${task.id as string}`)).body).toEqual([null]);
    expect((await bob('GET', `/api/v1/sandboxes?id=${sandboxV0}&id=${spare}&id=${paused}`)).body).toEqual([
      null,
      null,
      null,
    ]);
  });

  it("Alice's page ids do not open her records to Bob", async () => {
    const page = obj((await h.call('GET', '/api/v1/sandboxes/search?limit=1')).body);
    const next = page.next_page_id as string;
    expect(typeof next).toBe('string');
    expect(items((await bob('GET', `/api/v1/sandboxes/search?page_id=${encodeURIComponent(next)}`)).body)).toEqual([]);
  });

  it("Bob gets 404, exactly as for an unknown id, for every action on Alice's conversations", async () => {
    for (const id of [v0, v1]) {
      for (const r of [
        await sameAsUnknown('GET', (x) => `/api/conversations/${x}`, id),
        await sameAsUnknown('GET', (x) => `/api/v1/app-conversations/${x}`, id),
        await sameAsUnknown('POST', (x) => `/api/conversations/${x}/stop`, id),
        await sameAsUnknown('POST', (x) => `/api/conversations/${x}/start`, id, {}),
        await sameAsUnknown('DELETE', (x) => `/api/conversations/${x}`, id),
      ]) {
        expect(r.status).toBe(404);
        expect(errorCode(r.body)).toBe('CONVERSATION_NOT_FOUND');
      }
    }
  });

  it("Bob gets 404, exactly as for an unknown id, for every action on Alice's sandboxes", async () => {
    for (const id of [sandboxV0, spare, paused]) {
      for (const r of [
        await sameAsUnknown('GET', (x) => `/api/v1/sandboxes/${x}`, id),
        await sameAsUnknown('POST', (x) => `/api/v1/sandboxes/${x}/pause`, id),
        await sameAsUnknown('POST', (x) => `/api/v1/sandboxes/${x}/resume`, id),
        await sameAsUnknown('DELETE', (x) => `/api/v1/sandboxes/${x}`, id),
      ]) {
        expect(r.status).toBe(404);
        expect(errorCode(r.body)).toBe('SANDBOX_NOT_FOUND');
      }
    }
  });

  it("Bob cannot start a conversation in Alice's sandbox or under Alice's conversation", async () => {
    const inSandbox = await bob('POST', '/api/v1/app-conversations', { sandbox_id: spare });
    const inUnknown = await bob('POST', '/api/v1/app-conversations', { sandbox_id: UNKNOWN });
    expect(inSandbox.status).toBe(404);
    expect(errorCode(inSandbox.body)).toBe('SANDBOX_NOT_FOUND');
    expect(inUnknown.status).toBe(404);
    expect(String(obj(inSandbox.body).message).replaceAll(spare, 'ID')).toBe(
      String(obj(inUnknown.body).message).replaceAll(UNKNOWN, 'ID'),
    );
    const underParent = await bob('POST', '/api/v1/app-conversations', { parent_conversation_id: v1 });
    const underUnknown = await bob('POST', '/api/v1/app-conversations', { parent_conversation_id: UNKNOWN });
    expect(underParent.status).toBe(422);
    expect(underUnknown.status).toBe(422);
    expect(errorCode(underParent.body)).toBe(errorCode(underUnknown.body));
  });

  it('no answer to Bob was a 403', () => {
    expect(statuses.length).toBeGreaterThan(40);
    expect(statuses).not.toContain(403);
  });

  it("Alice's records are unchanged afterwards, and nothing of hers was paused, resumed or deleted", async () => {
    await h.idle();
    expect(await snapshot(h)).toEqual(before);
    const touched = h.ports.runtime.calls.filter(
      (c) => [sandboxV0, spare, paused].includes(c.sandboxId) && ['pause', 'resume', 'delete'].includes(c.operation),
    );
    expect(touched).toEqual([{ operation: 'pause', sandboxId: paused }]);
    expect(obj((await h.call('GET', `/api/conversations/${v0}`)).body).status).toBe('RUNNING');
    expect(obj((await h.call('GET', `/api/v1/sandboxes/${paused}`)).body).status).toBe('PAUSED');
    expect(arr(obj((await h.call('GET', '/api/conversations')).body).results)).toHaveLength(2);
  });
});
