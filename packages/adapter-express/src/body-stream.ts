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

/** Resolves when the response can take more (`drain`), or false when the client went away first. */
function roomFor(res: Response): Promise<boolean> {
  if (res.destroyed || res.writableEnded) return Promise.resolve(false);
  if (!res.writableNeedDrain) return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean) => () => {
      res.off('drain', drained);
      res.off('close', closed);
      resolve(ok);
    };
    const drained = done(true);
    const closed = done(false);
    res.once('drain', drained);
    res.once('close', closed);
  });
}

/**
 * Answers a body-stream route: its refusal while opening is a JSON error; then the status and
 * headers go out and the body's chunks are pulled one at a time, the next only once the client
 * has taken the last (so the route holds at most one chunk per client, however slow it reads),
 * until the body ends or the client leaves (the body's iterator is then ended). A failure after
 * the headers can only cut the body short: the connection is closed without the body's end.
 * Between chunks the event loop runs, so a long body never holds up other requests.
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
          const chunks = body.chunks[Symbol.asyncIterator]();
          try {
            if (req.method === 'HEAD') return;
            for (;;) {
              if (!(await roomFor(res))) return;
              const next = await chunks.next();
              if (next.done) break;
              res.write(typeof next.value === 'string' ? Buffer.from(next.value, 'utf8') : next.value);
              await yieldToEventLoop();
            }
            res.end();
          } catch (error: unknown) {
            options.logger.error(
              {
                path: req.baseUrl + req.path,
                route: route.operationId,
                err: error instanceof Error ? error.message : String(error),
              },
              'a streamed body failed; the response was cut',
            );
            res.destroy();
          } finally {
            if (!res.writableEnded && !res.destroyed) res.end();
            await chunks.return?.();
          }
        },
        (error) => {
          options.onBackendFailure(req, route, error);
          sendDomainError(res, error);
        },
      )
      .catch(next);
  };
}
