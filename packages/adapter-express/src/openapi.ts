import { createDocument, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject, type ZodOpenApiResponseObject } from 'zod-openapi';
import { z } from 'zod';
import { ErrorBodySchema } from './http-error.js';
import type { RouteDefinition } from './route.js';

const STATUS_TEXT: Record<number, string> = {
  400: 'Malformed JSON, or a precondition is missing (see code).',
  401: 'Missing or wrong X-Session-API-Key.',
  404: 'Not found (or not yours).',
  409: 'The current state does not allow this.',
  413: 'The body is larger than the limit.',
  415: 'The body is not JSON.',
  422: 'The input is invalid; issues lists the fields.',
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

/** The generated OpenAPI 3.1 document. */
export type OpenApiDocument = ReturnType<typeof createDocument>;

export interface OpenApiInfo {
  title?: string;
  version?: string;
}

/** The OpenAPI 3.1 document of a route list: the same schemas that validate requests. */
export function buildOpenApiDocument(routes: readonly RouteDefinition[], info: OpenApiInfo = {}): OpenApiDocument {
  const paths: ZodOpenApiPathsObject = {};
  for (const route of routes) {
    const hasBody = !(route.body instanceof z.ZodUndefined);
    const errorStatuses = new Set<number>([...route.errors, 500]);
    if (route.authenticated) errorStatuses.add(401);
    if (hasBody) [400, 413, 415, 422].forEach((s) => errorStatuses.add(s));
    if (hasShape(route.query) || hasShape(route.params) || hasShape(route.headers)) errorStatuses.add(422);
    const dataId = route.stream ? schemaId(route.success.schema) : undefined;
    const success: ZodOpenApiResponseObject = route.stream
      ? {
          description: route.success.description,
          content: {
            'text/event-stream': {
              schema: z.string().meta({
                description: 'Server-Sent Events: `id: <event id>`, `event: <kind>`, `data: <JSON>` per message, and `: ping` comments.',
              }),
              // OpenAPI 3.1 has no way to describe the messages of a stream (3.2 adds itemSchema).
              ...(dataId ? { 'x-sse-data': { $ref: `#/components/schemas/${dataId}` } } : {}),
            },
          },
        }
      : { description: route.success.description, content: { 'application/json': { schema: route.success.schema } } };
    const responses: Record<`${1 | 2 | 3 | 4 | 5}${string}`, ZodOpenApiResponseObject> = { [`${route.success.status}`]: success };
    for (const status of [...errorStatuses].sort()) {
      responses[`${status}` as `4${string}`] = { description: STATUS_TEXT[status] ?? 'Error', content: { 'application/json': { schema: ErrorBodySchema } } };
    }
    const operation: ZodOpenApiOperationObject = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: [...route.tags],
      ...(route.authenticated ? {} : { security: [] }),
      requestParams: {
        ...(hasShape(route.params) ? { path: route.params as z.ZodObject } : {}),
        ...(hasShape(route.query) ? { query: route.query as z.ZodObject } : {}),
        ...(hasShape(route.headers) ? { header: route.headers as z.ZodObject } : {}),
      },
      ...(hasBody
        ? { requestBody: { required: route.bodyRequired, content: { 'application/json': { schema: route.body } } } }
        : {}),
      responses,
    };
    paths[route.path] = { ...paths[route.path], [route.method]: operation };
  }
  return createDocument(
    {
      openapi: '3.1.0',
      info: {
        title: info.title ?? 'Agent Conversation Service',
        version: info.version ?? '0.1.0',
        description: 'Settings, conversations and sandboxes: the OpenHands-compatible V0 (/api) and V1 (/api/v1) interface.',
      },
      security: [{ SessionApiKey: [] }],
      paths,
      components: {
        securitySchemes: { SessionApiKey: { type: 'apiKey', in: 'header', name: 'X-Session-API-Key' } },
        schemas: { ErrorBody: ErrorBodySchema },
      },
    },
    {
      // Query strings arrive as strings and go through preprocessing; document what clients send.
      allowEmptySchema: { pipe: true, transform: true },
    },
  );
}
