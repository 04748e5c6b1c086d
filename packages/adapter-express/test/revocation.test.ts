/**
 * Revocation that revokes, over real HTTP: a browser session ends with the key that signed it
 * in (revoked or expired) and with "sign out everywhere", and lives at most so long however often
 * it is used; a conversation's key can be rotated and stops opening anything when its sandbox is
 * deleted; their live channels close too.
 */
import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryBrowserSessions } from '@acs/adapter-express';
import {
  arr,
  createConversation,
  errorCode,
  KEY_A,
  KEY_B,
  obj,
  startAppConversation,
  startHarness,
  storeSettings,
  type Harness,
  type HarnessOptions,
} from './harness.js';

const harnesses: Harness[] = [];
const cleanups: (() => void)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) cleanup();
  for (const h of harnesses.splice(0)) await h.close();
});

type ManualHarness = Harness & { clock: Harness['clock'] & { advance(ms: number): void } };

async function harness(options: HarnessOptions = {}): Promise<ManualHarness> {
  const h = await startHarness(options);
  harnesses.push(h);
  return h as ManualHarness;
}

async function makeKey(h: Harness, body: Record<string, unknown>): Promise<{ id: string; key: string }> {
  const r = await h.call('POST', '/api/keys', { body });
  expect(r.status, r.text).toBe(200);
  return obj(r.body) as { id: string; key: string };
}

/** Signs a fresh browser in with `key` (opened by hand: at once); resolves to its cookie. */
async function signIn(h: Harness, key: string): Promise<string> {
  const response = await fetch(`${h.baseUrl}/console/?key=${key}`, {
    redirect: 'manual',
    headers: { 'Sec-Fetch-Site': 'none' },
  });
  expect(response.status).toBe(303);
  return (response.headers.get('set-cookie') ?? '').split(';')[0]!;
}

/** Whose session a cookie is now: a request through the API (404: signed in, no settings stored yet). */
async function sessionStatus(h: Harness, cookie: string): Promise<number> {
  return (await h.call('GET', '/api/keys', { key: null, headers: { cookie } })).status;
}

/** An agent-server WebSocket of a conversation, with the headers (a cookie) or the URL key given. */
function openWs(h: Harness, id: string, options: { headers?: Record<string, string>; urlKey?: string }) {
  const query = options.urlKey ? `?session_api_key=${encodeURIComponent(options.urlKey)}` : '';
  const ws = new WebSocket(`${h.baseUrl.replace('http', 'ws')}/sockets/events/${id}${query}`, {
    headers: options.headers ?? {},
  });
  ws.on('error', () => {});
  cleanups.push(() => ws.terminate());
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  const opened = new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('close', (code) => reject(new Error(`closed with ${code} before opening`)));
  });
  return { ws, closed, opened };
}

/** An SSE event stream of a conversation, open; `ended` resolves once it has ended. */
async function openStream(h: Harness, id: string, headers: Record<string, string>): Promise<{ ended: Promise<void> }> {
  const controller = new AbortController();
  cleanups.push(() => controller.abort());
  const response = await fetch(`${h.baseUrl}/api/v1/app-conversations/${id}/events/stream`, {
    headers,
    signal: controller.signal,
  });
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  const ended = (async () => {
    while (!(await reader.read()).done);
  })();
  return { ended };
}

