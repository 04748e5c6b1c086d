import { closedPort, startFakeGitHub, type FakeGitHub } from '@acs/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createGitProviders, resolveEndpoints } from '../src/index.js';

const TOKEN = 'ghp_carol_0123456789abcdef';
let github: FakeGitHub;
let other: FakeGitHub;

beforeAll(async () => {
  github = await startFakeGitHub([
    {
      token: TOKEN,
      user: { id: 5, login: 'carol', email: 'carol@example.com' },
      repositories: [{ id: 1, full_name: 'carol/app' }],
    },
  ]);
  other = await startFakeGitHub([]);
});
afterAll(async () => {
  await github.close();
  await other.close();
});
beforeEach(() => {
  github.reset();
  other.reset();
});

const connect = (options: Parameters<typeof createGitProviders>[0] = {}) =>
  createGitProviders({ github: { apiUrl: github.apiUrl }, ...options }).connect('github', {
    token: TOKEN,
    host: null,
  })!;

describe('requests to a provider', () => {
  it('carry the token as a Bearer header, a user agent and the GitHub API version', async () => {
    await connect().user();
    expect(github.requests[0]!.token).toBe(TOKEN);
  });

  it('follow a redirect on the same host, but not one to another host (it would carry the token there)', async () => {
    github.intercept({
      match: (r) => r.path === '/user',
      reply: { status: 301, headers: { Location: `${github.root}/api/v3/user` } },
      times: 1,
    });
    expect((await connect().user())._unsafeUnwrap().login).toBe('carol');
    expect(github.requests.map((r) => r.rawPath)).toEqual(['/user', '/api/v3/user']);

    github.intercept({
      match: (r) => r.path === '/user',
      reply: { status: 302, headers: { Location: `${other.root}/user` } },
      times: 1,
    });
    const refused = (await connect().user())._unsafeUnwrapErr();
    expect(refused.type).toBe('unavailable');
    expect(refused.message).toContain('another host');
    expect(other.requests).toEqual([]);
  });

  it('end at the deadline: a provider that never answers is a timeout', async () => {
    github.intercept({ match: (r) => r.path === '/user', reply: 'hang', times: 1 });
    expect((await connect({ timeoutMs: 300 }).user())._unsafeUnwrapErr()).toEqual({
      type: 'timeout',
      message: 'no answer within 300 ms',
    });
  });

  it('read an answer only up to the size allowed', async () => {
    github.intercept({
      match: (r) => r.path === '/user',
      reply: { status: 200, body: { login: 'x'.repeat(20_000), id: 1 } },
      times: 1,
    });
    const failure = (await connect({ maxResponseBytes: 10_000 }).user())._unsafeUnwrapErr();
    expect(failure).toEqual({
      type: 'unavailable',
      message: 'GitHub answered with more than 10000 bytes; the answer was not read.',
    });
  });

  it('map 5xx, non-JSON and unexpected shapes to unavailable, and an unreachable host too', async () => {
    github.intercept({
      match: (r) => r.path === '/user',
      reply: { status: 503, body: '<html>maintenance</html>' },
      times: 1,
    });
    expect((await connect().user())._unsafeUnwrapErr()).toEqual({ type: 'unavailable', message: 'HTTP 503' });
    github.intercept({ match: (r) => r.path === '/user', reply: { status: 200, body: 'not json' }, times: 1 });
    expect((await connect().user())._unsafeUnwrapErr()).toEqual({
      type: 'unavailable',
      message: 'GitHub answered 200 with something that is not JSON.',
    });
    github.intercept({ match: (r) => r.path === '/user', reply: { status: 200, body: { id: 1 } }, times: 1 });
    expect((await connect().user())._unsafeUnwrapErr()).toEqual({
      type: 'unavailable',
      message: 'GitHub answered the user in a shape this server does not read (at login).',
    });
    const port = await closedPort();
    const unreachable = createGitProviders({ github: { apiUrl: `http://127.0.0.1:${port}` } }).connect('github', {
      token: TOKEN,
      host: null,
    })!;
    expect((await unreachable.user())._unsafeUnwrapErr()).toEqual({
      type: 'unavailable',
      message: 'GitHub could not be reached (ECONNREFUSED).',
    });
  });

  it("never repeat the token, even when the provider's message does", async () => {
    github.intercept({
      match: (r) => r.path === '/user',
      reply: { status: 401, body: { message: `token ${TOKEN} is revoked\nsee docs` } },
      times: 1,
    });
    expect((await connect().user())._unsafeUnwrapErr()).toEqual({
      type: 'token_invalid',
      message: 'token **** is revoked see docs (HTTP 401)',
    });
  });
});

