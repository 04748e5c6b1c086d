import type { GitBranch, GitRepository, GitSuggestedTask } from '@acs/core/schemas';
import type {
  GitPageRequest,
  GitProviderClient,
  GitProviderFailure,
  GitProviderPage,
  GitRepositorySearch,
} from '@acs/core/ports';
import { resultAsync } from '@acs/core/ports';
import { err, ok, type Result, type ResultAsync } from 'neverthrow';
import { z } from 'zod';
import type { ProviderEndpoints } from './endpoints.js';
import { failure, hasNextLink, type ProviderHttp } from './http.js';
import { repositoryPathOfUrl } from './urls.js';

const nullableString = z
  .string()
  .nullish()
  .transform((v) => v ?? null);

const GlUser = z.object({
  id: z.union([z.number(), z.string()]).transform(String),
  username: z.string(),
  avatar_url: nullableString,
  name: nullableString,
  email: nullableString,
  public_email: nullableString,
  organization: nullableString,
});
const GlProject = z.object({
  id: z.union([z.number(), z.string()]).transform(String),
  path_with_namespace: z.string(),
  visibility: z.string().optional(),
  star_count: z.number().int().nullish(),
  last_activity_at: nullableString,
  default_branch: nullableString,
  namespace: z.object({ kind: z.string().optional() }).nullish(),
});
const GlBranches = z.array(
  z.object({
    name: z.string(),
    protected: z.boolean().optional(),
    commit: z.object({ id: z.string().optional(), committed_date: z.string().nullish() }).nullish(),
  }),
);
const GlIssues = z.array(
  z.object({ iid: z.number().int(), title: z.string(), references: z.object({ full: z.string() }).nullish() }),
);
const GqlMergeRequests = z.object({
  data: z
    .object({
      currentUser: z
        .object({
          authoredMergeRequests: z.object({
            nodes: z.array(
              z.object({
                iid: z.union([z.string(), z.number()]).transform(Number),
                title: z.string(),
                conflicts: z.boolean().nullish(),
                project: z.object({ fullPath: z.string() }),
                headPipeline: z.object({ status: z.string() }).nullish(),
                discussions: z
                  .object({
                    nodes: z.array(z.object({ resolvable: z.boolean().nullish(), resolved: z.boolean().nullish() })),
                  })
                  .nullish(),
              }),
            ),
          }),
        })
        .nullish(),
    })
    .nullish(),
  errors: z.array(z.object({ message: z.string().optional() })).optional(),
});

/** The user's open merge requests, most recently updated first, with what may need doing in them. */
const MERGE_REQUESTS = `query AcsSuggestedTasks {
  currentUser {
    authoredMergeRequests(state: opened, sort: UPDATED_DESC, first: 100) {
      nodes {
        iid title conflicts project { fullPath }
        headPipeline { status }
        discussions(first: 100) { nodes { resolvable resolved } }
      }
    }
  }
}`;

/** GitLab orders projects by these; it cannot order them by forks. */
const ORDER_BY = { stars: 'star_count', updated: 'last_activity_at' } as const;

export interface GitLabClientDeps {
  endpoints: ProviderEndpoints;
  /** Requests with the user's token. */
  http: ProviderHttp;
}

/**
 * GitLab (gitlab.com or self-managed) for one token: REST v4, and GraphQL for the merge
 * requests of the suggested tasks. GitLab has no installations.
 */
export function createGitLabClient(deps: GitLabClientDeps): GitProviderClient {
  return {
    user: () =>
      deps.http.read(GlUser, 'the user', apiOf(deps, '/user')).map(({ body: u }) => ({
        id: u.id,
        login: u.username,
        avatar_url: u.avatar_url ?? '',
        company: u.organization,
        name: u.name,
        email: u.email ?? u.public_email,
      })),
    repositories: ({ page, perPage }) =>
      projectsPage(deps, { membership: true, order_by: 'last_activity_at', sort: 'desc', per_page: perPage, page }),
    searchRepositories: (request) => resultAsync(searchRepositories(deps, request)),
    branches: (request) => branches(deps, request),
    suggestedTasks: () => resultAsync(suggestedTasks(deps)),
  };
}

const apiOf = (deps: GitLabClientDeps, path: string) => `${deps.endpoints.api}${path}`;
const project = (path: string) => `/projects/${encodeURIComponent(path)}`;
const hasMore = (headers: Headers) => (headers.get('x-next-page') ?? '') !== '' || hasNextLink(headers);

/** A page of the user's projects, as `params` select them. */
function projectsPage(
  deps: GitLabClientDeps,
  params: Record<string, string | number | boolean | undefined>,
): ResultAsync<GitProviderPage<GitRepository>, GitProviderFailure> {
  return deps.http
    .read(z.array(GlProject), 'the projects', apiOf(deps, '/projects'), params)
    .map((a) => ({ items: a.body.map(toRepository), hasMore: hasMore(a.headers) }));
}

