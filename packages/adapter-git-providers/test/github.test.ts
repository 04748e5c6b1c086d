import type { GitProviderClient } from '@acs/core/ports';
import { startFakeGitHub, type FakeGitHub, type FakeGitHubAccount } from '@acs/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createGitProviders } from '../src/index.js';

const TOKEN = 'ghp_alice_0123456789abcdef';

const repo = (
  id: number,
  fullName: string,
  extra: Partial<NonNullable<FakeGitHubAccount['repositories']>[number]> = {},
) => ({
  id,
  full_name: fullName,
  pushed_at: `2024-0${(id % 9) + 1}-01T00:00:00Z`,
  stargazers_count: id,
  forks_count: 100 - id,
  ...extra,
});

const ALICE: FakeGitHubAccount = {
  token: TOKEN,
  user: { id: 42, login: 'alice', name: 'Alice A.', company: 'ACME', email: null },
  emails: [
    { email: 'old@example.com', primary: false, verified: true },
    { email: 'alice@example.com', primary: true, verified: true },
  ],
  orgs: ['acme'],
  installations: Array.from({ length: 3 }, (_, i) => ({
    id: 900 + i,
    account: i === 0 ? 'alice' : 'acme',
    repositories: ['acme/widgets'],
  })),
  repositories: [
    repo(1, 'alice/dotfiles', { private: true }),
    repo(2, 'alice/widget-lab'),
    repo(3, 'acme/widgets', {
      owner_type: 'Organization',
      branches: [
        { name: 'main', sha: 'a'.repeat(40), protected: true },
        ...Array.from({ length: 12 }, (_, i) => ({
          name: `feature/w-${String(i).padStart(2, '0')}`,
          sha: `${i}`.padStart(40, 'b'),
        })),
      ],
    }),
    repo(4, 'acme/gadgets', { owner_type: 'Organization' }),
  ],
  pullRequests: [
    { number: 7, title: 'Conflicted', repo: 'acme/widgets', mergeable: 'CONFLICTING', checks: 'FAILURE', reviews: 1 },
    { number: 8, title: 'Red CI', repo: 'acme/widgets', checks: 'FAILURE' },
    { number: 9, title: 'Reviewed', repo: 'alice/widget-lab', checks: 'SUCCESS', reviews: 2 },
    { number: 10, title: 'All good', repo: 'alice/widget-lab', checks: 'SUCCESS' },
    { number: 11, title: 'Errored CI', repo: 'acme/gadgets', checks: 'ERROR' },
  ],
  assignedIssues: [{ number: 3, title: 'Fix the widget', repo: 'acme/widgets' }],
};

let github: FakeGitHub;
let client: GitProviderClient;

beforeAll(async () => {
  github = await startFakeGitHub([ALICE]);
  client = createGitProviders({ github: { apiUrl: github.apiUrl, webHost: 'github.com' } }).connect('github', {
    token: TOKEN,
    host: null,
  })!;
});
afterAll(() => github.close());
beforeEach(() => github.reset());

