import type {
  McpCallResult,
  McpConnection,
  McpConnector,
  McpFailure,
  McpServerTarget,
  McpToolInfo,
  SandboxProcess,
} from '@acs/core/ports';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport, SseError } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CallToolResultSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ResultAsync } from 'neverthrow';
import { classify, clip, McpFailureError, redact, type ClassifyContext } from './errors.js';
import { boundedFetch, hostRefusal, httpPolicyOf, type HttpPolicy } from './http-bounds.js';
import { flattenCallResult, toToolInfo } from './mapping.js';
import { SandboxProcessTransport } from './stdio-transport.js';

export type McpLogger = (message: string, fields: Record<string, unknown>) => void;

export interface McpConnectorOptions {
  /** Sent to servers as `clientInfo.name`. Default `agent-conversation-service`. */
  clientName?: string;
  /** Sent to servers as `clientInfo.version`. Default `0.1.0`. */
  clientVersion?: string;
  /** Receives transport errors, stdio servers' stderr and lost connections (api_key redacted). */
  logger?: McpLogger;
  /** Most list pages followed when listing tools. Default 50. */
  maxToolPages?: number;
  /**
   * What one server's tool list may hold, kept for the conversation and sent to the model with
   * every call: at most `count` tools (default 256) and `bytes` of their names, descriptions and
   * input schemas as JSON (default 1 MiB). A server that lists more fails to connect (its tools
   * are not offered), saying which bound it passed.
   */
  maxToolList?: { count?: number; bytes?: number };
  /**
   * Largest message an HTTP or SSE server may send, in bytes: a JSON answer whole, or one event
   * of an event stream. A server that sends more loses its connection (and its tools). Default 16 MiB.
   */
  maxMessageBytes?: number;
  /**
   * The hosts (`host` or `host:port`) HTTP and SSE servers may be on: a server elsewhere is
   * refused before any connection (`unreachable`, saying why). Default: any. Stdio servers run in
   * the sandbox and are not affected.
   */
  allowedHosts?: readonly string[] | null;
  /** What the list is called where the operator sets it (e.g. `ACS_MCP_ALLOWED_HOSTS`), for refusals. */
  allowedHostsName?: string;
}

/** Names the server in messages without anything a URL's query or userinfo might hide. */
export function describeTarget(target: McpServerTarget): string {
  if (target.transport === 'stdio') return `stdio MCP server '${target.name}'`;
  try {
    const url = new URL(target.url);
    return `MCP server at ${url.origin}${url.pathname}`;
  } catch {
    return 'MCP server (invalid url)';
  }
}

function isCallToolResult(result: Record<string, unknown>): result is CallToolResult {
  return Array.isArray(result['content']);
}

const failure = (type: McpFailure['type'], message: string) => new McpFailureError({ type, message });

function toFailure(error: unknown, context: ClassifyContext): McpFailure {
  return classify(error, context);
}

/** One server's client, transport and (for stdio) process; whoever ends first ends them all. */
class Session {
  client: Client | null = null;
  transport: Transport | null = null;
  process: SandboxProcess | null = null;
  connection: Connection | null = null;
  readonly context: ClassifyContext;
  /** Set when the connection ended without close(); later calls fail with it. */
  lostReason: string | null = null;
  closing = false;
  /** The end of a stdio server's stderr, quoted when its process ends. */
  stderrTail = '';
  private disposed: Promise<void> | null = null;

  constructor(
    readonly target: McpServerTarget,
    readonly log: McpLogger,
  ) {
    this.context = {
      server: describeTarget(target),
      apiKey: target.transport === 'stdio' ? null : target.api_key,
      phase: 'connect',
      lostReason: null,
    };
  }

  /** Tears everything down; safe to call more than once and from any state. */
  dispose(): Promise<void> {
    this.disposed ??= (async () => {
      try {
        await this.client?.close();
      } catch (error) {
        this.logError('closing the MCP client failed', error);
      }
      try {
        await this.transport?.close();
      } catch (error) {
        this.logError('closing the MCP transport failed', error);
      }
      try {
        await this.process?.kill();
      } catch (error) {
        this.logError('killing the MCP server process failed', error);
      }
    })();
    return this.disposed;
  }

