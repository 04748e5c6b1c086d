import { createGitProviders } from '@acs/adapter-git-providers';
import {
  startFakeGitHub,
  startFakeGitLab,
  type FakeGitHub,
  type FakeGitHubAccount,
  type FakeGitLab,
  type FakeGitLabAccount,
} from '@acs/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { arr, errorCode, items, KEY_A, KEY_B, obj, startHarness, type Harness } from './harness.js';
import { expectOpenHandsShape } from './openhands-shapes.js';

/**
 * The git routes of OpenHands 1.x over HTTP, against a fake GitHub and a fake GitLab on
 * loopback: Alice has a GitHub token, Bob a GitLab one, Carol a GitHub Enterprise one (a host
 * of her own); every answer is held to the 1.11 model.
 */
const ALICE_TOKEN = 'ghp_alice_secret_0123456789';
const BOB_TOKEN = 'glpat-bob-secret-0123456789';
const CAROL_TOKEN = 'ghp_carol_enterprise_012345';
const KEY_C = 'carol-key-0123456789abcdef-c';
const KEY_D = 'dave-key-0123456789abcdef-dd';

const ALICE: FakeGitHubAccount = {
  token: ALICE_TOKEN,
  user: { id: 42, login: 'alice', name: 'Alice', company: null, email: 'alice@example.com' },
  orgs: ['acme'],
  installations: [1, 2, 3, 4, 5].map((id) => ({ id, account: 'acme', repositories: ['acme/widgets'] })),
  repositories: Array.from({ length: 5 }, (_, i) => ({
    id: i + 1,
    full_name: i < 2 ? `alice/widget-${i}` : `acme/widget-${i}`,
    owner_type: i < 2 ? ('User' as const) : ('Organization' as const),
    private: i === 0,
    stargazers_count: 10 * i,
    pushed_at: `2024-0${i + 1}-01T00:00:00Z`,
    branches:
      i === 4
        ? Array.from({ length: 5 }, (_, b) => ({ name: `branch-${b}`, sha: String(b).repeat(40), protected: b === 0 }))
        : [{ name: 'main', sha: 'f'.repeat(40) }],
  })),
  pullRequests: [
    { number: 1, title: 'Conflict', repo: 'acme/widget-4', mergeable: 'CONFLICTING' },
    { number: 2, title: 'Failing', repo: 'acme/widget-4', checks: 'FAILURE' },
    { number: 3, title: 'Fine', repo: 'acme/widget-4', checks: 'SUCCESS' },
  ],
  assignedIssues: [{ number: 9, title: 'An issue', repo: 'acme/widget-3' }],
};
const BOB: FakeGitLabAccount = {
  token: BOB_TOKEN,
  user: { id: 7, username: 'bob', name: 'Bob', email: null },
  projects: [
    {
      id: 70,
      path_with_namespace: 'bobs/app',
      visibility: 'public',
      branches: [{ name: 'main', sha: 'a'.repeat(40), protected: true }],
    },
  ],
  mergeRequests: [{ iid: 4, title: 'Red pipeline', project: 'bobs/app', pipeline: 'FAILED' }],
  assignedIssues: [{ iid: 5, title: 'Bug', project: 'bobs/app' }],
};
const CAROL: FakeGitHubAccount = {
  token: CAROL_TOKEN,
  user: { id: 99, login: 'carol-ghe' },
  repositories: [{ id: 1, full_name: 'corp/internal', private: true }],
};

let github: FakeGitHub;
let enterprise: FakeGitHub;
let gitlab: FakeGitLab;
let h: Harness;

async function storeTokens(
  key: string,
  tokens: Record<string, { token: string; host?: string | null }>,
): Promise<void> {
  const r = await h.call('POST', '/api/add-git-providers', { key, body: { provider_tokens: tokens } });
  expect(r.status, r.text).toBe(200);
}

