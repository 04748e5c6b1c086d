import type { Response } from 'express';
import { match } from 'ts-pattern';
import {
  DEVICE_TOKEN_REFUSALS,
  explainDomainError,
  type DomainError,
  type DomainErrorCode,
  type DomainErrorType,
  type ErrorHints,
  type FieldIssue,
} from '@acs/core';
import { z } from 'zod';

/**
 * The one error body of every route: a stable machine `code`, a sentence for
 * humans (as `message`, and again as `detail`, the field OpenHands clients print),
 * and for validation errors the field paths that are wrong.
 */
export const ErrorBodySchema = z.object({
  code: z.string().meta({ description: 'Stable machine-readable code, e.g. VALIDATION_FAILED.' }),
  message: z.string().meta({ description: 'What went wrong and what to do about it.' }),
  detail: z
    .string()
    .meta({ description: "The same text as message: OpenHands clients show `detail` (FastAPI's error field)." }),
  issues: z
    .array(z.object({ path: z.string(), message: z.string() }))
    .optional()
    .meta({ description: 'Validation problems by field path.' }),
  error: z.enum(DEVICE_TOKEN_REFUSALS).optional().meta({
    description:
      'Only from the device token endpoint: the OAuth error (RFC 8628 §3.5, RFC 6749 §5.2), which OAuth clients read.',
  }),
  error_description: z.string().optional().meta({ description: 'With `error`: the same text as message.' }),
  interval: z
    .int()
    .optional()
    .meta({ description: 'With `error: slow_down`: the seconds to wait between polls from now on.' }),
});
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

/** Codes the HTTP layer itself produces (domain codes come from @acs/core). */
export const HTTP_ERROR_CODES = {
  UNAUTHENTICATED: 'UNAUTHENTICATED',
  /** A browser-session request that changes state came from another site (the CSRF guard). */
  CROSS_SITE_REQUEST: 'CROSS_SITE_REQUEST',
  MALFORMED_JSON: 'MALFORMED_JSON',
  /** A JSON body nested deeper than the router's maxJsonDepth. */
  JSON_TOO_DEEP: 'JSON_TOO_DEEP',
  UNSUPPORTED_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  ROUTE_NOT_FOUND: 'ROUTE_NOT_FOUND',
  METHOD_NOT_ALLOWED: 'METHOD_NOT_ALLOWED',
  /** A request Express could not read (e.g. a path parameter that is not valid percent-encoding). */
  BAD_REQUEST: 'BAD_REQUEST',
  INTERNAL_ERROR: 'INTERNAL_ERROR',
  /** The host is shutting down (new event streams are refused; try again shortly). */
  SHUTTING_DOWN: 'SHUTTING_DOWN',
  /** The request line and headers are over the HTTP server's limit (431; see answerClientErrors). */
  REQUEST_HEADERS_TOO_LARGE: 'REQUEST_HEADERS_TOO_LARGE',
  /** The user holds as many live connections (event streams, sockets) as allowed. */
  TOO_MANY_CONNECTIONS: 'TOO_MANY_CONNECTIONS',
  /** One client address holds as many WebSockets that have not authenticated yet as allowed (429 at the upgrade). */
  TOO_MANY_UNAUTHENTICATED: 'TOO_MANY_UNAUTHENTICATED',
  /** A sandbox's key was sent for a sandbox that is not running (it opens it only while it runs). */
  SANDBOX_NOT_RUNNING: 'SANDBOX_NOT_RUNNING',
  /** A sandbox's key was sent for another sandbox. */
  SANDBOX_KEY_MISMATCH: 'SANDBOX_KEY_MISMATCH',
  /** The route answers only an API key, not a browser session (it gives out a secret). */
  API_KEY_REQUIRED: 'API_KEY_REQUIRED',
} as const;

/**
 * The HTTP status of a domain error, or of every error of a type: the one table both the
 * responses and the OpenAPI document (from each route's declared errors) use.
 */
