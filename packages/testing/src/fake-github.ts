import {
  pageOf,
  startFakeProviderServer,
  type FakeProviderReply,
  type FakeProviderRequest,
  type FakeProviderServer,
} from './fake-provider-server.js';

/** A repository a fake GitHub account may use. */
export interface FakeGitHubRepository {
  id: number;
  /** `owner/name` */
  full_name: string;
  private?: boolean;
  owner_type?: 'User' | 'Organization';
  stargazers_count?: number;
  forks_count?: number;
  pushed_at?: string;
  default_branch?: string;
  branches?: { name: string; sha: string; protected?: boolean; committed_at?: string }[];
}

/** What one token sees on the fake GitHub. */
export interface FakeGitHubAccount {
  token: string;
  user: {
    id: number;
    login: string;
    name?: string | null;
    company?: string | null;
    email?: string | null;
    avatar_url?: string;
  };
  /** GET /user/emails; absent: 404, as for a token without the user:email scope. */
  emails?: { email: string; primary: boolean; verified: boolean }[];
  orgs?: string[];
  /** GitHub App installations; absent: 403, as GitHub answers a token that is not a GitHub App user token. */
  installations?: { id: number; account: string; repositories: string[] }[];
  repositories?: FakeGitHubRepository[];
  /** The account's open pull requests (GraphQL `viewer.pullRequests`). */
  pullRequests?: {
    number: number;
    title: string;
    repo: string;
    mergeable?: 'MERGEABLE' | 'CONFLICTING' | 'UNKNOWN';
    checks?: 'SUCCESS' | 'FAILURE' | 'ERROR' | 'PENDING' | null;
    /** Reviews that requested changes or commented. */
    reviews?: number;
  }[];
  /** Open issues assigned to the account (GraphQL `search(type: ISSUE, …)`). */
  assignedIssues?: { number: number; title: string; repo: string }[];
}

export interface FakeGitHub extends FakeProviderServer {
  /** The REST base of the "public" GitHub (what api.github.com is): the root. */
  readonly apiUrl: string;
  /** The GraphQL endpoint of the "public" GitHub. */
  readonly graphqlUrl: string;
  /** Adds (or replaces) the account of a token. */
  addAccount(account: FakeGitHubAccount): void;
}

const DOCS = 'https://docs.github.com/rest';

/**
 * A GitHub on 127.0.0.1 answering the REST v3 and GraphQL calls the git provider adapter makes,
 * with the shapes GitHub documents (extra fields included): at the root as api.github.com, and
 * under `/api/v3` and `/api/graphql` as a GitHub Enterprise Server. Tokens are accounts; an
 * unknown one is 401 "Bad credentials". `intercept` stands in failures.
 */
export async function startFakeGitHub(accounts: readonly FakeGitHubAccount[] = []): Promise<FakeGitHub> {
  const byToken = new Map(accounts.map((a) => [a.token, a]));
  const server = await startFakeProviderServer(['/api/v3', '/api'], (request, root) => answer(request, root, byToken));
  return {
    ...server,
    apiUrl: server.root,
    graphqlUrl: `${server.root}/graphql`,
    addAccount: (account) => byToken.set(account.token, account),
  };
}

function answer(
  request: FakeProviderRequest,
  root: string,
  byToken: Map<string, FakeGitHubAccount>,
): FakeProviderReply {
  const account = request.token ? byToken.get(request.token) : undefined;
  if (!account) return { status: 401, body: { message: 'Bad credentials', documentation_url: DOCS, status: '401' } };
  const url = `${root}${request.rawPath}`;
  const { path, query } = request;
  if (request.method === 'POST' && path === '/graphql') return graphql(request.body, account);
  if (request.method !== 'GET') return notFound();
  if (path === '/user') return ok(userJson(account));
  if (path === '/user/emails')
    return account.emails
      ? ok(account.emails.map((e) => ({ ...e, visibility: e.primary ? 'private' : null })))
      : notFound();
  if (path === '/user/orgs')
    return ok(
      (account.orgs ?? []).map((login, i) => ({
        login,
        id: 1000 + i,
        node_id: `O_${i}`,
        url: `${root}/orgs/${login}`,
        description: null,
      })),
    );
  if (path === '/user/installations') {
    if (!account.installations)
      return {
        status: 403,
        body: {
          message:
            'You must authenticate with an access token authorized to a GitHub App in order to list installations',
          documentation_url: DOCS,
          status: '403',
        },
      };
    const page = pageOf(account.installations, query, url, 30);
    return ok(
      {
        total_count: account.installations.length,
        installations: page.items.map((i) => installationJson(i, root, account)),
      },
      page.link,
    );
  }
  const installationRepos = /^\/user\/installations\/([^/]+)\/repositories$/.exec(path);
  if (installationRepos) {
    const installation = account.installations?.find((i) => String(i.id) === decodeURIComponent(installationRepos[1]!));
    if (!installation) return notFound();
    const repos = (account.repositories ?? []).filter((r) => installation.repositories.includes(r.full_name));
    const page = pageOf(repos, query, url, 30);
    return ok(
      {
        total_count: repos.length,
        repository_selection: 'selected',
        repositories: page.items.map((r) => repoJson(r, root)),
      },
      page.link,
    );
  }
  if (path === '/user/repos') {
    const repos = [...(account.repositories ?? [])].sort((a, b) =>
      (b.pushed_at ?? '').localeCompare(a.pushed_at ?? ''),
    );
    const page = pageOf(repos, query, url, 30);
    return ok(
      page.items.map((r) => repoJson(r, root)),
      page.link,
    );
  }
  if (path === '/search/repositories') return searchRepositories(account, query, url, root);
  const branches = /^\/repos\/([^/]+)\/([^/]+)\/branches$/.exec(path);
  if (branches) {
    const repo = findRepo(account, `${decodeURIComponent(branches[1]!)}/${decodeURIComponent(branches[2]!)}`);
    if (!repo) return notFound();
    const page = pageOf(repo.branches ?? [], query, url, 30);
    return ok(
      page.items.map((b) => ({
        name: b.name,
        commit: { sha: b.sha, url: `${root}/repos/${repo.full_name}/commits/${b.sha}` },
        protected: b.protected ?? false,
      })),
      page.link,
    );
  }
  const single = /^\/repos\/([^/]+)\/([^/]+)$/.exec(path);
  if (single) {
    const repo = findRepo(account, `${decodeURIComponent(single[1]!)}/${decodeURIComponent(single[2]!)}`);
    return repo ? ok(repoJson(repo, root)) : notFound();
  }
  return notFound();
}

