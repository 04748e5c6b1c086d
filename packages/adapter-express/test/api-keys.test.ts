/**
 * Named API keys over real HTTP: made, listed without secrets, accepted wherever a configured
 * key is (header, Bearer, browser sign-in, live channels), revoked at once; the user's model
 * key (BYOR) and `GET /api/v1/users/me` as OpenHands answers its CLI.
 */
import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import {
  arr,
  createConversation,
  errorCode,
  KEY_A,
  KEY_B,
  LLM_SETTINGS,
  obj,
  startHarness,
  storeSettings,
  type Harness,
  type HarnessOptions,
} from './harness.js';
import { expectOpenHandsShape } from './openhands-shapes.js';

const harnesses: Harness[] = [];
const cleanups: (() => void)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) cleanup();
  for (const h of harnesses.splice(0)) await h.close();
});

async function harness(options: HarnessOptions = {}): Promise<Harness> {
  const h = await startHarness(options);
  harnesses.push(h);
  return h;
}

async function makeKey(h: Harness, name: string, key: string = KEY_A): Promise<{ id: string; key: string }> {
  const r = await h.call('POST', '/api/keys', { key, body: { name } });
  expect(r.status, r.text).toBe(200);
  return obj(r.body) as { id: string; key: string };
}

const bearer = (key: string) => ({ key: null, headers: { Authorization: `Bearer ${key}` } });

