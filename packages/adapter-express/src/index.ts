/**
 * @acs/adapter-express: the HTTP interface of the Agent Conversation Service as an Express 5 router.
 *
 * ```ts
 * app.use(createAcsRouter(service, { apiKeys: { [process.env.SESSION_API_KEY!]: 'default' } }));
 * ```
 */
export { createAcsRouter, type AcsRouterOptions } from './router.js';
export { apiKeyAuthenticator, SESSION_API_KEY_HEADER, type Authenticate } from './auth.js';
export { buildOpenApiDocument, type OpenApiDocument, type OpenApiInfo } from './openapi.js';
export { buildRoutes } from './routes.js';
export {
  defineRoute,
  type EventStreamHandle,
  type JsonRouteDefinition,
  type RouteDefinition,
  type RouteErrors,
  type RouteInput,
  type SseMessage,
  type StreamRouteDefinition,
} from './route.js';
export { ErrorBodySchema, HTTP_ERROR_CODES, sendDomainError, statusOf, type ErrorBody } from './http-error.js';
