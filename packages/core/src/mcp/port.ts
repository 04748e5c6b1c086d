import type { ResultAsync } from 'neverthrow';
import type { SandboxProcess, SandboxRuntimeError } from '../sandbox/runtime.js';

/**
 * The port to MCP servers. Core decides which servers a conversation has and turns their
 * tools into agent tools; an adapter (`@acs/adapter-mcp`, on the official SDK) speaks the
 * protocol. One connection per server per conversation.
 */

/** Where an MCP server is. */
export type McpServerTarget =
  | {
      transport: 'sse' | 'shttp';
      url: string;
      /** Sent as `Authorization: Bearer <api_key>`; null sends no header. */
      api_key: string | null;
    }
  | {
      transport: 'stdio';
      /** The server's configured name (for messages). */
      name: string;
      /**
       * Starts the server's process inside the conversation's sandbox (command, args and env
       * already applied). The connection owns the process: it kills it on close.
       */
      start: () => ResultAsync<SandboxProcess, SandboxRuntimeError>;
    };

/** What an MCP server says about one of its tools. */
export interface McpToolInfo {
  /** The server's own name for the tool. */
  name: string;
  description: string | null;
  /** The tool's JSON Schema for its arguments, as the server sent it. */
  input_schema: Record<string, unknown>;
  /** The server's hints (MCP tool annotations); absent when it gave none. */
  annotations: { read_only?: boolean; destructive?: boolean; open_world?: boolean };
}

/** One tool call's result, flattened for the model. */
export interface McpCallResult {
  /** Text content joined; other content (images, resources) described in words. */
  content: string;
  /** The server reported the call as failed (`isError`). */
  is_error: boolean;
}

export interface McpFailure {
  /**
   * `unreachable`: could not connect (refused, DNS, HTTP error, process would not start);
   * `timeout`: no answer in time; `closed`: the connection or process ended; `protocol`: the
   * server answered something that is not MCP (or an MCP error); `cancelled`: the caller aborted.
   */
  type: 'unreachable' | 'timeout' | 'closed' | 'protocol' | 'cancelled';
  /** Says what went wrong in words; never contains the api_key. */
  message: string;
}

export interface McpConnection {
  /** The tools the server listed when the connection was made. */
  readonly tools: readonly McpToolInfo[];
  call(
    tool: string,
    args: Record<string, unknown>,
    options: { signal: AbortSignal; timeoutMs: number },
  ): ResultAsync<McpCallResult, McpFailure>;
  /** Called once if the connection is lost without close() (the server crashed, the stream ended). */
  onLost(listener: (reason: string) => void): void;
  /** Closes the connection (and kills a stdio server's process). Idempotent. */
  close(): Promise<void>;
}

export interface McpConnector {
  /** Connects, initialises and lists the server's tools, all within timeoutMs. */
  connect(
    target: McpServerTarget,
    options: { signal: AbortSignal; timeoutMs: number },
  ): ResultAsync<McpConnection, McpFailure>;
}
