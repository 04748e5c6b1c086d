import { pipeline } from 'node:stream/promises';
import type { NextFunction, Request, Response } from 'express';
import type { DomainError } from '@acs/core';
import type { Logger } from '@acs/core/ports';
import { sendDomainError } from './http-error.js';
import type { BodyStreamRouteDefinition, RouteDefinition } from './route.js';

export interface BodyStreamOptions {
  logger: Logger;
  /** A backend failure while opening, for the operator's log. */
  onBackendFailure(req: Request, route: RouteDefinition, error: DomainError): void;
}

/** Lets the event loop run (other requests, timers) between two chunks: a body made of memory-fast reads would otherwise hold it until the socket is full. */
const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * The body's chunks as bytes, the event loop let run between two. A failure of the body
 * destroys the response before the pipeline sees it: the pipeline would destroy it with the
 * error, which reaches the host's HTTP server as a `clientError` although the client did
 * nothing wrong.
 */
async function* paced(chunks: AsyncIterable<Uint8Array | string>, res: Response, failed: { error?: unknown }) {
  try {
    for await (const chunk of chunks) {
      yield typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
      await yieldToEventLoop();
    }
  } catch (error: unknown) {
    failed.error = error;
    res.destroy();
    throw error;
  }
}

/**
 * Answers a body-stream route: its refusal while opening is a JSON error; then the status and
 * headers go out and the body goes through `stream.pipeline`, which pulls the next chunk only
 * once the client has taken the last (so the route holds at most one chunk per client, however
 * slow it reads), ends the response with the body, and ends the body's iterator when the client
 * leaves. A failure after the headers can only cut the body short: the connection is closed
 * without the body's end. Between chunks the event loop runs, so a long body never holds up
 * other requests.
 */
export function sendBodyStream(options: BodyStreamOptions) {
  return (
    route: BodyStreamRouteDefinition,
    input: Parameters<BodyStreamRouteDefinition['respond']>[0],
    req: Request,
    res: Response,
    next: NextFunction,
  ) => {
    route
      .respond(input)
      .match(
        async (body) => {
          res.writeHead(route.success.status, {
            ...body.headers,
            'Content-Type': route.success.contentType,
            'Cache-Control': 'no-store',
          });
          if (req.method === 'HEAD') {
            res.end();
            await body.chunks[Symbol.asyncIterator]().return?.();
            return;
          }
          const failed: { error?: unknown } = {};
          // Rejects too when the client leaves first; only a failure of the body is logged.
          await pipeline(paced(body.chunks, res, failed), res).catch(() => {
            if (!('error' in failed)) return;
            options.logger.error(
              {
                path: req.baseUrl + req.path,
                route: route.operationId,
                err: failed.error instanceof Error ? failed.error.message : String(failed.error),
              },
              'a streamed body failed; the response was cut',
            );
          });
        },
        (error) => {
          options.onBackendFailure(req, route, error);
          sendDomainError(res, error);
        },
      )
      .catch(next);
  };
}