beforeAll(async () => {
  github = await startFakeGitHub([ALICE]);
  enterprise = await startFakeGitHub([CAROL]);
  gitlab = await startFakeGitLab([BOB]);
  h = await startHarness({
    gitProviders: createGitProviders({
      github: { apiUrl: github.apiUrl },
      gitlab: { apiUrl: gitlab.apiUrl },
      allowHttp: true,
      allowedHosts: [enterprise.host],
    }),
    moreKeys: { [KEY_C]: 'carol', [KEY_D]: 'dave' },
  });
  await storeTokens(KEY_A, { github: { token: ALICE_TOKEN } });
  await storeTokens(KEY_B, { gitlab: { token: BOB_TOKEN } });
});
afterAll(async () => {
  await h.close();
  await github.close();
  await enterprise.close();
  await gitlab.close();
});
beforeEach(() => {
  github.reset();
  enterprise.reset();
  gitlab.reset();
});

/** Follows next_page_id to the end, checking each page against the 1.11 model. */
async function allPages(
  path: string,
  model: string,
  key = KEY_A,
): Promise<{ items: Record<string, unknown>[]; pageIds: (string | null)[] }> {
  const all: unknown[] = [];
  const pageIds: (string | null)[] = [];
  let pageId: string | null = null;
  for (let n = 0; n < 20; n++) {
    const r = await h.call('GET', `${path}${pageId ? `&page_id=${pageId}` : ''}`, { key });
    expect(r.status, r.text).toBe(200);
    expectOpenHandsShape(model, r.body);
    all.push(...arr(obj(r.body).items));
    pageId = obj(r.body).next_page_id as string | null;
    pageIds.push(pageId);
    if (pageId === null) return { items: all as Record<string, unknown>[], pageIds };
  }
  throw new Error(`${path} did not end in 20 pages`);
}

describe('GET /api/v1/git/installations/search', () => {
  it('pages the installation ids by offset, as 1.11 does', async () => {
    const { items: ids, pageIds } = await allPages(
      '/api/v1/git/installations/search?provider=github&limit=2',
      'InstallationPage',
    );
    expect(ids).toEqual(['1', '2', '3', '4', '5']);
    expect(pageIds).toEqual(['Mg', 'NA', null]);
  });

  it('GitLab has no installations: 400', async () => {
    const r = await h.call('GET', '/api/v1/git/installations/search?provider=gitlab', { key: KEY_B });
    expect([r.status, errorCode(r.body)]).toEqual([400, 'GIT_REQUEST_UNSUPPORTED']);
  });
});

describe('GET /api/v1/git/repositories/search', () => {
  it("lists the user's repositories, most recently pushed first, page by page without gaps", async () => {
    const { items: repos, pageIds } = await allPages(
      '/api/v1/git/repositories/search?provider=github&limit=2',
      'RepositoryPage',
    );
    expect(repos.map((r) => r.full_name)).toEqual([
      'acme/widget-4',
      'acme/widget-3',
      'acme/widget-2',
      'alice/widget-1',
      'alice/widget-0',
    ]);
    expect(pageIds).toEqual(['Mg', 'Mw', null]);
    expect(repos[4]).toEqual({
      id: '1',
      full_name: 'alice/widget-0',
      git_provider: 'github',
      is_public: false,
      stargazers_count: 0,
      link_header: null,
      pushed_at: '2024-01-01T00:00:00Z',
      owner_type: 'user',
      main_branch: 'main',
    });
  });

  it('searches with the sort order asked for, and pages the search', async () => {
    const { items: repos } = await allPages(
      '/api/v1/git/repositories/search?provider=github&query=widget&sort_order=stars-asc&limit=3',
      'RepositoryPage',
    );
    expect(repos.map((r) => r.stargazers_count)).toEqual([0, 10, 20, 30, 40]);
    expect(github.requests.find((r) => r.path === '/search/repositories')!.query.get('q')).toBe(
      'widget in:name user:alice org:acme',
    );
  });

  it("lists one installation's repositories", async () => {
    const r = await h.call('GET', '/api/v1/git/repositories/search?provider=github&installation_id=3');
    expect(r.status, r.text).toBe(200);
    expectOpenHandsShape('RepositoryPage', r.body);
    expect(github.requests.map((q) => q.path)).toEqual(['/user/installations/3/repositories']);
  });

  it('refuses sort_order without a query (400), as 1.11 does', async () => {
    const r = await h.call('GET', '/api/v1/git/repositories/search?provider=github&sort_order=stars-desc');
    expect([r.status, errorCode(r.body)]).toEqual([400, 'GIT_REQUEST_UNSUPPORTED']);
    expect(github.requests).toEqual([]);
  });

  it('serves GitLab projects for a GitLab token', async () => {
    const r = await h.call('GET', '/api/v1/git/repositories/search?provider=gitlab&query=app', { key: KEY_B });
    expect(r.status, r.text).toBe(200);
    expectOpenHandsShape('RepositoryPage', r.body);
    expect(items(r.body).map((p) => [p.full_name, p.git_provider])).toEqual([['bobs/app', 'gitlab']]);
  });
});