describe('GitHub client', () => {
  it('reads the user, with the primary verified address when the profile shows none', async () => {
    expect((await client.user())._unsafeUnwrap()).toEqual({
      id: '42',
      login: 'alice',
      avatar_url: 'https://avatars.githubusercontent.com/u/42?v=4',
      company: 'ACME',
      name: 'Alice A.',
      email: 'alice@example.com',
    });
    expect(github.requests.map((r) => r.path)).toEqual(['/user', '/user/emails']);
    expect(github.requests.every((r) => r.token === TOKEN)).toBe(true);
  });

  it('lists every installation, following the pages', async () => {
    expect((await client.installations!())._unsafeUnwrap()).toEqual(['900', '901', '902']);
    expect(github.requests[0]!.query.get('per_page')).toBe('100');
  });

  it('lists repositories most recently pushed first, a page at a time', async () => {
    const first = (await client.repositories({ page: 1, perPage: 3, installationId: null }))._unsafeUnwrap();
    expect(first.items.map((r) => r.full_name)).toEqual(['acme/gadgets', 'acme/widgets', 'alice/widget-lab']);
    expect(first.hasMore).toBe(true);
    expect(first.items[0]).toEqual({
      id: '4',
      full_name: 'acme/gadgets',
      git_provider: 'github',
      is_public: true,
      stargazers_count: 4,
      link_header: null,
      pushed_at: '2024-05-01T00:00:00Z',
      owner_type: 'organization',
      main_branch: 'main',
    });
    const second = (await client.repositories({ page: 2, perPage: 3, installationId: null }))._unsafeUnwrap();
    expect(second).toEqual({
      items: [expect.objectContaining({ full_name: 'alice/dotfiles', is_public: false, owner_type: 'user' })],
      hasMore: false,
    });
    expect(github.requests[0]!.query.get('sort')).toBe('pushed');
  });

  it("lists an installation's repositories", async () => {
    const page = (await client.repositories({ page: 1, perPage: 10, installationId: '901' }))._unsafeUnwrap();
    expect(page.items.map((r) => r.full_name)).toEqual(['acme/widgets']);
    expect(github.requests[0]!.path).toBe('/user/installations/901/repositories');
  });

  it('searches the user and their organisations in one query, sorted as asked', async () => {
    const page = (
      await client.searchRepositories({ query: 'widget', page: 1, perPage: 10, sort: 'stars', order: 'desc' })
    )._unsafeUnwrap();
    expect(page.items.map((r) => r.full_name)).toEqual(['acme/widgets', 'alice/widget-lab']);
    const search = github.requests.find((r) => r.path === '/search/repositories')!;
    expect(search.query.get('q')).toBe('widget in:name user:alice org:acme');
    expect([search.query.get('sort'), search.query.get('order')]).toEqual(['stars', 'desc']);
  });

  it('searches one owner for owner/part, and pages the search', async () => {
    const first = (
      await client.searchRepositories({ query: 'acme/', page: 1, perPage: 1, sort: 'forks', order: 'asc' })
    )._unsafeUnwrap();
    expect(first).toEqual({ items: [expect.objectContaining({ full_name: 'acme/gadgets' })], hasMore: true });
    const second = (
      await client.searchRepositories({ query: 'acme/', page: 2, perPage: 1, sort: 'forks', order: 'asc' })
    )._unsafeUnwrap();
    expect(second).toEqual({ items: [expect.objectContaining({ full_name: 'acme/widgets' })], hasMore: false });
    expect(github.requests.map((r) => r.query.get('q'))).toEqual(['in:name user:acme', 'in:name user:acme']);
  });

  it('looks up a pasted URL of the provider directly, and finds nothing for another host', async () => {
    const found = (
      await client.searchRepositories({
        query: 'https://github.com/acme/widgets/tree/main',
        page: 1,
        perPage: 10,
        sort: 'stars',
        order: 'desc',
      })
    )._unsafeUnwrap();
    expect(found.items.map((r) => r.full_name)).toEqual(['acme/widgets']);
    expect(github.requests.map((r) => r.path)).toEqual(['/repos/acme/widgets']);
    const missing = (
      await client.searchRepositories({
        query: 'https://github.com/acme/nothing',
        page: 1,
        perPage: 10,
        sort: 'stars',
        order: 'desc',
      })
    )._unsafeUnwrap();
    expect(missing).toEqual({ items: [], hasMore: false });
    const elsewhere = (
      await client.searchRepositories({
        query: 'https://gitlab.com/acme/widgets',
        page: 1,
        perPage: 10,
        sort: 'stars',
        order: 'desc',
      })
    )._unsafeUnwrap();
    expect(elsewhere).toEqual({ items: [], hasMore: false });
    expect(github.requests).toHaveLength(2);
  });

  it("passes GitHub's refusal of a search on (422)", async () => {
    const refused = (
      await client.searchRepositories({ query: 'nobody/x', page: 1, perPage: 10, sort: 'stars', order: 'desc' })
    )._unsafeUnwrapErr();
    expect(refused.type).toBe('rejected');
    expect(refused.message).toContain('cannot be searched');
  });

  it('lists branches a page at a time', async () => {
    const first = (
      await client.branches({ repository: 'acme/widgets', query: null, page: 1, perPage: 10 })
    )._unsafeUnwrap();
    expect(first.items).toHaveLength(10);
    expect(first.items[0]).toEqual({ name: 'main', commit_sha: 'a'.repeat(40), protected: true, last_push_date: null });
    expect(first.hasMore).toBe(true);
    const second = (
      await client.branches({ repository: 'acme/widgets', query: null, page: 2, perPage: 10 })
    )._unsafeUnwrap();
    expect(second.items).toHaveLength(3);
    expect(second.hasMore).toBe(false);
  });

  it('searches branches by name over GraphQL, any page, walking the matches 100 at a time', async () => {
    const first = (
      await client.branches({ repository: 'acme/widgets', query: 'w-0', page: 1, perPage: 4 })
    )._unsafeUnwrap();
    expect(first.items.map((b) => b.name)).toEqual(['feature/w-00', 'feature/w-01', 'feature/w-02', 'feature/w-03']);
    expect(first.hasMore).toBe(true);
    expect(first.items[0]).toEqual({
      name: 'feature/w-00',
      commit_sha: '0'.padStart(40, 'b'),
      protected: false,
      last_push_date: '2024-01-01T00:00:00Z',
    });
    const third = (
      await client.branches({ repository: 'acme/widgets', query: 'w-0', page: 3, perPage: 4 })
    )._unsafeUnwrap();
    expect(third).toEqual({
      items: [expect.objectContaining({ name: 'feature/w-08' }), expect.objectContaining({ name: 'feature/w-09' })],
      hasMore: false,
    });
    const graphql = github.requests.filter((r) => r.path === '/graphql');
    expect(graphql.map((r) => (r.body as { variables: { first: number } }).variables.first)).toEqual([5, 13]);
  });

  it('a missing repository is not_found, for lists and searches', async () => {
    expect(
      (await client.branches({ repository: 'acme/nothing', query: null, page: 1, perPage: 10 }))._unsafeUnwrapErr()
        .type,
    ).toBe('not_found');
    const searched = (
      await client.branches({ repository: 'acme/nothing', query: 'x', page: 1, perPage: 10 })
    )._unsafeUnwrapErr();
    expect(searched).toEqual({
      type: 'not_found',
      message: "Could not resolve to a Repository with the name 'acme/nothing'.",
    });
    expect(
      (await client.branches({ repository: 'just-a-name', query: null, page: 1, perPage: 10 }))._unsafeUnwrapErr().type,
    ).toBe('rejected');
  });

  it('suggests pull requests with conflicts, failing checks or reviews, then assigned issues', async () => {
    expect((await client.suggestedTasks())._unsafeUnwrap()).toEqual([
      {
        git_provider: 'github',
        task_type: 'MERGE_CONFLICTS',
        repo: 'acme/widgets',
        issue_number: 7,
        title: 'Conflicted',
      },
      { git_provider: 'github', task_type: 'FAILING_CHECKS', repo: 'acme/widgets', issue_number: 8, title: 'Red CI' },
      {
        git_provider: 'github',
        task_type: 'UNRESOLVED_COMMENTS',
        repo: 'alice/widget-lab',
        issue_number: 9,
        title: 'Reviewed',
      },
      {
        git_provider: 'github',
        task_type: 'FAILING_CHECKS',
        repo: 'acme/gadgets',
        issue_number: 11,
        title: 'Errored CI',
      },
      {
        git_provider: 'github',
        task_type: 'OPEN_ISSUE',
        repo: 'acme/widgets',
        issue_number: 3,
        title: 'Fix the widget',
      },
    ]);
    expect(github.requests).toHaveLength(1);
    expect((github.requests[0]!.body as { variables: { issues: string } }).variables.issues).toContain('assignee:@me');
  });

  it("a refused token is token_invalid with GitHub's words, never the token", async () => {
    const stranger = createGitProviders({ github: { apiUrl: github.apiUrl } }).connect('github', {
      token: 'ghp_unknown_token_000',
      host: null,
    })!;
    expect((await stranger.user())._unsafeUnwrapErr()).toEqual({
      type: 'token_invalid',
      message: 'Bad credentials (HTTP 401)',
    });
  });

  it('a PAT listing installations is forbidden, and a rate limit is told apart from it', async () => {
    const noApp = createGitProviders({ github: { apiUrl: github.apiUrl } }).connect('github', {
      token: 'pat',
      host: null,
    })!;
    github.addAccount({ token: 'pat', user: { id: 1, login: 'pat' } });
    const forbidden = (await noApp.installations!())._unsafeUnwrapErr();
    expect(forbidden.type).toBe('forbidden');
    expect(forbidden.message).toContain('GitHub App');
    github.intercept({
      match: (r) => r.path === '/user',
      reply: {
        status: 403,
        body: { message: 'API rate limit exceeded for user ID 42.' },
        headers: { 'x-ratelimit-remaining': '0' },
      },
      times: 1,
    });
    expect((await client.user())._unsafeUnwrapErr().type).toBe('rate_limited');
  });
});
