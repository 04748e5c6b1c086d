/**
 * Device sign-in (RFC 8628) over real HTTP, as `openhands login` does it: codes from
 * /oauth/device/authorize (JSON `{}`, no key), polls of /oauth/device/token (a form, no key),
 * the answer given by a signed-in user; on a manual clock, so expiry and pacing are exact.
 */
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import {
  arr,
  errorCode,
  KEY_A,
  KEY_B,
  obj,
  startHarness,
  type CallResult,
  type Harness,
  type HarnessOptions,
} from './harness.js';

const harnesses: Harness[] = [];
afterEach(async () => {
  for (const h of harnesses.splice(0)) await h.close();
});

type ManualHarness = Harness & { clock: Harness['clock'] & { advance(ms: number): void } };

async function harness(options: HarnessOptions = {}): Promise<ManualHarness> {
  const h = await startHarness({ clock: 'manual', ...options });
  harnesses.push(h);
  return h as ManualHarness;
}

interface Codes {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

/** What the CLI sends: `{}` as JSON, no key. */
async function authorize(h: Harness): Promise<Codes> {
  const r = await h.call('POST', '/oauth/device/authorize', { key: null, body: {} });
  expect(r.status, r.text).toBe(200);
  return r.body as Codes;
}

/** What the CLI sends: a form, no key. */
const poll = (h: Harness, deviceCode: string) =>
  h.call('POST', '/oauth/device/token', {
    key: null,
    rawBody: new URLSearchParams({ device_code: deviceCode }).toString(),
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
  });

const answer = (h: Harness, action: 'approve' | 'deny', userCode: string, key: string = KEY_A) =>
  h.call('POST', `/api/device-authorizations/${encodeURIComponent(userCode)}/${action}`, { key, body: {} });

/** The OAuth error of a refused poll (and that it is the common error body too). */
function oauthError(r: CallResult): string {
  expect(r.status, r.text).toBe(400);
  const body = obj(r.body);
  expect(body.error_description).toBe(body.message);
  expect(body.code).toBe(String(body.error).toUpperCase());
  return String(body.error);
}

/** A device sign-in approved by alice, and the token the device then gets. */
async function approvedKey(h: ManualHarness): Promise<{ access_token: string; expires_in: number | null }> {
  const codes = await authorize(h);
  expect((await answer(h, 'approve', codes.user_code)).status).toBe(200);
  const token = await poll(h, codes.device_code);
  expect(token.status, token.text).toBe(200);
  return token.body as { access_token: string; expires_in: number | null };
}

describe('device sign-in', () => {
  it('gives codes, answers authorization_pending until approved, then once a new key of the approving user', async () => {
    const h = await harness();
    const codes = await authorize(h);
    expect(codes).toEqual({
      device_code: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) as string,
      user_code: expect.stringMatching(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/) as string,
      verification_uri: `${h.baseUrl}/console/device`,
      verification_uri_complete: `${h.baseUrl}/console/device?user_code=${codes.user_code}`,
      expires_in: 600,
      interval: 5,
    });
    // The CLI polls at once, then every `interval` seconds.
    expect(oauthError(await poll(h, codes.device_code))).toBe('authorization_pending');
    h.clock.advance(5_000);
    expect(oauthError(await poll(h, codes.device_code))).toBe('authorization_pending');

    const page = await h.call('GET', `/api/device-authorizations/${codes.user_code}`);
    expect(page.status, page.text).toBe(200);
    expect(page.body).toMatchObject({ user_code: codes.user_code, client_name: 'OpenHands CLI', status: 'pending' });
    const approved = await answer(h, 'approve', codes.user_code.toLowerCase().replace('-', ''));
    expect(approved.status, approved.text).toBe(200);
    expect(obj(approved.body).status).toBe('approved');

    h.clock.advance(5_000);
    const token = await poll(h, codes.device_code);
    expect(token.status, token.text).toBe(200);
    expect(token.body).toEqual({
      access_token: expect.stringMatching(/^acsk_/) as string,
      token_type: 'Bearer',
      expires_in: 90 * 24 * 3600,
    });
    expect(token.headers.get('cache-control')).toBe('no-store');
    const key = obj(token.body).access_token as string;
    // The key is alice's, named for the device, listed and revocable with her others.
    const me = await h.call('GET', '/api/v1/users/me', { key: null, headers: { Authorization: `Bearer ${key}` } });
    expect(obj(me.body).id).toBe('alice');
    const keys = arr((await h.call('GET', '/api/keys')).body).map(obj);
    expect(keys.map((k) => k.name)).toEqual([expect.stringMatching(/^OpenHands CLI \(2026-01-01 \d\d:\d\d UTC\)$/)]);
    expect(arr((await h.call('GET', '/api/keys', { key: KEY_B })).body)).toEqual([]);

    // The device code is used up: the same poll again gets nothing.
    h.clock.advance(5_000);
    expect(oauthError(await poll(h, codes.device_code))).toBe('invalid_grant');
    expect(arr((await h.call('GET', '/api/keys')).body)).toHaveLength(1);
    // And the user code is gone.
    expect((await h.call('GET', `/api/device-authorizations/${codes.user_code}`)).status).toBe(404);
  });

  it('takes the poll as JSON too, and a form or an empty body for the codes', async () => {
    const h = await harness();
    const form = await h.call('POST', '/oauth/device/authorize', {
      key: null,
      rawBody: 'client_id=My%20Laptop&scope=x',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    });
    expect(form.status, form.text).toBe(200);
    const none = await h.call('POST', '/oauth/device/authorize', { key: null });
    expect(none.status, none.text).toBe(200);
    const codes = form.body as Codes;
    expect(obj((await h.call('GET', `/api/device-authorizations/${codes.user_code}`)).body).client_name).toBe(
      'My Laptop',
    );
    const json = await h.call('POST', '/oauth/device/token', {
      key: null,
      body: { device_code: codes.device_code, grant_type: 'urn:ietf:params:oauth:grant-type:device_code' },
    });
    expect(oauthError(json)).toBe('authorization_pending');
    const missing = await h.call('POST', '/oauth/device/token', {
      key: null,
      rawBody: 'grant_type=x',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    });
    expect(missing.status).toBe(422);
  });

  it('answers slow_down with a longer interval to a device that polls too often, and keeps that interval', async () => {
    const h = await harness();
    const codes = await authorize(h);
    expect(oauthError(await poll(h, codes.device_code))).toBe('authorization_pending');
    h.clock.advance(1_000);
    const fast = await poll(h, codes.device_code);
    expect(oauthError(fast)).toBe('slow_down');
    expect(obj(fast.body).interval).toBe(10);
    // The next poll after 5 s is still too soon: the interval is 10 now.
    h.clock.advance(5_000);
    expect(obj(await poll(h, codes.device_code).then((r) => r.body)).interval).toBe(15);
    h.clock.advance(15_000);
    expect(oauthError(await poll(h, codes.device_code))).toBe('authorization_pending');
  });

  it('answers expired_token once the codes have expired, and the user code no longer matches', async () => {
    const h = await harness();
    const codes = await authorize(h);
    h.clock.advance(600_000);
    expect((await answer(h, 'approve', codes.user_code)).status).toBe(404);
    expect(oauthError(await poll(h, codes.device_code))).toBe('expired_token');
    // The CLI stops there; a later poll finds nothing.
    h.clock.advance(10_000);
    expect(oauthError(await poll(h, codes.device_code))).toBe('invalid_grant');
  });

  it('answers access_denied when the user denies, and no key is made', async () => {
    const h = await harness();
    const codes = await authorize(h);
    const denied = await answer(h, 'deny', codes.user_code);
    expect(denied.status).toBe(200);
    expect(obj(denied.body).status).toBe('denied');
    expect(oauthError(await poll(h, codes.device_code))).toBe('access_denied');
    expect(arr((await h.call('GET', '/api/keys')).body)).toEqual([]);
  });

  it('answers invalid_grant for a device code it never gave', async () => {
    const h = await harness();
    await authorize(h);
    expect(oauthError(await poll(h, 'x'.repeat(43)))).toBe('invalid_grant');
  });

  it('binds the sign-in to whoever answered first: alice’s approval never gives bob’s key, and bob cannot answer it after her', async () => {
    const h = await harness();
    const codes = await authorize(h);
    expect((await answer(h, 'approve', codes.user_code)).status).toBe(200);
    // Approving again is the same answer; denying now is a conflict; bob sees and answers nothing of it.
    expect((await answer(h, 'approve', codes.user_code)).status).toBe(200);
    expect(errorCode((await answer(h, 'deny', codes.user_code)).body)).toBe('DEVICE_AUTHORIZATION_ANSWERED');
    for (const r of [
      await answer(h, 'approve', codes.user_code, KEY_B),
      await answer(h, 'deny', codes.user_code, KEY_B),
      await h.call('GET', `/api/device-authorizations/${codes.user_code}`, { key: KEY_B }),
    ]) {
      expect(r.status, r.text).toBe(409);
      expect(errorCode(r.body)).toBe('DEVICE_AUTHORIZATION_ANSWERED');
    }
    const token = await poll(h, codes.device_code);
    const key = obj(token.body).access_token as string;
    expect(obj((await h.call('GET', '/api/v1/users/me', { key })).body).id).toBe('alice');
    expect(arr((await h.call('GET', '/api/keys', { key: KEY_B })).body)).toEqual([]);

    // Bob's own sign-in gives bob's key.
    const bobs = await authorize(h);
    expect((await answer(h, 'approve', bobs.user_code, KEY_B)).status).toBe(200);
    const bobKey = obj((await poll(h, bobs.device_code)).body).access_token as string;
    expect(obj((await h.call('GET', '/api/v1/users/me', { key: bobKey })).body).id).toBe('bob');
  });

  it('bounds guessing: user codes that match nothing count per user, and past the limit even a right code is refused until the window closes', async () => {
    const h = await harness({ service: { maxUserCodeFailures: 3, userCodeFailureWindowMs: 60_000 } });
    const codes = await authorize(h);
    const wrong = codes.user_code.startsWith('B') ? 'CCCC-CCCC' : 'BBBB-BBBB';
    for (let i = 0; i < 3; i++) {
      const r = await answer(h, 'approve', wrong);
      expect(r.status).toBe(404);
      expect(errorCode(r.body)).toBe('USER_CODE_NOT_FOUND');
    }
    for (const r of [
      await answer(h, 'approve', codes.user_code),
      await h.call('GET', `/api/device-authorizations/${codes.user_code}`),
    ]) {
      expect(r.status, r.text).toBe(429);
      expect(errorCode(r.body)).toBe('USER_CODE_ATTEMPTS_EXCEEDED');
    }
    expect(oauthError(await poll(h, codes.device_code))).toBe('authorization_pending');
    // Bob's attempts are his own.
    expect((await h.call('GET', `/api/device-authorizations/${codes.user_code}`, { key: KEY_B })).status).toBe(200);
    h.clock.advance(60_000);
    expect((await answer(h, 'approve', codes.user_code)).status).toBe(200);
    // A code that is not of the form is not a guess at one (422, nothing counted).
    for (const bad of ['AAAA-AAAA', 'BCDF', 'BCDF-GHJK-L'])
      expect((await h.call('GET', `/api/device-authorizations/${bad}`)).status).toBe(422);
  });

  it('holds at most so many sign-ins waiting at once: past it 503, and room again once they expire', async () => {
    const h = await harness({ service: { maxPendingDeviceAuthorizations: 2 } });
    await authorize(h);
    await authorize(h);
    const full = await h.call('POST', '/oauth/device/authorize', { key: null, body: {} });
    expect(full.status).toBe(503);
    expect(errorCode(full.body)).toBe('DEVICE_AUTHORIZATIONS_FULL');
    h.clock.advance(600_000);
    await authorize(h);
  });

  it('holds at most so many sign-ins from one client address (an IPv6 /64 counts as one): 429, while other addresses still get in', async () => {
    const h = await harness({
      router: { trustProxy: true },
      service: { maxPendingDeviceAuthorizations: 7, maxPendingDeviceAuthorizationsPerClient: 3 },
    });
    const from = (address: string) =>
      h.call('POST', '/oauth/device/authorize', { key: null, body: {}, headers: { 'X-Forwarded-For': address } });
    for (let i = 0; i < 3; i++) expect((await from('203.0.113.5')).status).toBe(200);
    const refused = await from('203.0.113.5');
    expect(refused.status, refused.text).toBe(429);
    expect(errorCode(refused.body)).toBe('DEVICE_AUTHORIZATIONS_FROM_CLIENT_FULL');
    expect(obj(refused.body).message).toContain('3 device sign-ins from your address');
    // The proxy's own entry (the last) counts, not what the client put before it.
    expect((await from('198.51.100.1, 203.0.113.5')).status).toBe(429);
    // Addresses of one /64 are one client; another /64, or another IPv4 address, is another.
    for (let i = 0; i < 3; i++) expect((await from(`2001:db8:1:2::${i + 1}`)).status).toBe(200);
    expect((await from('2001:db8:1:2:ffff:ffff:ffff:ffff')).status).toBe(429);
    expect((await from('203.0.113.6')).status).toBe(200);
    // Only the global bound is 503, once many addresses together reach it.
    const full = await from('2001:db8:1:3::1');
    expect(full.status).toBe(503);
    expect(errorCode(full.body)).toBe('DEVICE_AUTHORIZATIONS_FULL');
    // Room again once they expire.
    h.clock.advance(600_000);
    expect((await from('203.0.113.5')).status).toBe(200);
  });

  it('counts by the connection’s address when the router trusts no proxy (X-Forwarded-For is ignored)', async () => {
    const h = await harness({ service: { maxPendingDeviceAuthorizationsPerClient: 2 } });
    const from = (address: string) =>
      h.call('POST', '/oauth/device/authorize', { key: null, body: {}, headers: { 'X-Forwarded-For': address } });
    expect((await from('203.0.113.1')).status).toBe(200);
    expect((await from('203.0.113.2')).status).toBe(200);
    expect(errorCode((await from('203.0.113.3')).body)).toBe('DEVICE_AUTHORIZATIONS_FROM_CLIENT_FULL');
  });

  it('gives a key that expires after the device key lifetime (90 days by default), listed with when it expires', async () => {
    const h = await harness();
    const key = await approvedKey(h);
    expect(key.expires_in).toBe(90 * 24 * 3600);
    const [listed] = arr((await h.call('GET', '/api/keys')).body).map(obj);
    expect(Date.parse(listed!.expires_at as string) - Date.parse(listed!.created_at as string)).toBe(
      90 * 24 * 3600_000,
    );
    const me = () => h.call('GET', '/api/v1/users/me', { key: key.access_token });
    expect((await me()).status).toBe(200);
    h.clock.advance(90 * 24 * 3600_000 - 60_000);
    expect((await me()).status).toBe(200);
    h.clock.advance(60_000);
    const expired = await me();
    expect(expired.status).toBe(401);
    expect(errorCode(expired.body)).toBe('UNAUTHENTICATED');
  });

  it('takes the device key lifetime from the service’s options, or makes keys that never expire with null', async () => {
    const hour = await harness({ service: { deviceKeyLifetimeMs: 3600_000 } });
    expect((await approvedKey(hour)).expires_in).toBe(3600);
    hour.clock.advance(3600_000);
    expect((await hour.call('GET', '/api/v1/users/me', { key: (await approvedKey(hour)).access_token })).status).toBe(
      200,
    );
    const never = await harness({ service: { deviceKeyLifetimeMs: null } });
    const key = await approvedKey(never);
    expect(key.expires_in).toBeNull();
    expect(obj(arr((await never.call('GET', '/api/keys')).body)[0]).expires_at).toBeNull();
    never.clock.advance(100 * 24 * 3600_000);
    expect((await never.call('GET', '/api/v1/users/me', { key: key.access_token })).status).toBe(200);
  });

  it('needs a signed-in user to answer, and a browser session to answer from this origin', async () => {
    const h = await harness();
    const codes = await authorize(h);
    expect((await h.call('GET', `/api/device-authorizations/${codes.user_code}`, { key: null })).status).toBe(401);
    expect((await answer(h, 'approve', codes.user_code, 'acsk_' + 'x'.repeat(43))).status).toBe(401);
    const signIn = await fetch(`${h.baseUrl}/console/device?user_code=${codes.user_code}&key=${KEY_A}`, {
      redirect: 'manual',
      headers: { 'Sec-Fetch-Site': 'none' },
    });
    expect(signIn.status).toBe(303);
    // Back to the approval page, without the key.
    expect(signIn.headers.get('location')).toBe(`/console/device?user_code=${codes.user_code}`);
    const cookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0]!;
    const crossSite = await h.call('POST', `/api/device-authorizations/${codes.user_code}/approve`, {
      key: null,
      body: {},
      headers: { cookie, origin: 'https://evil.example' },
    });
    expect(crossSite.status).toBe(403);
    expect(errorCode(crossSite.body)).toBe('CROSS_SITE_REQUEST');
    const sameSite = await h.call('POST', `/api/device-authorizations/${codes.user_code}/approve`, {
      key: null,
      body: {},
      headers: { cookie, origin: h.baseUrl },
    });
    expect(sameSite.status, sameSite.text).toBe(200);
    expect(
      obj(
        (
          await h.call('GET', '/api/v1/users/me', {
            key: obj((await poll(h, codes.device_code)).body).access_token as string,
          })
        ).body,
      ).id,
    ).toBe('alice');
  });

  it('says where the approval page is from the origin the request came to, at the path the host gave', async () => {
    const h = await harness({ router: { deviceVerificationPath: '/admin/device' } });
    // fetch will not send another Host; node:http will.
    const body = await new Promise<string>((resolve, reject) => {
      const req = request(
        `${h.baseUrl}/oauth/device/authorize`,
        { method: 'POST', headers: { Host: 'acs.example:8443', 'Content-Type': 'application/json' } },
        (res) => {
          let text = '';
          res.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
          res.on('end', () => resolve(text));
        },
      );
      req.on('error', reject);
      req.end('{}');
    });
    expect((JSON.parse(body) as Codes).verification_uri).toBe('http://acs.example:8443/admin/device');
  });
});
