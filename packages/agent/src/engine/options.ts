import type { AgentHost, AgentPort } from '@acs/core/ports';
import type { CondenserOptions } from '../condenser.js';
import type { AgentTool } from '../tool.js';
import type { WorkspaceOptions } from '../workspace-setup.js';

/** Steps per user message when neither the options nor the user's settings say. */
export const DEFAULT_MAX_ITERATIONS = 100;
/** Model calls one user's agents make at once when the options do not say. */
export const DEFAULT_MAX_MODEL_CALLS_PER_USER = 16;

export interface AgentEngineOptions {
  /** Steps per user message when the user's `max_iterations` is unset. Default 100. */
  defaultMaxIterations?: number;
  /** The tools of every conversation. Default: execute_bash, str_replace_editor, think, finish. */
  tools?: readonly AgentTool[];
  /** Bounds of the default condenser (used when the user's `enable_default_condenser` is on). */
  condenser?: CondenserOptions;
  /** MCP time limits. connectTimeoutMs (default 30 s) bounds connecting and listing tools; callTimeoutMs (default 300 s) one call. */
  mcp?: { connectTimeoutMs?: number; callTimeoutMs?: number };
  /** What the rule-based security analyzer trusts: hosts the agent may contact, directories that hold secrets. Added to the defaults. */
  security?: { trustedHosts?: readonly string[]; secretPaths?: readonly string[] };
  /** Repository setup: clone and setup-script time limits, where credentials live in the sandbox. */
  workspace?: WorkspaceOptions;
  /**
   * Model calls one user's agents make at once, in this process (default 16); more wait their
   * turn. One user's many conversations then share what the server spends on them instead of
   * taking it from everyone else.
   */
  maxModelCallsPerUser?: number;
  /**
   * How long the pieces of a streamed answer are held to be published together (default 10 ms;
   * 0: each piece at once). A model that writes a token every few milliseconds then costs a
   * publish, a notification across replicas and a write per live client per window, not per token.
   */
  deltaWindowMs?: number;
}

/** What the engine is built from: the domain's side of the agent port, and its options. */
export interface AgentEngineDeps extends AgentHost {
  options?: AgentEngineOptions;
}

/**
 * Runs the agents. Each conversation has at most one loop at a time, an async task of its
 * own: LLM calls and tool runs are awaited I/O, so one slow call holds up neither other
 * conversations nor the HTTP server. Everything a step does is appended to the event log
 * before it is acted on; the log is the only state a restarted process needs.
 */
export type AgentEngine = AgentPort;
