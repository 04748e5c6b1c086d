import { failure, outcome, type AgentTool } from './tool.js';
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { McpConfig } from '@acs/core/schemas';
import type { McpConnection, McpConnector, McpServerTarget, McpToolInfo, SandboxRuntime } from '@acs/core/ports';

/**
 * The MCP servers of one conversation: connected together when the agent starts running,
 * each in its own time; a server that fails degrades only its own tools. Tool names are
 * `<server>__<tool>` so two servers cannot collide.
 */

const DEFAULT_MCP_CONNECT_TIMEOUT_MS = 30_000;
const DEFAULT_MCP_CALL_TIMEOUT_MS = 300_000;

/** The user's servers extended by the conversation's: a server of the request with the same stdio name or URL replaces the user's. */
export function mergeMcpConfigs(base: McpConfig | null, override: McpConfig | null): McpConfig {
  const pick = <T>(a: readonly T[] = [], b: readonly T[] = [], key: (s: T) => string): T[] => {
    const replaced = new Set(b.map(key));
    return [...a.filter((s) => !replaced.has(key(s))), ...b];
  };
  return {
    sse_servers: pick(base?.sse_servers, override?.sse_servers, (s) => s.url),
    shttp_servers: pick(base?.shttp_servers, override?.shttp_servers, (s) => s.url),
    stdio_servers: pick(base?.stdio_servers, override?.stdio_servers, (s) => s.name),
  };
}

export const hasMcpServers = (config: McpConfig): boolean =>
  config.sse_servers.length + config.shttp_servers.length + config.stdio_servers.length > 0;

/** One configured server: its label (the prefix of its tools), how to reach it, and words for messages. */
export interface McpServerPlan {
  label: string;
  /** Words for messages and events: the URL without query or credentials, or `stdio: <command>` (never args, env or keys). */
  describe: string;
  timeoutMs: number;
  target: McpServerTarget;
}

const TOOL_NAME_MAX = 64;
const sanitize = (text: string): string => text.replace(/[^A-Za-z0-9_-]+/g, '_').replace(/^_+|_+$/g, '') || 'mcp';

/** A label from a URL: its host (and port), e.g. `mcp_example_com` or `127_0_0_1_8931`. */
const labelOfUrl = (url: string): string => {
  try {
    const u = new URL(url);
    return sanitize(`${u.hostname}${u.port ? `_${u.port}` : ''}`).slice(0, 40);
  } catch {
    return 'mcp';
  }
};

/** A URL as it may be shown: origin and path, without credentials, query or fragment (they may hold tokens). */
const publicUrl = (url: string): string => {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(an invalid URL)';
  }
};

export function planMcpServers(
  config: McpConfig,
  sandboxId: string,
  workingDir: string,
  runtime: SandboxRuntime,
  connectTimeoutMs = DEFAULT_MCP_CONNECT_TIMEOUT_MS,
): McpServerPlan[] {
  const used = new Set<string>();
  const unique = (label: string): string => {
    let candidate = label;
    for (let n = 2; used.has(candidate); n++) candidate = `${label}_${n}`;
    used.add(candidate);
    return candidate;
  };
  const plans: McpServerPlan[] = [];
  for (const s of config.stdio_servers) {
    plans.push({
      label: unique(sanitize(s.name).slice(0, 40)),
      describe: `stdio: ${s.command.slice(0, 200)}`,
      timeoutMs: connectTimeoutMs,
      target: {
        transport: 'stdio',
        name: s.name,
        start: () => runtime.spawn(sandboxId, { command: [s.command, ...s.args], cwd: workingDir, env: s.env }),
      },
    });
  }
  for (const s of config.shttp_servers) {
    plans.push({
      label: unique(labelOfUrl(s.url)),
      describe: publicUrl(s.url),
      timeoutMs: s.timeout * 1000,
      target: { transport: 'shttp', url: s.url, api_key: s.api_key },
    });
  }
  for (const s of config.sse_servers) {
    plans.push({
      label: unique(labelOfUrl(s.url)),
      describe: publicUrl(s.url),
      timeoutMs: connectTimeoutMs,
      target: { transport: 'sse', url: s.url, api_key: s.api_key },
    });
  }
  return plans;
}

/** `<server>__<tool>`, cut to the 64 characters providers allow (with a short hash to stay unique). */
export function namespacedToolName(server: string, tool: string): string {
  const name = `${sanitize(server)}__${sanitize(tool)}`;
  if (name.length <= TOOL_NAME_MAX) return name;
  const hash = createHash('sha256').update(`${server}\u0000${tool}`).digest('hex').slice(0, 8);
  return `${name.slice(0, TOOL_NAME_MAX - 9)}_${hash}`;
}