describe('GET /api/v1/git/branches/search', () => {
  it('lists every branch for an empty query, page by page', async () => {
    const { items: branches, pageIds } = await allPages(
      '/api/v1/git/branches/search?provider=github&repository=acme/widget-4&query=&limit=2',
      'BranchPage',
    );
    expect(branches.map((b) => b.name)).toEqual(['branch-0', 'branch-1', 'branch-2', 'branch-3', 'branch-4']);
    expect(branches[0]).toEqual({
      name: 'branch-0',
      commit_sha: '0'.repeat(40),
      protected: true,
      last_push_date: null,
    });
    expect(pageIds).toEqual(['Mg', 'Mw', null]);
  });

  it('searches by name, and pages a search too (1.11 refuses a second page)', async () => {
    const { items: branches } = await allPages(
      '/api/v1/git/branches/search?provider=github&repository=acme/widget-4&query=branch-&limit=3',
      'BranchPage',
    );
    expect(branches.map((b) => b.name)).toEqual(['branch-0', 'branch-1', 'branch-2', 'branch-3', 'branch-4']);
  });

  it('a repository the token cannot see is 404; query is required (422), as in 1.11', async () => {
    const missing = await h.call('GET', '/api/v1/git/branches/search?provider=github&repository=acme/nothing&query=');
    expect([missing.status, errorCode(missing.body)]).toEqual([404, 'GIT_RESOURCE_NOT_FOUND']);
    const noQuery = await h.call('GET', '/api/v1/git/branches/search?provider=github&repository=acme/widget-4');
    expect([noQuery.status, errorCode(noQuery.body)]).toEqual([422, 'VALIDATION_FAILED']);
    const noRepo = await h.call('GET', '/api/v1/git/branches/search?provider=github&repository=widget&query=');
    expect(noRepo.status).toBe(422);
  });
});

describe('GET /api/v1/git/suggested-tasks/search', () => {
  it("suggests from the user's pull requests and issues, page by page", async () => {
    const { items: tasks, pageIds } = await allPages('/api/v1/git/suggested-tasks/search?limit=2', 'SuggestedTaskPage');
    expect(tasks).toEqual([
      {
        git_provider: 'github',
        task_type: 'MERGE_CONFLICTS',
        repo: 'acme/widget-4',
        issue_number: 1,
        title: 'Conflict',
      },
      { git_provider: 'github', task_type: 'FAILING_CHECKS', repo: 'acme/widget-4', issue_number: 2, title: 'Failing' },
      { git_provider: 'github', task_type: 'OPEN_ISSUE', repo: 'acme/widget-3', issue_number: 9, title: 'An issue' },
    ]);
    expect(pageIds).toEqual(['Mg', null]);
  });

  it('from every connected provider; one that fails is left out unless all fail', async () => {
    await storeTokens(KEY_D, { github: { token: ALICE_TOKEN }, gitlab: { token: BOB_TOKEN } });
    const both = await h.call('GET', '/api/v1/git/suggested-tasks/search', { key: KEY_D });
    expectOpenHandsShape('SuggestedTaskPage', both.body);
    expect(items(both.body).map((t) => t.git_provider)).toEqual(['github', 'github', 'github', 'gitlab', 'gitlab']);

    gitlab.intercept({ match: () => true, reply: { status: 500, body: { message: '500 Internal Server Error' } } });
    const oneDown = await h.call('GET', '/api/v1/git/suggested-tasks/search', { key: KEY_D });
    expect(items(oneDown.body).map((t) => t.git_provider)).toEqual(['github', 'github', 'github']);

    github.intercept({ match: () => true, reply: { status: 502, body: 'bad gateway' } });
    const allDown = await h.call('GET', '/api/v1/git/suggested-tasks/search', { key: KEY_D });
    expect([allDown.status, errorCode(allDown.body)]).toEqual([502, 'GIT_PROVIDER_UNAVAILABLE']);
  });
});

