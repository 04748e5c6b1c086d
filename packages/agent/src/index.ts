/**
 * @acs/agent: the agent of the Agent Conversation Service. It reads a conversation's event log,
 * calls the model and runs tools in the sandbox, one loop per conversation; core's conversation
 * service drives it through the `AgentPort` and it reaches the domain only through `AgentHost`.
 *
 * This entry is what a host needs to compose the service with it: `createAgent`, the types of
 * its options (and of a tool of one's own), and the built-in tools to add one to. The engine,
 * prompt, condenser, stuck detection, security rules and workspace setup are its own, not an API.
 *
 * ```ts
 * const service = createAgentConversationService({ ...ports, agent: createAgent({ defaultMaxIterations: 50 }) });
 * // a tool of one's own beside the built-in ones:
 * createAgent({ tools: [...BUILTIN_TOOLS, myTool] });
 * ```
 */
import type { AgentFactory } from '@acs/core/ports';
import { createAgentEngine, type AgentEngineOptions } from './engine/index.js';

/** The agent for `createAgentConversationService({ …, agent })`: its limits, tools, condenser, MCP and security options. */
export function createAgent(options: AgentEngineOptions = {}): AgentFactory {
  return (host) => createAgentEngine({ ...host, options });
}

export type { AgentEngineOptions } from './engine/index.js';
export type { CondenserOptions } from './condenser.js';
export type { WorkspaceOptions } from './workspace-setup.js';
export type { AgentTool, ToolContext, ToolOutcome } from './tool.js';
export { BUILTIN_TOOLS } from './toolset.js';
