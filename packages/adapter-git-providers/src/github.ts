import type { GitBranch, GitRepository, GitSuggestedTask, GitUserInfo } from '@acs/core/schemas';
import type {
  GitPageRequest,
  GitProviderClient,
  GitProviderFailure,
  GitProviderPage,
  GitRepositorySearch,
} from '@acs/core/ports';
import { resultAsync } from '@acs/core/ports';
import { err, errAsync, ok, type Result, type ResultAsync } from 'neverthrow';
import { z } from 'zod';
import type { ProviderEndpoints } from './endpoints.js';
import { failure, hasNextLink, type ProviderHttp } from './http.js';
import { repositoryPathOfUrl } from './urls.js';

const id = z.union([z.number(), z.string()]).transform(String);
const nullableString = z
  .string()
  .nullish()
  .transform((v) => v ?? null);

const GhUser = z.object({
  id,
  login: z.string(),
  avatar_url: nullableString,
  name: nullableString,
  company: nullableString,
  email: nullableString,
});
const GhEmails = z.array(
  z.object({ email: z.string(), primary: z.boolean().optional(), verified: z.boolean().optional() }),
);
const GhRepo = z.object({
  id,
  full_name: z.string(),
  private: z.boolean().optional(),
  visibility: z.string().optional(),
  stargazers_count: z.number().int().nullish(),
  pushed_at: nullableString,
  default_branch: nullableString,
  owner: z.object({ type: z.string().optional() }).nullish(),
});
const GhInstallations = z.object({ installations: z.array(z.object({ id })) });
const GhInstallationRepos = z.object({ repositories: z.array(GhRepo) });
const GhSearch = z.object({ items: z.array(GhRepo) });
const GhOrgs = z.array(z.object({ login: z.string() }));
const GhBranches = z.array(
  z.object({ name: z.string(), commit: z.object({ sha: z.string() }).nullish(), protected: z.boolean().optional() }),
);

const GqlError = z.object({ type: z.string().optional(), message: z.string().optional() });
const GqlRefs = z.object({
  data: z
    .object({
      repository: z
        .object({
          refs: z.object({
            nodes: z.array(
              z.object({
                name: z.string(),
                target: z.object({ oid: z.string().optional(), committedDate: z.string().optional() }).nullish(),
              }),
            ),
            pageInfo: z.object({ hasNextPage: z.boolean(), endCursor: z.string().nullish() }),
          }),
        })
        .nullish(),
    })
    .nullish(),
  errors: z.array(GqlError).optional(),
});
const GqlSuggestions = z.object({
  data: z
    .object({
      viewer: z.object({
        pullRequests: z.object({
          nodes: z.array(
            z.object({
              number: z.number().int(),
              title: z.string(),
              mergeable: z.string().nullish(),
              repository: z.object({ nameWithOwner: z.string() }),
              commits: z
                .object({
                  nodes: z.array(
                    z
                      .object({ commit: z.object({ statusCheckRollup: z.object({ state: z.string() }).nullish() }) })
                      .nullable(),
                  ),
                })
                .nullish(),
              reviews: z.object({ totalCount: z.number().int() }).nullish(),
            }),
          ),
        }),
      }),
      search: z.object({
        nodes: z.array(
          z.object({
            number: z.number().int().optional(),
            title: z.string().optional(),
            repository: z.object({ nameWithOwner: z.string() }).optional(),
          }),
        ),
      }),
    })
    .nullish(),
  errors: z.array(GqlError).optional(),
});

/** Branches whose name contains the query, alphabetically, 100 at most per call. */
const BRANCH_SEARCH = `query AcsBranchSearch($owner: String!, $name: String!, $query: String!, $first: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    refs(refPrefix: "refs/heads/", query: $query, first: $first, after: $after, orderBy: {field: ALPHABETICAL, direction: ASC}) {
      nodes { name target { ... on Commit { oid committedDate } } }
      pageInfo { hasNextPage endCursor }
    }
  }
}`;

/** The viewer's open pull requests (with what may need doing) and the open issues assigned to them, most recently updated first. */
const SUGGESTED_TASKS = `query AcsSuggestedTasks($issues: String!) {
  viewer {
    pullRequests(first: 50, states: [OPEN], orderBy: {field: UPDATED_AT, direction: DESC}) {
      nodes {
        number title mergeable repository { nameWithOwner }
        commits(last: 1) { nodes { commit { statusCheckRollup { state } } } }
        reviews(first: 1, states: [CHANGES_REQUESTED, COMMENTED]) { totalCount }
      }
    }
  }
  search(type: ISSUE, query: $issues, first: 50) {
    nodes { ... on Issue { number title repository { nameWithOwner } } }
  }
}`;
const ASSIGNED_ISSUES = 'is:issue is:open archived:false assignee:@me sort:updated-desc';

