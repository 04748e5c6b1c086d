import type { NextFunction, Request, Response } from 'express';
import {
  findUnstorableText,
  toFieldIssues,
  UNSTORABLE_TEXT_MESSAGE,
  validationFailed,
  type FieldIssue,
} from '@acs/core';
import { normalizeId } from '@acs/core/ports';
import { z } from 'zod';
import { sessionCookie } from './auth/browser-sessions.js';
import { requestOrigin } from './auth/origin.js';
import { clientAddressOf } from './auth/client-address.js';
import { HTTP_ERROR_CODES, sendDomainError, sendError } from './http-error.js';
import { notFoundOf, type RouteDefinition } from './route.js';
import { logBackendFailure } from './router-errors.js';
import type { RouterParts } from './router-parts.js';
import { callerOf, mountOf, routePathOf } from './router-request.js';

/** One route's handler: who may call it, its body's type, then (once the body is read) `runRoute`. */
export function handlerFor(parts: RouterParts, route: RouteDefinition) {
  const acceptsBody = !(route.body instanceof z.ZodUndefined);
  const hasPathParams = route.path.includes('{');
  return (req: Request, res: Response, next: NextFunction) => {
    // `/api/v1/sandboxes/search` is the search route's path, never a sandbox called "search".
    if (hasPathParams && parts.methodsFor.isLiteral(routePathOf(req))) {
      next('route');
      return;
    }
    if (route.conversationKeyOnly && callerOf(req)?.via !== 'conversation-key') {
      sendError(
        res,
        401,
        HTTP_ERROR_CODES.UNAUTHENTICATED,
        "This route acts on the conversation whose key opens it: send that conversation's session_api_key as X-Session-API-Key.",
      );
      return;
    }
    if (route.apiKeyOnly && callerOf(req)?.via === 'session') {
      sendError(
        res,
        403,
        HTTP_ERROR_CODES.API_KEY_REQUIRED,
        'This route answers a secret: call it with an API key (X-Session-API-Key or Authorization: Bearer), not from a browser session.',
      );
      return;
    }
    const withBody = acceptsBody && requestHasBody(req);
    const asForm = withBody && route.formBody === true && req.is('application/x-www-form-urlencoded') !== false;
    if (withBody && !asForm && !req.is(['application/json', 'application/*+json'])) {
      sendError(
        res,
        415,
        HTTP_ERROR_CODES.UNSUPPORTED_MEDIA_TYPE,
        'Send the body as JSON with Content-Type: application/json.',
      );
      return;
    }
    if (!withBody && route.bodyRequired) {
      refuseMissingBody(req, res);
      return;
    }
    const run = () => runRoute(parts, route, withBody, req, res, next);
    if (withBody)
      (asForm ? parts.parseForm : parts.parseJson)(req, res, (error?: unknown) => (error ? next(error) : run()));
    else run();
  };
}

/** A route that needs a body got none: 415 without a JSON content type, 400 with one. */
function refuseMissingBody(req: Request, res: Response): void {
  if (req.get('content-type') && !req.is(['application/json', 'application/*+json'])) {
    sendError(
      res,
      415,
      HTTP_ERROR_CODES.UNSUPPORTED_MEDIA_TYPE,
      'Send the body as JSON with Content-Type: application/json.',
    );
  } else if (req.get('content-type')) {
    sendError(res, 400, HTTP_ERROR_CODES.MALFORMED_JSON, 'The request body is empty; send a JSON object.');
  } else {
    sendError(
      res,
      415,
      HTTP_ERROR_CODES.UNSUPPORTED_MEDIA_TYPE,
      'This route needs a JSON body with Content-Type: application/json.',
    );
  }
}

