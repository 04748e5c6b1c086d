/**
 * Browser sign-in with ?key= over real HTTP: another site can neither sign a victim in nor
 * switch a session; a redirect is always a path of this site; behind a trusted proxy the cookie
 * and the origin checks follow the scheme the browser sees.
 */
import { once } from 'node:events';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createAcsRouter } from '@acs/adapter-express';
import { afterEach, describe, expect, it } from 'vitest';
import { KEY_A, KEY_B, startHarness, type Harness, type HarnessOptions } from './harness.js';

const harnesses: Harness[] = [];
afterEach(async () => {
  for (const h of harnesses.splice(0)) await h.close();
});

async function harness(options: HarnessOptions = {}): Promise<Harness> {
  const h = await startHarness(options);
  harnesses.push(h);
  return h;
}

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A request with the path sent exactly as written (fetch would normalise it). */
function raw(
  h: Harness,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<Raw> {
  const { port } = new URL(h.baseUrl);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: { ...headers, ...(body !== undefined ? { 'Content-Length': String(Buffer.byteLength(body)) } : {}) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const cookieOf = (r: Raw) => {
  const setCookie = r.headers['set-cookie'];
  return Array.isArray(setCookie) ? setCookie[0] : undefined;
};
const TYPED = { 'Sec-Fetch-Site': 'none', 'Sec-Fetch-Mode': 'navigate' };

/** Who the cookie signs in as, through the API. */
async function userOf(h: Harness, cookie: string): Promise<string | null> {
  const r = await h.call('GET', '/api/settings', { key: null, headers: { cookie } });
  if (r.status === 401) return null;
  return r.status === 200 || r.status === 404 ? 'signed-in' : `status ${r.status}`;
}

describe('sign-in from another site', () => {
  it.each([
    ['a cross-site navigation', { 'Sec-Fetch-Site': 'cross-site', 'Sec-Fetch-Mode': 'navigate' }],
    ['a same-site navigation from another port', { 'Sec-Fetch-Site': 'same-site', 'Sec-Fetch-Mode': 'navigate' }],
    ['a browser that says nothing', {}],
  ])('%s gets a page asking first, that no other page can frame, and no session', async (_what, headers) => {
    const h = await harness();
    const r = await raw(h, 'GET', `/console/?key=${KEY_B}`, headers);
    expect(r.status).toBe(200);
    expect(cookieOf(r)).toBeUndefined();
    expect(r.headers['content-type']).toMatch(/^text\/html/);
    expect(r.body).toContain('<h1>Sign in as bob?</h1>');
    expect(r.body).toContain('<form method="post">');
    expect(r.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(r.headers['x-frame-options']).toBe('DENY');
    expect(r.headers['referrer-policy']).toBe('no-referrer');
    expect(r.headers['cache-control']).toBe('no-store');
  });

  it('signs in at once when the user opened the link themselves and no one is signed in', async () => {
    const h = await harness();
    const r = await raw(h, 'GET', `/console/?key=${KEY_A}&tab=x`, TYPED);
    expect(r.status).toBe(303);
    expect(r.headers.location).toBe('/console/?tab=x');
    const cookie = cookieOf(r)!;
    expect(cookie).toMatch(/^acs_session=[^;]+; Path=\/; HttpOnly; SameSite=Strict$/);
    expect(await userOf(h, cookie.split(';')[0]!)).toBe('signed-in');
  });

  it('never replaces a session silently: another user’s link asks, and only a post from this origin switches', async () => {
    const h = await harness();
    const alice = cookieOf(await raw(h, 'GET', `/?key=${KEY_A}`, TYPED))!.split(';')[0]!;
    // Bob's link, even opened by hand, while Alice is signed in: asked, nothing changes.
    const asked = await raw(h, 'GET', `/console/?key=${KEY_B}`, { ...TYPED, cookie: alice });
    expect(asked.status).toBe(200);
    expect(asked.body).toContain('signed in as <b>alice</b>');
    expect(cookieOf(asked)).toBeUndefined();
    // A page elsewhere posting the form: refused.
    const form = 'sign_in=bob';
    const formHeaders = { 'Content-Type': 'application/x-www-form-urlencoded', cookie: alice };
    const forgeries: Record<string, string>[] = [
      { 'Sec-Fetch-Site': 'cross-site' },
      { 'Sec-Fetch-Site': 'same-site' },
      { Origin: 'http://evil.example' },
      {},
    ];
    for (const forged of forgeries) {
      const r = await raw(h, 'POST', `/console/?key=${KEY_B}`, { ...formHeaders, ...forged }, form);
      expect(r.status, JSON.stringify(forged)).toBe(403);
      expect(cookieOf(r)).toBeUndefined();
    }
    expect(await userOf(h, alice)).toBe('signed-in');
    // The user presses the button (a same-origin post): now Bob, and Alice's session is over.
    const confirmed = await raw(
      h,
      'POST',
      `/console/?key=${KEY_B}`,
      { ...formHeaders, 'Sec-Fetch-Site': 'same-origin', Origin: h.baseUrl },
      form,
    );
    expect(confirmed.status).toBe(303);
    expect(confirmed.headers.location).toBe('/console/');
    const bob = cookieOf(confirmed)!.split(';')[0]!;
    expect(bob).not.toBe(alice);
    expect(await userOf(h, alice)).toBeNull();
    const bobsSettings = await h.call('POST', '/api/settings', {
      key: null,
      body: { llm_model: 'openai/x' },
      headers: { cookie: bob, Origin: h.baseUrl },
    });
    expect(bobsSettings.status).toBe(200);
    expect((await h.call('GET', '/api/settings', { key: KEY_B })).body).toMatchObject({ llm_model: 'openai/x' });
  });

  it('the same user’s link with a session only drops the key; a form naming another user is refused', async () => {
    const h = await harness();
    const alice = cookieOf(await raw(h, 'GET', `/?key=${KEY_A}`, TYPED))!.split(';')[0]!;
    const again = await raw(h, 'GET', `/console/?key=${KEY_A}`, { 'Sec-Fetch-Site': 'cross-site', cookie: alice });
    expect(again.status).toBe(303);
    expect(cookieOf(again)).toBeUndefined();
    const mismatch = await raw(
      h,
      'POST',
      `/?key=${KEY_A}`,
      { 'Content-Type': 'application/x-www-form-urlencoded', 'Sec-Fetch-Site': 'same-origin' },
      'sign_in=bob',
    );
    expect(mismatch.status).toBe(400);
  });
});

describe('the sign-in redirect', () => {
  it.each([
    '/.//evil.com/',
    '/%2e//evil.com/',
    '/console/..//evil.com/',
    '/./\\evil.com/',
    '//evil.com/',
    '/\\/evil.com/',
  ])('for %s stays on this site', async (path) => {
    const h = await harness();
    const r = await raw(h, 'GET', `${path}?key=${KEY_A}`, TYPED);
    expect(r.status).toBe(303);
    const location = String(r.headers.location);
    expect(location).toMatch(/^\/(?![/\\])/);
    expect(new URL(location, 'http://this.site').host).toBe('this.site');
  });
});

describe('behind a proxy', () => {
  const forwarded = { 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'acs.example' };

  it('with trustProxy: the cookie is Secure and same-origin posts from the https origin are taken', async () => {
    const h = await harness({ router: { trustProxy: true } });
    const signIn = await raw(h, 'GET', `/?key=${KEY_A}`, { ...TYPED, ...forwarded });
    expect(cookieOf(signIn)).toContain('; Secure');
    const cookie = cookieOf(signIn)!.split(';')[0]!;
    const post = await h.call('POST', '/api/settings', {
      key: null,
      body: { llm_model: 'openai/x' },
      headers: { cookie, Origin: 'https://acs.example', ...forwarded },
    });
    expect(post.status).toBe(200);
    const other = await h.call('POST', '/api/settings', {
      key: null,
      body: { llm_model: 'openai/y' },
      headers: { cookie, Origin: 'http://acs.example', ...forwarded },
    });
    expect(other.status).toBe(403);
  });

  it('on https at the root the cookie is __Host-acs_session (Secure, Path=/, no Domain), and only that name is read there', async () => {
    const h = await harness({ router: { trustProxy: true } });
    const signIn = await raw(h, 'GET', `/?key=${KEY_A}`, { ...TYPED, ...forwarded });
    const setCookie = cookieOf(signIn)!;
    expect(setCookie).toMatch(/^__Host-acs_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Secure$/);
    const id = setCookie.split(';')[0]!.split('=')[1]!;
    const asked = (cookie: string, headers: Record<string, string> = forwarded) =>
      h.call('GET', '/api/settings', { key: null, headers: { cookie, ...headers } });
    expect((await asked(`__Host-acs_session=${id}`)).status).toBe(404); // signed in: no settings yet
    // The same id under the plain name, as a page on a sibling host could set it (Domain=…): not read here.
    expect((await asked(`acs_session=${id}`)).status).toBe(401);
    // A __Host- cookie is taken wherever it comes (no other host can set one), also where the scheme looks like http.
    expect((await asked(`__Host-acs_session=${id}`, {})).status).toBe(404);
    // Sign-out clears the cookie of that name.
    const out = await h.call('POST', '/api/sign-out', {
      key: null,
      headers: { cookie: `__Host-acs_session=${id}`, Origin: 'https://acs.example', ...forwarded },
    });
    expect(out.status, out.text).toBe(200);
    expect(out.headers.get('set-cookie')).toBe(
      '__Host-acs_session=; Path=/; HttpOnly; SameSite=Strict; Secure; Max-Age=0',
    );
    expect((await asked(`__Host-acs_session=${id}`)).status).toBe(401);
  });

  it('mounted below the root, the cookie keeps the plain name with the mount as its path (Secure on https)', async () => {
    const h = await harness();
    const app = express();
    app.use('/acs', createAcsRouter(h.service, { apiKeys: { [KEY_A]: 'alice' }, trustProxy: true }));
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      const at = (path: string, headers: Record<string, string>, method = 'GET') =>
        fetch(`http://127.0.0.1:${port}${path}`, { method, headers, redirect: 'manual' });
      const signIn = await at(`/acs/console/?key=${KEY_A}`, { ...TYPED, ...forwarded });
      expect(signIn.status).toBe(303);
      const setCookie = signIn.headers.get('set-cookie')!;
      expect(setCookie).toMatch(/^acs_session=[A-Za-z0-9_-]{43}; Path=\/acs; HttpOnly; SameSite=Strict; Secure$/);
      const cookie = setCookie.split(';')[0]!;
      expect((await at('/acs/api/settings', { cookie, ...forwarded })).status).toBe(404);
      const out = await at('/acs/api/sign-out', { cookie, Origin: 'https://acs.example', ...forwarded }, 'POST');
      expect(out.headers.get('set-cookie')).toBe(
        'acs_session=; Path=/acs; HttpOnly; SameSite=Strict; Secure; Max-Age=0',
      );
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('without it (the default) the forwarded headers are not believed', async () => {
    const h = await harness();
    const signIn = await raw(h, 'GET', `/?key=${KEY_A}`, { ...TYPED, ...forwarded });
    expect(cookieOf(signIn)).not.toContain('Secure');
    const cookie = cookieOf(signIn)!.split(';')[0]!;
    const post = await h.call('POST', '/api/settings', {
      key: null,
      body: { llm_model: 'openai/x' },
      headers: { cookie, Origin: 'https://acs.example', ...forwarded },
    });
    expect(post.status).toBe(403);
  });
});

describe('security headers of the API', () => {
  it('JSON answers are not sniffed, framed or given a referrer', async () => {
    const h = await harness();
    for (const path of ['/api/settings', '/alive', '/api/nothing']) {
      const r = await h.call('GET', path);
      expect(r.headers.get('x-content-type-options'), path).toBe('nosniff');
      expect(r.headers.get('x-frame-options'), path).toBe('DENY');
      expect(r.headers.get('content-security-policy'), path).toContain("frame-ancestors 'none'");
    }
  });
});
