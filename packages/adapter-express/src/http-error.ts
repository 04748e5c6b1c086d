import type { Response } from 'express';
import { match } from 'ts-pattern';
import { explainDomainError, type DomainError, type FieldIssue } from '@acs/core';
import { z } from 'zod';

/**
 * The one error body of every route: a stable machine `code`, a sentence for
 * humans, and for validation errors the field paths that are wrong.
 */
export const ErrorBodySchema = z.object({
  code: z.string().meta({ description: 'Stable machine-readable code, e.g. VALIDATION_FAILED.' }),
  message: z.string().meta({ description: 'What went wrong and what to do about it.' }),
  issues: z
    .array(z.object({ path: z.string(), message: z.string() }))
    .optional()
    .meta({ description: 'Validation problems by field path.' }),
});
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

/** Codes the HTTP layer itself produces (domain codes come from @acs/core). */
export const HTTP_ERROR_CODES = {
  UNAUTHENTICATED: 'UNAUTHENTICATED',
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
} as const;

export function statusOf(error: DomainError): number {
  return match(error)
    .with({ type: 'ValidationFailed' }, () => 422)
    .with({ type: 'SettingsNotFound' }, () => 404)
    .with({ type: 'SettingsRequired' }, () => 400)
    .with({ type: 'ConversationNotFound' }, () => 404)
    .with({ type: 'ConversationIdTaken' }, () => 409)
    .with({ type: 'IllegalConversationTransition' }, () => 409)
    .with({ type: 'ConfirmationNotPending' }, () => 409)
    .with({ type: 'StartTaskNotFound' }, () => 404)
    .with({ type: 'SandboxNotFound' }, () => 404)
    .with({ type: 'SandboxSpecNotFound' }, () => 404)
    .with({ type: 'IllegalSandboxTransition' }, () => 409)
    .with({ type: 'SandboxRuntimeFailed' }, () => 502)
    .with({ type: 'SandboxesUnavailable' }, () => 503)
    .with({ type: 'SandboxCapReached' }, () => 429)
    .with({ type: 'StoreUnavailable' }, () => 503)
    .exhaustive();
}

export function sendError(res: Response, status: number, code: string, message: string, issues?: readonly FieldIssue[]): void {
  const body: ErrorBody = { code, message, ...(issues && issues.length > 0 ? { issues: [...issues] } : {}) };
  res.status(status).json(body);
}

export function sendDomainError(res: Response, error: DomainError): void {
  const { code, message } = explainDomainError(error);
  sendError(res, statusOf(error), code, message, error.type === 'ValidationFailed' ? error.issues : undefined);
}
