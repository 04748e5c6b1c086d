import {
  pageOf,
  startFakeProviderServer,
  type FakeProviderReply,
  type FakeProviderRequest,
  type FakeProviderServer,
} from './fake-provider-server.js';

/** A project a fake GitLab account is a member of. */
export interface FakeGitLabProject {
  id: number;
  /** `group/sub/name` */
  path_with_namespace: string;
  visibility?: 'public' | 'internal' | 'private';
  namespace_kind?: 'user' | 'group';
  star_count?: number;
  last_activity_at?: string;
  default_branch?: string;
  branches?: { name: string; sha: string; protected?: boolean; committed_date?: string }[];
}

/** What one token sees on the fake GitLab. */
export interface FakeGitLabAccount {
  token: string;
  user: {
    id: number;
    username: string;
    name?: string;
    email?: string | null;
    avatar_url?: string | null;
    organization?: string | null;
  };
  projects?: FakeGitLabProject[];
  /** The account's open merge requests (GraphQL `currentUser.authoredMergeRequests`). */
  mergeRequests?: {
    iid: number;
    title: string;
    project: string;
    conflicts?: boolean;
    pipeline?: 'SUCCESS' | 'FAILED' | 'RUNNING' | null;
    discussions?: { resolvable: boolean; resolved: boolean }[];
  }[];
  /** Open issues assigned to the account (`GET /issues?scope=assigned_to_me`). */
  assignedIssues?: { iid: number; title: string; project: string }[];
}

export interface FakeGitLab extends FakeProviderServer {
  /** The REST base (`<root>/api/v4`), as for gitlab.com's `https://gitlab.com/api/v4`. */
  readonly apiUrl: string;
  readonly graphqlUrl: string;
  addAccount(account: FakeGitLabAccount): void;
}

const ORDER_BY = new Set([
  'id',
  'name',
  'path',
  'created_at',
  'updated_at',
  'last_activity_at',
  'similarity',
  'star_count',
]);

/**
 * A GitLab on 127.0.0.1 answering the REST v4 (`/api/v4`) and GraphQL (`/api/graphql`) calls the
 * git provider adapter makes, with the shapes and paging headers GitLab documents. Tokens are
 * accounts (Bearer or PRIVATE-TOKEN); an unknown one is 401 "401 Unauthorized".
 */
export async function startFakeGitLab(accounts: readonly FakeGitLabAccount[] = []): Promise<FakeGitLab> {
  const byToken = new Map(accounts.map((a) => [a.token, a]));
  const server = await startFakeProviderServer(['/api/v4', '/api'], (request, root) => answer(request, root, byToken));
  return {
    ...server,
    apiUrl: `${server.root}/api/v4`,
    graphqlUrl: `${server.root}/api/graphql`,
    addAccount: (account) => byToken.set(account.token, account),
  };
}

function answer(
  request: FakeProviderRequest,
  root: string,
  byToken: Map<string, FakeGitLabAccount>,
): FakeProviderReply {
  const account = request.token ? byToken.get(request.token) : undefined;
  if (!account) return { status: 401, body: { message: '401 Unauthorized' } };
  const url = `${root}${request.rawPath}`;
  const { path, query } = request;
  if (request.method === 'POST' && path === '/graphql') return { status: 200, body: graphql(request.body, account) };
  if (request.method !== 'GET') return notFound('404 Not Found');
  if (path === '/user') return ok(userJson(account, root));
  if (path === '/projects') return listProjects(account, query, url, root);
  if (path === '/issues') {
    if (query.get('scope') !== 'assigned_to_me') return ok([]);
    const issues = (account.assignedIssues ?? []).map((i, n) => ({
      id: 5000 + n,
      iid: i.iid,
      project_id: findProject(account, i.project)?.id ?? 0,
      title: i.title,
      state: 'opened',
      references: { short: `#${i.iid}`, relative: `${i.project}#${i.iid}`, full: `${i.project}#${i.iid}` },
      web_url: `${root}/${i.project}/-/issues/${i.iid}`,
      assignees: [{ id: account.user.id, username: account.user.username }],
    }));
    return paged(issues, query, url, 20);
  }
  const branches = /^\/projects\/([^/]+)\/repository\/branches$/.exec(path);
  if (branches) {
    const project = findProject(account, decodeURIComponent(branches[1]!));
    if (!project) return notFound('404 Project Not Found');
    const search = (query.get('search') ?? '').toLowerCase();
    const list = (project.branches ?? [])
      .filter((b) => b.name.toLowerCase().includes(search))
      .sort((a, b) => a.name.localeCompare(b.name));
    return paged(
      list.map((b) => ({
        name: b.name,
        merged: false,
        protected: b.protected ?? false,
        default: b.name === (project.default_branch ?? 'main'),
        developers_can_push: false,
        developers_can_merge: false,
        can_push: true,
        web_url: `${root}/${project.path_with_namespace}/-/tree/${b.name}`,
        commit: {
          id: b.sha,
          short_id: b.sha.slice(0, 8),
          title: 'A commit',
          author_name: 'someone',
          committed_date: b.committed_date ?? '2024-01-01T00:00:00.000Z',
        },
      })),
      query,
      url,
      20,
    );
  }
  const single = /^\/projects\/([^/]+)$/.exec(path);
  if (single) {
    const project = findProject(account, decodeURIComponent(single[1]!));
    return project ? ok(projectJson(project, root)) : notFound('404 Project Not Found');
  }
  return notFound('404 Not Found');
}

