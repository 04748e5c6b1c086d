import { z } from 'zod';

/**
 * The git providers a request may name: every provider OpenHands 1.x knows, so a client naming
 * one this server has no client for is told so (a 4xx that says which), not refused as malformed.
 */
export const GIT_PROVIDER_TYPES = [
  'github',
  'gitlab',
  'bitbucket',
  'bitbucket_data_center',
  'forgejo',
  'azure_devops',
  'enterprise_sso',
] as const;
export const GitProviderTypeSchema = z.enum(GIT_PROVIDER_TYPES).meta({ id: 'GitProviderType' });
export type GitProviderType = z.infer<typeof GitProviderTypeSchema>;

/** How a repository search is ordered: field and direction (`stars-desc`). */
export const REPOSITORY_SORT_ORDERS = [
  'stars-desc',
  'stars-asc',
  'forks-desc',
  'forks-asc',
  'updated-desc',
  'updated-asc',
] as const;
export const RepositorySortOrderSchema = z.enum(REPOSITORY_SORT_ORDERS);
export type RepositorySortOrder = z.infer<typeof RepositorySortOrderSchema>;

/** A repository as a git provider lists it (`full_name` is `owner/name`, or a GitLab group path). */
export const GitRepositorySchema = z
  .object({
    id: z.string().meta({ description: "The provider's own id of the repository." }),
    full_name: z.string(),
    git_provider: GitProviderTypeSchema,
    is_public: z.boolean(),
    stargazers_count: z.int().nullable(),
    link_header: z
      .string()
      .nullable()
      .meta({ description: 'Always null here (OpenHands 1.x copied a paging header into each repository).' }),
    pushed_at: z
      .string()
      .nullable()
      .meta({ description: 'When it was last pushed to (GitHub) or last active (GitLab), ISO 8601.' }),
    owner_type: z.enum(['user', 'organization']).nullable(),
    main_branch: z.string().nullable(),
  })
  .meta({ id: 'GitRepository' });
export type GitRepository = z.infer<typeof GitRepositorySchema>;

export const GitBranchSchema = z
  .object({
    name: z.string(),
    commit_sha: z.string(),
    protected: z.boolean(),
    last_push_date: z
      .string()
      .nullable()
      .meta({ description: "The head commit's date, ISO 8601, when the provider gives it." }),
  })
  .meta({ id: 'GitBranch' });
export type GitBranch = z.infer<typeof GitBranchSchema>;

/**
 * Why something is suggested: a pull/merge request of the user's with conflicts, failing
 * checks or review comments to answer, or an open issue assigned to them. (`OPEN_PR` is part of
 * the OpenHands vocabulary; a request with nothing to do is not suggested.)
 */
export const SUGGESTED_TASK_TYPES = [
  'MERGE_CONFLICTS',
  'FAILING_CHECKS',
  'UNRESOLVED_COMMENTS',
  'OPEN_ISSUE',
  'OPEN_PR',
] as const;
export const GitSuggestedTaskSchema = z
  .object({
    git_provider: GitProviderTypeSchema,
    task_type: z.enum(SUGGESTED_TASK_TYPES),
    repo: z.string(),
    issue_number: z.int(),
    title: z.string(),
  })
  .meta({ id: 'GitSuggestedTask' });
export type GitSuggestedTask = z.infer<typeof GitSuggestedTaskSchema>;

/** The account a provider token belongs to. */
export const GitUserInfoSchema = z
  .object({
    id: z.string(),
    login: z.string(),
    avatar_url: z.string(),
    company: z.string().nullable(),
    name: z.string().nullable(),
    email: z.string().nullable(),
  })
  .meta({ id: 'UserGitInfo' });
export type GitUserInfo = z.infer<typeof GitUserInfoSchema>;

const nextPageId = z
  .string()
  .nullable()
  .meta({ description: 'Pass as page_id for the next page; null on the last page.' });

export const InstallationPageSchema = z
  .object({ items: z.array(z.string()), next_page_id: nextPageId })
  .meta({ id: 'InstallationPage' });
export const RepositoryPageSchema = z
  .object({ items: z.array(GitRepositorySchema), next_page_id: nextPageId })
  .meta({ id: 'RepositoryPage' });
export const BranchPageSchema = z
  .object({ items: z.array(GitBranchSchema), next_page_id: nextPageId })
  .meta({ id: 'BranchPage' });
export const SuggestedTaskPageSchema = z
  .object({ items: z.array(GitSuggestedTaskSchema), next_page_id: nextPageId })
  .meta({ id: 'SuggestedTaskPage' });
export type InstallationPage = z.infer<typeof InstallationPageSchema>;
export type RepositoryPage = z.infer<typeof RepositoryPageSchema>;
export type BranchPage = z.infer<typeof BranchPageSchema>;
export type SuggestedTaskPage = z.infer<typeof SuggestedTaskPageSchema>;