/** The deepest match a branch search pages to (10 calls of 100). */
const MAX_BRANCH_MATCHES = 1000;
/** GitHub refuses search queries longer than this. */
const MAX_SEARCH_QUERY = 256;
const INSTALLATION_PAGES = 10;

export interface GitHubClientDeps {
  endpoints: ProviderEndpoints;
  /** Requests with the user's token. */
  http: ProviderHttp;
}

/**
 * GitHub (github.com or GitHub Enterprise Server) for one token: REST v3 for lists, GraphQL for
 * branch searches and suggested tasks. Each method is one or a few requests, bounded.
 */
export function createGitHubClient(deps: GitHubClientDeps): GitProviderClient {
  return {
    user: () => resultAsync(user(deps)),
    installations: () => resultAsync(installations(deps)),
    repositories: (request) => repositories(deps, request),
    searchRepositories: (request) => resultAsync(searchRepositories(deps, request)),
    branches: (request) => branches(deps, request),
    suggestedTasks: () => resultAsync(suggestedTasks(deps)),
  };
}

const apiOf = (deps: GitHubClientDeps, path: string) => `${deps.endpoints.api}${path}`;
const repoPath = (fullName: string) => fullName.split('/').map(encodeURIComponent).join('/');

async function user(deps: GitHubClientDeps): Promise<Result<GitUserInfo, GitProviderFailure>> {
  const found = await deps.http.read(GhUser, 'the user', apiOf(deps, '/user'));
  if (found.isErr()) return err(found.error);
  const u = found.value.body;
  const email = u.email ?? (await primaryEmail(deps));
  return ok({ id: u.id, login: u.login, avatar_url: u.avatar_url ?? '', company: u.company, name: u.name, email });
}

/** The primary verified address when the profile shows none (needs the user:email scope; without it, none). */
async function primaryEmail(deps: GitHubClientDeps): Promise<string | null> {
  const emails = await deps.http.read(GhEmails, 'the e-mail addresses', apiOf(deps, '/user/emails'));
  return emails.isOk() ? (emails.value.body.find((e) => e.primary && e.verified)?.email ?? null) : null;
}

/** Every installation's id, a page of 100 at a time, up to INSTALLATION_PAGES pages. */
async function installations(deps: GitHubClientDeps): Promise<Result<string[], GitProviderFailure>> {
  const found: string[] = [];
  for (let page = 1; ; page++) {
    const answer = await deps.http.read(GhInstallations, 'the installations', apiOf(deps, '/user/installations'), {
      per_page: 100,
      page,
    });
    if (answer.isErr()) return err(answer.error);
    found.push(...answer.value.body.installations.map((i) => i.id));
    if (!hasNextLink(answer.value.headers) || page >= INSTALLATION_PAGES) return ok(found);
  }
}

function repositories(
  deps: GitHubClientDeps,
  { page, perPage, installationId }: GitPageRequest & { installationId: string | null },
): ResultAsync<GitProviderPage<GitRepository>, GitProviderFailure> {
  if (installationId !== null) {
    return deps.http
      .read(
        GhInstallationRepos,
        'the repositories',
        apiOf(deps, `/user/installations/${encodeURIComponent(installationId)}/repositories`),
        { per_page: perPage, page },
      )
      .map((a) => ({ items: a.body.repositories.map(toRepository), hasMore: hasNextLink(a.headers) }));
  }
  return deps.http
    .read(z.array(GhRepo), 'the repositories', apiOf(deps, '/user/repos'), { sort: 'pushed', per_page: perPage, page })
    .map((a) => ({ items: a.body.map(toRepository), hasMore: hasNextLink(a.headers) }));
}

/** One repository by its name (a pasted URL); none when there is no such repository. */
async function lookup(
  deps: GitHubClientDeps,
  fullName: string,
): Promise<Result<GitProviderPage<GitRepository>, GitProviderFailure>> {
  const repo = await deps.http.read(GhRepo, 'the repository', apiOf(deps, `/repos/${repoPath(fullName)}`));
  if (repo.isOk()) return ok({ items: [toRepository(repo.value.body)], hasMore: false });
  return repo.error.type === 'not_found' ? ok({ items: [], hasMore: false }) : err(repo.error);
}

