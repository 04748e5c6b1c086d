/**
 * Operators' allow-lists of the hosts the server may open connections to for users (git
 * providers, model servers, MCP servers): entries are `host` (any port) or `host:port`, compared
 * case-insensitively, as a URL names them (`127.1` is 127.0.0.1, a name is lower-cased and
 * IDNA-encoded, an IPv6 address is written in brackets: `[::1]:8080`).
 */

/** The port a URL of each scheme goes to when it names none. */
const DEFAULT_PORTS: Readonly<Record<string, string>> = { 'http:': '80', 'https:': '443', 'ws:': '80', 'wss:': '443' };

/** `host` or `host:port`; the host a name, an IPv4 address, or an IPv6 address in brackets (no wildcards: `*` is refused). */
const ENTRY = /^(\[[0-9a-f:.]+\]|[^\s:/?#@[\]\\*]+)(?::(\d{1,5}))?$/;

/** An entry as it is matched (`example.com`, `example.com:8443`, `[::1]:11434`), or null when it is not a host or host:port. */
export function normalizeHostEntry(entry: string): string | null {
  const match = ENTRY.exec(entry.trim().toLowerCase());
  if (!match) return null;
  let hostname: string;
  try {
    hostname = new URL(`http://${match[1]!}`).hostname;
  } catch {
    return null;
  }
  if (hostname === '') return null;
  if (match[2] === undefined) return hostname;
  const port = Number(match[2]);
  return port >= 1 && port <= 65_535 ? `${hostname}:${port}` : null;
}

/** An allow-list's entries as they are matched; throws an Error naming the entries that are not a host or host:port (an option that cannot work). */
export function allowedHostSet(entries: readonly string[], listName = 'the allowed hosts'): ReadonlySet<string> {
  const hosts = new Set<string>();
  const invalid: string[] = [];
  for (const entry of entries) {
    if (entry.trim() === '') continue;
    const normalized = normalizeHostEntry(entry);
    if (normalized === null) invalid.push(entry);
    else hosts.add(normalized);
  }
  if (invalid.length > 0)
    throw new Error(
      `${listName}: ${invalid.map((e) => JSON.stringify(e)).join(', ')} ${invalid.length === 1 ? 'is' : 'are'} not a host or host:port`,
    );
  return hosts;
}

/** Whether `url` names a host of the list: its host with any port, or with its port (the scheme's default when it names none). */
export function isHostAllowed(allowed: ReadonlySet<string>, url: URL): boolean {
  if (allowed.has(url.hostname)) return true;
  const port = url.port !== '' ? url.port : DEFAULT_PORTS[url.protocol];
  return port !== undefined && allowed.has(`${url.hostname}:${port}`);
}

/** A list's entries for a message: the first `max`, and how many more there are. */
export function describeAllowedHosts(allowed: ReadonlySet<string>, max = 20): string {
  const entries = [...allowed];
  if (entries.length === 0) return 'none';
  const shown = entries.slice(0, max).join(', ');
  return entries.length > max ? `${shown} and ${entries.length - max} more` : shown;
}
