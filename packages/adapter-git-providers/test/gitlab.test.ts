import type { GitProviderClient } from '@acs/core/ports';
import { startFakeGitLab, type FakeGitLab, type FakeGitLabAccount } from '@acs/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createGitProviders } from '../src/index.js';

const TOKEN = 'glpat-bob-0123456789abcdef';

const BOB: FakeGitLabAccount = {
  token: TOKEN,
  user: { id: 7, username: 'bob', name: 'Bob B.', email: 'bob@example.com', avatar_url: null, organization: 'Initech' },
  projects: [
    {
      id: 11,
      path_with_namespace: 'bob/notes',
      namespace_kind: 'user',
      visibility: 'private',
      star_count: 1,
      last_activity_at: '2024-03-01T00:00:00.000Z',
    },
    {
      id: 12,
      path_with_namespace: 'initech/platform/tps-reports',
      visibility: 'public',
      star_count: 9,
      last_activity_at: '2024-05-01T00:00:00.000Z',
      default_branch: 'trunk',
      branches: [
        { name: 'trunk', sha: 'c'.repeat(40), protected: true, committed_date: '2024-05-01T10:00:00.000+00:00' },
        { name: 'fix/cover-sheet', sha: 'd'.repeat(40) },
        { name: 'fix/stapler', sha: 'e'.repeat(40) },
      ],
    },
    {
      id: 13,
      path_with_namespace: 'initech/tps-tools',
      visibility: 'internal',
      star_count: 5,
      last_activity_at: '2024-04-01T00:00:00.000Z',
    },
  ],
  mergeRequests: [
    { iid: 1, title: 'Conflicts', project: 'initech/tps-tools', conflicts: true, pipeline: 'FAILED' },
    { iid: 2, title: 'Red pipeline', project: 'initech/tps-tools', pipeline: 'FAILED' },
    {
      iid: 3,
      title: 'Open thread',
      project: 'bob/notes',
      pipeline: 'SUCCESS',
      discussions: [
        { resolvable: false, resolved: false },
        { resolvable: true, resolved: false },
      ],
    },
    { iid: 4, title: 'Resolved thread', project: 'bob/notes', discussions: [{ resolvable: true, resolved: true }] },
  ],
  assignedIssues: [{ iid: 21, title: 'Cover sheets', project: 'initech/platform/tps-reports' }],
};

let gitlab: FakeGitLab;
let client: GitProviderClient;

beforeAll(async () => {
  gitlab = await startFakeGitLab([BOB]);
  client = createGitProviders({ gitlab: { apiUrl: gitlab.apiUrl } }).connect('gitlab', { token: TOKEN, host: null })!;
});
afterAll(() => gitlab.close());
beforeEach(() => gitlab.reset());