/** Where a search looks: `user:<owner>` for `owner/…`, else the user and their organisations. */
async function searchScope(
  deps: GitHubClientDeps,
  query: string,
): Promise<Result<{ terms: string; owners: string[] }, GitProviderFailure>> {
  const slash = query.indexOf('/');
  if (slash > 0) return ok({ terms: query.slice(slash + 1).trim(), owners: [`user:${query.slice(0, slash).trim()}`] });
  // Both at once; organisations the token may not read are none.
  const [me, orgs] = await Promise.all([
    user(deps),
    deps.http.read(GhOrgs, 'the organisations', apiOf(deps, '/user/orgs'), { per_page: 100 }),
  ]);
  if (me.isErr()) return err(me.error);
  const orgNames = orgs.isOk() ? orgs.value.body.map((o) => `org:${o.login}`) : [];
  return ok({ terms: query, owners: [`user:${me.value.login}`, ...orgNames] });
}

async function searchRepositories(
  deps: GitHubClientDeps,
  request: GitRepositorySearch,
): Promise<Result<GitProviderPage<GitRepository>, GitProviderFailure>> {
  const pasted = repositoryPathOfUrl(request.query, deps.endpoints);
  if (pasted !== undefined)
    return pasted === null ? ok({ items: [], hasMore: false }) : lookup(deps, pasted.slice(0, 2).join('/'));
  const scope = await searchScope(deps, request.query);
  if (scope.isErr()) return err(scope.error);
  // Owners are ORed by GitHub; those that would make the query too long for it are left out.
  let q = [scope.value.terms, 'in:name'].filter(Boolean).join(' ');
  if (q.length > MAX_SEARCH_QUERY)
    return err(failure('rejected', `the search text is longer than GitHub searches (${MAX_SEARCH_QUERY} characters)`));
  for (const owner of scope.value.owners) if (q.length + owner.length + 1 <= MAX_SEARCH_QUERY) q = `${q} ${owner}`;
  const found = await deps.http.read(GhSearch, 'the search', apiOf(deps, '/search/repositories'), {
    q,
    sort: request.sort,
    order: request.order,
    per_page: request.perPage,
    page: request.page,
  });
  if (found.isErr()) return err(found.error);
  return ok({ items: found.value.body.items.map(toRepository), hasMore: hasNextLink(found.value.headers) });
}

function listBranches(
  deps: GitHubClientDeps,
  fullName: string,
  { page, perPage }: GitPageRequest,
): ResultAsync<GitProviderPage<GitBranch>, GitProviderFailure> {
  return deps.http
    .read(GhBranches, 'the branches', apiOf(deps, `/repos/${repoPath(fullName)}/branches`), { per_page: perPage, page })
    .map((a) => ({
      items: a.body.map((b): GitBranch => ({
        name: b.name,
        commit_sha: b.commit?.sha ?? '',
        protected: b.protected ?? false,
        last_push_date: null,
      })),
      hasMore: hasNextLink(a.headers),
    }));
}

/** Walks the GraphQL matches 100 at a time up to the requested page (and one more, to know if another follows). */
async function searchBranches(
  deps: GitHubClientDeps,
  owner: string,
  name: string,
  query: string,
  { page, perPage }: GitPageRequest,
): Promise<Result<GitProviderPage<GitBranch>, GitProviderFailure>> {
  const start = (page - 1) * perPage;
  if (start >= MAX_BRANCH_MATCHES)
    return err(
      failure('rejected', `branch searches page through the first ${MAX_BRANCH_MATCHES} matches; narrow the query`),
    );
  const wanted = Math.min(start + perPage + 1, MAX_BRANCH_MATCHES + 1);
  const found: GitBranch[] = [];
  for (let after: string | null = null; ;) {
    const matches = await branchMatches(deps, {
      owner,
      name,
      query,
      first: Math.min(100, wanted - found.length),
      after,
    });
    if (matches.isErr()) return err(matches.error);
    found.push(...matches.value.branches);
    if (found.length >= wanted || matches.value.next === null) break;
    after = matches.value.next;
  }
  return ok({
    items: found.slice(start, start + perPage),
    hasMore: found.length > start + perPage && start + perPage < MAX_BRANCH_MATCHES,
  });
}