export function statusOf(error: DomainError | DomainErrorType): number {
  return (
    match<DomainErrorType, number>(typeof error === 'string' ? error : error.type)
      .with('ValidationFailed', () => 422)
      .with('SettingsNotFound', () => 404)
      .with('SettingsRequired', () => 400)
      .with('ConversationNotFound', () => 404)
      .with('ConversationIdTaken', () => 409)
      .with('IllegalConversationTransition', () => 409)
      .with('ConfirmationNotPending', () => 409)
      .with('StartTaskNotFound', () => 404)
      .with('SandboxNotFound', () => 404)
      .with('SandboxSpecNotFound', () => 404)
      .with('IllegalSandboxTransition', () => 409)
      .with('SandboxRuntimeFailed', () => 502)
      .with('SandboxesUnavailable', () => 503)
      .with('SandboxCapReached', () => 429)
      .with('SecretNotFound', () => 404)
      .with('ConversationNotRunning', () => 409)
      .with('SecretNameTaken', () => 409)
      .with('ProfileNotFound', () => 404)
      .with('ProfileNameTaken', () => 409)
      .with('ProfileLimitReached', () => 409)
      .with('WorkspaceFileNotFound', () => 404)
      .with('WorkspacePathIsDirectory', () => 400)
      .with('ApiKeyNotFound', () => 404)
      .with('ApiKeyLimitReached', () => 409)
      // RFC 6749 §5.2: every refusal of the token endpoint is a 400; the body's `error` says which.
      .with('DeviceTokenRefused', () => 400)
      .with('DeviceAuthorizationsFull', () => 503)
      .with('DeviceAuthorizationsFromClientFull', () => 429)
      .with('UserCodeNotFound', () => 404)
      .with('UserCodeAttemptsExceeded', () => 429)
      .with('DeviceAuthorizationAnswered', () => 409)
      .with('GitProviderNotConnected', () => 403)
      .with('GitRequestRefused', () => 400)
      // Not 401: that would tell the client its own key is wrong (OpenHands clients sign out on 401).
      .with('GitProviderRefused', () => 403)
      .with('GitResourceNotFound', () => 404)
      .with('GitProviderRateLimited', () => 429)
      .with('GitProviderUnavailable', () => 502)
      .with('InvalidIds', () => 400)
      .with('TooManyPendingMessages', () => 429)
      .with('ExportTooLarge', () => 413)
      .with('HostNotAllowed', () => 400)
      .with('SandboxImageNotAllowed', () => 400)
      // Not 401 either: the caller's own key is good; what is missing is a sandbox's.
      .with('SecretsNotExposed', () => 403)
      .with('StoreUnavailable', () => 503)
      .exhaustive()
  );
}

export function sendError(
  res: Response,
  status: number,
  code: string,
  message: string,
  issues?: readonly FieldIssue[],
  oauth?: Pick<ErrorBody, 'error' | 'interval'>,
): void {
  const body: ErrorBody = {
    code,
    message,
    detail: message,
    ...(issues && issues.length > 0 ? { issues: [...issues] } : {}),
    ...(oauth?.error
      ? {
          error: oauth.error,
          error_description: message,
          ...(oauth.interval !== undefined ? { interval: oauth.interval } : {}),
        }
      : {}),
  };
  res.status(status).json(body);
}

/** Core explains errors in domain words; over HTTP they also say which route helps (routes are this adapter's). */
const ROUTE_HINTS: ErrorHints = {
  storeSettings: 'POST /api/settings',
  listSandboxSpecs: 'GET /api/v1/sandbox-specs/search',
  listFiles: 'GET /api/conversations/{conversation_id}/list-files?path=…',
  storeProviderTokens: 'POST /api/add-git-providers',
};

/** The code and message a client gets for a domain error. */
export function explainHttpError(error: DomainError): { code: DomainErrorCode; message: string } {
  return explainDomainError(error, ROUTE_HINTS);
}

export function sendDomainError(res: Response, error: DomainError): void {
  const { code, message } = explainHttpError(error);
  // The device token endpoint's refusals carry the OAuth error too: the OpenHands CLI reads `error` (and `interval`).
  const oauth =
    error.type === 'DeviceTokenRefused'
      ? { error: error.reason, ...(error.interval !== null ? { interval: error.interval } : {}) }
      : undefined;
  sendError(res, statusOf(error), code, message, error.type === 'ValidationFailed' ? error.issues : undefined, oauth);
}
