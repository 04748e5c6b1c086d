import { isHostAllowed } from '@acs/core/ports';

/** Where one provider's APIs are, for one stored host. */
export interface ProviderEndpoints {
  /** REST base, without a trailing slash (`https://api.github.com`, `https://gitlab.example.com/api/v4`). */
  api: string;
  graphql: string;
  /** The web host repositories' URLs are on (`github.com`), for telling a pasted URL from a search. */
  webHost: string;
  /** The web path prefix of a GitLab installed under a relative URL (`/gitlab`), or ''. */
  webPrefix: string;
}

/** The public host's endpoints: used for a token stored without a host, or with the public one. */
export interface PublicEndpoints {
  api: string;
  graphql: string;
  webHost: string;
}

export interface HostPolicy {
  /** Hosts (host or host:port, as `normalizeHostEntry` writes them) tokens may name besides the public one; null: any. */
  allowedHosts: ReadonlySet<string> | null;
  /** Tokens may name http:// hosts. */
  allowHttp: boolean;
}

export type EndpointsOutcome = { ok: true; endpoints: ProviderEndpoints } | { ok: false; reason: string };

const API_PATH = { github: '/api/v3', gitlab: '/api/v4' } as const;

/**
 * The endpoints for a stored host: none or the public one → the public endpoints; a host name
 * (`ghe.example.com`, `gitlab.example.com:8443`) or URL (`https://gitlab.example.com/gitlab`) →
 * that server's REST (`/api/v3` GitHub Enterprise, `/api/v4` GitLab) and GraphQL (`/api/graphql`).
 * An API path given with the host (`…/api/v3`) is taken off first. Refused: a host that is not a
 * host, one with credentials, http:// unless allowed, and one outside the allowed list.
 */
export function resolveEndpoints(
  provider: 'github' | 'gitlab',
  host: string | null,
  publicEndpoints: PublicEndpoints,
  policy: HostPolicy,
): EndpointsOutcome {
  const text = host?.trim() ?? '';
  const publicOnly = { ok: true as const, endpoints: { ...publicEndpoints, webPrefix: '' } };
  if (text === '') return publicOnly;
  let url: URL;
  try {
    url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `https://${text}`);
  } catch {
    return { ok: false, reason: `The stored ${provider} host "${text}" is not a host name or URL.` };
  }
  if (
    (url.protocol !== 'https:' && url.protocol !== 'http:') ||
    url.username ||
    url.password ||
    url.search ||
    url.hash ||
    !url.hostname
  ) {
    return {
      ok: false,
      reason: `The stored ${provider} host "${text}" must be a host name or an http(s) URL without credentials, query or fragment.`,
    };
  }
  const prefix = url.pathname.replace(/\/+$/, '').replace(/\/api\/(?:v\d+|graphql)$/, '');
  const hostPort = url.host.toLowerCase();
  if (
    url.protocol === 'https:' &&
    prefix === '' &&
    (hostPort === publicEndpoints.webHost || hostPort === `api.${publicEndpoints.webHost}`)
  )
    return publicOnly;
  if (url.protocol === 'http:' && !policy.allowHttp) {
    return {
      ok: false,
      reason: `The stored ${provider} host "${text}" is plain http://; this server calls git providers over https only.`,
    };
  }
  if (policy.allowedHosts && !isHostAllowed(policy.allowedHosts, url)) {
    return { ok: false, reason: `The stored ${provider} host "${url.host}" is not one this server may call.` };
  }
  const base = `${url.origin}${prefix}`;
  return {
    ok: true,
    endpoints: {
      api: `${base}${API_PATH[provider]}`,
      graphql: `${base}/api/graphql`,
      webHost: hostPort,
      webPrefix: prefix,
    },
  };
}

/** The GraphQL endpoint next to a REST base: `…/api/v3` or `…/api/v4` → `…/api/graphql`, else `<base>/graphql` (api.github.com). */
export function graphqlNextTo(api: string): string {
  const trimmed = api.replace(/\/+$/, '');
  return /\/api\/v\d+$/.test(trimmed) ? trimmed.replace(/\/api\/v\d+$/, '/api/graphql') : `${trimmed}/graphql`;
}