describe('the host stored with a token', () => {
  const PUBLIC = { api: 'https://api.github.com', graphql: 'https://api.github.com/graphql', webHost: 'github.com' };
  const ANY = { allowedHosts: null, allowHttp: false };

  it.each([
    [null, 'https://api.github.com', 'https://api.github.com/graphql'],
    ['github.com', 'https://api.github.com', 'https://api.github.com/graphql'],
    ['https://api.github.com/', 'https://api.github.com', 'https://api.github.com/graphql'],
    ['ghe.example.com', 'https://ghe.example.com/api/v3', 'https://ghe.example.com/api/graphql'],
    [
      'https://ghe.example.com:8443/api/v3/',
      'https://ghe.example.com:8443/api/v3',
      'https://ghe.example.com:8443/api/graphql',
    ],
  ])('GitHub %s → %s', (host, api, graphql) => {
    const outcome = resolveEndpoints('github', host, PUBLIC, ANY);
    expect(outcome.ok && [outcome.endpoints.api, outcome.endpoints.graphql]).toEqual([api, graphql]);
  });

  it('GitLab under a relative URL keeps its prefix', () => {
    const outcome = resolveEndpoints(
      'gitlab',
      'https://git.example.com/gitlab',
      { api: 'https://gitlab.com/api/v4', graphql: 'https://gitlab.com/api/graphql', webHost: 'gitlab.com' },
      ANY,
    );
    expect(outcome).toEqual({
      ok: true,
      endpoints: {
        api: 'https://git.example.com/gitlab/api/v4',
        graphql: 'https://git.example.com/gitlab/api/graphql',
        webHost: 'git.example.com',
        webPrefix: '/gitlab',
      },
    });
  });

  it.each([
    ['http://ghe.example.com', ANY, 'plain http://'],
    ['https://user:pw@ghe.example.com', ANY, 'without credentials'],
    ['ftp://ghe.example.com', ANY, 'http(s) URL'],
    ['https://ghe.example.com?x=1', ANY, 'query'],
    [
      'other.example.com',
      { allowedHosts: new Set(['ghe.example.com']), allowHttp: false },
      'not one this server may call',
    ],
  ])('refuses %s', (host, policy, reason) => {
    const outcome = resolveEndpoints('github', host, PUBLIC, policy);
    expect(outcome.ok).toBe(false);
    expect(!outcome.ok && outcome.reason).toContain(reason);
  });

  it('a token for an allowed host goes there and nowhere else', async () => {
    const providers = createGitProviders({ allowHttp: true, allowedHosts: [github.host] });
    const client = providers.connect('github', { token: TOKEN, host: `http://${github.host}` })!;
    expect((await client.user())._unsafeUnwrap().login).toBe('carol');
    expect(github.requests.map((r) => r.rawPath)).toEqual(['/api/v3/user']);
    const refused = providers.connect('github', { token: TOKEN, host: `http://${other.host}` })!;
    expect((await refused.user())._unsafeUnwrapErr().type).toBe('host_not_allowed');
    expect(other.requests).toEqual([]);
  });

  it('other providers have no client', () => {
    expect(createGitProviders().connect('bitbucket', { token: TOKEN, host: null })).toBeNull();
  });
});
