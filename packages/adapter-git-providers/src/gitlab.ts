import type { GitBranch, GitRepository, GitSuggestedTask, GitUserInfo } from '@acs/core/schemas';
import type { GitPageRequest, GitProviderClient, GitProviderFailure, GitProviderPage, GitRepositorySearch } from '@acs/core/ports';
import { errAsync, okAsync, ResultAsync } from 'neverthrow';
import { z } from 'zod';
import type { ProviderEndpoints } from './endpoints.js';
import { failure, hasNextLink, type JsonAnswer, type ProviderHttp } from './http.js';
import { repositoryPathOfUrl } from './urls.js';

const nullableString = z.string().nullish().transform((v) => v ?? null);

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
  z.object({ name: z.string(), protected: z.boolean().optional(), commit: z.object({ id: z.string().optional(), committed_date: z.string().nullish() }).nullish() }),
);
const GlIssues = z.array(z.object({ iid: z.number().int(), title: z.string(), references: z.object({ full: z.string() }).nullish() }));
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
                discussions: z.object({ nodes: z.array(z.object({ resolvable: z.boolean().nullish(), resolved: z.boolean().nullish() })) }).nullish(),
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

/**
 * GitLab (gitlab.com or self-managed) for one token: REST v4, and GraphQL for the merge
 * requests of the suggested tasks. GitLab has no installations.
 */
export function createGitLabClient(endpoints: ProviderEndpoints, http: ProviderHttp): GitProviderClient {
  const api = (path: string) => `${endpoints.api}${path}`;
  const project = (path: string) => `/projects/${encodeURIComponent(path)}`;
  const hasMore = (a: JsonAnswer) => (a.headers.get('x-next-page') ?? '') !== '' || hasNextLink(a.headers);
  const projectsPage = (a: JsonAnswer) => http.parse(z.array(GlProject), a, 'the projects').map((projects) => ({ items: projects.map(toRepository), hasMore: hasMore(a) }));

  const user = (): ResultAsync<GitUserInfo, GitProviderFailure> =>
    http
      .get(api('/user'))
      .andThen((a) => http.parse(GlUser, a, 'the user'))
      .map((u) => ({ id: u.id, login: u.username, avatar_url: u.avatar_url ?? '', company: u.organization, name: u.name, email: u.email ?? u.public_email }));

  const repositories = ({ page, perPage }: GitPageRequest) =>
    http.get(api('/projects'), { membership: true, order_by: 'last_activity_at', sort: 'desc', per_page: perPage, page }).andThen(projectsPage);

  const lookup = (path: string): ResultAsync<GitProviderPage<GitRepository>, GitProviderFailure> =>
    http
      .get(api(project(path)))
      .andThen((a) => http.parse(GlProject, a, 'the project'))
      .map((p) => ({ items: [toRepository(p)], hasMore: false }))
      .orElse((f) => (f.type === 'not_found' ? okAsync({ items: [], hasMore: false }) : errAsync(f)));

  const searchRepositories = (request: GitRepositorySearch): ResultAsync<GitProviderPage<GitRepository>, GitProviderFailure> => {
    const pasted = repositoryPathOfUrl(request.query, endpoints);
    if (pasted !== undefined) return pasted === null ? okAsync({ items: [], hasMore: false }) : lookup(pasted.join('/'));
    if (request.sort === 'forks') return errAsync(failure('rejected', 'GitLab cannot order projects by forks; sort by stars or updated'));
    return http
      .get(api('/projects'), {
        membership: true,
        search: request.query,
        search_namespaces: true,
        order_by: ORDER_BY[request.sort],
        sort: request.order,
        per_page: request.perPage,
        page: request.page,
      })
      .andThen(projectsPage);
  };

  const branches = ({ repository, query, page, perPage }: GitPageRequest & { repository: string; query: string | null }) =>
    http.get(api(`${project(repository)}/repository/branches`), { per_page: perPage, page, ...(query !== null ? { search: query } : {}) }).andThen((a) =>
      http.parse(GlBranches, a, 'the branches').map((list) => ({
        items: list.map((b): GitBranch => ({ name: b.name, commit_sha: b.commit?.id ?? '', protected: b.protected ?? false, last_push_date: b.commit?.committed_date ?? null })),
        hasMore: hasMore(a),
      })),
    );

  const mergeRequestTasks = (): ResultAsync<GitSuggestedTask[], GitProviderFailure> =>
    http
      .post(endpoints.graphql, { query: MERGE_REQUESTS, variables: {} })
      .andThen((a) => http.parse(GqlMergeRequests, a, 'the merge requests'))
      .andThen((body) => {
        const mine = body.data?.currentUser;
        if (!mine) return errAsync(failure(body.errors?.length ? 'rejected' : 'token_invalid', http.sanitize(body.errors?.[0]?.message ?? null) ?? 'GitLab answered without the current user'));
        return okAsync(
          mine.authoredMergeRequests.nodes.flatMap((mr): GitSuggestedTask[] => {
            const unresolved = (mr.discussions?.nodes ?? []).some((d) => d.resolvable && !d.resolved);
            const taskType = mr.conflicts ? 'MERGE_CONFLICTS' : mr.headPipeline?.status === 'FAILED' ? 'FAILING_CHECKS' : unresolved ? 'UNRESOLVED_COMMENTS' : null;
            return taskType ? [{ git_provider: 'gitlab', task_type: taskType, repo: mr.project.fullPath, issue_number: mr.iid, title: mr.title }] : [];
          }),
        );
      });

  const issueTasks = (): ResultAsync<GitSuggestedTask[], GitProviderFailure> =>
    http
      .get(api('/issues'), { scope: 'assigned_to_me', state: 'opened', order_by: 'updated_at', sort: 'desc', per_page: 100 })
      .andThen((a) => http.parse(GlIssues, a, 'the issues'))
      .map((issues) =>
        issues.flatMap((issue): GitSuggestedTask[] => {
          const repo = issue.references?.full.split('#')[0]?.trim();
          return repo ? [{ git_provider: 'gitlab', task_type: 'OPEN_ISSUE', repo, issue_number: issue.iid, title: issue.title }] : [];
        }),
      );

  return {
    user,
    repositories,
    searchRepositories,
    branches,
    suggestedTasks: () => ResultAsync.combine([mergeRequestTasks(), issueTasks()] as const).map(([requests, issues]) => [...requests, ...issues]),
  };
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
