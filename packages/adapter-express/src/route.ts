import type { DomainError } from '@acs/core';
import type { ResultAsync } from 'neverthrow';
import { z } from 'zod';

export const NO_PARAMS = z.object({});
export const NO_BODY = z.undefined();

export interface RouteInput<P, Q, B> {
  userId: string;
  params: P;
  query: Q;
  body: B;
}

/**
 * One HTTP operation: its schemas (the single source for validation and the
 * OpenAPI document) and its handler. The router and the document are both built
 * from the same list, so a route cannot exist without being documented and
 * authenticated.
 */
export interface RouteDefinition<P extends z.ZodType = z.ZodType, Q extends z.ZodType = z.ZodType, B extends z.ZodType = z.ZodType> {
  method: 'get' | 'post' | 'delete';
  /** OpenAPI path template, e.g. `/api/v1/sandboxes/{sandbox_id}`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tags: readonly string[];
  params: P;
  query: Q;
  body: B;
  /** A JSON body must be sent (default: whenever the route has a body schema). */
  bodyRequired: boolean;
  success: { status: 200; description: string; schema: z.ZodType };
  /** Error statuses this route documents, besides 401, 415, 413, 400 for malformed JSON and 500. */
  errors: readonly number[];
  /** False only for health routes. */
  authenticated: boolean;
  handle(input: RouteInput<z.output<P>, z.output<Q>, z.output<B>>): ResultAsync<unknown, DomainError>;
}

type RouteSpec<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType> = Omit<
  RouteDefinition<P, Q, B>,
  'params' | 'query' | 'body' | 'bodyRequired' | 'authenticated'
> & {
  params?: P;
  query?: Q;
  body?: B;
  bodyRequired?: boolean;
  authenticated?: boolean;
};

export function defineRoute<
  P extends z.ZodType = typeof NO_PARAMS,
  Q extends z.ZodType = typeof NO_PARAMS,
  B extends z.ZodType = typeof NO_BODY,
>(spec: RouteSpec<P, Q, B>): RouteDefinition {
  const definition: RouteDefinition<P, Q, B> = {
    ...spec,
    params: spec.params ?? (NO_PARAMS as unknown as P),
    query: spec.query ?? (NO_PARAMS as unknown as Q),
    body: spec.body ?? (NO_BODY as unknown as B),
    bodyRequired: spec.bodyRequired ?? spec.body !== undefined,
    authenticated: spec.authenticated ?? true,
  };
  return definition;
}

/** `/a/{b}` → `/a/:b` for Express. */
export const toExpressPath = (openApiPath: string) => openApiPath.replace(/\{([^}]+)\}/g, ':$1');