describe('GET /api/v1/users/git-info', () => {
  it("is the account of the user's provider token", async () => {
    const alice = await h.call('GET', '/api/v1/users/git-info');
    expect(alice.status, alice.text).toBe(200);
    expectOpenHandsShape('UserGitInfo', alice.body);
    expect(alice.body).toEqual({
      id: '42',
      login: 'alice',
      avatar_url: 'https://avatars.githubusercontent.com/u/42?v=4',
      company: null,
      name: 'Alice',
      email: 'alice@example.com',
    });
    const bob = await h.call('GET', '/api/v1/users/git-info', { key: KEY_B });
    expectOpenHandsShape('UserGitInfo', bob.body);
    expect(obj(bob.body).login).toBe('bob');
  });
});

describe('without a provider token (what 1.11 answers: 403)', () => {
  it.each([
    '/api/v1/git/installations/search?provider=github',
    '/api/v1/git/repositories/search?provider=github',
    '/api/v1/git/branches/search?provider=github&repository=a/b&query=',
    '/api/v1/git/suggested-tasks/search',
    '/api/v1/users/git-info',
  ])('%s', async (path) => {
    const r = await h.call('GET', path, { key: KEY_C });
    expect([r.status, errorCode(r.body)]).toEqual([403, 'GIT_PROVIDER_NOT_CONNECTED']);
    expect(obj(r.body).detail).toContain('POST /api/add-git-providers');
  });

  it('a provider the user has no token for is 403 too, naming it; one this server has no client for is 400', async () => {
    const r = await h.call('GET', '/api/v1/git/repositories/search?provider=github', { key: KEY_B });
    expect([r.status, errorCode(r.body)]).toEqual([403, 'GIT_PROVIDER_NOT_CONNECTED']);
    expect(obj(r.body).message).toContain('GitHub');
    await storeTokens(KEY_C, { bitbucket: { token: 'bb-token' } });
    const bitbucket = await h.call('GET', '/api/v1/git/repositories/search?provider=bitbucket', { key: KEY_C });
    expect([bitbucket.status, errorCode(bitbucket.body)]).toEqual([400, 'GIT_REQUEST_UNSUPPORTED']);
    const info = await h.call('GET', '/api/v1/users/git-info', { key: KEY_C });
    expect([info.status, errorCode(info.body)]).toEqual([400, 'GIT_REQUEST_UNSUPPORTED']);
    await storeTokens(KEY_C, {});
  });
});