/** One page of a branch search's matches, and the cursor of the next (null: no more). */
async function branchMatches(
  deps: GitHubClientDeps,
  variables: { owner: string; name: string; query: string; first: number; after: string | null },
): Promise<Result<{ branches: GitBranch[]; next: string | null }, GitProviderFailure>> {
  const body = await deps.http.readPost(GqlRefs, 'the branch search', deps.endpoints.graphql, {
    query: BRANCH_SEARCH,
    variables,
  });
  if (body.isErr()) return err(body.error);
  const refs = body.value.data?.repository?.refs;
  if (!refs)
    return err(graphqlFailure(deps.http, body.value.errors, `repository ${variables.owner}/${variables.name}`));
  const branches = refs.nodes.map((n): GitBranch => ({
    name: n.name,
    commit_sha: n.target?.oid ?? '',
    protected: false,
    last_push_date: n.target?.committedDate ?? null,
  }));
  return ok({ branches, next: refs.pageInfo.hasNextPage && refs.pageInfo.endCursor ? refs.pageInfo.endCursor : null });
}

function branches(
  deps: GitHubClientDeps,
  request: GitPageRequest & { repository: string; query: string | null },
): ResultAsync<GitProviderPage<GitBranch>, GitProviderFailure> {
  const parts = request.repository.split('/');
  if (parts.length !== 2 || !parts[0] || !parts[1])
    return errAsync(failure('rejected', `GitHub repositories are named owner/name, not "${request.repository}"`));
  return request.query === null
    ? listBranches(deps, request.repository, request)
    : resultAsync(searchBranches(deps, parts[0], parts[1], request.query, request));
}

async function suggestedTasks(deps: GitHubClientDeps): Promise<Result<GitSuggestedTask[], GitProviderFailure>> {
  const body = await deps.http.readPost(GqlSuggestions, 'the suggested tasks', deps.endpoints.graphql, {
    query: SUGGESTED_TASKS,
    variables: { issues: ASSIGNED_ISSUES },
  });
  if (body.isErr()) return err(body.error);
  const data = body.value.data;
  if (!data) return err(graphqlFailure(deps.http, body.value.errors, 'the suggested tasks'));
  const requests = data.viewer.pullRequests.nodes.flatMap((pr): GitSuggestedTask[] => {
    const checks = pr.commits?.nodes[0]?.commit.statusCheckRollup?.state;
    const taskType =
      pr.mergeable === 'CONFLICTING'
        ? 'MERGE_CONFLICTS'
        : checks === 'FAILURE' || checks === 'ERROR'
          ? 'FAILING_CHECKS'
          : (pr.reviews?.totalCount ?? 0) > 0
            ? 'UNRESOLVED_COMMENTS'
            : null;
    return taskType
      ? [
          {
            git_provider: 'github',
            task_type: taskType,
            repo: pr.repository.nameWithOwner,
            issue_number: pr.number,
            title: pr.title,
          },
        ]
      : [];
  });
  const issues = data.search.nodes.flatMap((issue): GitSuggestedTask[] =>
    issue.number !== undefined && issue.title !== undefined && issue.repository
      ? [
          {
            git_provider: 'github',
            task_type: 'OPEN_ISSUE',
            repo: issue.repository.nameWithOwner,
            issue_number: issue.number,
            title: issue.title,
          },
        ]
      : [],
  );
  return ok([...requests, ...issues]);
}

function toRepository(repo: z.infer<typeof GhRepo>): GitRepository {
  return {
    id: repo.id,
    full_name: repo.full_name,
    git_provider: 'github',
    is_public: repo.visibility ? repo.visibility === 'public' : repo.private === false,
    stargazers_count: repo.stargazers_count ?? null,
    link_header: null,
    pushed_at: repo.pushed_at,
    owner_type: repo.owner?.type === 'Organization' ? 'organization' : 'user',
    main_branch: repo.default_branch,
  };
}

/** A GraphQL answer without its data: what its errors say (GitHub types them). */
function graphqlFailure(
  http: ProviderHttp,
  errors: z.infer<typeof GqlError>[] | undefined,
  what: string,
): GitProviderFailure {
  const first = errors?.[0];
  const message = http.sanitize(first?.message ?? null) ?? `GitHub answered without ${what}`;
  switch (first?.type) {
    case 'NOT_FOUND':
      return failure('not_found', message);
    case 'FORBIDDEN':
      return failure('forbidden', message);
    case 'RATE_LIMITED':
      return failure('rate_limited', message);
    default:
      return failure(first ? 'rejected' : 'unavailable', message);
  }
}
