import { decodeGitPageId, GIT_PAGE_ID_PATTERN, GitServiceErrors, type AgentConversationService } from '@acs/core';
import {
  BranchPageSchema,
  GIT_PROVIDER_TYPES,
  GitUserInfoSchema,
  InstallationPageSchema,
  RepositoryPageSchema,
  RepositorySortOrderSchema,
  SuggestedTaskPageSchema,
} from '@acs/core/schemas';
import { z } from 'zod';
import { defineRoute, type RouteDefinition } from '../route.js';

/**
 * A git search's page id → the number in it: a page (from 1; 0 reads as 1) or an offset (from
 * 0). Every string of the documented form is taken; any other is a 422.
 */
const gitPageId = (first: 0 | 1) =>
  z
    .string()
    .regex(new RegExp(GIT_PAGE_ID_PATTERN), 'is not a page id of this search; use next_page_id from the previous page')
    .transform((value) => Math.max(first, decodeGitPageId(value) ?? first))
    .optional()
    .meta({ description: "Opaque: the previous page's next_page_id." });

const limit = (defaultValue: number) =>
  z.coerce
    .number({ error: 'must be an integer between 1 and 100' })
    .int('must be an integer between 1 and 100')
    .min(1, 'must be an integer between 1 and 100')
    .max(100, 'must be an integer between 1 and 100')
    .default(defaultValue)
    .meta({ description: `Page size, 1 to 100 (default ${defaultValue}).` });

const provider = z
  .enum(GIT_PROVIDER_TYPES)
  .meta({ description: 'The git provider to ask (github and gitlab are served; a token for it must be stored).' });

const InstallationsQuery = z.object({ provider, page_id: gitPageId(0), limit: limit(100) });
const RepositoriesQuery = z.object({
  provider,
  query: z.string().max(256).optional().meta({
    description:
      'Part of a name, `owner/part of a name`, or a repository URL on the provider. Without it: your repositories, most recently pushed first.',
  }),
  installation_id: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .meta({ description: 'GitHub: only the repositories of this GitHub App installation (see installations/search).' }),
  page_id: gitPageId(1),
  limit: limit(100),
  sort_order: RepositorySortOrderSchema.optional().meta({
    description: 'Searches only (with query); default stars-desc. GitLab cannot sort by forks.',
  }),
});
const BranchesQuery = z.object({
  provider,
  repository: z
    .string()
    .max(512)
    // eslint-disable-next-line no-control-regex -- U+0000 is left out as the router refuses it (findUnstorableText).
    .regex(/^[^/\s\u0000]+(?:\/[^/\s\u0000]+)+$/, 'must be a repository path: owner/name (GitLab: group/sub/name)')
    .meta({ description: 'owner/name (GitLab: the full project path).' }),
  query: z.string().max(256).meta({ description: 'Part of a branch name; empty for every branch.' }),
  page_id: gitPageId(1),
  limit: limit(30),
});
const SuggestedTasksQuery = z.object({ page_id: gitPageId(1), limit: limit(30) });

const NO_PROVIDER =
  '403 GIT_PROVIDER_NOT_CONNECTED when the user has no provider token (or none for the provider asked about; store one with POST /api/add-git-providers).';
const PROVIDER_ERRORS =
  "A token the provider refuses is 403 GIT_PROVIDER_TOKEN_INVALID (not 401: that is for this API's own key); its rate limit 429; a provider that fails, 502; a request it refuses, 400 GIT_PROVIDER_REJECTED_REQUEST. Messages carry the provider's own words, never the token.";

/**
 * The user's git providers as the OpenHands UI browses them (OpenHands 1.x `/api/v1/git/*` and
 * `/api/v1/users/git-info`), over the provider tokens stored in their settings: only theirs.
 */
export function gitRoutes(service: AgentConversationService): RouteDefinition[] {
  const { git } = service;
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/git/installations/search',
      operationId: 'searchGitInstallations',
      summary: "Search the user's GitHub App installations",
      description: `The ids of the GitHub App installations the user's GitHub token may use; GitLab has none (400 GIT_REQUEST_UNSUPPORTED). ${NO_PROVIDER} ${PROVIDER_ERRORS}`,
      tags: ['git'],
      query: InstallationsQuery,
      success: { status: 200, description: 'A page of installation ids.', schema: InstallationPageSchema },
      errors: GitServiceErrors.searchInstallations,
      handle: ({ userId, query }) =>
        git.searchInstallations(userId, { provider: query.provider, offset: query.page_id ?? 0, limit: query.limit }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/git/repositories/search',
      operationId: 'searchGitRepositories',
      summary: "List or search the user's repositories at a git provider",
      description: `Without query: the user's repositories (of one installation with installation_id), most recently pushed first; sort_order is then refused (400). With query: repositories whose name matches among the user's own and their organisations' (GitLab: groups'), or the one a pasted URL names. ${NO_PROVIDER} ${PROVIDER_ERRORS}`,
      tags: ['git'],
      query: RepositoriesQuery,
      success: { status: 200, description: 'A page of repositories.', schema: RepositoryPageSchema },
      errors: GitServiceErrors.searchRepositories,
      handle: ({ userId, query }) =>
        git.searchRepositories(userId, {
          provider: query.provider,
          query: query.query ?? null,
          installationId: query.installation_id ?? null,
          page: query.page_id ?? 1,
          limit: query.limit,
          sortOrder: query.sort_order ?? null,
        }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/git/branches/search',
      operationId: 'searchGitBranches',
      summary: "Search a repository's branches",
      description: `Every branch (empty query), or those whose name contains query, a page at a time. A repository the token cannot see is 404 GIT_RESOURCE_NOT_FOUND. ${NO_PROVIDER} ${PROVIDER_ERRORS}`,
      tags: ['git'],
      query: BranchesQuery,
      success: { status: 200, description: 'A page of branches.', schema: BranchPageSchema },
      errors: GitServiceErrors.searchBranches,
      handle: ({ userId, query }) =>
        git.searchBranches(userId, {
          provider: query.provider,
          repository: query.repository,
          query: query.query,
          page: query.page_id ?? 1,
          limit: query.limit,
        }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/git/suggested-tasks/search',
      operationId: 'searchGitSuggestedTasks',
      summary: "Suggest tasks from the user's pull requests and issues",
      description: `From every connected provider: the user's open pull/merge requests with merge conflicts, failing checks or review comments to answer, then open issues assigned to them. A provider that fails is left out unless every one fails. ${NO_PROVIDER} ${PROVIDER_ERRORS}`,
      tags: ['git'],
      query: SuggestedTasksQuery,
      success: { status: 200, description: 'A page of suggested tasks.', schema: SuggestedTaskPageSchema },
      errors: GitServiceErrors.searchSuggestedTasks,
      handle: ({ userId, query }) => git.searchSuggestedTasks(userId, { page: query.page_id ?? 1, limit: query.limit }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/users/git-info',
      operationId: 'getUserGitInfo',
      summary: "The user's account at their git provider",
      description: `The account of the first connected provider (GitHub, then GitLab) whose token it accepts; when none does, the first one's refusal. ${NO_PROVIDER} ${PROVIDER_ERRORS}`,
      tags: ['git'],
      success: { status: 200, description: 'The git account.', schema: GitUserInfoSchema },
      errors: GitServiceErrors.user,
      handle: ({ userId }) => git.user(userId),
    }),
  ];
}
