import type { ProviderEndpoints } from './endpoints.js';

/**
 * A repository search that is a pasted URL (`https://github.com/owner/name`, a clone URL, a
 * GitLab URL with subgroups or a `/-/tree/main` tail) names one repository:
 * - undefined: the query is not a URL (search by name);
 * - null: a URL, but not of a repository on this provider's host (nothing to find);
 * - the path's segments (`['owner', 'name', 'tree', 'main']`, `['group', 'sub', 'name']`): the
 *   provider takes the repository out of them.
 */
export function repositoryPathOfUrl(
  query: string,
  endpoints: Pick<ProviderEndpoints, 'webHost' | 'webPrefix'>,
): string[] | null | undefined {
  if (!/^https?:\/\//i.test(query)) return undefined;
  let url: URL;
  try {
    url = new URL(query);
  } catch {
    return null;
  }
  const host = url.host.toLowerCase();
  if (host !== endpoints.webHost && host !== `www.${endpoints.webHost}`) return null;
  let path: string;
  try {
    path = decodeURIComponent(url.pathname);
  } catch {
    return null;
  }
  if (endpoints.webPrefix && path.startsWith(`${endpoints.webPrefix}/`)) path = path.slice(endpoints.webPrefix.length);
  const parts = path
    .split('/-/')[0]!
    .replace(/\.git$/, '')
    .split('/')
    .filter(Boolean);
  return parts.length >= 2 ? parts : null;
}
