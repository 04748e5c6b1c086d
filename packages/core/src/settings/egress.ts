import { errAsync, type ResultAsync } from 'neverthrow';
import type { DomainErrorOf } from '../errors.js';
import type { McpConfig } from '../mcp/schema.js';
import { allowedHostSet, isHostAllowed } from '../net/allowed-hosts.js';
import type { SettingsChange } from './merge.js';
import type { SaveProfileRequest } from './profiles.js';
import type { SettingsInput } from './schema.js';

/**
 * Where URLs users give may point: the operator's allow-lists of the hosts the server opens
 * connections to for a user's model (`llm_base_url`, a profile's `base_url`) and MCP servers
 * (`mcp_config` of the settings or of a conversation). A URL outside its list is refused when it
 * is stored (`HostNotAllowed`, 400 `LLM_HOST_NOT_ALLOWED` / `MCP_HOST_NOT_ALLOWED` over HTTP);
 * the adapters check again before they connect, which covers what was stored before the list
 * was set and the hosts a model name reaches without a base URL (`openai/…` → api.openai.com).
 */
export interface EgressOptions {
  /** Hosts a model's base URL may name; null or left out: any. */
  llmAllowedHosts?: AllowedHostList | null;
  /** Hosts an MCP server's URL may name; null or left out: any. */
  mcpAllowedHosts?: AllowedHostList | null;
}

export interface AllowedHostList {
  /** `host` (any port) or `host:port` entries, case-insensitive. */
  hosts: readonly string[];
  /** What the list is called where the operator sets it (the example server: `ACS_LLM_ALLOWED_HOSTS`), for refusals. */
  name?: string;
}

/** The lists, their entries as they are matched. */
export interface EgressPolicy {
  llm: ResolvedList | null;
  mcp: ResolvedList | null;
}

interface ResolvedList {
  hosts: ReadonlySet<string>;
  name: string | null;
}

type HostNotAllowed = DomainErrorOf<'HostNotAllowed'>;

/** The options as they are checked; throws for an entry that is not a host or host:port (an option that cannot work). */
export function resolveEgress(options: EgressOptions | undefined): EgressPolicy {
  const resolve = (list: AllowedHostList | null | undefined): ResolvedList | null =>
    list ? { hosts: allowedHostSet(list.hosts, list.name), name: list.name ?? null } : null;
  return { llm: resolve(options?.llmAllowedHosts), mcp: resolve(options?.mcpAllowedHosts) };
}

/** The refusal of a URL outside its list, or null (no list, the host is on it, or not a URL: the schema says so). */
function refusalOf(
  list: ResolvedList | null,
  target: 'llm' | 'mcp',
  path: string,
  value: string | null | undefined,
): HostNotAllowed | null {
  if (list === null || !value) return null;
  const url = URL.parse(value);
  if (url === null || isHostAllowed(list.hosts, url)) return null;
  return { type: 'HostNotAllowed', target, path, host: url.host, allowed: [...list.hosts], listName: list.name };
}

/** The first MCP server URL of `config` outside the list; `path` names the config (`mcp_config`). */
export function refusalOfMcpConfig(
  policy: EgressPolicy,
  config: McpConfig | null | undefined,
  path = 'mcp_config',
): HostNotAllowed | null {
  if (!config || policy.mcp === null) return null;
  for (const list of ['shttp_servers', 'sse_servers'] as const) {
    for (const [index, server] of config[list].entries()) {
      const refused = refusalOf(policy.mcp, 'mcp', `${path}.${list}.${index}.url`, server.url);
      if (refused) return refused;
    }
  }
  return null;
}

/** Store Settings (V0): the base URL and MCP servers given. */
export const refusalOfInput = (policy: EgressPolicy, input: SettingsInput): HostNotAllowed | null =>
  refusalOf(policy.llm, 'llm', 'llm_base_url', input.llm_base_url) ?? refusalOfMcpConfig(policy, input.mcp_config);

/** The V1 change: the base URL and MCP servers given. */
export const refusalOfChange = (policy: EgressPolicy, change: SettingsChange): HostNotAllowed | null =>
  refusalOf(policy.llm, 'llm', 'llm_base_url', change.llm_base_url) ?? refusalOfMcpConfig(policy, change.mcp_config);

/** A profile saved with a model configuration of its own (one saved from the settings' own takes what is stored). */
export const refusalOfProfile = (policy: EgressPolicy, request: SaveProfileRequest): HostNotAllowed | null =>
  refusalOf(policy.llm, 'llm', 'llm.base_url', request.llm?.base_url);

/** `run()`, unless the change was refused: then nothing runs and the refusal is the answer. */
export function unlessRefused<T, E>(
  refusal: HostNotAllowed | null,
  run: () => ResultAsync<T, E>,
): ResultAsync<T, E | HostNotAllowed> {
  return refusal ? errAsync(refusal) : run();
}