describe('GitLab client', () => {
  it('reads the user (username as login, an empty avatar when GitLab has none)', async () => {
    expect((await client.user())._unsafeUnwrap()).toEqual({
      id: '7',
      login: 'bob',
      avatar_url: '',
      company: 'Initech',
      name: 'Bob B.',
      email: 'bob@example.com',
    });
    expect(gitlab.requests[0]!.rawPath).toBe('/api/v4/user');
  });

  it('has no installations', () => {
    expect('installations' in client).toBe(false);
  });

  it("lists the user's projects by last activity, a page at a time, from GitLab's paging headers", async () => {
    const first = (await client.repositories({ page: 1, perPage: 2, installationId: null }))._unsafeUnwrap();
    expect(first.items.map((r) => r.full_name)).toEqual(['initech/platform/tps-reports', 'initech/tps-tools']);
    expect(first.hasMore).toBe(true);
    expect(first.items[0]).toEqual({
      id: '12',
      full_name: 'initech/platform/tps-reports',
      git_provider: 'gitlab',
      is_public: true,
      stargazers_count: 9,
      link_header: null,
      pushed_at: '2024-05-01T00:00:00.000Z',
      owner_type: 'organization',
      main_branch: 'trunk',
    });
    expect(first.items[1]!.is_public).toBe(false);
    const second = (await client.repositories({ page: 2, perPage: 2, installationId: null }))._unsafeUnwrap();
    expect(second).toEqual({
      items: [expect.objectContaining({ full_name: 'bob/notes', owner_type: 'user' })],
      hasMore: false,
    });
    const query = gitlab.requests[0]!.query;
    expect([query.get('membership'), query.get('order_by'), query.get('sort')]).toEqual([
      'true',
      'last_activity_at',
      'desc',
    ]);
  });

  it('searches names and namespaces, ordered by stars or activity; forks it cannot order by', async () => {
    const byStars = (
      await client.searchRepositories({ query: 'tps', page: 1, perPage: 10, sort: 'stars', order: 'asc' })
    )._unsafeUnwrap();
    expect(byStars.items.map((r) => r.full_name)).toEqual(['initech/tps-tools', 'initech/platform/tps-reports']);
    const query = gitlab.requests[0]!.query;
    expect([query.get('search'), query.get('search_namespaces'), query.get('order_by'), query.get('sort')]).toEqual([
      'tps',
      'true',
      'star_count',
      'asc',
    ]);
    expect(
      (
        await client.searchRepositories({ query: 'tps', page: 1, perPage: 10, sort: 'forks', order: 'desc' })
      )._unsafeUnwrapErr().type,
    ).toBe('rejected');
  });

  it('looks up a pasted project URL (subgroups, a /-/ tail) directly', async () => {
    const found = (
      await client.searchRepositories({
        query: `${gitlab.root}/initech/platform/tps-reports/-/tree/trunk`,
        page: 1,
        perPage: 10,
        sort: 'stars',
        order: 'desc',
      })
    )._unsafeUnwrap();
    expect(found.items.map((r) => r.full_name)).toEqual(['initech/platform/tps-reports']);
    expect(gitlab.requests[0]!.rawPath).toBe('/api/v4/projects/initech%2Fplatform%2Ftps-reports');
  });

  it('lists and searches branches with their head commit', async () => {
    const all = (
      await client.branches({ repository: 'initech/platform/tps-reports', query: null, page: 1, perPage: 2 })
    )._unsafeUnwrap();
    expect(all.items.map((b) => b.name)).toEqual(['fix/cover-sheet', 'fix/stapler']);
    expect(all.hasMore).toBe(true);
    const trunk = (
      await client.branches({ repository: 'initech/platform/tps-reports', query: 'trunk', page: 1, perPage: 2 })
    )._unsafeUnwrap();
    expect(trunk).toEqual({
      items: [
        { name: 'trunk', commit_sha: 'c'.repeat(40), protected: true, last_push_date: '2024-05-01T10:00:00.000+00:00' },
      ],
      hasMore: false,
    });
    expect(gitlab.requests[1]!.query.get('search')).toBe('trunk');
    expect(
      (await client.branches({ repository: 'initech/nothing', query: null, page: 1, perPage: 2 }))._unsafeUnwrapErr(),
    ).toEqual({ type: 'not_found', message: '404 Project Not Found (HTTP 404)' });
  });

  it('suggests merge requests with conflicts, a failed pipeline or open threads, then assigned issues', async () => {
    expect((await client.suggestedTasks())._unsafeUnwrap()).toEqual([
      {
        git_provider: 'gitlab',
        task_type: 'MERGE_CONFLICTS',
        repo: 'initech/tps-tools',
        issue_number: 1,
        title: 'Conflicts',
      },
      {
        git_provider: 'gitlab',
        task_type: 'FAILING_CHECKS',
        repo: 'initech/tps-tools',
        issue_number: 2,
        title: 'Red pipeline',
      },
      {
        git_provider: 'gitlab',
        task_type: 'UNRESOLVED_COMMENTS',
        repo: 'bob/notes',
        issue_number: 3,
        title: 'Open thread',
      },
      {
        git_provider: 'gitlab',
        task_type: 'OPEN_ISSUE',
        repo: 'initech/platform/tps-reports',
        issue_number: 21,
        title: 'Cover sheets',
      },
    ]);
    expect(gitlab.requests.map((r) => r.rawPath).sort()).toEqual(['/api/graphql', '/api/v4/issues']);
  });

  it("a refused token is token_invalid with GitLab's words", async () => {
    const stranger = createGitProviders({ gitlab: { apiUrl: gitlab.apiUrl } }).connect('gitlab', {
      token: 'glpat-revoked',
      host: null,
    })!;
    expect((await stranger.user())._unsafeUnwrapErr()).toEqual({
      type: 'token_invalid',
      message: '401 Unauthorized (HTTP 401)',
    });
    gitlab.intercept({
      match: (r) => r.path === '/user',
      reply: {
        status: 401,
        body: {
          error: 'invalid_token',
          error_description: 'Token was revoked. You have to re-authorize from the user.',
        },
      },
      times: 1,
    });
    expect((await client.user())._unsafeUnwrapErr().message).toBe(
      'Token was revoked. You have to re-authorize from the user. (HTTP 401)',
    );
  });

  it('reaches a self-managed GitLab at the host stored with the token (https by default, http when allowed)', async () => {
    const strict = createGitProviders().connect('gitlab', { token: TOKEN, host: `http://${gitlab.host}` })!;
    expect((await strict.user())._unsafeUnwrapErr().type).toBe('host_not_allowed');
    const local = createGitProviders({ allowHttp: true }).connect('gitlab', {
      token: TOKEN,
      host: `http://${gitlab.host}`,
    })!;
    expect((await local.user())._unsafeUnwrap().login).toBe('bob');
    expect(gitlab.requests.map((r) => r.rawPath)).toEqual(['/api/v4/user']);
  });
});
