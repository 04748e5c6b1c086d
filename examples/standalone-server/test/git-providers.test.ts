import { startFakeGitHub, type FakeGitHub } from '@acs/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startServer } from './process.js';

/**
 * The example server reaches git providers with the tokens users store: the public GitHub at
 * ACS_GITHUB_API_URL, an enterprise host stored with a token only when the configuration allows
 * it (ACS_GIT_ALLOW_HTTP, ACS_GIT_ALLOWED_HOSTS). A fake GitHub on loopback stands in for both.
 */
const KEY = 'default-key-0123456789abcdef';
const TOKEN = 'ghp_example_server_0123456789';
let github: FakeGitHub;

beforeAll(async () => {
  github = await startFakeGitHub([
    {
      token: TOKEN,
      user: { id: 3, login: 'octo', email: 'octo@example.com' },
      repositories: [{ id: 1, full_name: 'octo/app' }],
    },
  ]);
});
afterAll(() => github.close());

const storeToken = async (url: string, host: string | null) => {
  const r = await call(url, '/api/add-git-providers', KEY, { provider_tokens: { github: { token: TOKEN, host } } });
  expect(r.status, await r.clone().text()).toBe(200);
};

describe('git providers of the example server', () => {
  it("serves the user's git account and repositories from ACS_GITHUB_API_URL; refuses an http:// host unless allowed", async () => {
    const server = await startServer({
      SESSION_API_KEY: KEY,
      ACS_STORAGE: 'memory',
      ACS_GITHUB_API_URL: github.apiUrl,
    });
    await storeToken(server.url, null);
    const info = await call(server.url, '/api/v1/users/git-info', KEY);
    expect(info.status).toBe(200);
    expect(await info.json()).toMatchObject({ id: '3', login: 'octo', email: 'octo@example.com' });
    const repos = await call(server.url, '/api/v1/git/repositories/search?provider=github', KEY);
    expect(((await repos.json()) as { items: { full_name: string }[] }).items.map((r) => r.full_name)).toEqual([
      'octo/app',
    ]);

    await storeToken(server.url, `http://${github.host}`);
    const refused = await call(server.url, '/api/v1/users/git-info', KEY);
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { code: string }).code).toBe('GIT_HOST_NOT_ALLOWED');
    expect(server.stdout()).not.toContain(TOKEN);
  });

  it('calls an enterprise host at /api/v3 when ACS_GIT_ALLOW_HTTP and ACS_GIT_ALLOWED_HOSTS let it', async () => {
    const server = await startServer({
      SESSION_API_KEY: KEY,
      ACS_STORAGE: 'memory',
      ACS_GIT_ALLOW_HTTP: 'true',
      ACS_GIT_ALLOWED_HOSTS: github.host,
    });
    await storeToken(server.url, `http://${github.host}`);
    github.reset();
    const info = await call(server.url, '/api/v1/users/git-info', KEY);
    expect(info.status).toBe(200);
    expect(github.requests.map((r) => r.rawPath)).toEqual(['/api/v3/user']);
  });
});
