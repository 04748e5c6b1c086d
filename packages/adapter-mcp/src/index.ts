/**
 * @acs/adapter-mcp: the core `McpConnector` port on the official MCP TypeScript SDK
 * (`@modelcontextprotocol/sdk`): Streamable HTTP, SSE and stdio servers, the last run as a
 * process in the conversation's sandbox and spoken to over its stdin and stdout.
 *
 * ```ts
 * const service = createAgentConversationService({ ...storage, sandboxSpecs, runtime, llm, mcp: createMcpConnector() });
 * ```
 */
export { createMcpConnector, describeTarget, type McpConnectorOptions, type McpLogger } from './connector.js';
export { classify, redact, type ClassifyContext } from './errors.js';
export { flattenCallResult, toToolInfo } from './mapping.js';
export { SandboxProcessTransport, type SandboxProcessTransportOptions } from './stdio-transport.js';
