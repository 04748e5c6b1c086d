import {
  createDocument,
  type CreateDocumentOptions,
  type ZodOpenApiOperationObject,
  type ZodOpenApiPathsObject,
  type ZodOpenApiResponseObject,
} from 'zod-openapi';
import { z } from 'zod';
import { DOMAIN_ERROR_CODES, STORABLE_TEXT_PATTERN } from '@acs/core';
import { ErrorBodySchema, HTTP_ERROR_CODES, statusOf } from './http-error.js';
import { notFoundTypeOf, type RouteDefinition } from './route.js';

const STATUS_TEXT: Record<number, string> = {
  400: 'The request could not be read (malformed JSON, bad percent-encoding in the path, ids no record can have or too many of them), or a precondition is missing; from the device token endpoint, why there is no token yet (`error` says it as OAuth does).',
  401: 'Missing or wrong X-Session-API-Key (on a sandbox’s routes: not its key, or the sandbox is not running).',
  403: 'A browser-session request that changes state came from another site, or not as JSON (the CSRF guard; API keys are not refused here), a browser session asked for what only an API key may read, or a sandbox’s key was sent for another sandbox.',
  404: 'Not found (or not yours).',
  409: 'The current state does not allow this.',
  413: 'The body is larger than the limit, or what is asked for is larger than an answer may be.',
  415: 'The body is not JSON.',
  422: 'The input is invalid; issues lists the fields.',
  429: 'A limit is reached: sandboxes running at once (pause or delete one), live connections of the user (close one), user codes that matched nothing (wait), device sign-ins waiting from one address (answer them or wait), or messages waiting for an agent (wait until it takes them); then try again.',
  431: "The request line and headers are larger than the HTTP server accepts (Node: 16 KiB by default). The JSON body comes from answerClientErrors(server), which the example server calls; a host that does not call it gets Node's 431 without a body.",
  500: 'A defect on the server.',
  502: 'The sandbox runtime failed.',
  503: 'A backend (storage or the sandbox runtime) is unavailable.',
};

/** The component id a schema registers under (its `.meta({ id })`), if any. */
const schemaId = (schema: z.ZodType): string | undefined => {
  const id = z.globalRegistry.get(schema)?.id;
  return typeof id === 'string' ? id : undefined;
};

const hasShape = (schema: z.ZodType) => schema instanceof z.ZodObject && Object.keys(schema.shape).length > 0;

const hasBodySchema = (route: RouteDefinition) => !(route.body instanceof z.ZodUndefined);

/**
 * The error statuses of an operation, each with the codes it may carry: those of the domain
 * errors the route declares (through `statusOf`), and those the adapter itself answers with:
 * 401 when authenticated; for a body, 400 (malformed or too deep JSON), 413, 415 and 422; 422
 * for path, query or header parameters; 400 for a path that is not valid percent-encoding;
 * 404 when the path names a record; 503 for a stream the host refuses while shutting down and
 * 429 past the user's live connections; 403 from the CSRF guard on what changes state; 431
 * and 500 always.
 */
function errorStatusesOf(route: RouteDefinition): Map<number, Set<string>> {
  const statuses = new Map<number, Set<string>>();
  const add = (status: number, ...codes: string[]) => {
    const known = statuses.get(status) ?? new Set<string>();
    for (const code of codes) known.add(code);
    statuses.set(status, known);
  };
  for (const type of route.errors) add(statusOf(type), ...DOMAIN_ERROR_CODES[type]);
  if (route.authenticated) add(401, HTTP_ERROR_CODES.UNAUTHENTICATED);
  if (route.sandboxKeyOnly) {
    add(401, HTTP_ERROR_CODES.SANDBOX_NOT_RUNNING);
    add(403, HTTP_ERROR_CODES.SANDBOX_KEY_MISMATCH);
  }
  if (hasBodySchema(route)) {
    add(400, HTTP_ERROR_CODES.MALFORMED_JSON, HTTP_ERROR_CODES.JSON_TOO_DEEP);
    add(413, HTTP_ERROR_CODES.PAYLOAD_TOO_LARGE);
    add(415, HTTP_ERROR_CODES.UNSUPPORTED_MEDIA_TYPE);
    add(422, DOMAIN_ERROR_CODES.ValidationFailed[0]);
  }
  if (hasShape(route.params) || hasShape(route.query) || hasShape(route.headers))
    add(422, DOMAIN_ERROR_CODES.ValidationFailed[0]);
  if (hasShape(route.params)) add(400, HTTP_ERROR_CODES.BAD_REQUEST);
  const notFound = notFoundTypeOf(route.params);
  if (notFound) add(statusOf(notFound), ...DOMAIN_ERROR_CODES[notFound]);
  if (route.stream) add(503, HTTP_ERROR_CODES.SHUTTING_DOWN);
  if (route.stream) add(429, HTTP_ERROR_CODES.TOO_MANY_CONNECTIONS);
  if (route.authenticated && !route.sandboxKeyOnly && route.method !== 'get')
    add(403, HTTP_ERROR_CODES.CROSS_SITE_REQUEST);
  if (route.apiKeyOnly) add(403, HTTP_ERROR_CODES.API_KEY_REQUIRED);
  // The HTTP server's, before any route: ids, paths and query values within their lengths can still add up past its limit.
  add(431, HTTP_ERROR_CODES.REQUEST_HEADERS_TOO_LARGE);
  add(500, HTTP_ERROR_CODES.INTERNAL_ERROR);
  return statuses;
}

