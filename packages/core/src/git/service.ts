import { err, ok, type Result, type ResultAsync } from 'neverthrow';
import { match } from 'ts-pattern';
import type { DomainErrorOf, DomainErrorType, ErrorsOf } from '../errors.js';
import { silentLogger, type Logger } from '../logger.js';
import { resultAsync } from '../result.js';
import { GIT_PROVIDERS, type GitProvider, type StoredSettings } from '../settings/schema.js';
import type { SettingsStore } from '../settings/store.js';
import { encodeGitPageId } from './page-id.js';
import type { GitProviderClient, GitProviderFailure, GitProviders } from './port.js';
import type {
  BranchPage,
  GitProviderType,
  GitUserInfo,
  InstallationPage,
  RepositoryPage,
  RepositorySortOrder,
  GitSuggestedTask,
  SuggestedTaskPage,
} from './schema.js';

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
  searchSuggestedTasks(
    userId: string,
    request: { page: number; limit: number },
  ): ResultAsync<SuggestedTaskPage, GitError>;
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

const unsupported = (provider: string, message: string): DomainErrorOf<'GitRequestRefused'> => ({
  type: 'GitRequestRefused',
  provider,
  reason: 'unsupported',
  message,
});

export interface GitServiceDeps {
  /** Where the user's provider tokens are (read on every call; nothing is cached). */
  settings: SettingsStore;
  /** Clients per provider; null: none here (every connected provider is then unsupported). */
  providers: GitProviders | null;
  logger?: Logger;
}

export function createGitService(deps: GitServiceDeps): GitService {
  return {
    searchInstallations: (userId, request) => resultAsync(searchInstallations(deps, userId, request)),
    searchRepositories: (userId, request) => resultAsync(searchRepositories(deps, userId, request)),
    searchBranches: (userId, request) => resultAsync(searchBranches(deps, userId, request)),
    searchSuggestedTasks: (userId, request) => resultAsync(searchSuggestedTasks(deps, userId, request)),
    user: (userId) => resultAsync(user(deps, userId)),
  };
}

/** A user's token for a provider, and where it is used. */
interface StoredToken {
  provider: GitProvider;
  token: string;
  host: string | null;
}

/** The user's providers with a token, in the order of GIT_PROVIDERS. */
function tokensOf(deps: GitServiceDeps, userId: string): ResultAsync<StoredToken[], DomainErrorOf<'StoreUnavailable'>> {
  return deps.settings.get(userId).map((stored: StoredSettings | null) =>
    GIT_PROVIDERS.flatMap((provider) => {
      const entry = stored?.secrets_store.provider_tokens[provider];
      return entry?.token ? [{ provider, token: entry.token, host: entry.host?.trim() || null }] : [];
    }),
  );
}

function connect(deps: GitServiceDeps, { provider, token, host }: StoredToken): Connected | null {
  const client = deps.providers?.connect(provider, { token, host }) ?? null;
  return client ? { provider, client } : null;
}

/** The client of one provider for this user: 403 without a token for it, 400 without a client for it here. */
async function clientFor(
  deps: GitServiceDeps,
  userId: string,
  provider: GitProviderType,
): Promise<Result<Connected, GitError>> {
  const tokens = await tokensOf(deps, userId);
  if (tokens.isErr()) return err(tokens.error);
  if (tokens.value.length === 0) return err({ type: 'GitProviderNotConnected', provider: null });
  const entry = tokens.value.find((t) => t.provider === provider);
  if (!entry) return err({ type: 'GitProviderNotConnected', provider });
  const connected = connect(deps, entry);
  return connected ? ok(connected) : err(unsupported(provider, `This server has no client for ${provider}.`));
}

/** Every connected provider this server has a client for: 403 without any token, 400 when none has a client. */
async function allClients(deps: GitServiceDeps, userId: string): Promise<Result<Connected[], GitError>> {
  const tokens = await tokensOf(deps, userId);
  if (tokens.isErr()) return err(tokens.error);
  if (tokens.value.length === 0) return err({ type: 'GitProviderNotConnected', provider: null });
  const clients = tokens.value.flatMap((t) => connect(deps, t) ?? []);
  if (clients.length === 0) {
    const names = tokens.value.map((t) => t.provider).join(', ');
    return err(unsupported(names, `This server has no client for the connected git providers (${names}).`));
  }
  return ok(clients);
}

const call = <T>(
  { provider, client }: Connected,
  run: (client: GitProviderClient) => ResultAsync<T, GitProviderFailure>,
): ResultAsync<T, GitError> => run(client).mapErr((failure) => gitFailureError(provider, failure));