/** A server that could not be used, and why. */
interface McpServerProblem {
  server: string;
  describe: string;
  reason: string;
}

interface Connected {
  plan: McpServerPlan;
  connection: McpConnection;
  /** Set when the connection was lost; its tools are then no longer offered. */
  lost: string | null;
}

export interface McpSession {
  /** The tools of the servers that are connected now. */
  tools(): AgentTool[];
  /** Servers that failed to connect in this session. */
  readonly failures: readonly McpServerProblem[];
  /** Servers lost since the last call (each reported once). */
  takeLost(): McpServerProblem[];
  /** Every server connected and none lost. */
  healthy(): boolean;
  close(): Promise<void>;
}

export interface OpenMcpSessionOptions {
  connector: McpConnector;
  plans: readonly McpServerPlan[];
  signal: AbortSignal;
  callTimeoutMs?: number;
}

/** Connects every server at once; resolves when each has connected or failed. */
export async function openMcpSession(options: OpenMcpSessionOptions): Promise<McpSession> {
  const callTimeoutMs = options.callTimeoutMs ?? DEFAULT_MCP_CALL_TIMEOUT_MS;
  const failures: McpServerProblem[] = [];
  const connected: Connected[] = [];
  const lostQueue: McpServerProblem[] = [];
  await Promise.all(
    options.plans.map(async (plan) => {
      const result = await options.connector.connect(plan.target, {
        signal: options.signal,
        timeoutMs: plan.timeoutMs,
      });
      if (result.isErr()) {
        failures.push({
          server: plan.label,
          describe: plan.describe,
          reason: `${result.error.type}: ${result.error.message}`,
        });
        return;
      }
      const entry: Connected = { plan, connection: result.value, lost: null };
      result.value.onLost((reason) => {
        if (entry.lost !== null) return;
        entry.lost = reason;
        lostQueue.push({ server: plan.label, describe: plan.describe, reason });
      });
      connected.push(entry);
    }),
  );
  // Configuration order, whatever order the connections finished in.
  connected.sort((a, b) => options.plans.indexOf(a.plan) - options.plans.indexOf(b.plan));

  const toolsOf = (entry: Connected): AgentTool[] =>
    entry.connection.tools.map((info) => mcpTool(entry, info, callTimeoutMs));
  return {
    tools: () => {
      const seen = new Set<string>();
      return connected
        .filter((c) => c.lost === null)
        .flatMap(toolsOf)
        .filter((t) => !seen.has(t.definition.name) && seen.add(t.definition.name));
    },
    failures,
    takeLost: () => lostQueue.splice(0),
    healthy: () => failures.length === 0 && connected.every((c) => c.lost === null),
    close: async () => {
      await Promise.all(connected.map((c) => c.connection.close().catch(() => undefined)));
    },
  };
}

const McpArguments = z.record(z.string(), z.unknown());

function mcpTool(entry: Connected, info: McpToolInfo, callTimeoutMs: number): AgentTool<typeof McpArguments> {
  const server = entry.plan.label;
  return {
    definition: {
      name: namespacedToolName(server, info.name),
      description: `${info.description?.trim() || `The tool ${info.name}.`}\n(Tool ${info.name} of the MCP server ${server}.)`,
      parameters: Object.keys(info.input_schema).length > 0 ? info.input_schema : { type: 'object', properties: {} },
    },
    arguments: McpArguments,
    mcp: { server, tool: info.name, annotations: info.annotations },
    run: async (args, context) => {
      if (entry.lost !== null) {
        return failure(
          `The MCP server ${server} is not available (${entry.lost}), so ${info.name} was not run. Its tools cannot be used until the conversation runs again.`,
          {
            details: { mcp_server: server, mcp_tool: info.name },
          },
        );
      }
      const result = await entry.connection.call(info.name, args, { signal: context.signal, timeoutMs: callTimeoutMs });
      if (result.isErr()) {
        return failure(
          `${info.name} on the MCP server ${server} failed (${result.error.type}): ${result.error.message}`,
          {
            details: { mcp_server: server, mcp_tool: info.name, mcp_failure: result.error.type },
          },
        );
      }
      return outcome(result.value.content, {
        is_error: result.value.is_error,
        details: { mcp_server: server, mcp_tool: info.name },
      });
    },
  };
}
