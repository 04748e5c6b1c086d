import type { ResultAsync } from 'neverthrow';
import type { GitBranch, GitProviderType, GitRepository, GitUserInfo, GitSuggestedTask } from './schema.js';

/**
 * Why a call to a git provider failed, by what the provider (or the way to it) said:
 * - `token_invalid`: it refused the token (401): expired, revoked, or never valid;
 * - `forbidden`: it knows the token but refuses this (403 not caused by a rate limit): a scope
 *   the token lacks, a GitHub App installation it may not list;
 * - `not_found`: the repository (or installation) does not exist for this token (404);
 * - `rate_limited`: the token's rate limit is used up (429, or 403 saying so);
 * - `rejected`: it refused the request as asked (another 4xx, e.g. a search query it cannot run),
 *   or the client refused to send it (a page too deep to reach);
 * - `unavailable`: it could not be reached, answered 5xx, or answered something unreadable;
 * - `timeout`: it did not answer in time;
 * - `host_not_allowed`: the token's host is not one this server may call (an `http://` host, or
 *   one outside the operator's list).
 */
export type GitProviderFailureType =
  | 'token_invalid'
  | 'forbidden'
  | 'not_found'
  | 'rate_limited'
  | 'rejected'
  | 'unavailable'
  | 'timeout'
  | 'host_not_allowed';

export interface GitProviderFailure {
  readonly type: GitProviderFailureType;
  /** What went wrong in words, with the provider's own message when it gave one; never the token. */
  readonly message: string;
}

/** One page of a provider's list, and whether another follows. */
export interface GitProviderPage<T> {
  items: T[];
  hasMore: boolean;
}

/** A 1-based page number and the page size (1–100). */
export interface GitPageRequest {
  page: number;
  perPage: number;
}

export interface GitRepositorySearch extends GitPageRequest {
  /** Part of a name, `owner/part of a name`, or a repository's URL on the provider. */
  query: string;
  sort: 'stars' | 'forks' | 'updated';
  order: 'asc' | 'desc';
}

/**
 * One user's token at one git provider. Every answer is mapped to the OpenHands shapes; a method
 * a provider cannot offer is left out (GitLab has no installations).
 */
export interface GitProviderClient {
  /** The account the token belongs to. */
  user(): ResultAsync<GitUserInfo, GitProviderFailure>;
  /** GitHub App installations the token may use (their ids), every one of them. */
  installations?(): ResultAsync<string[], GitProviderFailure>;
  /** The repositories the token may use, most recently pushed first; of one installation when given. */
  repositories(
    request: GitPageRequest & { installationId: string | null },
  ): ResultAsync<GitProviderPage<GitRepository>, GitProviderFailure>;
  /** Repositories whose name matches, among the user's own and their organisations'/groups'; a URL finds that one repository. */
  searchRepositories(request: GitRepositorySearch): ResultAsync<GitProviderPage<GitRepository>, GitProviderFailure>;
  /** A repository's branches (`repository` is `owner/name`); with `query`, those whose name contains it. */
  branches(
    request: GitPageRequest & { repository: string; query: string | null },
  ): ResultAsync<GitProviderPage<GitBranch>, GitProviderFailure>;
  /**
   * What the user might ask an agent to do: their open pull/merge requests with conflicts,
   * failing checks or review comments, and open issues assigned to them (a bounded number, newest first).
   */
  suggestedTasks(): ResultAsync<GitSuggestedTask[], GitProviderFailure>;
}

/** The stored token of one provider: the secret and the host it is for (null: the provider's public host). */
export interface GitProviderCredentials {
  token: string;
  host: string | null;
}

/**
 * Reaches git providers' APIs with users' tokens (`@acs/adapter-git-providers`: GitHub and GitLab
 * over REST and GraphQL). The domain gives it one user's stored token per call; it keeps none.
 */
export interface GitProviders {
  /**
   * A client for this token, or null when this host has no client for the provider. A host the
   * token names but this server may not call is not refused here: the client's calls fail with
   * `host_not_allowed`.
   */
  connect(provider: GitProviderType, credentials: GitProviderCredentials): GitProviderClient | null;
}
