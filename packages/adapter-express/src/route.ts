import type { Caller } from './auth/caller.js';
import type { Pacing } from './realtime/outbound.js';
import type { DomainError, DomainErrorOf, DomainErrorType } from '@acs/core';
import type { ResultAsync } from 'neverthrow';
import { z } from 'zod';

export const NO_PARAMS = z.object({});
export const NO_BODY = z.undefined();

export interface RouteInput<P, Q, B, H = Record<string, never>> {
  userId: string;
  /** Who is calling and how they proved it (API key, browser session, host auth, a conversation's key). */
  caller: Caller;
  /** Where the host mounted the router (`''` at the root): links the API gives out are relative to it. */
  mountPath: string;
  /** The origin the client sees (`https://host:port`; behind a proxy only with `trustProxy`), for the absolute URLs some answers hold (a sandbox's exposed URLs). */
  origin: string;
  /**
   * Who the client is for limits per client: its address (an IPv6 one by its /64), the socket's,
   * or with `trustProxy` the one the proxy appended to X-Forwarded-For.
   */
  client: string;
  /**
   * The address of this server the client's connection came in on (the socket's local address,
   * e.g. `127.0.0.1`); null when unknown. With a loopback origin it is where a sandbox's
   * loopback port is opened (sandbox-loopback-ports.ts).
   */
  localAddress: string | null;
  params: P;
  query: Q;
  body: B;
  /** The request headers the route declares (by the names it declares them under). */
  headers: H;
}

/** One Server-Sent Events message: sent as `id: …`, `event: …`, `data: <JSON>`. */
export interface SseMessage {
  /**
   * Absent for a transient message (a delta): it is sent without an `id:` line, so the client's
   * last event id (what Last-Event-ID resumes from) is always a stored event's.
   */
  id?: number | string;
  event: string;
  data: unknown;
}

/** An open event source behind a streaming route; closed when the client goes away. */
export interface EventStreamHandle {
  /** Called once the response is an event stream (not for HEAD): a source that paces itself begins here. */
  start?(): void;
  close(): void;
}

/** How a stream route can pace itself by its client and its user's other connections (see `openFeed`). */
export interface StreamPacing extends Pacing {
  /** Ends the response at once, dropping what waits unsent (a client that is not reading; it resumes with Last-Event-ID). */
  drop(reason: string): void;
  /**
   * Whether a transient message (a delta) may be sent now: little waits unsent for this client
   * and its user has room (see `roomForDelta`). One sent then never gets the client cut off;
   * one that may not is left out (see `deltaGate`).
   */
  roomForTransient(): boolean;
}

/** The domain error types a route's handler may return. */
export type RouteErrors = readonly DomainErrorType[];

interface RouteCommon<
  P extends z.ZodType,
  Q extends z.ZodType,
  B extends z.ZodType,
  H extends z.ZodType,
  E extends RouteErrors,
> {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** OpenAPI path template, e.g. `/api/v1/sandboxes/{sandbox_id}`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tags: readonly string[];
  params: P;
  query: Q;
  body: B;
  /** Request headers the route reads, keyed by header name (e.g. `Last-Event-ID`); documented as header parameters. */
  headers: H;
  /** A JSON body must be sent (default: whenever the route has a body schema). */
  bodyRequired: boolean;
  /**
   * The domain errors the handler can return: the operation's declared list from core (e.g.
   * `SandboxServiceErrors.start`), plus any the handler adds itself. A handler returning an
   * error not listed does not compile. The document's error statuses are derived from it
   * (through `statusOf`), plus those the adapter itself answers with (see openapi.ts).
   */
  errors: E;
  /** False only for health routes. */
  authenticated: boolean;
  /** On success the browser session cookie is cleared (sign-out). */
  clearsBrowserSession?: boolean;
  /**
   * For routes of one conversation that its own key (`session_api_key`) may call (its agent
   * routes): which conversation a request is about. Routes without it refuse conversation keys.
   */
  conversationScope?(input: RouteInput<z.output<P>, z.output<Q>, z.output<B>, z.output<H>>): string | null;
  /**
   * Only a conversation's own key opens the route (it names no conversation: the key says
   * which). Any other caller is refused with 401, and the document asks for that key.
   */
  conversationKeyOnly?: true;
  /**
   * Only the key of the sandbox the `{sandbox_id}` path parameter names opens the route
   * (auth/sandbox-keys.ts); the handler acts as that sandbox's owner. API keys, sessions and
   * the host's own authentication are not taken.
   */
  sandboxKeyOnly?: true;
  /**
   * Only an API key (or the host's own authentication) opens the route, never a browser session
   * (403 API_KEY_REQUIRED) nor a conversation key (401): for answers a page must never read
   * (a secret value).
   */
  apiKeyOnly?: true;
  /**
   * The body may also come form-encoded (`application/x-www-form-urlencoded`), as OAuth clients
   * send it; JSON is taken too. Only for routes without authentication (a form is what a page
   * of another site can post, so a cookie must never ride on one).
   */
  formBody?: true;
}

