/**
 * @acs/adapter-express: the HTTP interface of the Agent Conversation Service as an Express 5 router.
 *
 * ```ts
 * app.use(createAcsRouter(service, { apiKeys: { [process.env.SESSION_API_KEY!]: 'default' } }));
 * ```
 */
export { createAcsRouter, type AcsRouter } from './router.js';
export type { AcsRouterOptions } from './router-options.js';
export { serveUi, type UiHandlerOptions } from './ui.js';
export { answerClientErrors } from './client-errors.js';
export {
  HOST_SESSION_COOKIE,
  MemoryBrowserSessions,
  SESSION_COOKIE,
  type BrowserSession,
  type BrowserSessionStore,
  type MemoryBrowserSessionsOptions,
} from './auth/browser-sessions.js';
export { ConversationKeys } from './auth/conversation-keys.js';
export type { Caller } from './auth/caller.js';
export type { RealtimeChannels } from './realtime/attach.js';
export { V0EventTranslator, agentStateOf, type V0Event, type V0AgentState } from './realtime/v0-events.js';
export { V1EventTranslator, countV1Frames, type V1Event } from './realtime/v1-events.js';
export { apiKeyAuthenticator, presentedKeyOf, SESSION_API_KEY_HEADER, type Authenticate } from './auth/api-keys.js';
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
// The wire shapes of a conversation (V0 and V1) and of V0's create/start/stop answers, for clients.
export {
  AppConversationSchema,
  ConversationInfoSchema,
  ConversationStatusResponseSchema,
  NewConversationResponseSchema,
  toAppConversation,
  toConversationInfo,
  type AppConversation,
  type ConversationInfo,
  type ConversationStatusResponse,
  type NewConversationResponse,
} from './views/conversations.js';
export {
  ErrorBodySchema,
  explainHttpError,
  HTTP_ERROR_CODES,
  sendDomainError,
  statusOf,
  type ErrorBody,
} from './http-error.js';