const ok = (body: unknown): FakeProviderReply => ({ status: 200, body });
const notFound = (message: string): FakeProviderReply => ({ status: 404, body: { message } });
const findProject = (account: FakeGitLabAccount, idOrPath: string) =>
  account.projects?.find(
    (p) => String(p.id) === idOrPath || p.path_with_namespace.toLowerCase() === idOrPath.toLowerCase(),
  );

/** GitLab's offset paging: the page, and x-page, x-next-page, x-total… and Link headers. */
function paged(
  items: readonly unknown[],
  query: URLSearchParams,
  url: string,
  perPageDefault: number,
): FakeProviderReply {
  const page = pageOf(items, query, url, perPageDefault);
  return {
    status: 200,
    body: page.items,
    headers: {
      'x-page': String(page.page),
      'x-per-page': String(page.perPage),
      'x-next-page': page.page < page.pages ? String(page.page + 1) : '',
      'x-prev-page': page.page > 1 ? String(page.page - 1) : '',
      'x-total': String(items.length),
      'x-total-pages': String(page.pages),
      ...(page.link ? { link: page.link } : {}),
    },
  };
}

function userJson(account: FakeGitLabAccount, root: string) {
  const { user } = account;
  return {
    id: user.id,
    username: user.username,
    name: user.name ?? user.username,
    state: 'active',
    locked: false,
    avatar_url:
      user.avatar_url === undefined ? `${root}/uploads/-/system/user/avatar/${user.id}/avatar.png` : user.avatar_url,
    web_url: `${root}/${user.username}`,
    created_at: '2020-01-01T00:00:00.000Z',
    bio: '',
    public_email: null,
    organization: user.organization ?? null,
    email: user.email ?? null,
    two_factor_enabled: false,
  };
}

function projectJson(project: FakeGitLabProject, root: string) {
  const parts = project.path_with_namespace.split('/');
  const name = parts.at(-1) ?? '';
  const namespace = parts.slice(0, -1).join('/');
  return {
    id: project.id,
    description: null,
    name,
    name_with_namespace: parts.join(' / '),
    path: name,
    path_with_namespace: project.path_with_namespace,
    created_at: '2020-01-01T00:00:00.000Z',
    default_branch: project.default_branch ?? 'main',
    ssh_url_to_repo: `git@fake:${project.path_with_namespace}.git`,
    http_url_to_repo: `${root}/${project.path_with_namespace}.git`,
    web_url: `${root}/${project.path_with_namespace}`,
    star_count: project.star_count ?? 0,
    forks_count: 0,
    last_activity_at: project.last_activity_at ?? '2024-01-01T00:00:00.000Z',
    visibility: project.visibility ?? 'private',
    namespace: {
      id: project.id * 3,
      name: parts.at(-2) ?? namespace,
      path: parts.at(-2) ?? namespace,
      kind: project.namespace_kind ?? 'group',
      full_path: namespace,
    },
  };
}

/** `/projects` with the parameters GitLab documents: membership, search (name, and namespace with search_namespaces), order_by, sort. */
function listProjects(
  account: FakeGitLabAccount,
  query: URLSearchParams,
  url: string,
  root: string,
): FakeProviderReply {
  const orderBy = query.get('order_by') ?? 'created_at';
  if (!ORDER_BY.has(orderBy)) return { status: 400, body: { error: 'order_by does not have a valid value' } };
  const search = (query.get('search') ?? '').toLowerCase();
  const inNamespaces = query.get('search_namespaces') === 'true';
  const matches = (account.projects ?? []).filter((p) => {
    const full = p.path_with_namespace.toLowerCase();
    return search === '' || (inNamespaces ? full.includes(search) : (full.split('/').at(-1) ?? '').includes(search));
  });
  const key = (p: FakeGitLabProject): number | string =>
    orderBy === 'star_count' ? (p.star_count ?? 0) : orderBy === 'id' ? p.id : (p.last_activity_at ?? '');
  const direction = query.get('sort') === 'asc' ? 1 : -1;
  const sorted = [...matches].sort((a, b) =>
    key(a) < key(b) ? -direction : key(a) > key(b) ? direction : a.id - b.id,
  );
  return paged(
    sorted.map((p) => projectJson(p, root)),
    query,
    url,
    20,
  );
}

function graphql(body: unknown, account: FakeGitLabAccount) {
  const { query = '' } = (body ?? {}) as { query?: string };
  if (!query.includes('authoredMergeRequests'))
    return { errors: [{ message: 'This fake does not answer this query.' }] };
  return {
    data: {
      currentUser: {
        authoredMergeRequests: {
          nodes: (account.mergeRequests ?? []).map((mr) => ({
            iid: String(mr.iid),
            title: mr.title,
            conflicts: mr.conflicts ?? false,
            project: { fullPath: mr.project },
            headPipeline: mr.pipeline ? { status: mr.pipeline } : null,
            discussions: { nodes: mr.discussions ?? [] },
          })),
        },
      },
    },
  };
}