describe('a browser session ends with the key that signed it in', () => {
  it('revoked: the session answers 401 at once, and its live channels close within a second', async () => {
    const h = await harness({ realtime: true, router: { liveChannels: { recheckMs: 100 } } });
    await storeSettings(h);
    const id = await createConversation(h);
    const made = await makeKey(h, { name: 'browser' });
    const cookie = await signIn(h, made.key);
    const byConfiguredKey = await signIn(h, KEY_A);
    expect(await sessionStatus(h, cookie)).toBe(200);
    const ws = openWs(h, id, { headers: { cookie, origin: h.baseUrl } });
    await ws.opened;
    const stream = await openStream(h, id, { cookie });
    const other = openWs(h, id, { headers: { cookie: byConfiguredKey, origin: h.baseUrl } });
    await other.opened;

    // Revoked with another key (the CLI's, say), not through the session.
    expect((await h.call('DELETE', `/api/keys/${made.id}`)).status).toBe(200);
    expect(await sessionStatus(h, cookie)).toBe(401);
    expect(await ws.closed).toBe(4001);
    await stream.ended;
    // The session of another key of the same user goes on.
    expect(await sessionStatus(h, byConfiguredKey)).toBe(200);
    expect(other.ws.readyState).toBe(WebSocket.OPEN);
  });

  it('expired: a key made with expires_in_days opens nothing after it, nor does the session it signed in', async () => {
    const h = await harness({ clock: 'manual' });
    for (const days of [0, 3651, 1.5]) {
      const refused = await h.call('POST', '/api/keys', { body: { name: 'x', expires_in_days: days } });
      expect(refused.status, String(days)).toBe(422);
    }
    const made = await makeKey(h, { name: 'for a day', expires_in_days: 1 });
    const listed = obj(arr((await h.call('GET', '/api/keys')).body)[0]);
    expect(Date.parse(listed.expires_at as string) - Date.parse(listed.created_at as string)).toBe(24 * 3600_000);
    const cookie = await signIn(h, made.key);
    expect(await sessionStatus(h, cookie)).toBe(200);
    h.clock.advance(24 * 3600_000);
    expect((await h.call('GET', '/api/v1/users/me', { key: made.key })).status).toBe(401);
    expect(await sessionStatus(h, cookie)).toBe(401);
    // It signs in no more either.
    const again = await fetch(`${h.baseUrl}/console/?key=${made.key}`, {
      redirect: 'manual',
      headers: { 'Sec-Fetch-Site': 'none' },
    });
    expect(again.status).toBe(401);
  });

  it('a session of a configured key lasts while that key is configured (in this process)', async () => {
    const h = await harness();
    const cookie = await signIn(h, KEY_A);
    expect(await sessionStatus(h, cookie)).toBe(200);
    // Another router on the same sessions, configured without that key (a restart with a new configuration).
    const sessions = new MemoryBrowserSessions();
    const configured = await harness({ router: { browserSessions: sessions } });
    const carried = await sessions.create('alice', 'configured:0000');
    expect(
      (await configured.call('GET', '/api/keys', { key: null, headers: { cookie: `acs_session=${carried}` } })).status,
    ).toBe(401);
    // A session kept without a credential (a store of the host's) is taken as it is.
    const bare = await sessions.create('alice');
    expect(
      (await configured.call('GET', '/api/keys', { key: null, headers: { cookie: `acs_session=${bare}` } })).status,
    ).toBe(200);
  });
});

describe('sign out everywhere', () => {
  it('ends every session of the user (not other users’), closes their channels at once, and says how many', async () => {
    // Credentials are checked again only once a minute here: the phone's socket must close at the sign-out itself.
    const h = await harness({ realtime: true, router: { liveChannels: { recheckMs: 60_000 } } });
    await storeSettings(h);
    const id = await createConversation(h);
    const [laptop, phone, bobs] = [await signIn(h, KEY_A), await signIn(h, KEY_A), await signIn(h, KEY_B)];
    const onPhone = openWs(h, id, { headers: { cookie: phone, origin: h.baseUrl } });
    await onPhone.opened;

    const out = await h.call('POST', '/api/sign-out', {
      key: null,
      body: { everywhere: true },
      headers: { cookie: laptop, origin: h.baseUrl },
    });
    expect(out.status, out.text).toBe(200);
    expect(out.body).toEqual({ signed_out: true, sessions_ended: 2 });
    expect(out.headers.get('set-cookie')).toMatch(/^acs_session=; /);
    expect(await sessionStatus(h, laptop)).toBe(401);
    expect(await sessionStatus(h, phone)).toBe(401);
    expect(await onPhone.closed).toBe(4001);
    expect(await sessionStatus(h, bobs)).toBe(200);
  });

  it('with an API key ends the user’s browser sessions too; a plain sign-out ends only its own', async () => {
    const h = await harness();
    const [one, two] = [await signIn(h, KEY_A), await signIn(h, KEY_A)];
    const plain = await h.call('POST', '/api/sign-out', { key: null, headers: { cookie: one, origin: h.baseUrl } });
    expect(plain.body).toEqual({ signed_out: true, sessions_ended: 1 });
    expect(await sessionStatus(h, two)).toBe(200);
    const byKey = await h.call('POST', '/api/sign-out', { body: { everywhere: true } });
    expect(byKey.status, byKey.text).toBe(200);
    expect(byKey.body).toEqual({ signed_out: true, sessions_ended: 1 });
    expect(await sessionStatus(h, two)).toBe(401);
    expect((await h.call('POST', '/api/sign-out', { body: { everywhere: 'yes' } })).status).toBe(422);
  });
});

