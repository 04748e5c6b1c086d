/**
 * @acs/adapter-git-providers: the core `GitProviders` port for GitHub and GitLab, public or
 * self-hosted, over their REST and GraphQL APIs with `fetch` (no SDK), one user's token per call.
 *
 * ```ts
 * const service = createAgentConversationService({ ...ports, gitProviders: createGitProviders({ allowedHosts: ['ghe.example.com'] }) });
 * ```
 */
import type { GitProviderClient, GitProviderCredentials, GitProviderFailure, GitProviders } from '@acs/core/ports';
import { normalizeHostEntry } from '@acs/core/ports';
import type { GitProviderType } from '@acs/core/schemas';
import { errAsync } from 'neverthrow';
import { graphqlNextTo, resolveEndpoints, type HostPolicy, type PublicEndpoints } from './endpoints.js';
import { createGitHubClient } from './github.js';
import { createGitLabClient } from './gitlab.js';
import { ProviderHttp } from './http.js';

export { graphqlNextTo, resolveEndpoints, type EndpointsOutcome, type ProviderEndpoints } from './endpoints.js';

/** Where a provider's public host is served (for tokens stored without a host). */
export interface PublicProviderOptions {
  /** REST base. GitHub: `https://api.github.com`; GitLab: `https://gitlab.com/api/v4`. */
  apiUrl?: string;
  /** Default: next to `apiUrl` (`…/api/graphql` for `…/api/v3|v4`, else `<apiUrl>/graphql`). */
  graphqlUrl?: string;
  /**
   * The host of its repositories' web URLs (a pasted URL on it names a repository). Default: the
   * host of `apiUrl` without a leading `api.` (`github.com` for api.github.com, `gitlab.com`).
   */
  webHost?: string;
}

export interface GitProvidersOptions {
  github?: PublicProviderOptions;
  gitlab?: PublicProviderOptions;
  /**
   * The hosts (`ghe.example.com`, or with its port) a stored token may name besides the public
   * ones. Default: any host. Set it where the server can reach hosts users must not make it call.
   */
  allowedHosts?: readonly string[] | null;
  /** Let stored tokens name `http://` hosts (a provider on a trusted network). Default false: https only. */
  allowHttp?: boolean;
  /** Per request, the answer included. Default 15 000. */
  timeoutMs?: number;
  /** Answers longer than this fail. Default 8 MiB. */
  maxResponseBytes?: number;
  /** Default `agent-conversation-service` (GitHub refuses requests without one). */
  userAgent?: string;
}

const DEFAULT_API_URLS = { github: 'https://api.github.com', gitlab: 'https://gitlab.com/api/v4' } as const;

/** What GitHub says in an error body: its message and those of its `errors`. */
function gitHubMessage(body: unknown): string | null {
  if (typeof body !== 'object' || body === null) return null;
  const { message, errors } = body as { message?: unknown; errors?: unknown };
  const details = Array.isArray(errors)
    ? (errors as unknown[])
        .map((e): unknown => (typeof e === 'object' && e !== null ? (e as { message?: unknown }).message : e))
        .filter((m): m is string => typeof m === 'string')
    : [];
  const parts = [typeof message === 'string' ? message : null, ...details].filter((p): p is string => Boolean(p));
  return parts.length > 0 ? parts.join(': ') : null;
}

/** What GitLab says in an error body: `message` (text, or field → problems), an OAuth `error_description`, or GraphQL `errors`. */
function gitLabMessage(body: unknown): string | null {
  if (typeof body !== 'object' || body === null) return null;
  const { message, error, error_description: description, errors } = body as Record<string, unknown>;
  if (typeof message === 'string') return message;
  if (typeof message === 'object' && message !== null) return JSON.stringify(message);
  if (typeof description === 'string') return description;
  if (typeof error === 'string') return error;
  if (Array.isArray(errors) && typeof (errors[0] as { message?: unknown } | undefined)?.message === 'string')
    return (errors[0] as { message: string }).message;
  return null;
}

/** The port over GitHub and GitLab; other providers get no client (null). */
export function createGitProviders(options: GitProvidersOptions = {}): GitProviders {
  const policy: HostPolicy = {
    allowedHosts: options.allowedHosts
      ? // An entry that is not a host or host:port is kept as it is, and matches nothing.
        new Set(options.allowedHosts.map((h) => normalizeHostEntry(h) ?? h.trim().toLowerCase()).filter(Boolean))
      : null,
    allowHttp: options.allowHttp ?? false,
  };
  const publicOf = (provider: 'github' | 'gitlab'): PublicEndpoints => {
    const given = options[provider] ?? {};
    const api = (given.apiUrl ?? DEFAULT_API_URLS[provider]).replace(/\/+$/, '');
    const webHost = given.webHost ?? new URL(api).host.replace(/^api\./, '');
    return { api, graphql: given.graphqlUrl ?? graphqlNextTo(api), webHost: webHost.toLowerCase() };
  };
  const publicEndpoints = { github: publicOf('github'), gitlab: publicOf('gitlab') };
  const http = (
    providerName: string,
    token: string,
    messageOf: (body: unknown) => string | null,
    headers: Record<string, string>,
  ) =>
    new ProviderHttp({
      providerName,
      token,
      timeoutMs: options.timeoutMs ?? 15_000,
      maxResponseBytes: options.maxResponseBytes ?? 8 * 1024 * 1024,
      userAgent: options.userAgent ?? 'agent-conversation-service',
      headers,
      messageOf,
    });

  return {
    connect(provider: GitProviderType, credentials: GitProviderCredentials): GitProviderClient | null {
      if (provider !== 'github' && provider !== 'gitlab') return null;
      const resolved = resolveEndpoints(provider, credentials.host, publicEndpoints[provider], policy);
      if (!resolved.ok) return refusingClient({ type: 'host_not_allowed', message: resolved.reason });
      return provider === 'github'
        ? createGitHubClient({
            endpoints: resolved.endpoints,
            http: http('GitHub', credentials.token, gitHubMessage, {
              Accept: 'application/vnd.github+json',
              'X-GitHub-Api-Version': '2022-11-28',
            }),
          })
        : createGitLabClient({
            endpoints: resolved.endpoints,
            http: http('GitLab', credentials.token, gitLabMessage, {}),
          });
    },
  };
}

/** A client whose every call fails the same way (a host this server may not call). */
function refusingClient(reason: GitProviderFailure): GitProviderClient {
  const refuse = () => errAsync(reason);
  return {
    user: refuse,
    installations: refuse,
    repositories: refuse,
    searchRepositories: refuse,
    branches: refuse,
    suggestedTasks: refuse,
  };
}
