import { allowedHostSet, type McpConnector } from '@acs/core/ports';
import { errAsync, ResultAsync } from 'neverthrow';
import type { McpConnectorOptions } from './connector.js';

/**
 * `createMcpConnector`, with the MCP SDK loaded at the first connection instead of at import:
 * a process that never meets an MCP server never holds the SDK (about 20 MiB with its
 * validators). Behaves as `createMcpConnector(options)` once loaded.
 *
 * ```ts
 * import { createLazyMcpConnector } from '@acs/adapter-mcp/lazy';
 * const service = createAgentConversationService({ ...ports, mcp: createLazyMcpConnector() });
 * ```
 */
export function createLazyMcpConnector(options: McpConnectorOptions = {}): McpConnector {
  // An allowed host that is not a host is found now, at start, not at the first connection.
  if (options.allowedHosts) allowedHostSet(options.allowedHosts, options.allowedHostsName);
  let loading: Promise<McpConnector> | null = null;
  const load = () => (loading ??= import('./connector.js').then((module) => module.createMcpConnector(options)));
  return {
    connect: (target, connectOptions) =>
      ResultAsync.fromPromise(load(), (error) => error)
        .orElse((error) => {
          // A failed load is tried again at the next connection (a package being installed, say).
          loading = null;
          return errAsync({
            type: 'protocol' as const,
            message: `could not load the MCP client: ${error instanceof Error ? error.message : String(error)}`,
          });
        })
        .andThen((connector) => connector.connect(target, connectOptions)),
  };
}
