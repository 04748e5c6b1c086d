import { errAsync, okAsync, ResultAsync } from 'neverthrow';
import { match } from 'ts-pattern';
import type { DomainErrorOf, DomainErrorType, ErrorsOf } from '../errors.js';
import { silentLogger, type Logger } from '../logger.js';
import { GIT_PROVIDERS, type GitProvider, type StoredSettings } from '../settings/schema.js';
import type { SettingsStore } from '../settings/store.js';
import { encodeGitPageId } from './page-id.js';
import type { GitProviderClient, GitProviderFailure, GitProviders } from './port.js';
import type { BranchPage, GitProviderType, GitUserInfo, InstallationPage, RepositoryPage, RepositorySortOrder, GitSuggestedTask, SuggestedTaskPage } from './schema.js';

const GIT_ERRORS = [
  'GitProviderNotConnected',
  'GitRequestRefused',
  'GitProviderRefused',
  'GitResourceNotFound',
  'GitProviderRateLimited',
  'GitProviderUnavailable',
  'StoreUnavailable',
] as const satisfies readonly DomainErrorType[];

/** What each git operation can fail with (the compiler holds the implementation to it). */
export const GitServiceErrors = {
  searchInstallations: GIT_ERRORS,
  searchRepositories: GIT_ERRORS,
  searchBranches: GIT_ERRORS,
  searchSuggestedTasks: GIT_ERRORS,
  user: GIT_ERRORS,
} as const satisfies Record<string, readonly DomainErrorType[]>;

type GitError = ErrorsOf<typeof GIT_ERRORS>;

export interface InstallationSearch {
  provider: GitProviderType;
  /** How many installations to skip. */
  offset: number;
  limit: number;
}

export interface RepositorySearch {
  provider: GitProviderType;
  /** Null or empty: the user's repositories, most recently pushed first. */
  query: string | null;
  installationId: string | null;
  /** From 1. */
  page: number;
  limit: number;
  /** Searches only (with a query); default stars-desc. */
  sortOrder: RepositorySortOrder | null;
}

export interface BranchSearch {
  provider: GitProviderType;
  /** `owner/name`. */
  repository: string;
  /** Empty: every branch. */
  query: string;
  page: number;
  limit: number;
}

/**
 * The user's git providers as the OpenHands UI browses them (installations, repositories,
 * branches, suggested tasks, the account), over the provider tokens stored in their settings.
 * Each call reads that user's tokens and no one else's; nothing is cached.
 */
export interface GitService {
  searchInstallations(userId: string, request: InstallationSearch): ResultAsync<InstallationPage, GitError>;
  searchRepositories(userId: string, request: RepositorySearch): ResultAsync<RepositoryPage, GitError>;
  searchBranches(userId: string, request: BranchSearch): ResultAsync<BranchPage, GitError>;
  /** Every connected provider's suggestions, in provider order; a provider that fails is left out unless all fail. */
  searchSuggestedTasks(userId: string, request: { page: number; limit: number }): ResultAsync<SuggestedTaskPage, GitError>;
  /** The account of the first connected provider that answers. */
  user(userId: string): ResultAsync<GitUserInfo, GitError>;
}

interface Connected {
  provider: GitProvider;
  client: GitProviderClient;
}

const nextPage = (hasMore: boolean, page: number): string | null => (hasMore ? encodeGitPageId(page + 1) : null);

/** A provider's failure as the domain error it is for the user. */
function gitFailureError(provider: string, failure: GitProviderFailure): GitError {
  const { message } = failure;
  return match<GitProviderFailure['type'], GitError>(failure.type)
    .with('token_invalid', () => ({ type: 'GitProviderRefused', provider, reason: 'token_invalid', message }))
    .with('forbidden', () => ({ type: 'GitProviderRefused', provider, reason: 'forbidden', message }))
    .with('not_found', () => ({ type: 'GitResourceNotFound', provider, message }))
    .with('rate_limited', () => ({ type: 'GitProviderRateLimited', provider, message }))
    .with('rejected', () => ({ type: 'GitRequestRefused', provider, reason: 'rejected', message }))
    .with('host_not_allowed', () => ({ type: 'GitRequestRefused', provider, reason: 'host_not_allowed', message }))
    .with('unavailable', () => ({ type: 'GitProviderUnavailable', provider, reason: 'unavailable', message }))
    .with('timeout', () => ({ type: 'GitProviderUnavailable', provider, reason: 'timeout', message }))
    .exhaustive();
}

const unsupported = (provider: string, message: string): DomainErrorOf<'GitRequestRefused'> => ({ type: 'GitRequestRefused', provider, reason: 'unsupported', message });