describe('provider failures are clear 4xx/502 answers, never 500, never the token', () => {
  it('a token the provider refuses is 403 GIT_PROVIDER_TOKEN_INVALID (not 401: that would sign the client out)', async () => {
    await storeTokens(KEY_C, { github: { token: 'ghp_revoked_token_0000000' } });
    const r = await h.call('GET', '/api/v1/users/git-info', { key: KEY_C });
    expect([r.status, errorCode(r.body)]).toEqual([403, 'GIT_PROVIDER_TOKEN_INVALID']);
    expect(obj(r.body).message).toContain('Bad credentials');
    expect(r.text).not.toContain('ghp_revoked_token_0000000');
    await storeTokens(KEY_C, {});
  });

  it.each([
    [{ status: 500, body: { message: 'Server Error' } }, 502, 'GIT_PROVIDER_UNAVAILABLE'],
    [
      { status: 403, body: { message: 'API rate limit exceeded' }, headers: { 'x-ratelimit-remaining': '0' } },
      429,
      'GIT_PROVIDER_RATE_LIMITED',
    ],
    [
      { status: 403, body: { message: 'Resource not accessible by personal access token' } },
      403,
      'GIT_PROVIDER_FORBIDDEN',
    ],
    [
      {
        status: 422,
        body: { message: 'Validation Failed', errors: [{ message: 'The search is longer than 256 characters.' }] },
      },
      400,
      'GIT_PROVIDER_REJECTED_REQUEST',
    ],
    [{ status: 200, body: '<html>' }, 502, 'GIT_PROVIDER_UNAVAILABLE'],
  ] as const)('provider answers %j → %i %s', async (reply, status, code) => {
    github.intercept({ match: (r) => r.path === '/user/repos', reply: { ...reply }, times: 1 });
    const r = await h.call('GET', '/api/v1/git/repositories/search?provider=github');
    expect([r.status, errorCode(r.body)]).toEqual([status, code]);
    expect(r.text).not.toContain(ALICE_TOKEN);
  });

  it('bad paging parameters are 422', async () => {
    for (const query of ['page_id=nonsense', 'page_id=Mg==', 'page_id=MTIzNDU2Nw', 'limit=0', 'limit=101', 'limit=x']) {
      const r = await h.call('GET', `/api/v1/git/repositories/search?provider=github&${query}`);
      expect([r.status, errorCode(r.body)], query).toEqual([422, 'VALIDATION_FAILED']);
    }
    const unknown = await h.call('GET', '/api/v1/git/repositories/search?provider=sourceforge');
    expect(unknown.status).toBe(422);
    expect(github.requests).toEqual([]);
  });
});

describe('per-user isolation and hosts', () => {
  it("each user's calls carry their own token only", async () => {
    await h.call('GET', '/api/v1/git/repositories/search?provider=github');
    await h.call('GET', '/api/v1/git/suggested-tasks/search', { key: KEY_B });
    await h.call('GET', '/api/v1/users/git-info', { key: KEY_B });
    const bobGithub = await h.call('GET', '/api/v1/git/repositories/search?provider=github', { key: KEY_B });
    expect(bobGithub.status).toBe(403);
    expect(new Set(github.requests.map((r) => r.token))).toEqual(new Set([ALICE_TOKEN]));
    expect(new Set(gitlab.requests.map((r) => r.token))).toEqual(new Set([BOB_TOKEN]));
    expect(h.responses.join('\n')).not.toMatch(new RegExp(`${ALICE_TOKEN}|${BOB_TOKEN}`));
  });

  it("a token stored with an enterprise host goes to that host's /api/v3, and nowhere else", async () => {
    await storeTokens(KEY_C, { github: { token: CAROL_TOKEN, host: `http://${enterprise.host}` } });
    const info = await h.call('GET', '/api/v1/users/git-info', { key: KEY_C });
    expect(info.status, info.text).toBe(200);
    expect(obj(info.body).login).toBe('carol-ghe');
    const repos = await h.call('GET', '/api/v1/git/repositories/search?provider=github', { key: KEY_C });
    expectOpenHandsShape('RepositoryPage', repos.body);
    expect(items(repos.body).map((r) => r.full_name)).toEqual(['corp/internal']);
    expect(enterprise.requests.map((r) => r.rawPath)).toEqual([
      '/api/v3/user',
      '/api/v3/user/emails',
      '/api/v3/user/repos',
    ]);
    expect(github.requests).toEqual([]);

    await storeTokens(KEY_C, { github: { token: CAROL_TOKEN, host: 'ghe.elsewhere.example' } });
    const refused = await h.call('GET', '/api/v1/users/git-info', { key: KEY_C });
    expect([refused.status, errorCode(refused.body)]).toEqual([400, 'GIT_HOST_NOT_ALLOWED']);
    await storeTokens(KEY_C, {});
  });
});