/**
 * Whether a pattern cannot match U+0000: anchored at both ends, with no wildcard, no negated
 * class that lets U+0000 in, and no \\S, \\W or \\D.
 */
function excludesNul(pattern: string): boolean {
  if (!pattern.startsWith('^') || !pattern.endsWith('$')) return false;
  const unescaped = pattern
    .replace(/\[\^(?:[^\]\\]|\\.)*?\\u0000(?:[^\]\\]|\\.)*\]/g, '') // a negated class that leaves U+0000 out
    .replace(/\\([^SWD])/g, '') // escaped characters stand for themselves
    .replace(/\[[^\]^][^\]]*\]/g, ''); // positive classes list what they take
  return !/\.|\[\^|\\[SWD]/.test(unescaped);
}

/**
 * Every string a request may carry is checked for text storage cannot hold (the router's
 * `findUnstorableText`, over every part); the document states the same rule on every string
 * of a request as STORABLE_TEXT_PATTERN. A string with a pattern of its own must leave U+0000
 * out in it (the document would otherwise admit what the router refuses).
 */
const statesStorableText: CreateDocumentOptions['override'] = ({ jsonSchema, io }) => {
  if (io !== 'input' || jsonSchema.type !== 'string' || jsonSchema.enum !== undefined || jsonSchema.const !== undefined)
    return;
  const patterns = [
    jsonSchema.pattern,
    ...(jsonSchema.allOf ?? []).map((s) => ('pattern' in s ? s.pattern : undefined)),
  ].filter((p) => typeof p === 'string');
  if (patterns.length === 0) jsonSchema.pattern = STORABLE_TEXT_PATTERN;
  else if (!patterns.some(excludesNul))
    throw new Error(
      `The request pattern ${patterns.join(' and ')} can match U+0000, which the router refuses: leave it out in the pattern (e.g. [^\\s\\u0000] for \\S).`,
    );
};

/** The generated OpenAPI 3.1 document. */
export type OpenApiDocument = ReturnType<typeof createDocument>;

export interface OpenApiInfo {
  title?: string;
  version?: string;
}

/** The OpenAPI 3.1 document of a route list: the same schemas that validate requests. */
export function buildOpenApiDocument(routes: readonly RouteDefinition[], info: OpenApiInfo = {}): OpenApiDocument {
  const paths: ZodOpenApiPathsObject = {};
  for (const route of routes) paths[route.path] = { ...paths[route.path], [route.method]: operationOf(route) };
  return documentOf(paths, info);
}

/** One route's operation: parameters, body, its success and every error status it may answer with. */
function operationOf(route: RouteDefinition): ZodOpenApiOperationObject {
  const responses: Record<`${1 | 2 | 3 | 4 | 5}${string}`, ZodOpenApiResponseObject> = {
    [`${route.success.status}`]: successOf(route),
  };
  const errorStatuses = errorStatusesOf(route);
  for (const status of [...errorStatuses.keys()].sort((a, b) => a - b)) {
    const codes = [...(errorStatuses.get(status) ?? [])].sort();
    responses[`${status}` as `4${string}`] = {
      description: `${STATUS_TEXT[status] ?? 'Error'} Codes: ${codes.join(', ')}.`,
      content: { 'application/json': { schema: ErrorBodySchema } },
    };
  }
  return {
    operationId: route.operationId,
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    tags: [...route.tags],
    ...securityOf(route),
    requestParams: {
      ...(hasShape(route.params) ? { path: route.params as z.ZodObject } : {}),
      ...(hasShape(route.query) ? { query: route.query as z.ZodObject } : {}),
      ...(hasShape(route.headers) ? { header: route.headers as z.ZodObject } : {}),
    },
    ...(hasBodySchema(route)
      ? {
          requestBody: {
            required: route.bodyRequired,
            content: {
              'application/json': { schema: route.body },
              ...(route.formBody ? { 'application/x-www-form-urlencoded': { schema: route.body } } : {}),
            },
          },
        }
      : {}),
    responses,
  };
}

