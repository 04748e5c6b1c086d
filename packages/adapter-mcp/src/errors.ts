import type { McpFailure } from '@acs/core/ports';
import { SseError } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';

/** A failure already classified; thrown inside the adapter and unwrapped at the port boundary. */
export class McpFailureError extends Error {
  constructor(readonly failure: McpFailure) {
    super(failure.message);
    this.name = 'McpFailureError';
  }
}

/**
 * Removes the api_key (and anything shaped like a bearer token or URL credentials) from text
 * that may have come back from a server, e.g. an error page echoing the request.
 */
export function redact(text: string, apiKey: string | null): string {
  let out = text;
  if (apiKey !== null && apiKey !== '') out = out.split(apiKey).join('[REDACTED]');
  return out
    .replace(/(bearer\s+)(?!\[REDACTED\])[^\s"',;()[\]{}<>]+/gi, '$1[REDACTED]')
    .replace(/(\/\/)[^\s/@:]+:[^\s/@]+@/g, '$1[REDACTED]@');
}

/** Server-provided text can be a whole HTML page; keep messages readable. */
export function clip(text: string, max = 300): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

const NETWORK_CODES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found (DNS)',
  EAI_AGAIN: 'host name could not be resolved (DNS, temporary)',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'connection timed out',
  EPIPE: 'connection closed while sending',
  UND_ERR_SOCKET: 'connection closed by the server',
  UND_ERR_CONNECT_TIMEOUT: 'connection timed out',
  CERT_HAS_EXPIRED: 'TLS certificate expired',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'self-signed TLS certificate',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'TLS certificate could not be verified',
};

/** The network-level reason of a fetch failure (`TypeError: fetch failed` with a cause), if it is one. */
function networkReason(error: unknown): string | null {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') {
      const known = NETWORK_CODES[code];
      if (known !== undefined) return known;
    }
    const match = /\b(ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|EPIPE)\b/.exec(
      current.message,
    );
    if (match?.[1] !== undefined) return NETWORK_CODES[match[1]] ?? match[1];
    if (current.message === 'fetch failed' && !(current.cause instanceof Error)) return 'the request failed';
    current = current.cause;
  }
  return null;
}

/** The HTTP status an SDK transport error carries, if any. */
function httpStatus(error: unknown): number | null {
  if (
    (error instanceof StreamableHTTPError || error instanceof SseError) &&
    typeof error.code === 'number' &&
    error.code >= 100
  )
    return error.code;
  if (error instanceof Error) {
    // The SSE transport's POST failures are plain Errors: "Error POSTing to endpoint (HTTP 401): …"
    const match = /\(HTTP (\d{3})\)/.exec(error.message);
    if (match?.[1] !== undefined) return Number(match[1]);
  }
  return null;
}

function statusAdvice(status: number): string {
  if (status === 401) return 'the server refused the credentials; check the api_key';
  if (status === 403) return 'the server denied access; check the api_key and its permissions';
  if (status === 404) return 'nothing was found at that URL (or the MCP session expired); check the url';
  if (status === 405) return 'the server does not accept this method at that URL; check the url and transport';
  if (status >= 500) return 'the server failed; try again later or check the server logs';
  return 'the server rejected the request';
}

/** What the message's detail says, with the SDK's prefixes removed. */
function detailOf(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  return error.message
    .replace(/^Streamable HTTP error: /, '')
    .replace(/^SSE error: /, '')
    .replace(/^MCP error -?\d+: /, '');
}

export interface ClassifyContext {
  /** Names the server in messages, e.g. `MCP server at http://host/mcp`. */
  server: string;
  apiKey: string | null;
  /** While connecting, network and HTTP errors are `unreachable`; during a call they end the connection (`closed`). */
  phase: 'connect' | 'call';
  /** Why the connection ended, when it is known (e.g. the process's exit code). */
  lostReason: string | null;
}

/** Maps anything the SDK throws to an McpFailure; the message is redacted. */
export function classify(error: unknown, context: ClassifyContext): McpFailure {
  const failure = classifyRaw(error, context);
  return { type: failure.type, message: redact(failure.message, context.apiKey) };
}

const TIMEOUT_CODE: number = ErrorCode.RequestTimeout;
const CLOSED_CODE: number = ErrorCode.ConnectionClosed;

function classifyRaw(error: unknown, { server, phase, lostReason }: ClassifyContext): McpFailure {
  if (error instanceof McpFailureError) return error.failure;
  if (error instanceof McpError) {
    if (error.code === TIMEOUT_CODE) return { type: 'timeout', message: `${server} did not answer in time` };
    if (error.code === CLOSED_CODE) {
      return {
        type: 'closed',
        message: `the connection to ${server} closed${lostReason !== null ? `: ${lostReason}` : ''}`,
      };
    }
    return {
      type: 'protocol',
      message: `${server} answered with an error: ${clip(detailOf(error))} (code ${error.code})`,
    };
  }
  const status = httpStatus(error);
  if (status !== null) {
    const message = `${server} answered HTTP ${status}: ${statusAdvice(status)} (${clip(detailOf(error))})`;
    if (phase === 'connect') return { type: 'unreachable', message };
    return { type: status === 404 ? 'closed' : 'protocol', message };
  }
  const network = networkReason(error);
  if (network !== null) {
    return {
      type: phase === 'connect' ? 'unreachable' : 'closed',
      message: `${server} could not be reached: ${network}`,
    };
  }
  if (error instanceof SseError) {
    return {
      type: phase === 'connect' ? 'unreachable' : 'closed',
      message: `the SSE stream of ${server} failed: ${clip(detailOf(error))}`,
    };
  }
  if (error instanceof Error && error.name === 'ZodError') {
    return { type: 'protocol', message: `${server} sent an answer that is not valid MCP: ${clip(error.message)}` };
  }
  if (error instanceof Error && /not connected/i.test(error.message)) {
    return {
      type: 'closed',
      message: `the connection to ${server} is closed${lostReason !== null ? `: ${lostReason}` : ''}`,
    };
  }
  return { type: 'protocol', message: `${server} failed: ${clip(detailOf(error))}` };
}