const ok = (body: unknown, link?: string): FakeProviderReply => ({
  status: 200,
  body,
  headers: link ? { Link: link } : {},
});
const notFound = (): FakeProviderReply => ({
  status: 404,
  body: { message: 'Not Found', documentation_url: DOCS, status: '404' },
});
const findRepo = (account: FakeGitHubAccount, fullName: string) =>
  account.repositories?.find((r) => r.full_name.toLowerCase() === fullName.toLowerCase());

function userJson(account: FakeGitHubAccount) {
  const { user } = account;
  return {
    login: user.login,
    id: user.id,
    node_id: `U_${user.id}`,
    avatar_url: user.avatar_url ?? `https://avatars.githubusercontent.com/u/${user.id}?v=4`,
    gravatar_id: '',
    html_url: `https://github.com/${user.login}`,
    type: 'User',
    site_admin: false,
    name: user.name ?? null,
    company: user.company ?? null,
    blog: '',
    location: null,
    email: user.email ?? null,
    hireable: null,
    bio: null,
    public_repos: account.repositories?.length ?? 0,
    followers: 0,
    following: 0,
    created_at: '2020-01-01T00:00:00Z',
    updated_at: '2024-01-01T00:00:00Z',
  };
}

function installationJson(installation: { id: number; account: string }, root: string, owner: FakeGitHubAccount) {
  const type = installation.account === owner.user.login ? 'User' : 'Organization';
  return {
    id: installation.id,
    account: { login: installation.account, id: installation.id * 10, type },
    repository_selection: 'selected',
    access_tokens_url: `${root}/app/installations/${installation.id}/access_tokens`,
    app_id: 1,
    target_type: type,
    permissions: { contents: 'write', metadata: 'read' },
    events: ['push'],
    created_at: '2024-01-01T00:00:00Z',
    updated_at: '2024-01-01T00:00:00Z',
  };
}

function repoJson(repo: FakeGitHubRepository, root: string) {
  const [owner = '', name = ''] = repo.full_name.split('/');
  const isPrivate = repo.private ?? false;
  return {
    id: repo.id,
    node_id: `R_${repo.id}`,
    name,
    full_name: repo.full_name,
    private: isPrivate,
    owner: { login: owner, id: repo.id * 7, type: repo.owner_type ?? 'User', site_admin: false },
    html_url: `https://github.com/${repo.full_name}`,
    description: null,
    fork: false,
    url: `${root}/repos/${repo.full_name}`,
    created_at: '2020-01-01T00:00:00Z',
    updated_at: repo.pushed_at ?? '2024-01-01T00:00:00Z',
    pushed_at: repo.pushed_at ?? '2024-01-01T00:00:00Z',
    clone_url: `https://github.com/${repo.full_name}.git`,
    stargazers_count: repo.stargazers_count ?? 0,
    watchers_count: repo.stargazers_count ?? 0,
    forks_count: repo.forks_count ?? 0,
    open_issues_count: 0,
    default_branch: repo.default_branch ?? 'main',
    visibility: isPrivate ? 'private' : 'public',
    archived: false,
    topics: [],
  };
}