/** What a route answers when it succeeds: an event stream, a body of its own content type, text or JSON. */
function successOf(route: RouteDefinition): ZodOpenApiResponseObject {
  if (route.stream) {
    const dataId = schemaId(route.success.schema);
    return {
      description: route.success.description,
      content: {
        'text/event-stream': {
          schema: z.string().meta({
            description:
              'Server-Sent Events: `id: <event id>`, `event: <kind>`, `data: <JSON>` per stored event; `event: delta` messages without an `id:` (pieces of an answer being written, never stored); and `: ping` comments.',
          }),
          // OpenAPI 3.1 has no way to describe the messages of a stream (3.2 adds itemSchema).
          ...(dataId ? { 'x-sse-data': { $ref: `#/components/schemas/${dataId}` } } : {}),
        },
      },
    };
  }
  if (route.respond)
    return {
      description: route.success.description,
      content: { [route.success.contentType]: { schema: route.success.schema } },
    };
  return {
    description: route.success.description,
    content: { [route.success.text ? 'text/plain' : 'application/json']: { schema: route.success.schema } },
  };
}

/** Which keys open a route (the document's default, an API key, applies where it says nothing). */
function securityOf(route: RouteDefinition): Pick<ZodOpenApiOperationObject, 'security'> {
  if (!route.authenticated) return { security: [] };
  if (route.sandboxKeyOnly) return { security: [{ SandboxKey: [] }, { SandboxBearer: [] }] };
  if (route.conversationKeyOnly) return { security: [{ ConversationKey: [] }, { ConversationBearer: [] }] };
  if (route.conversationScope)
    return { security: [{ SessionApiKey: [] }, { Bearer: [] }, { ConversationKey: [] }, { ConversationBearer: [] }] };
  return {};
}

/** The document around the paths: info, the security schemes, the shared error body. */
function documentOf(paths: ZodOpenApiPathsObject, info: OpenApiInfo) {
  return createDocument(
    {
      openapi: '3.1.0',
      info: {
        title: info.title ?? 'Agent Conversation Service',
        version: info.version ?? '0.1.0',
        description:
          'Settings, conversations and sandboxes: the OpenHands-compatible V0 (/api) and V1 (/api/v1) interface.',
      },
      security: [{ SessionApiKey: [] }, { Bearer: [] }],
      paths,
      components: {
        securitySchemes: {
          SessionApiKey: { type: 'apiKey', in: 'header', name: 'X-Session-API-Key' },
          Bearer: {
            type: 'http',
            scheme: 'bearer',
            description: 'The same API key as `Authorization: Bearer <key>` (as OpenHands 1.x clients send it).',
          },
          ConversationKey: {
            type: 'apiKey',
            in: 'header',
            name: 'X-Session-API-Key',
            description:
              "A conversation's own key: the session_api_key of its record (acsc_…). It opens only that conversation's agent routes and channels, and it is the only key the routes that name no conversation take (the key says which).",
          },
          ConversationBearer: {
            type: 'http',
            scheme: 'bearer',
            description: "A conversation's own key as `Authorization: Bearer acsc_…`.",
          },
          SandboxKey: {
            type: 'apiKey',
            in: 'header',
            name: 'X-Session-API-Key',
            description:
              "A sandbox's key: the session_api_key (acsc_…) of a conversation whose sandbox it is, taken while the sandbox runs. It opens only the routes a sandbox reads its owner's secrets by.",
          },
          SandboxBearer: {
            type: 'http',
            scheme: 'bearer',
            description: "A sandbox's key as `Authorization: Bearer acsc_…`.",
          },
        },
        schemas: { ErrorBody: ErrorBodySchema },
      },
    },
    {
      // Query strings arrive as strings and go through preprocessing; document what clients send.
      allowEmptySchema: { pipe: true, transform: true },
      override: statesStorableText,
    },
  );
}