describe('API keys', () => {
  it('makes a named key whose secret is shown once, lists keys without secrets, and the key opens the API as its user', async () => {
    const h = await harness();
    const made = await makeKey(h, '  laptop  ');
    expect(made).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{32}$/) as string,
      name: 'laptop',
      created_at: expect.any(String) as string,
      last_used_at: null,
      expires_at: null,
      key: expect.stringMatching(/^acsk_[A-Za-z0-9_-]{43}$/) as string,
    });

    const listed = await h.call('GET', '/api/keys');
    expect(listed.body).toEqual([
      { id: made.id, name: 'laptop', created_at: obj(made).created_at, last_used_at: null, expires_at: null },
    ]);
    expect(listed.text).not.toContain(made.key);

    // Header and Bearer, as configured keys are taken.
    const me = await h.call('GET', '/api/v1/users/me', { key: made.key });
    expect(me.status).toBe(200);
    expect(obj(me.body).id).toBe('alice');
    expect(obj((await h.call('GET', '/api/v1/users/me', bearer(made.key))).body).id).toBe('alice');
    // What it stores is alice's.
    await storeSettings(h, { language: 'de' }, made.key);
    expect(obj((await h.call('GET', '/api/settings')).body).language).toBe('de');
    // Its use is noted.
    expect(obj(arr((await h.call('GET', '/api/keys')).body)[0]).last_used_at).toEqual(expect.any(String));
    // Nothing logs it.
    expect(h.logger.lines.join('\n')).not.toContain(made.key);
  });

  it('revokes a key: it opens nothing from the next request on, and revoking again is 404', async () => {
    const h = await harness();
    const made = await makeKey(h, 'ci');
    const kept = await makeKey(h, 'kept');
    expect((await h.call('GET', '/api/settings', { key: made.key })).status).toBe(404); // authenticated: no settings yet
    const revoked = await h.call('DELETE', `/api/keys/${made.id}`);
    expect(revoked.status, revoked.text).toBe(200);
    expect(revoked.body).toEqual({ success: true });
    for (const options of [{ key: made.key }, bearer(made.key)]) {
      const r = await h.call('GET', '/api/v1/users/me', options);
      expect(r.status).toBe(401);
      expect(errorCode(r.body)).toBe('UNAUTHENTICATED');
    }
    expect((await h.call('GET', '/api/v1/users/me', { key: kept.key })).status).toBe(200);
    const again = await h.call('DELETE', `/api/keys/${made.id}`);
    expect(again.status).toBe(404);
    expect(errorCode(again.body)).toBe('API_KEY_NOT_FOUND');
    expect(arr((await h.call('GET', '/api/keys')).body).map((k) => obj(k).name)).toEqual(['kept']);
  });

  it('keeps each user’s keys to that user: bob lists none of alice’s and cannot revoke them', async () => {
    const h = await harness();
    const alices = await makeKey(h, 'alice laptop');
    const bobs = await makeKey(h, 'bob laptop', KEY_B);
    expect(arr((await h.call('GET', '/api/keys', { key: KEY_B })).body).map((k) => obj(k).id)).toEqual([bobs.id]);
    const r = await h.call('DELETE', `/api/keys/${alices.id}`, { key: KEY_B });
    expect(r.status).toBe(404);
    expect(errorCode(r.body)).toBe('API_KEY_NOT_FOUND');
    // With bob's new key too.
    expect((await h.call('DELETE', `/api/keys/${alices.id}`, { key: bobs.key })).status).toBe(404);
    expect(obj((await h.call('GET', '/api/v1/users/me', { key: alices.key })).body).id).toBe('alice');
    expect(obj((await h.call('GET', '/api/v1/users/me', { key: bobs.key })).body).id).toBe('bob');
  });

  it('refuses a blank or too long name (422) and a key past the limit per user (409)', async () => {
    const h = await harness({ service: { maxApiKeysPerUser: 2 } });
    for (const name of ['', '   ', 'x'.repeat(101)]) {
      const r = await h.call('POST', '/api/keys', { body: { name } });
      expect(r.status, name).toBe(422);
      expect(errorCode(r.body)).toBe('VALIDATION_FAILED');
    }
    expect((await h.call('POST', '/api/keys', { body: { name: 'x', extra: 1 } })).status).toBe(422);
    await makeKey(h, 'one');
    await makeKey(h, 'two');
    const third = await h.call('POST', '/api/keys', { body: { name: 'three' } });
    expect(third.status).toBe(409);
    expect(errorCode(third.body)).toBe('API_KEY_LIMIT_REACHED');
    expect((await h.call('POST', '/api/keys', { key: KEY_B, body: { name: 'bob' } })).status).toBe(200);
  });

  it('signs a browser in with a stored key (?key=), and the session manages keys but never reads the model key', async () => {
    const h = await harness();
    const made = await makeKey(h, 'browser');
    const signIn = await fetch(`${h.baseUrl}/console/keys?key=${made.key}`, {
      redirect: 'manual',
      headers: { 'Sec-Fetch-Site': 'none' },
    });
    expect(signIn.status).toBe(303);
    expect(signIn.headers.get('location')).toBe('/console/keys');
    const cookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0]!;
    const session = { key: null, headers: { cookie, origin: h.baseUrl } };
    expect(arr((await h.call('GET', '/api/keys', session)).body)).toHaveLength(1);
    const byor = await h.call('GET', '/api/keys/llm/byor', session);
    expect(byor.status).toBe(403);
    expect(errorCode(byor.body)).toBe('API_KEY_REQUIRED');
    // Revoking the key ends the session it signed in (the session remembers its key), and it signs in no more.
    expect((await h.call('DELETE', `/api/keys/${made.id}`, session)).status).toBe(200);
    expect((await h.call('GET', '/api/keys', session)).status).toBe(401);
    const again = await fetch(`${h.baseUrl}/console/keys?key=${made.key}`, {
      redirect: 'manual',
      headers: { 'Sec-Fetch-Site': 'none' },
    });
    expect(again.status).toBe(401);
  });

  it('closes the live channels opened with a key once it is revoked, and keeps those of other keys', async () => {
    const h = await harness({ realtime: true, router: { liveChannels: { recheckMs: 100 } } });
    await storeSettings(h);
    const id = await createConversation(h);
    const made = await makeKey(h, 'channels');
    const open = (key: string) => {
      const ws = new WebSocket(`${h.baseUrl.replace('http', 'ws')}/sockets/events/${id}`, {
        headers: { 'X-Session-API-Key': key },
      });
      ws.on('error', () => {});
      cleanups.push(() => ws.terminate());
      const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
      const opened = new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('close', (code) => reject(new Error(`closed with ${code} before opening`)));
      });
      return { ws, closed, opened };
    };
    const withStored = open(made.key);
    const withConfigured = open(KEY_A);
    await Promise.all([withStored.opened, withConfigured.opened]);
    const sse = new AbortController();
    cleanups.push(() => sse.abort());
    const stream = await fetch(`${h.baseUrl}/api/v1/app-conversations/${id}/events/stream`, {
      headers: { Authorization: `Bearer ${made.key}` },
      signal: sse.signal,
    });
    expect(stream.status).toBe(200);
    const streamEnded = (async () => {
      const reader = stream.body!.getReader();
      while (!(await reader.read()).done);
    })();

    expect((await h.call('DELETE', `/api/keys/${made.id}`)).status).toBe(200);
    expect(await withStored.closed).toBe(4001);
    await streamEnded;
    expect(withConfigured.ws.readyState).toBe(WebSocket.OPEN);
  });
});