  /** The connection ended on its own: remember why, tell the listeners once, free the rest. */
  lost(reason: string): void {
    if (this.closing || this.lostReason !== null) return;
    const clean = redact(reason, this.context.apiKey);
    this.lostReason = clean;
    this.context.lostReason = clean;
    // Before the connection exists this is a failed connect, reported as such.
    if (this.connection !== null) this.log('MCP connection lost', { server: this.context.server, reason: clean });
    this.connection?.notifyLost(clean);
    void this.dispose();
  }

  /** The server sent a message past the bound: the session ends, and a connect in progress fails at once (the SSE transport's start would wait for ever). */
  readonly overflowed = new AbortController();
  tooLarge(reason: string): void {
    this.lost(reason);
    this.overflowed.abort();
  }

  transportError(error: Error): void {
    this.logError('MCP transport error', error);
    if (this.connection === null) return;
    // The SSE session lives on its GET stream: once that fails the session is gone.
    if (error instanceof SseError) {
      const detail = error.message.replace(/^SSE error: /, '');
      this.lost(
        detail === 'undefined' || detail === ''
          ? 'the server ended the SSE stream'
          : `the SSE stream failed: ${clip(detail)}`,
      );
    }
    // Streamable HTTP gives up on its GET stream after its reconnection attempts.
    else if (/Maximum reconnection attempts/.test(error.message))
      this.lost('the server stopped answering (its event stream could not be reopened)');
  }

  logError(message: string, error: unknown): void {
    const text = error instanceof Error ? error.message : String(error);
    this.log(message, { server: this.context.server, error: redact(clip(text, 1000), this.context.apiKey) });
  }
}

class Connection implements McpConnection {
  private listeners: ((reason: string) => void)[] = [];
  private lostNotified: string | null = null;
  private closed: Promise<void> | null = null;

  constructor(
    private readonly session: Session,
    private readonly client: Client,
    readonly tools: readonly McpToolInfo[],
  ) {}

  call(
    tool: string,
    args: Record<string, unknown>,
    options: { signal: AbortSignal; timeoutMs: number },
  ): ResultAsync<McpCallResult, McpFailure> {
    return ResultAsync.fromPromise(this.callTool(tool, args, options), (error) =>
      error instanceof McpFailureError ? error.failure : toFailure(error, { ...this.session.context, phase: 'call' }),
    );
  }

  private async callTool(
    tool: string,
    args: Record<string, unknown>,
    { signal, timeoutMs }: { signal: AbortSignal; timeoutMs: number },
  ): Promise<McpCallResult> {
    const { server } = this.session.context;
    if (this.closed !== null) throw failure('closed', `the connection to ${server} was closed`);
    if (this.session.lostReason !== null)
      throw failure('closed', `the connection to ${server} was lost: ${this.session.lostReason}`);
    if (signal.aborted) throw failure('cancelled', `the call of '${tool}' on ${server} was cancelled`);
    try {
      const result = await this.client.callTool({ name: tool, arguments: args }, CallToolResultSchema, {
        signal,
        timeout: Math.max(1, timeoutMs),
      });
      if (isCallToolResult(result)) return flattenCallResult(result);
      // A server from before 2024-11 answers `toolResult`: pass it on as JSON.
      return { content: JSON.stringify(result['toolResult'] ?? null), is_error: false };
    } catch (error) {
      if (signal.aborted) throw failure('cancelled', `the call of '${tool}' on ${server} was cancelled`);
      const mapped = toFailure(error, { ...this.session.context, phase: 'call' });
      if (mapped.type === 'timeout')
        throw failure('timeout', `the tool '${tool}' on ${server} did not answer within ${timeoutMs} ms`);
      if (mapped.type === 'closed') this.session.lost(mapped.message);
      throw new McpFailureError(mapped);
    }
  }

  onLost(listener: (reason: string) => void): void {
    if (this.lostNotified !== null) {
      const reason = this.lostNotified;
      queueMicrotask(() => listener(reason));
      return;
    }
    this.listeners.push(listener);
  }

  notifyLost(reason: string): void {
    if (this.lostNotified !== null || this.closed !== null) return;
    this.lostNotified = reason;
    const listeners = this.listeners;
    this.listeners = [];
    for (const listener of listeners) {
      try {
        listener(reason);
      } catch (error) {
        this.session.logError('an onLost listener threw', error);
      }
    }
  }

  close(): Promise<void> {
    if (this.closed === null) {
      this.session.closing = true;
      this.listeners = [];
      this.closed = this.session.dispose();
    }
    return this.closed;
  }
}

