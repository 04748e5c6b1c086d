import type { NextFunction, Request, Response } from 'express';
import type { DomainError } from '@acs/core';
import type { Logger } from '@acs/core/ports';
import { HTTP_ERROR_CODES, sendError } from './http-error.js';
import type { RouteDefinition } from './route.js';

/** Errors Express and the body parsers raise, as the router's JSON errors; anything else is a 500, logged. */
export function errorHandler(parts: { logger: Logger; bodyLimit: number; maxJsonDepth: number }) {
  return (error: unknown, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) {
      next(error);
      return;
    }
    const type = (error as { type?: unknown } | null)?.type;
    switch (type) {
      case 'entity.parse.failed':
        sendError(res, 400, HTTP_ERROR_CODES.MALFORMED_JSON, 'The request body is not valid JSON.');
        return;
      case 'entity.too.deep':
        sendError(
          res,
          400,
          HTTP_ERROR_CODES.JSON_TOO_DEEP,
          `The request body nests arrays and objects more than ${parts.maxJsonDepth} levels deep; nothing was stored.`,
        );
        return;
      case 'entity.too.large':
        sendError(
          res,
          413,
          HTTP_ERROR_CODES.PAYLOAD_TOO_LARGE,
          `The request body is larger than ${parts.bodyLimit} bytes.`,
        );
        return;
      case 'charset.unsupported':
      case 'encoding.unsupported':
        sendError(
          res,
          415,
          HTTP_ERROR_CODES.UNSUPPORTED_MEDIA_TYPE,
          'Send the body as UTF-8 JSON (Content-Type: application/json).',
        );
        return;
      case 'request.aborted':
      case 'request.size.invalid':
        sendError(res, 400, HTTP_ERROR_CODES.MALFORMED_JSON, 'The request body was incomplete.');
        return;
      default:
        // Other client errors raised by Express or the body parser (a path parameter that is not
        // valid percent-encoding, a body that cannot be decompressed): the request is bad, not the server.
        if (isClientHttpError(error)) {
          sendError(
            res,
            error.status,
            HTTP_ERROR_CODES.BAD_REQUEST,
            'The request could not be read: its URL or body is not correctly encoded.',
          );
          return;
        }
        parts.logger.error(
          {
            method: req.method,
            path: req.baseUrl + req.path,
            err: error instanceof Error ? error.message : String(error),
          },
          'unhandled error',
        );
        sendError(
          res,
          500,
          HTTP_ERROR_CODES.INTERNAL_ERROR,
          'The server failed to handle this request; it has been logged.',
        );
    }
  };
}

/** A backend failure is the operator's to see: the operation and the error's class, never values. */
export function logBackendFailure(logger: Logger, req: Request, route: RouteDefinition, error: DomainError) {
  const where = { method: req.method, path: req.baseUrl + req.path, route: route.operationId };
  if (error.type === 'StoreUnavailable')
    logger.error({ ...where, operation: error.operation, errorClass: error.errorClass }, 'storage failed');
  else if (error.type === 'SandboxRuntimeFailed')
    logger.warn({ ...where, operation: error.operation, sandboxId: error.sandboxId }, 'sandbox runtime failed');
  else if (error.type === 'SandboxesUnavailable') logger.warn(where, 'sandbox runtime unavailable');
}

/** An http-errors style error (Express, body-parser) with a 4xx status. */
function isClientHttpError(error: unknown): error is { status: number } {
  const status = (error as { status?: unknown } | null)?.status;
  return typeof status === 'number' && Number.isInteger(status) && status >= 400 && status < 500;
}
