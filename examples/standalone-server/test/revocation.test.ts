/**
 * Revocation that revokes, on the example server as a process (issue 35, items 4 and 8): a
 * browser session signed in with a key made by `POST /api/keys` ends when that key is revoked;
 * a device sign-in's key carries the configured expiry; one client address cannot fill the
 * device sign-ins everyone shares.
 */
import { describe, expect, it } from 'vitest';
import { body, call, startServer, type Running } from './process.js';

const KEY = 'revocation-test-key-0123456789abcdef';

/** Signs a fresh browser in with `key` as a person opening the link would; resolves to the session cookie. */
async function signIn(server: Running, key: string): Promise<string> {
  const r = await fetch(`${server.url}/console/?key=${key}`, {
    redirect: 'manual',
    headers: { 'Sec-Fetch-Site': 'none', 'Sec-Fetch-Mode': 'navigate' },
  });
  expect(r.status, `sign-in answered ${r.status}; server stderr:\n${server.stderr().slice(-2000)}`).toBe(303);
  return (r.headers.get('set-cookie') ?? '').split(';')[0]!;
}

const withCookie = (server: Running, cookie: string, path: string) =>
  fetch(`${server.url}${path}`, { headers: { cookie } }).then((r) => r.status);

describe('revocation on the example server', () => {
  it('ends the browser session a revoked key signed in, at once, and keeps the others', async () => {
    const server = await startServer({ SESSION_API_KEY: KEY });
    const made = await body<{ id: string; key: string; expires_at: string | null }>(
      call(server.url, '/api/keys', KEY, { name: 'laptop' }),
    );
    expect(made.expires_at).toBeNull();
    const session = await signIn(server, made.key);
    const other = await signIn(server, KEY);
    expect(await withCookie(server, session, '/api/keys')).toBe(200);

    await body(call(server.url, `/api/keys/${made.id}`, KEY, undefined, 'DELETE'));
    expect(await withCookie(server, session, '/api/keys')).toBe(401);
    expect(await withCookie(server, session, '/api/v1/users/me')).toBe(401);
    expect(await withCookie(server, other, '/api/keys')).toBe(200);
  });

  it('gives a device sign-in’s key the lifetime ACS_DEVICE_KEY_TTL_DAYS says, and caps waiting sign-ins per address', async () => {
    const server = await startServer({ SESSION_API_KEY: KEY, ACS_STORAGE: 'memory', ACS_DEVICE_KEY_TTL_DAYS: '7' });
    const codes = await body<{ device_code: string; user_code: string }>(
      call(server.url, '/oauth/device/authorize', null, {}),
    );
    await body(call(server.url, `/api/device-authorizations/${codes.user_code}/approve`, KEY, {}));
    const token = await body<{ access_token: string; expires_in: number | null }>(
      fetch(`${server.url}/oauth/device/token`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: `device_code=${codes.device_code}`,
      }),
    );
    expect(token.expires_in).toBe(7 * 24 * 3600);
    const [key] = await body<{ created_at: string; expires_at: string }[]>(call(server.url, '/api/keys', KEY));
    expect(Date.parse(key!.expires_at) - Date.parse(key!.created_at)).toBe(7 * 24 * 3600_000);

    // This test is one address: 10 sign-ins may wait from it (the one answered above is gone), then 429.
    for (let i = 0; i < 10; i++) await body(call(server.url, '/oauth/device/authorize', null, {}));
    const refused = await call(server.url, '/oauth/device/authorize', null, {});
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { code: string }).code).toBe('DEVICE_AUTHORIZATIONS_FROM_CLIENT_FULL');
  });
});
