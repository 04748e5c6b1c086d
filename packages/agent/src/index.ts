/**
 * @acs/agent: the agent of the Agent Conversation Service. It reads a conversation's event log,
 * calls the model and runs tools in the sandbox, one loop per conversation; core's conversation
 * service drives it through the `AgentPort` and it reaches the domain only through `AgentHost`.
 *
 * ```ts
 * const service = createAgentConversationService({ ...ports, agent: createAgent({ defaultMaxIterations: 50 }) });
 * ```
 */
import type { AgentFactory } from '@acs/core/ports';
import { createAgentEngine, type AgentEngineOptions } from './engine/index.js';

/** The agent for `createAgentConversationService({ …, agent })`: its limits, tools, condenser, MCP and security options. */
export function createAgent(options: AgentEngineOptions = {}): AgentFactory {
  return (host) => createAgentEngine({ ...host, options });
}

export {
  createAgentEngine,
  metricsOf,
  pendingConfirmation,
  DEFAULT_MAX_ITERATIONS,
  type AgentEngine,
  type AgentEngineDeps,
  type AgentEngineOptions,
} from './engine/index.js';
export * from './security.js';
export { assessByRules } from './security/rules.js';
export { DEFAULT_TRUSTED_HOSTS, highestRisk, RULE_IDS, type AssessedAction, type RiskAssessment, type RuleContext, type SecurityRisk } from './security/risk.js';
export * from './condenser.js';
export * from './mcp-session.js';
export { MISSING_RESULT, projectMessages, systemPrompt, type PromptContext } from './prompt.js';
export { detectStuck, STUCK_THRESHOLDS, type StuckVerdict } from './stuck.js';
export { nextReplayStep, replayCallId, replayEndIndex } from './replay.js';
export { BUILTIN_TOOLS, parseToolArguments, Toolset } from './toolset.js';
export { executeBashTool, DEFAULT_COMMAND_WAIT_SECONDS } from './bash-tool.js';
export { strReplaceEditorTool, MAX_VIEW_CHARS } from './editor-tool.js';
export { thinkTool, finishTool } from './builtin-tools.js';
export type { AgentTool, ToolContext, ToolOutcome } from './tool.js';
export * from './guidance.js';
export {
  credentialHelperScript,
  DEFAULT_CLONE_TIMEOUT_MS,
  DEFAULT_CREDENTIAL_DIR,
  DEFAULT_GIT_USER_EMAIL,
  DEFAULT_GIT_USER_NAME,
  DEFAULT_SETUP_SCRIPT_TIMEOUT_MS,
  prepareRepository,
  PROVIDER_HOSTS,
  repositoryDir,
  resolveRemote,
  scrubSecrets,
  workBranchName,
  type PrepareRepositoryInput,
  type RepositoryRemote,
  type WorkspaceOptions,
} from './workspace-setup.js';