/** `q` as GitHub reads the parts used here: words (in the name), `user:`/`org:` (ORed), `in:name`, `is:public`. */
function searchRepositories(
  account: FakeGitHubAccount,
  query: URLSearchParams,
  url: string,
  root: string,
): FakeProviderReply {
  const q = query.get('q') ?? '';
  const invalid = (message: string): FakeProviderReply => ({
    status: 422,
    body: {
      message: 'Validation Failed',
      errors: [{ message, resource: 'Search', field: 'q', code: 'invalid' }],
      documentation_url: DOCS,
      status: '422',
    },
  });
  if (q.trim() === '') return invalid('q must be given');
  if (q.length > 256) return invalid('The search is longer than 256 characters.');
  const words: string[] = [];
  const owners: string[] = [];
  let publicOnly = false;
  for (const part of q.split(/\s+/).filter(Boolean)) {
    const qualifier = /^(user|org|in|is):(.*)$/i.exec(part);
    if (!qualifier) words.push(part.toLowerCase());
    else if (qualifier[1] === 'user' || qualifier[1] === 'org') owners.push(qualifier[2]!.toLowerCase());
    else if (qualifier[1] === 'is' && qualifier[2] === 'public') publicOnly = true;
  }
  const repos = account.repositories ?? [];
  const known = new Set([
    account.user.login.toLowerCase(),
    ...(account.orgs ?? []).map((o) => o.toLowerCase()),
    ...repos.map((r) => r.full_name.split('/')[0]!.toLowerCase()),
  ]);
  if (owners.some((o) => !known.has(o)))
    return invalid(
      'The listed users and repositories cannot be searched either because the resources do not exist or you do not have permission to view them.',
    );
  const matches = repos.filter((r) => {
    const [owner = '', name = ''] = r.full_name.toLowerCase().split('/');
    return (
      (owners.length === 0 || owners.includes(owner)) &&
      words.every((w) => name.includes(w)) &&
      (!publicOnly || !r.private)
    );
  });
  const field = query.get('sort');
  const key = (r: FakeGitHubRepository): number | string =>
    field === 'forks' ? (r.forks_count ?? 0) : field === 'updated' ? (r.pushed_at ?? '') : (r.stargazers_count ?? 0);
  const direction = query.get('order') === 'asc' ? 1 : -1;
  const sorted = field
    ? [...matches].sort((a, b) => (key(a) < key(b) ? -direction : key(a) > key(b) ? direction : a.id - b.id))
    : matches;
  const page = pageOf(sorted, query, url, 30);
  return ok(
    {
      total_count: sorted.length,
      incomplete_results: false,
      items: page.items.map((r) => ({ ...repoJson(r, root), score: 1 })),
    },
    page.link,
  );
}

function graphql(body: unknown, account: FakeGitHubAccount): FakeProviderReply {
  const { query = '', variables = {} } = (body ?? {}) as { query?: string; variables?: Record<string, unknown> };
  if (query.includes('refs(')) return ok(branchSearch(account, variables));
  if (query.includes('pullRequests')) return ok(suggestions(account));
  return ok({ errors: [{ message: 'This fake does not answer this query.' }] });
}

function branchSearch(account: FakeGitHubAccount, variables: Record<string, unknown>) {
  const fullName = `${String(variables.owner)}/${String(variables.name)}`;
  const repo = findRepo(account, fullName);
  if (!repo) {
    return {
      data: { repository: null },
      errors: [
        {
          type: 'NOT_FOUND',
          path: ['repository'],
          locations: [{ line: 2, column: 3 }],
          message: `Could not resolve to a Repository with the name '${fullName}'.`,
        },
      ],
    };
  }
  const text = (typeof variables.query === 'string' ? variables.query : '').toLowerCase();
  const matches = (repo.branches ?? [])
    .filter((b) => b.name.toLowerCase().includes(text))
    .sort((a, b) => a.name.localeCompare(b.name));
  const start =
    typeof variables.after === 'string' ? Number(Buffer.from(variables.after, 'base64').toString('utf8')) + 1 : 0;
  const first = Math.min(100, Number(variables.first ?? 100));
  const slice = matches.slice(start, start + first);
  return {
    data: {
      repository: {
        refs: {
          nodes: slice.map((b) => ({
            name: b.name,
            target: { __typename: 'Commit', oid: b.sha, committedDate: b.committed_at ?? '2024-01-01T00:00:00Z' },
          })),
          pageInfo: {
            hasNextPage: start + first < matches.length,
            endCursor: slice.length > 0 ? Buffer.from(String(start + slice.length - 1)).toString('base64') : null,
          },
        },
      },
    },
  };
}

function suggestions(account: FakeGitHubAccount) {
  return {
    data: {
      viewer: {
        pullRequests: {
          nodes: (account.pullRequests ?? []).map((pr) => ({
            number: pr.number,
            title: pr.title,
            mergeable: pr.mergeable ?? 'MERGEABLE',
            repository: { nameWithOwner: pr.repo },
            commits: { nodes: [{ commit: { statusCheckRollup: pr.checks ? { state: pr.checks } : null } }] },
            reviews: { totalCount: pr.reviews ?? 0 },
          })),
        },
      },
      search: {
        nodes: (account.assignedIssues ?? []).map((i) => ({
          number: i.number,
          title: i.title,
          repository: { nameWithOwner: i.repo },
        })),
      },
    },
  };
}