/** One project by its path (a pasted URL); none when there is no such project. */
async function lookup(
  deps: GitLabClientDeps,
  path: string,
): Promise<Result<GitProviderPage<GitRepository>, GitProviderFailure>> {
  const found = await deps.http.read(GlProject, 'the project', apiOf(deps, project(path)));
  if (found.isOk()) return ok({ items: [toRepository(found.value.body)], hasMore: false });
  return found.error.type === 'not_found' ? ok({ items: [], hasMore: false }) : err(found.error);
}

async function searchRepositories(
  deps: GitLabClientDeps,
  request: GitRepositorySearch,
): Promise<Result<GitProviderPage<GitRepository>, GitProviderFailure>> {
  const pasted = repositoryPathOfUrl(request.query, deps.endpoints);
  if (pasted !== undefined) return pasted === null ? ok({ items: [], hasMore: false }) : lookup(deps, pasted.join('/'));
  if (request.sort === 'forks')
    return err(failure('rejected', 'GitLab cannot order projects by forks; sort by stars or updated'));
  return projectsPage(deps, {
    membership: true,
    search: request.query,
    search_namespaces: true,
    order_by: ORDER_BY[request.sort],
    sort: request.order,
    per_page: request.perPage,
    page: request.page,
  });
}

function branches(
  deps: GitLabClientDeps,
  { repository, query, page, perPage }: GitPageRequest & { repository: string; query: string | null },
): ResultAsync<GitProviderPage<GitBranch>, GitProviderFailure> {
  return deps.http
    .read(GlBranches, 'the branches', apiOf(deps, `${project(repository)}/repository/branches`), {
      per_page: perPage,
      page,
      ...(query !== null ? { search: query } : {}),
    })
    .map((a) => ({
      items: a.body.map((b): GitBranch => ({
        name: b.name,
        commit_sha: b.commit?.id ?? '',
        protected: b.protected ?? false,
        last_push_date: b.commit?.committed_date ?? null,
      })),
      hasMore: hasMore(a.headers),
    }));
}

/** The user's merge requests that need something, and the issues assigned to them: both asked at once. */
async function suggestedTasks(deps: GitLabClientDeps): Promise<Result<GitSuggestedTask[], GitProviderFailure>> {
  const [requests, issues] = await Promise.all([mergeRequestTasks(deps), issueTasks(deps)]);
  if (requests.isErr()) return err(requests.error);
  if (issues.isErr()) return err(issues.error);
  return ok([...requests.value, ...issues.value]);
}

async function mergeRequestTasks(deps: GitLabClientDeps): Promise<Result<GitSuggestedTask[], GitProviderFailure>> {
  const body = await deps.http.readPost(GqlMergeRequests, 'the merge requests', deps.endpoints.graphql, {
    query: MERGE_REQUESTS,
    variables: {},
  });
  if (body.isErr()) return err(body.error);
  const mine = body.value.data?.currentUser;
  if (!mine)
    return err(
      failure(
        body.value.errors?.length ? 'rejected' : 'token_invalid',
        deps.http.sanitize(body.value.errors?.[0]?.message ?? null) ?? 'GitLab answered without the current user',
      ),
    );
  return ok(
    mine.authoredMergeRequests.nodes.flatMap((mr): GitSuggestedTask[] => {
      const unresolved = (mr.discussions?.nodes ?? []).some((d) => d.resolvable && !d.resolved);
      const taskType = mr.conflicts
        ? 'MERGE_CONFLICTS'
        : mr.headPipeline?.status === 'FAILED'
          ? 'FAILING_CHECKS'
          : unresolved
            ? 'UNRESOLVED_COMMENTS'
            : null;
      return taskType
        ? [
            {
              git_provider: 'gitlab',
              task_type: taskType,
              repo: mr.project.fullPath,
              issue_number: mr.iid,
              title: mr.title,
            },
          ]
        : [];
    }),
  );
}

function issueTasks(deps: GitLabClientDeps): ResultAsync<GitSuggestedTask[], GitProviderFailure> {
  return deps.http
    .read(GlIssues, 'the issues', apiOf(deps, '/issues'), {
      scope: 'assigned_to_me',
      state: 'opened',
      order_by: 'updated_at',
      sort: 'desc',
      per_page: 100,
    })
    .map((a) =>
      a.body.flatMap((issue): GitSuggestedTask[] => {
        const repo = issue.references?.full.split('#')[0]?.trim();
        return repo
          ? [{ git_provider: 'gitlab', task_type: 'OPEN_ISSUE', repo, issue_number: issue.iid, title: issue.title }]
          : [];
      }),
    );
}

function toRepository(p: z.infer<typeof GlProject>): GitRepository {
  return {
    id: p.id,
    full_name: p.path_with_namespace,
    git_provider: 'gitlab',
    is_public: p.visibility === 'public',
    stargazers_count: p.star_count ?? null,
    link_header: null,
    pushed_at: p.last_activity_at,
    owner_type: p.namespace?.kind === 'group' ? 'organization' : 'user',
    main_branch: p.default_branch,
  };
}