export function createGitService(settings: SettingsStore, providers: GitProviders | null, logger: Logger = silentLogger): GitService {
  /** The user's providers with a token, in the order of GIT_PROVIDERS. */
  const tokensOf = (userId: string) =>
    settings.get(userId).map((stored: StoredSettings | null) =>
      GIT_PROVIDERS.flatMap((provider) => {
        const entry = stored?.secrets_store.provider_tokens[provider];
        return entry?.token ? [{ provider, token: entry.token, host: entry.host?.trim() || null }] : [];
      }),
    );

  const connect = (provider: GitProvider, token: string, host: string | null): Connected | null => {
    const client = providers?.connect(provider, { token, host }) ?? null;
    return client ? { provider, client } : null;
  };

  /** The client of one provider for this user: 403 without a token for it, 400 without a client for it here. */
  const clientFor = (userId: string, provider: GitProviderType): ResultAsync<Connected, GitError> =>
    tokensOf(userId).andThen((tokens) => {
      if (tokens.length === 0) return errAsync<Connected, GitError>({ type: 'GitProviderNotConnected', provider: null });
      const entry = tokens.find((t) => t.provider === provider);
      if (!entry) return errAsync<Connected, GitError>({ type: 'GitProviderNotConnected', provider });
      const connected = connect(entry.provider, entry.token, entry.host);
      return connected ? okAsync(connected) : errAsync<Connected, GitError>(unsupported(provider, `This server has no client for ${provider}.`));
    });

  /** Every connected provider this server has a client for: 403 without any token, 400 when none has a client. */
  const allClients = (userId: string): ResultAsync<Connected[], GitError> =>
    tokensOf(userId).andThen((tokens) => {
      if (tokens.length === 0) return errAsync<Connected[], GitError>({ type: 'GitProviderNotConnected', provider: null });
      const clients = tokens.flatMap((t) => connect(t.provider, t.token, t.host) ?? []);
      if (clients.length === 0) {
        const names = tokens.map((t) => t.provider).join(', ');
        return errAsync<Connected[], GitError>(unsupported(names, `This server has no client for the connected git providers (${names}).`));
      }
      return okAsync(clients);
    });

  const call = <T>({ provider, client }: Connected, run: (client: GitProviderClient) => ResultAsync<T, GitProviderFailure>): ResultAsync<T, GitError> =>
    run(client).mapErr((failure) => gitFailureError(provider, failure));

  return {
    searchInstallations: (userId, { provider, offset, limit }) =>
      clientFor(userId, provider).andThen((connected) => {
        const { client } = connected;
        if (!client.installations) return errAsync(unsupported(provider, `${provider} has no installations; list repositories without installation_id.`));
        return call(connected, () => client.installations!()).map((ids) => ({
          items: ids.slice(offset, offset + limit),
          next_page_id: offset + limit < ids.length ? encodeGitPageId(offset + limit) : null,
        }));
      }),
    searchRepositories: (userId, request) => {
      const query = request.query?.trim() ?? '';
      if (query === '' && request.sortOrder !== null) {
        return errAsync(unsupported(request.provider, 'sort_order applies to searches only: give a query, or leave sort_order out to list your repositories (most recently pushed first).'));
      }
      return clientFor(userId, request.provider).andThen((connected) => {
        const paging = { page: request.page, perPage: request.limit };
        const listed =
          query === ''
            ? call(connected, (c) => c.repositories({ ...paging, installationId: request.installationId }))
            : call(connected, (c) => c.searchRepositories({ ...paging, query, ...sortOf(request.sortOrder ?? 'stars-desc') }));
        return listed.map((page) => ({ items: page.items, next_page_id: nextPage(page.hasMore, request.page) }));
      });
    },
    searchBranches: (userId, request) =>
      clientFor(userId, request.provider).andThen((connected) =>
        call(connected, (c) => c.branches({ repository: request.repository, query: request.query === '' ? null : request.query, page: request.page, perPage: request.limit })).map(
          (page) => ({ items: page.items, next_page_id: nextPage(page.hasMore, request.page) }),
        ),
      ),
    searchSuggestedTasks: (userId, { page, limit }) =>
      allClients(userId)
        .andThen((clients) => suggestionsOf(clients))
        .map((tasks) => {
          const start = (page - 1) * limit;
          return { items: tasks.slice(start, start + limit), next_page_id: nextPage(start + limit < tasks.length, page) };
        }),
    user: (userId) => allClients(userId).andThen((clients) => firstUser(clients)),
  };

  function suggestionsOf(clients: Connected[]): ResultAsync<GitSuggestedTask[], GitError> {
    const outcomes = ResultAsync.fromSafePromise(Promise.all(clients.map(async (connected) => call(connected, (c) => c.suggestedTasks()))));
    return outcomes.andThen((results) => {
      const succeeded = results.filter((r) => r.isOk());
      const failed = results.find((r) => r.isErr());
      if (succeeded.length === 0 && failed) return errAsync<GitSuggestedTask[], GitError>(failed.error);
      results.forEach((r, i) => {
        if (r.isErr()) logger.warn({ provider: clients[i]?.provider, error: r.error.type }, 'a git provider was left out of the suggested tasks');
      });
      return okAsync(succeeded.flatMap((r) => r.value));
    });
  }

  /** Tries each provider in order; the first failure is the answer when none answers. */
  function firstUser(clients: Connected[], index = 0, firstFailure: GitError | null = null): ResultAsync<GitUserInfo, GitError> {
    const connected = clients[index];
    if (!connected) return errAsync(firstFailure ?? { type: 'GitProviderNotConnected', provider: null });
    return call(connected, (c) => c.user()).orElse((error) => firstUser(clients, index + 1, firstFailure ?? error));
  }
}

function sortOf(order: RepositorySortOrder): { sort: 'stars' | 'forks' | 'updated'; order: 'asc' | 'desc' } {
  const [sort, direction] = order.split('-') as ['stars' | 'forks' | 'updated', 'asc' | 'desc'];
  return { sort, order: direction };
}