/** A route answering with one JSON value. */
export interface JsonRouteDefinition<
  P extends z.ZodType = z.ZodType,
  Q extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
  H extends z.ZodType = z.ZodType,
  E extends RouteErrors = RouteErrors,
> extends RouteCommon<P, Q, B, H, E> {
  /**
   * 201 where OpenHands answers a creation so. `text`: the value (a string) is sent as
   * `text/plain` rather than JSON (a secret's value, as a sandbox reads it).
   */
  success: { status: 200 | 201; description: string; schema: z.ZodType; text?: true };
  handle(
    input: RouteInput<z.output<P>, z.output<Q>, z.output<B>, z.output<H>>,
  ): ResultAsync<unknown, DomainErrorOf<E[number]>>;
  stream?: never;
  respond?: never;
}

/**
 * A body written as it is made (a JSON array of progress snapshots, a zip archive): chunks are
 * pulled one at a time, each only once the client has taken what was written before, and the
 * iterator is ended (`return()`) when the client goes away. Headers besides Content-Type go in
 * `headers`.
 */
interface StreamedBody {
  headers?: Record<string, string>;
  chunks: AsyncIterable<Uint8Array | string>;
}

/**
 * A route whose answer is a body written as it is made (`respond`). A refusal while opening
 * (404, 413…) is still a JSON error; once `respond` resolves the status and headers are sent,
 * so a failure after that can only cut the body short.
 */
export interface BodyStreamRouteDefinition<
  P extends z.ZodType = z.ZodType,
  Q extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
  H extends z.ZodType = z.ZodType,
  E extends RouteErrors = RouteErrors,
> extends RouteCommon<P, Q, B, H, E> {
  /** `contentType` is the body's; `schema` describes it for the document. */
  success: { status: 200; description: string; contentType: string; schema: z.ZodType };
  respond(
    input: RouteInput<z.output<P>, z.output<Q>, z.output<B>, z.output<H>>,
  ): ResultAsync<StreamedBody, DomainErrorOf<E[number]>>;
  handle?: never;
  stream?: never;
}

/**
 * A route answering with a Server-Sent Events stream. `stream` opens the source; its
 * messages are held until it resolves, so a refusal (404, 422) is still a JSON error.
 * Once it resolves the response switches to `text/event-stream`, and the handle is
 * closed when the client disconnects.
 */
export interface StreamRouteDefinition<
  P extends z.ZodType = z.ZodType,
  Q extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
  H extends z.ZodType = z.ZodType,
  E extends RouteErrors = RouteErrors,
> extends RouteCommon<P, Q, B, H, E> {
  /** `schema` describes the `data` of each message. */
  success: { status: 200; description: string; schema: z.ZodType };
  /** Opens the source; `send` writes a message, `end` finishes the response (the source has nothing more, ever). */
  stream(
    input: RouteInput<z.output<P>, z.output<Q>, z.output<B>, z.output<H>>,
    send: (message: SseMessage) => void,
    end: () => void,
    pacing: StreamPacing,
  ): ResultAsync<EventStreamHandle, DomainErrorOf<E[number]>>;
  handle?: never;
  respond?: never;
}

/**
 * One HTTP operation: its schemas (the single source for validation and the
 * OpenAPI document) and its handler. The router and the document are both built
 * from the same list, so a route cannot exist without being documented and
 * authenticated.
 */