describe('GET /api/keys/llm/byor', () => {
  it('answers the caller’s own stored model key, null before one is stored, never another user’s', async () => {
    const h = await harness();
    expect((await h.call('GET', '/api/keys/llm/byor')).body).toEqual({ key: null });
    await storeSettings(h);
    await storeSettings(h, { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-bob-000000000000' }, KEY_B);
    expect((await h.call('GET', '/api/keys/llm/byor')).body).toEqual({ key: LLM_SETTINGS.llm_api_key });
    expect((await h.call('GET', '/api/keys/llm/byor', bearer(KEY_B))).body).toEqual({ key: 'sk-bob-000000000000' });
    // With a stored key of alice's: alice's.
    const made = await makeKey(h, 'cli');
    expect((await h.call('GET', '/api/keys/llm/byor', bearer(made.key))).body).toEqual({
      key: LLM_SETTINGS.llm_api_key,
    });
    // A cleared key is null again.
    await storeSettings(h, { llm_api_key: '' });
    expect((await h.call('GET', '/api/keys/llm/byor')).body).toEqual({ key: null });
    expect((await h.call('GET', '/api/keys/llm/byor', { key: null })).status).toBe(401);
  });

  it('is refused to a conversation’s own key (a sandbox must not read it)', async () => {
    const h = await harness();
    await storeSettings(h);
    const id = await createConversation(h);
    const conversationKey = obj((await h.call('GET', `/api/v1/app-conversations/${id}`)).body)
      .session_api_key as string;
    expect(conversationKey).toMatch(/^acsc_/);
    const r = await h.call('GET', '/api/keys/llm/byor', { key: conversationKey });
    expect(r.status).toBe(401);
    expect(r.text).not.toContain(LLM_SETTINGS.llm_api_key);
  });
});

describe('GET /api/v1/users/me', () => {
  it('answers OpenHands 1.11 UserInfo: the id and the settings with secrets masked, before and after settings are stored', async () => {
    const h = await harness();
    const before = await h.call('GET', '/api/v1/users/me');
    expect(before.status).toBe(200);
    expectOpenHandsShape('UserInfo', before.body);
    expect(obj(before.body)).toMatchObject({ id: 'alice', agent_settings: { llm: { model: null, api_key: null } } });

    await storeSettings(h, {
      ...LLM_SETTINGS,
      llm_base_url: 'http://127.0.0.1:9/v1',
      max_iterations: 40,
      confirmation_mode: true,
      security_analyzer: 'llm',
      search_api_key: 'tvly-secret-0000',
      git_user_name: 'Alice',
    });
    const after = await h.call('GET', '/api/v1/users/me');
    expectOpenHandsShape('UserInfo', after.body);
    expect(obj(after.body)).toMatchObject({
      id: 'alice',
      agent_settings: {
        llm: { model: LLM_SETTINGS.llm_model, base_url: 'http://127.0.0.1:9/v1', api_key: '**********' },
      },
      conversation_settings: { max_iterations: 40, confirmation_mode: true, security_analyzer: 'llm' },
      search_api_key: '**********',
      git_user_name: 'Alice',
    });
    expect(after.text).not.toContain(LLM_SETTINGS.llm_api_key);
    expect(after.text).not.toContain('tvly-secret-0000');
    // Analyzers 1.11 has no name for are left out rather than misnamed.
    await storeSettings(h, { security_analyzer: 'rules' });
    const rules = await h.call('GET', '/api/v1/users/me');
    expectOpenHandsShape('UserInfo', rules.body);
    expect(obj(obj(rules.body).conversation_settings).security_analyzer).toBeUndefined();
    // Bob is bob.
    const bob = await h.call('GET', '/api/v1/users/me', bearer(KEY_B));
    expectOpenHandsShape('UserInfo', bob.body);
    expect(obj(bob.body)).toMatchObject({ id: 'bob', agent_settings: { llm: { model: null } } });
  });

  it('is 401 for a key that opens nothing (the CLI’s probe: it logs out on 401 only)', async () => {
    const h = await harness();
    for (const options of [{ key: null }, bearer('acsk_' + 'x'.repeat(43)), bearer('not-a-key-0123456789abcdef')]) {
      const r = await h.call('GET', '/api/v1/users/me', options);
      expect(r.status).toBe(401);
    }
  });
});
