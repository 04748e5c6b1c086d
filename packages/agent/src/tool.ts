import type { LlmToolDefinition, SandboxRuntime, SandboxRuntimeError, SandboxShell } from '@acs/core/ports';
import type { ResultAsync } from 'neverthrow';
import type { z } from 'zod';

/** What a tool can reach while it runs: the conversation's sandbox, its shell, and per-conversation memory. */
export interface ToolContext {
  readonly sandboxId: string;
  /** The sandbox's working directory; relative paths resolve against it. */
  readonly workingDir: string;
  readonly runtime: SandboxRuntime;
  /** The conversation's persistent shell, opened on first use. */
  shell(): ResultAsync<SandboxShell, SandboxRuntimeError>;
  /** Closes the shell (it died, or was closed under us); the next shell() opens a new one. */
  resetShell(): Promise<void>;
  /** Earlier contents of files the editor changed, newest last (for undo_edit). Lost on restart. */
  readonly editHistory: Map<string, string[]>;
  /** Aborted when the conversation is paused or stopped. */
  readonly signal: AbortSignal;
}

/** What running one tool call produced. */
export interface ToolOutcome {
  /** What the model is shown. */
  content: string;
  is_error: boolean;
  exit_code: number | null;
  details: Record<string, unknown>;
  /** The runtime answered unavailable/not_found: the engine checks whether the sandbox is still there. */
  sandboxFailure?: SandboxRuntimeError;
  /** `finish` was called with this message. */
  finished?: { message: string };
}

export interface AgentTool<S extends z.ZodType = z.ZodType> {
  /** The tool as offered when no conversation is known; its name is the tool's name. */
  readonly definition: LlmToolDefinition;
  /**
   * The tool as offered in a conversation whose working directory is `workingDir` (the same name
   * and parameters): examples in its words use that directory, since small models copy example
   * paths as they are. Without it, `definition` is offered.
   */
  definitionIn?(workingDir: string): LlmToolDefinition;
  /** Set for a tool of an MCP server: its schema is passed as the server gave it, and the security analyzer reads the server's hints. */
  readonly mcp?: {
    server: string;
    tool: string;
    annotations: { read_only?: boolean; destructive?: boolean; open_world?: boolean };
  };
  /** Validates (and lightly coerces) the model's arguments. */
  readonly arguments: S;
  run(args: z.output<S>, context: ToolContext): Promise<ToolOutcome>;
}

export const outcome = (content: string, extra: Partial<ToolOutcome> = {}): ToolOutcome => ({
  content,
  is_error: false,
  exit_code: null,
  details: {},
  ...extra,
});

export const failure = (content: string, extra: Partial<ToolOutcome> = {}): ToolOutcome =>
  outcome(content, { is_error: true, ...extra });

/** A runtime error as the tool's result; the engine stops the agent if the sandbox turns out to be gone. */
export function runtimeFailure(what: string, error: SandboxRuntimeError): ToolOutcome {
  // Only an engine that is down or a sandbox that is gone is the sandbox's failure; a bad path is the call's.
  return failure(
    `${what}: ${error.message}`,
    error.type === 'failed' || error.type === 'is_directory' ? {} : { sandboxFailure: error },
  );
}