function httpTransport(
  target: Extract<McpServerTarget, { transport: 'sse' | 'shttp' }>,
  session: Session,
  policy: HttpPolicy,
): Transport {
  const { server } = session.context;
  let url: URL;
  try {
    url = new URL(target.url);
  } catch {
    throw failure('unreachable', `${server}: the url is not a valid URL; check the server's url`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw failure('unreachable', `${server}: the url must start with http:// or https://`);
  }
  const refused = hostRefusal(policy, url, server);
  if (refused !== null) throw failure('unreachable', refused);
  const headers: Record<string, string> = target.api_key !== null ? { Authorization: `Bearer ${target.api_key}` } : {};
  // An answer past the bound ends the session: the SDK would only log its stream's error.
  const fetch = boundedFetch(policy, server, (error) => session.tooLarge(`the server sent ${error.message}`));
  // Both SDK transports add requestInit.headers to every request, the SSE GET stream included.
  if (target.transport === 'shttp') return new StreamableHTTPClientTransport(url, { requestInit: { headers }, fetch });
  return new SSEClientTransport(url, { requestInit: { headers }, fetch });
}

async function startProcess(
  session: Session,
  target: Extract<McpServerTarget, { transport: 'stdio' }>,
  abandoned: AbortSignal,
): Promise<SandboxProcessTransport> {
  let started: Awaited<ReturnType<typeof target.start>>;
  try {
    started = await target.start();
  } catch (error) {
    throw failure(
      'unreachable',
      `could not start the ${session.context.server}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  if (started.isErr()) {
    throw failure('unreachable', `could not start the ${session.context.server}: ${started.error.message}`);
  }
  const process = started.value;
  session.process = process;
  const transport = new SandboxProcessTransport(process, {
    onStderr: (text) => {
      session.stderrTail = (session.stderrTail + text).slice(-2000);
      session.log('MCP server stderr', { server: session.context.server, text: clip(text, 2000) });
    },
    onNoise: (error) => session.logError('MCP server wrote a line that is not JSON-RPC; skipped', error),
  });
  session.transport = transport;
  // Connect gave up while the process was starting (dispose may already have run): end it here.
  if (abandoned.aborted) {
    void process.kill();
    throw failure('cancelled', 'gave up');
  }
  return transport;
}

const DEFAULT_MAX_TOOLS = 256;
const DEFAULT_MAX_TOOL_LIST_BYTES = 1024 * 1024;

/** Refuses a tool list past its bounds: it is held for the conversation and sent with every model call. */
function checkToolList(server: string, tools: readonly McpToolInfo[], bounds: { count: number; bytes: number }): void {
  if (tools.length > bounds.count)
    throw failure('protocol', `${server} lists more than ${bounds.count} tools, the most one server may offer`);
  let bytes = 0;
  for (const tool of tools) bytes += JSON.stringify(tool).length;
  if (bytes > bounds.bytes)
    throw failure(
      'protocol',
      `${server} lists tools whose definitions take more than ${bounds.bytes} bytes, the most one server may offer`,
    );
}

async function establish(
  session: Session,
  settings: Required<Pick<McpConnectorOptions, 'clientName' | 'clientVersion' | 'maxToolPages'>> & {
    maxToolList: Required<NonNullable<McpConnectorOptions['maxToolList']>>;
  },
  policy: HttpPolicy,
  deadline: { signal: AbortSignal; at: number },
): Promise<Connection> {
  const { target } = session;
  const remaining = () => Math.max(1, deadline.at - Date.now());
  const transport =
    target.transport === 'stdio'
      ? await startProcess(session, target, deadline.signal)
      : httpTransport(target, session, policy);
  session.transport = transport;
  if (deadline.signal.aborted) throw failure('cancelled', 'gave up');

  const client = new Client({ name: settings.clientName, version: settings.clientVersion }, { capabilities: {} });
  session.client = client;
  client.onclose = () => {
    const exit = transport instanceof SandboxProcessTransport ? transport.exit : null;
    if (exit === null) return session.lost('the connection closed');
    const stderr = session.stderrTail.trim();
    session.lost(
      `the process exited${exit.exit_code !== null ? ` with code ${exit.exit_code}` : ''}${stderr !== '' ? `; its last output on stderr: ${clip(stderr.slice(-300))}` : ''}`,
    );
  };
  client.onerror = (error) => session.transportError(error);

  await client.connect(transport, { signal: deadline.signal, timeout: remaining() });

  const tools: McpToolInfo[] = [];
  let cursor: string | undefined;
  for (let page = 0; ; page++) {
    if (page >= settings.maxToolPages)
      throw failure(
        'protocol',
        `${session.context.server} kept paginating its tool list (more than ${settings.maxToolPages} pages)`,
      );
    const listed = await client.listTools(cursor !== undefined ? { cursor } : undefined, {
      signal: deadline.signal,
      timeout: remaining(),
    });
    tools.push(...listed.tools.map(toToolInfo));
    checkToolList(session.context.server, tools, settings.maxToolList);
    if (listed.nextCursor === undefined || listed.nextCursor === '' || listed.nextCursor === cursor) break;
    cursor = listed.nextCursor;
  }
  const connection = new Connection(session, client, tools);
  session.connection = connection;
  // The process may have ended while we were listing.
  if (session.lostReason !== null) connection.notifyLost(session.lostReason);
  return connection;
}

async function connect(
  target: McpServerTarget,
  { signal, timeoutMs }: { signal: AbortSignal; timeoutMs: number },
  settings: McpConnectorOptions,
  policy: HttpPolicy,
): Promise<McpConnection> {
  const log = settings.logger ?? (() => undefined);
  const session = new Session(target, log);
  const { server } = session.context;
  const cancelled = () => failure('cancelled', `connecting to ${server} was cancelled`);
  const timedOut = () =>
    failure('timeout', `${server} did not complete the MCP handshake and tool listing within ${timeoutMs} ms`);
  if (signal.aborted) throw cancelled();

  const giveUp = new AbortController();
  let why: 'timeout' | 'cancelled' | 'overflowed' | null = null;
  const stop = (reason: NonNullable<typeof why>) => {
    why ??= reason;
    giveUp.abort();
  };
  const timer = setTimeout(() => stop('timeout'), timeoutMs);
  const onAbort = () => stop('cancelled');
  signal.addEventListener('abort', onAbort, { once: true });
  session.overflowed.signal.addEventListener('abort', () => stop('overflowed'), { once: true });
  const overflowed = () => failure('closed', `the connection to ${server} closed: ${session.lostReason ?? ''}`);
  const stopped = new Promise<never>((_, reject) => {
    giveUp.signal.addEventListener(
      'abort',
      () => reject(why === 'cancelled' ? cancelled() : why === 'overflowed' ? overflowed() : timedOut()),
      { once: true },
    );
  });
  stopped.catch(() => undefined);

  try {
    return await Promise.race([
      establish(
        session,
        {
          clientName: settings.clientName ?? 'agent-conversation-service',
          clientVersion: settings.clientVersion ?? '0.1.0',
          maxToolPages: settings.maxToolPages ?? 50,
          maxToolList: {
            count: settings.maxToolList?.count ?? DEFAULT_MAX_TOOLS,
            bytes: settings.maxToolList?.bytes ?? DEFAULT_MAX_TOOL_LIST_BYTES,
          },
        },
        policy,
        { signal: giveUp.signal, at: Date.now() + timeoutMs },
      ),
      stopped,
    ]);
  } catch (error) {
    session.closing = true;
    await session.dispose();
    if (why === 'cancelled') throw cancelled();
    const mapped = toFailure(error, session.context);
    // The SDK's request timeout (set to the time left) can fire just before our own timer.
    if (why === 'timeout' || mapped.type === 'timeout') throw timedOut();
    throw new McpFailureError(mapped);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * The core `McpConnector` on the official MCP TypeScript SDK: Streamable HTTP, SSE and stdio
 * (a process in the conversation's sandbox) servers.
 */
export function createMcpConnector(options: McpConnectorOptions = {}): McpConnector {
  const policy = httpPolicyOf(options);
  return {
    connect: (target, connectOptions) =>
      ResultAsync.fromPromise(connect(target, connectOptions, options, policy), (error) =>
        error instanceof McpFailureError
          ? {
              type: error.failure.type,
              message: redact(error.failure.message, target.transport === 'stdio' ? null : target.api_key),
            }
          : {
              type: 'protocol' as const,
              message: redact(
                `connecting to ${describeTarget(target)} failed: ${String(error)}`,
                target.transport === 'stdio' ? null : target.api_key,
              ),
            },
      ),
  };
}