export type RouteDefinition<
  P extends z.ZodType = z.ZodType,
  Q extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
  H extends z.ZodType = z.ZodType,
  E extends RouteErrors = RouteErrors,
> =
  JsonRouteDefinition<P, Q, B, H, E> | StreamRouteDefinition<P, Q, B, H, E> | BodyStreamRouteDefinition<P, Q, B, H, E>;

type Defaulted = 'params' | 'query' | 'body' | 'headers' | 'bodyRequired' | 'authenticated';
type Optional<P, Q, B, H> = {
  params?: P;
  query?: Q;
  body?: B;
  headers?: H;
  bodyRequired?: boolean;
  authenticated?: boolean;
};

/** `errors` alone decides E; the handler is checked against it (NoInfer), never widens it. */
type RouteSpec<
  P extends z.ZodType,
  Q extends z.ZodType,
  B extends z.ZodType,
  H extends z.ZodType,
  E extends RouteErrors,
> =
  | (Omit<JsonRouteDefinition<P, Q, B, H, NoInfer<E>>, Defaulted | 'errors'> & Optional<P, Q, B, H> & { errors: E })
  | (Omit<StreamRouteDefinition<P, Q, B, H, NoInfer<E>>, Defaulted | 'errors'> & Optional<P, Q, B, H> & { errors: E })
  | (Omit<BodyStreamRouteDefinition<P, Q, B, H, NoInfer<E>>, Defaulted | 'errors'> &
      Optional<P, Q, B, H> & { errors: E });

/**
 * Defines a route. `errors` lists the domain errors its handler may return; a handler that
 * can return any other does not compile:
 *
 * ```ts
 * defineRoute({ …, errors: SandboxServiceErrors.get, handle: ({ userId, params }) => sandboxes.get(userId, params.sandbox_id) });
 * ```
 */
export function defineRoute<
  P extends z.ZodType = typeof NO_PARAMS,
  Q extends z.ZodType = typeof NO_PARAMS,
  B extends z.ZodType = typeof NO_BODY,
  H extends z.ZodType = typeof NO_PARAMS,
  const E extends RouteErrors = readonly [],
>(spec: RouteSpec<P, Q, B, H, E>): RouteDefinition {
  const definition = {
    ...spec,
    params: spec.params ?? (NO_PARAMS as unknown as P),
    query: spec.query ?? (NO_PARAMS as unknown as Q),
    body: spec.body ?? (NO_BODY as unknown as B),
    headers: spec.headers ?? (NO_PARAMS as unknown as H),
    bodyRequired: spec.bodyRequired ?? spec.body !== undefined,
    authenticated: spec.authenticated ?? true,
  } as RouteDefinition<P, Q, B, H, E>;
  if (definition.stream && definition.method !== 'get')
    throw new Error(`${definition.operationId}: event streams are GET routes.`);
  if (definition.formBody && definition.authenticated)
    throw new Error(`${definition.operationId}: only routes without authentication take form bodies.`);
  return definition;
}

const NOT_FOUND = new WeakMap<
  z.ZodType,
  { type: DomainErrorType; error: (params: Record<string, string>) => DomainError }
>();

/**
 * Path parameters that name a record, with the error that says it does not exist (its type,
 * and how to make it). A value no record can have (text storage cannot hold) is answered with
 * that error (404), not 422.
 */
export function recordPathParams<S extends z.ZodObject, T extends DomainErrorType>(
  schema: S,
  type: T,
  notFound: (params: Record<string, string>) => NoInfer<DomainErrorOf<T>>,
): S {
  NOT_FOUND.set(schema, { type, error: notFound });
  return schema;
}

/** The not-found error of a route's path parameters, if they name a record. */
export const notFoundOf = (params: z.ZodType) => NOT_FOUND.get(params)?.error;

/** The type of that not-found error, if the path parameters name a record. */
export const notFoundTypeOf = (params: z.ZodType) => NOT_FOUND.get(params)?.type;

/** `/a/{b}` → `/a/:b` for Express. */
export const toExpressPath = (openApiPath: string) => openApiPath.replace(/\{([^}]+)\}/g, ':$1');