async function searchInstallations(
  deps: GitServiceDeps,
  userId: string,
  { provider, offset, limit }: InstallationSearch,
): Promise<Result<InstallationPage, GitError>> {
  const connected = await clientFor(deps, userId, provider);
  if (connected.isErr()) return err(connected.error);
  const installations = connected.value.client.installations?.bind(connected.value.client);
  if (!installations)
    return err(unsupported(provider, `${provider} has no installations; list repositories without installation_id.`));
  const ids = await call(connected.value, () => installations());
  if (ids.isErr()) return err(ids.error);
  return ok({
    items: ids.value.slice(offset, offset + limit),
    next_page_id: offset + limit < ids.value.length ? encodeGitPageId(offset + limit) : null,
  });
}

async function searchRepositories(
  deps: GitServiceDeps,
  userId: string,
  request: RepositorySearch,
): Promise<Result<RepositoryPage, GitError>> {
  const query = request.query?.trim() ?? '';
  if (query === '' && request.sortOrder !== null) {
    return err(
      unsupported(
        request.provider,
        'sort_order applies to searches only: give a query, or leave sort_order out to list your repositories (most recently pushed first).',
      ),
    );
  }
  const connected = await clientFor(deps, userId, request.provider);
  if (connected.isErr()) return err(connected.error);
  const paging = { page: request.page, perPage: request.limit };
  const listed =
    query === ''
      ? await call(connected.value, (c) => c.repositories({ ...paging, installationId: request.installationId }))
      : await call(connected.value, (c) =>
          c.searchRepositories({ ...paging, query, ...sortOf(request.sortOrder ?? 'stars-desc') }),
        );
  if (listed.isErr()) return err(listed.error);
  return ok({ items: listed.value.items, next_page_id: nextPage(listed.value.hasMore, request.page) });
}

async function searchBranches(
  deps: GitServiceDeps,
  userId: string,
  request: BranchSearch,
): Promise<Result<BranchPage, GitError>> {
  const connected = await clientFor(deps, userId, request.provider);
  if (connected.isErr()) return err(connected.error);
  const page = await call(connected.value, (c) =>
    c.branches({
      repository: request.repository,
      query: request.query === '' ? null : request.query,
      page: request.page,
      perPage: request.limit,
    }),
  );
  if (page.isErr()) return err(page.error);
  return ok({ items: page.value.items, next_page_id: nextPage(page.value.hasMore, request.page) });
}

/** Every connected provider's suggestions, all asked at once; one that fails is left out (and logged) unless all fail. */
async function searchSuggestedTasks(
  deps: GitServiceDeps,
  userId: string,
  { page, limit }: { page: number; limit: number },
): Promise<Result<SuggestedTaskPage, GitError>> {
  const clients = await allClients(deps, userId);
  if (clients.isErr()) return err(clients.error);
  const results = await Promise.all(clients.value.map((connected) => call(connected, (c) => c.suggestedTasks())));
  const succeeded = results.filter((r) => r.isOk());
  const failed = results.find((r) => r.isErr());
  if (succeeded.length === 0 && failed) return err(failed.error);
  results.forEach((r, i) => {
    if (r.isErr())
      (deps.logger ?? silentLogger).warn(
        { provider: clients.value[i]?.provider, error: r.error.type },
        'a git provider was left out of the suggested tasks',
      );
  });
  const tasks: GitSuggestedTask[] = succeeded.flatMap((r) => r.value);
  const start = (page - 1) * limit;
  return ok({ items: tasks.slice(start, start + limit), next_page_id: nextPage(start + limit < tasks.length, page) });
}

/** Tries each provider in order; the first failure is the answer when none answers. */
async function user(deps: GitServiceDeps, userId: string): Promise<Result<GitUserInfo, GitError>> {
  const clients = await allClients(deps, userId);
  if (clients.isErr()) return err(clients.error);
  let firstFailure: GitError | null = null;
  for (const connected of clients.value) {
    const found = await call(connected, (c) => c.user());
    if (found.isOk()) return found;
    firstFailure ??= found.error;
  }
  return err(firstFailure ?? { type: 'GitProviderNotConnected', provider: null });
}

function sortOf(order: RepositorySortOrder): { sort: 'stars' | 'forks' | 'updated'; order: 'asc' | 'desc' } {
  const [sort, direction] = order.split('-') as ['stars' | 'forks' | 'updated', 'asc' | 'desc'];
  return { sort, order: direction };
}
