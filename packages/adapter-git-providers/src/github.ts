import type { GitBranch, GitRepository, GitSuggestedTask, GitUserInfo } from '@acs/core/schemas';
import type { GitPageRequest, GitProviderClient, GitProviderFailure, GitProviderPage, GitRepositorySearch } from '@acs/core/ports';
import { errAsync, okAsync, ResultAsync } from 'neverthrow';
import { z } from 'zod';
import type { ProviderEndpoints } from './endpoints.js';
import { failure, hasNextLink, type ProviderHttp } from './http.js';
import { repositoryPathOfUrl } from './urls.js';

const id = z.union([z.number(), z.string()]).transform(String);
const nullableString = z.string().nullish().transform((v) => v ?? null);

const GhUser = z.object({ id, login: z.string(), avatar_url: nullableString, name: nullableString, company: nullableString, email: nullableString });
const GhEmails = z.array(z.object({ email: z.string(), primary: z.boolean().optional(), verified: z.boolean().optional() }));
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
const GhBranches = z.array(z.object({ name: z.string(), commit: z.object({ sha: z.string() }).nullish(), protected: z.boolean().optional() }));

const GqlError = z.object({ type: z.string().optional(), message: z.string().optional() });
const GqlRefs = z.object({
  data: z
    .object({
      repository: z
        .object({
          refs: z.object({
            nodes: z.array(z.object({ name: z.string(), target: z.object({ oid: z.string().optional(), committedDate: z.string().optional() }).nullish() })),
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
              commits: z.object({ nodes: z.array(z.object({ commit: z.object({ statusCheckRollup: z.object({ state: z.string() }).nullish() }) }).nullable()) }).nullish(),
              reviews: z.object({ totalCount: z.number().int() }).nullish(),
            }),
          ),
        }),
      }),
      search: z.object({ nodes: z.array(z.object({ number: z.number().int().optional(), title: z.string().optional(), repository: z.object({ nameWithOwner: z.string() }).optional() })) }),
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

/**
 * GitHub (github.com or GitHub Enterprise Server) for one token: REST v3 for lists, GraphQL for
 * branch searches and suggested tasks. Each method is one or a few requests, bounded.
 */
export function createGitHubClient(endpoints: ProviderEndpoints, http: ProviderHttp): GitProviderClient {
  const api = (path: string) => `${endpoints.api}${path}`;
  const repoPath = (fullName: string) => fullName.split('/').map(encodeURIComponent).join('/');

  const user = (): ResultAsync<GitUserInfo, GitProviderFailure> =>
    http
      .get(api('/user'))
      .andThen((a) => http.parse(GhUser, a, 'the user'))
      .andThen((u) =>
        (u.email ? okAsync(u.email) : primaryEmail()).map((email) => ({ id: u.id, login: u.login, avatar_url: u.avatar_url ?? '', company: u.company, name: u.name, email })),
      );

  /** The primary verified address when the profile shows none (needs the user:email scope; without it, none). */
  const primaryEmail = (): ResultAsync<string | null, GitProviderFailure> =>
    http
      .get(api('/user/emails'))
      .andThen((a) => http.parse(GhEmails, a, 'the e-mail addresses'))
      .map((emails) => emails.find((e) => e.primary && e.verified)?.email ?? null)
      .orElse(() => okAsync(null));

  const installations = (page = 1, found: string[] = []): ResultAsync<string[], GitProviderFailure> =>
    http.get(api('/user/installations'), { per_page: 100, page }).andThen((a) =>
      http.parse(GhInstallations, a, 'the installations').andThen((body) => {
        const all = [...found, ...body.installations.map((i) => i.id)];
        return hasNextLink(a.headers) && page < INSTALLATION_PAGES ? installations(page + 1, all) : okAsync(all);
      }),
    );

  const repositories = ({ page, perPage, installationId }: GitPageRequest & { installationId: string | null }) =>
    installationId !== null
      ? http
          .get(api(`/user/installations/${encodeURIComponent(installationId)}/repositories`), { per_page: perPage, page })
          .andThen((a) => http.parse(GhInstallationRepos, a, 'the repositories').map((b) => ({ items: b.repositories.map(toRepository), hasMore: hasNextLink(a.headers) })))
      : http
          .get(api('/user/repos'), { sort: 'pushed', per_page: perPage, page })
          .andThen((a) => http.parse(z.array(GhRepo), a, 'the repositories').map((repos) => ({ items: repos.map(toRepository), hasMore: hasNextLink(a.headers) })));

  const lookup = (fullName: string): ResultAsync<GitProviderPage<GitRepository>, GitProviderFailure> =>
    http
      .get(api(`/repos/${repoPath(fullName)}`))
      .andThen((a) => http.parse(GhRepo, a, 'the repository'))
      .map((repo) => ({ items: [toRepository(repo)], hasMore: false }))
      .orElse((f) => (f.type === 'not_found' ? okAsync({ items: [], hasMore: false }) : errAsync(f)));

  /** Where a search looks: `user:<owner>` for `owner/…`, else the user and their organisations. */
  const searchScope = (query: string): ResultAsync<{ terms: string; owners: string[] }, GitProviderFailure> => {
    const slash = query.indexOf('/');
    if (slash > 0) return okAsync({ terms: query.slice(slash + 1).trim(), owners: [`user:${query.slice(0, slash).trim()}`] });
    return ResultAsync.combine([
      user(),
      http
        .get(api('/user/orgs'), { per_page: 100 })
        .andThen((a) => http.parse(GhOrgs, a, 'the organisations'))
        .orElse(() => okAsync([] as { login: string }[])),
    ] as const).map(([me, orgs]) => ({ terms: query, owners: [`user:${me.login}`, ...orgs.map((o) => `org:${o.login}`)] }));
  };

  const searchRepositories = (request: GitRepositorySearch): ResultAsync<GitProviderPage<GitRepository>, GitProviderFailure> => {
    const pasted = repositoryPathOfUrl(request.query, endpoints);
    if (pasted !== undefined) return pasted === null ? okAsync({ items: [], hasMore: false }) : lookup(pasted.slice(0, 2).join('/'));
    return searchScope(request.query).andThen(({ terms, owners }) => {
      // Owners are ORed by GitHub; those that would make the query too long for it are left out.
      let q = [terms, 'in:name'].filter(Boolean).join(' ');
      if (q.length > MAX_SEARCH_QUERY) return errAsync(failure('rejected', `the search text is longer than GitHub searches (${MAX_SEARCH_QUERY} characters)`));
      for (const owner of owners) if (q.length + owner.length + 1 <= MAX_SEARCH_QUERY) q = `${q} ${owner}`;
      return http
        .get(api('/search/repositories'), { q, sort: request.sort, order: request.order, per_page: request.perPage, page: request.page })
        .andThen((a) => http.parse(GhSearch, a, 'the search').map((b) => ({ items: b.items.map(toRepository), hasMore: hasNextLink(a.headers) })));
    });
  };

  const listBranches = (fullName: string, { page, perPage }: GitPageRequest) =>
    http.get(api(`/repos/${repoPath(fullName)}/branches`), { per_page: perPage, page }).andThen((a) =>
      http.parse(GhBranches, a, 'the branches').map((branches) => ({
        items: branches.map((b): GitBranch => ({ name: b.name, commit_sha: b.commit?.sha ?? '', protected: b.protected ?? false, last_push_date: null })),
        hasMore: hasNextLink(a.headers),
      })),
    );

  /** Walks the GraphQL matches 100 at a time up to the requested page (and one more, to know if another follows). */
  const searchBranches = (owner: string, name: string, query: string, { page, perPage }: GitPageRequest): ResultAsync<GitProviderPage<GitBranch>, GitProviderFailure> => {
    const start = (page - 1) * perPage;
    if (start >= MAX_BRANCH_MATCHES) return errAsync(failure('rejected', `branch searches page through the first ${MAX_BRANCH_MATCHES} matches; narrow the query`));
    const wanted = Math.min(start + perPage + 1, MAX_BRANCH_MATCHES + 1);
    const walk = (found: GitBranch[], after: string | null): ResultAsync<{ found: GitBranch[]; more: boolean }, GitProviderFailure> =>
      http
        .post(endpoints.graphql, { query: BRANCH_SEARCH, variables: { owner, name, query, first: Math.min(100, wanted - found.length), after } })
        .andThen((a) => http.parse(GqlRefs, a, 'the branch search'))
        .andThen((body) => {
          const refs = body.data?.repository?.refs;
          if (!refs) return errAsync(graphqlFailure(http, body.errors, `repository ${owner}/${name}`));
          const all = [...found, ...refs.nodes.map((n): GitBranch => ({ name: n.name, commit_sha: n.target?.oid ?? '', protected: false, last_push_date: n.target?.committedDate ?? null }))];
          const more = refs.pageInfo.hasNextPage && Boolean(refs.pageInfo.endCursor);
          return all.length < wanted && more ? walk(all, refs.pageInfo.endCursor ?? null) : okAsync({ found: all, more });
        });
    return walk([], null).map(({ found }) => ({ items: found.slice(start, start + perPage), hasMore: found.length > start + perPage && start + perPage < MAX_BRANCH_MATCHES }));
  };

  const branches = (request: GitPageRequest & { repository: string; query: string | null }) => {
    const parts = request.repository.split('/');
    if (parts.length !== 2 || !parts[0] || !parts[1]) return errAsync(failure('rejected', `GitHub repositories are named owner/name, not "${request.repository}"`));
    return request.query === null ? listBranches(request.repository, request) : searchBranches(parts[0], parts[1], request.query, request);
  };

  const suggestedTasks = (): ResultAsync<GitSuggestedTask[], GitProviderFailure> =>
    http
      .post(endpoints.graphql, { query: SUGGESTED_TASKS, variables: { issues: ASSIGNED_ISSUES } })
      .andThen((a) => http.parse(GqlSuggestions, a, 'the suggested tasks'))
      .andThen((body) => {
        if (!body.data) return errAsync(graphqlFailure(http, body.errors, 'the suggested tasks'));
        const requests = body.data.viewer.pullRequests.nodes.flatMap((pr): GitSuggestedTask[] => {
          const checks = pr.commits?.nodes[0]?.commit.statusCheckRollup?.state;
          const taskType =
            pr.mergeable === 'CONFLICTING'
              ? 'MERGE_CONFLICTS'
              : checks === 'FAILURE' || checks === 'ERROR'
                ? 'FAILING_CHECKS'
                : (pr.reviews?.totalCount ?? 0) > 0
                  ? 'UNRESOLVED_COMMENTS'
                  : null;
          return taskType ? [{ git_provider: 'github', task_type: taskType, repo: pr.repository.nameWithOwner, issue_number: pr.number, title: pr.title }] : [];
        });
        const issues = body.data.search.nodes.flatMap((issue): GitSuggestedTask[] =>
          issue.number !== undefined && issue.title !== undefined && issue.repository
            ? [{ git_provider: 'github', task_type: 'OPEN_ISSUE', repo: issue.repository.nameWithOwner, issue_number: issue.number, title: issue.title }]
            : [],
        );
        return okAsync([...requests, ...issues]);
      });

  return { user, installations: () => installations(), repositories, searchRepositories, branches, suggestedTasks };
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
function graphqlFailure(http: ProviderHttp, errors: z.infer<typeof GqlError>[] | undefined, what: string): GitProviderFailure {
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