describe('the longest a session lives', () => {
  it('ends a session past maxAgeMs however often it is used, and one unused past idleMs', async () => {
    let now = 0;
    const sessions = new MemoryBrowserSessions({ idleMs: 1_000, maxAgeMs: 3_000, now: () => now });
    const busy = await sessions.create('alice');
    const idle = await sessions.create('alice');
    for (now = 500; now <= 3_000; now += 500) expect(await sessions.userOf(busy)).toBe('alice');
    expect(await sessions.userOf(idle)).toBeNull();
    now = 3_001;
    expect(await sessions.userOf(busy)).toBeNull();
    expect(() => new MemoryBrowserSessions({ maxAgeMs: 0 })).toThrow(/maxAgeMs/);
  });

  it('holds through the router: a session used every day ends after 30 days by default', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const h = await harness({ router: { browserSessions: new MemoryBrowserSessions({ now: () => now }) } });
    const cookie = await signIn(h, KEY_A);
    for (let day = 1; day <= 30; day++) {
      now += 24 * 3600_000;
      expect(await sessionStatus(h, cookie), `day ${day}`).toBe(200);
    }
    now += 60_000;
    expect(await sessionStatus(h, cookie)).toBe(401);
  });
});

describe('a conversation’s own key', () => {
  /** A running V1 conversation of alice's: its id, its sandbox and its key. */
  async function running(h: Harness): Promise<{ id: string; sandboxId: string; key: string }> {
    await storeSettings(h);
    h.ports.llm.respondWith(() => ({ content: 'Done.' }));
    const task = await startAppConversation(h);
    await h.idle();
    const c = obj((await h.call('GET', `/api/v1/app-conversations/${task.app_conversation_id as string}`)).body);
    expect(c.sandbox_status).toBe('RUNNING');
    return { id: c.id as string, sandboxId: c.sandbox_id as string, key: c.session_api_key as string };
  }

  const opens = async (h: Harness, id: string, key: string) =>
    (await h.call('GET', `/api/v1/events/count?conversation_id__eq=${id}`, { key })).status;

  it('is rotated: the old key opens nothing (routes, channels, the sandbox’s secrets), the new one does', async () => {
    const h = await harness({ realtime: true, router: { liveChannels: { recheckMs: 100 } } });
    const { id, sandboxId, key } = await running(h);
    const secrets = (k: string) => h.call('GET', `/api/v1/sandboxes/${sandboxId}/settings/secrets`, { key: k });
    expect(await opens(h, id, key)).toBe(200);
    expect((await secrets(key)).status).toBe(200);
    const ws = openWs(h, id, { urlKey: key });
    await ws.opened;

    // Not with the key itself, nor by another user.
    expect((await h.call('POST', `/api/v1/app-conversations/${id}/rotate-key`, { key })).status).toBe(401);
    expect((await h.call('POST', `/api/v1/app-conversations/${id}/rotate-key`, { key: KEY_B })).status).toBe(404);
    const rotated = await h.call('POST', `/api/v1/app-conversations/${id}/rotate-key`);
    expect(rotated.status, rotated.text).toBe(200);
    const fresh = obj(rotated.body).session_api_key as string;
    expect(fresh).toMatch(/^acsc_/);
    expect(fresh).not.toBe(key);
    expect(obj((await h.call('GET', `/api/v1/app-conversations/${id}`)).body).session_api_key).toBe(fresh);
    expect(obj((await h.call('GET', `/api/conversations/${id}`)).body).session_api_key).toBe(fresh);

    expect(await opens(h, id, key)).toBe(401);
    const oldSecrets = await secrets(key);
    expect(oldSecrets.status).toBe(401);
    expect(errorCode(oldSecrets.body)).toBe('UNAUTHENTICATED');
    expect(await ws.closed).toBe(4001);
    expect(await opens(h, id, fresh)).toBe(200);
    expect((await secrets(fresh)).status).toBe(200);
    const again = openWs(h, id, { urlKey: fresh });
    await again.opened;
  });

  it('stops opening anything when its sandbox is deleted; a start in a new sandbox gives a new key', async () => {
    const h = await harness();
    await storeSettings(h);
    h.ports.llm.respondWith(() => ({ content: 'Done.' }));
    const id = await createConversation(h);
    await h.idle();
    const before = obj((await h.call('GET', `/api/conversations/${id}`)).body);
    const key = before.session_api_key as string;
    expect(await opens(h, id, key)).toBe(200);
    expect((await h.call('DELETE', `/api/v1/sandboxes/${before.sandbox_id as string}`)).status).toBe(200);
    expect(await opens(h, id, key)).toBe(401);

    expect((await h.call('POST', `/api/conversations/${id}/start`, { body: {} })).status).toBe(200);
    await h.idle();
    const after = obj((await h.call('GET', `/api/conversations/${id}`)).body);
    expect(after.sandbox_id).not.toBe(before.sandbox_id);
    expect(after.session_api_key).not.toBe(key);
    expect(await opens(h, id, after.session_api_key as string)).toBe(200);
    expect(await opens(h, id, key)).toBe(401);
  });
});