/** Validates every part of the request, checks a conversation key's scope, and answers: JSON, an event stream or a body stream. */
function runRoute(
  parts: RouterParts,
  route: RouteDefinition,
  withBody: boolean,
  req: Request,
  res: Response,
  next: NextFunction,
): void {
  const issues: FieldIssue[] = [];
  const params = parsePart(route.params, req.params, 'path', issues);
  const notFound = notFoundOf(route.params);
  if (notFound && findUnstorableText(req.params) !== null) {
    // No record can have such an id.
    sendDomainError(res, notFound(req.params as Record<string, string>));
    return;
  }
  const query = parsePart(route.query, req.query, 'query', issues);
  const body = parsePart(route.body, withBody ? (req.body as unknown) : undefined, null, issues);
  const headers = parsePart(route.headers, headersOf(req, route.headers), 'header', issues);
  if (issues.length > 0) {
    sendDomainError(res, validationFailed(issues));
    return;
  }
  const caller = callerOf(req) ?? {
    userId: '',
    via: 'host' as const,
    conversationId: null,
    sessionId: null,
  };
  const input = {
    userId: caller.userId,
    caller,
    mountPath: mountOf(req) ?? '',
    origin: requestOrigin(req, parts.proxy).origin,
    // Read only by the routes that count per client (device sign-in), not worked out for every request.
    get client() {
      return clientAddressOf(req, parts.proxy);
    },
    localAddress: req.socket.localAddress ?? null,
    params,
    query,
    body,
    headers,
  };
  if (caller.via === 'conversation-key') {
    // A conversation's key opens that conversation's channels and agent routes, nothing else.
    const scope = route.conversationScope?.(input) ?? null;
    if (scope === null || normalizeId(scope) !== caller.conversationId) {
      sendError(
        res,
        401,
        HTTP_ERROR_CODES.UNAUTHENTICATED,
        `This is the key of conversation ${caller.conversationId}; it opens only that conversation's channels and agent routes. Use an API key here.`,
      );
      return;
    }
  }
  if (route.stream) {
    parts.eventStreams.open(route, input, req, res, next);
    return;
  }
  if (route.respond) {
    parts.bodyStream(route, input, req, res, next);
    return;
  }
  route
    .handle(input)
    .match(
      (value) => {
        if (route.clearsBrowserSession)
          res.set(
            'Set-Cookie',
            sessionCookie(null, {
              secure: requestOrigin(req, parts.proxy).protocol === 'https',
              path: mountOf(req) || '/',
            }),
          );
        if (route.success.text) res.status(route.success.status).type('text/plain').send(String(value));
        else res.status(route.success.status).json(value);
      },
      (error) => {
        logBackendFailure(parts.logger, req, route, error);
        sendDomainError(res, error);
      },
    )
    .catch(next);
}

/** The declared headers of a request, by their declared names; an empty header counts as absent. */
function headersOf(req: Request, schema: z.ZodType): Record<string, string | undefined> {
  if (!(schema instanceof z.ZodObject)) return {};
  return Object.fromEntries(Object.keys(schema.shape).map((name) => [name, req.get(name) || undefined]));
}

function requestHasBody(req: Request): boolean {
  const length = req.get('content-length');
  return req.get('transfer-encoding') !== undefined || (length !== undefined && length !== '0');
}

/**
 * Validates one part of the request. What the schema accepts is also checked once for text
 * storage cannot hold (NUL, unpaired surrogates), so such input is a 422 naming the field
 * rather than a storage failure later.
 */
function parsePart(schema: z.ZodType, value: unknown, prefix: string | null, issues: FieldIssue[]): unknown {
  const at = (path: string) => (prefix ? (path ? `${prefix}.${path}` : prefix) : path);
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    for (const issue of toFieldIssues(parsed.error)) issues.push({ path: at(issue.path), message: issue.message });
    return undefined;
  }
  const unstorable = findUnstorableText(parsed.data);
  if (unstorable !== null) {
    issues.push({ path: at(unstorable), message: UNSTORABLE_TEXT_MESSAGE });
    return undefined;
  }
  return parsed.data;
}
