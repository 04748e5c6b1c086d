import {
  allowedHostSet,
  describeAllowedHosts,
  eventStreamBound,
  isHostAllowed,
  wholeBodyBound,
  type BodyTooLargeError,
} from '@acs/core/ports';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { McpFailureError } from './errors.js';

/**
 * What the HTTP and SSE transports are held to, through the fetch they are given: the hosts they
 * may connect to (every request, redirects and the SSE endpoint included, is checked), and the
 * size of one message (a JSON answer whole, or one event of an event stream, since the last blank
 * line), gathered in one buffer so that memory follows bytes, not the pieces they came in. A
 * server past the bound loses its connection (its tools), not the process its memory.
 */
export interface HttpPolicy {
  /** Hosts requests may go to (as matched); null: any. */
  allowedHosts: ReadonlySet<string> | null;
  /** What the list is called where the operator sets it, for refusals. */
  allowedHostsName: string | null;
  maxMessageBytes: number;
}

const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** Answers without a body (RFC 9110): passed on as they are. */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

/** The policy of the connector's options; throws for an allowed host that is not a host or host:port. */
export function httpPolicyOf(options: {
  allowedHosts?: readonly string[] | null | undefined;
  allowedHostsName?: string | undefined;
  maxMessageBytes?: number | undefined;
}): HttpPolicy {
  return {
    allowedHosts: options.allowedHosts ? allowedHostSet(options.allowedHosts, options.allowedHostsName) : null,
    allowedHostsName: options.allowedHostsName ?? null,
    maxMessageBytes: options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
  };
}

/** Why `url` may not be connected to (its host is not on the list), or null. */
export function hostRefusal(policy: HttpPolicy, url: URL, server: string): string | null {
  const list = policy.allowedHosts;
  if (list === null || isHostAllowed(list, url)) return null;
  const name = policy.allowedHostsName ? ` (${policy.allowedHostsName})` : '';
  return `${server}: the host ${url.host} is not one this server may connect to for MCP servers; the hosts it may: ${describeAllowedHosts(list, 10)}${name}`;
}

/**
 * A fetch for the SDK's transports: each request refused unless its host is allowed, never left
 * to follow a redirect by itself (the SDK follows those within the origin, through this fetch
 * again), and each answer bounded: `onTooLarge` hears of one past the bound (the SDK may only log
 * the stream's error), and reading it fails.
 */
export function boundedFetch(
  policy: HttpPolicy,
  server: string,
  onTooLarge: (error: BodyTooLargeError) => void,
  base: FetchLike = fetch,
): FetchLike {
  return async (input, init) => {
    const url = new URL(input);
    const refused = hostRefusal(policy, url, server);
    if (refused !== null) throw new McpFailureError({ type: 'unreachable', message: refused });
    const response = await base(url, { ...init, redirect: init?.redirect === 'error' ? 'error' : 'manual' });
    if (response.body === null || NULL_BODY_STATUSES.has(response.status)) return response;
    const bound = isEventStream(response)
      ? eventStreamBound(policy.maxMessageBytes, { what: `an event from the ${server}`, onTooLarge })
      : wholeBodyBound(policy.maxMessageBytes, { what: `an answer from the ${server}`, onTooLarge });
    const bounded = new Response(response.body.pipeThrough(bound), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
    // Where the answer came from, as the SDK reads it (to name a redirect it did not follow).
    Object.defineProperty(bounded, 'url', { value: response.url });
    return bounded;
  };
}

const isEventStream = (response: Response) =>
  (response.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase() === 'text/event-stream';
