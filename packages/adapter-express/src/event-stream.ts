import type { NextFunction, Request, Response } from 'express';
import type { DomainError } from '@acs/core';
import type { Logger } from '@acs/core/ports';
import { HTTP_ERROR_CODES, sendDomainError, sendError } from './http-error.js';
import type { Caller } from './auth/caller.js';
import type { LiveConnections } from './realtime/live-connections.js';
import { httpResponseOutbound } from './realtime/outbound.js';
import type { RouteDefinition, SseMessage, StreamPacing, StreamRouteDefinition } from './route.js';

export interface EventStreamOptions {
  logger: Logger;
  /** Counts each stream against its user's live connections, and closes it when its credentials end. */
  live: LiveConnections;
  /** Who the request's credentials name now (for the periodic re-check). */
  resolveCaller(req: Request): Promise<Caller | null>;
  /** A comment line this often keeps proxies from closing a quiet stream. */
  heartbeatMs: number;
  /** A client that lets more than this pile up unread is cut off (it resumes from its last id). */
  maxBufferedBytes: number;
  /** Aborted on shutdown: open streams end at once, new ones get 503 SHUTTING_DOWN. */
  shutdownSignal?: AbortSignal;
  /** A backend failure while opening a stream, for the operator's log. */
  onBackendFailure(req: Request, route: RouteDefinition, error: DomainError): void;
}

/**
 * Server-Sent Events for the routes that stream (the event logs): a refusal while opening is
 * still a JSON error, then text/event-stream with the replay, live messages and heartbeats;
 * backpressure cuts a client that stopped reading; shutdown ends every open stream.
 */
export function createEventStreams(options: EventStreamOptions) {
  const { logger, heartbeatMs, maxBufferedBytes } = options;
  /** The open event streams, each ended by its function. */
  const openStreams = new Set<() => void>();
  options.shutdownSignal?.addEventListener(
    'abort',
    () => {
      for (const end of [...openStreams]) end();
    },
    { once: true },
  );

  /**
   * Opens the route's source; its messages are held until it is open, so a refusal is
   * still a JSON error. Then switches to text/event-stream, writes what was held and
   * follows; the source is closed when the client goes away.
   */
  function open(route: StreamRouteDefinition, input: Parameters<StreamRouteDefinition['stream']>[0], req: Request, res: Response, next: NextFunction) {
    if (options.shutdownSignal?.aborted) {
      res.set('Retry-After', '1');
      sendError(res, 503, HTTP_ERROR_CODES.SHUTTING_DOWN, 'The server is shutting down; reconnect in a moment (send Last-Event-ID to resume).');
      return;
    }
    let held: SseMessage[] | null = [];
    let gone = false;
    const outbound = httpResponseOutbound(res, () => held === null && !gone);
    const admission = options.live.admit({
      caller: input.caller,
      channel: 'sse',
      outbound,
      stillValid: () => options.resolveCaller(req).then((now) => now !== null && now.userId === input.caller.userId),
      close: () => end(),
    });
    if ('refused' in admission) {
      sendError(res, 429, HTTP_ERROR_CODES.TOO_MANY_CONNECTIONS, `Refused: ${admission.refused}.`);
      return;
    }
    const started = performance.now();
    let sent = 0;
    let heartbeat: NodeJS.Timeout | undefined;
    let close: (() => void) | undefined;

    const end = () => {
      if (gone) return;
      gone = true;
      admission.release();
      openStreams.delete(end);
      clearInterval(heartbeat);
      close?.();
      if (!res.writableEnded && !res.destroyed) res.end();
    };
    openStreams.add(end);
    /** Ends the response at once, dropping what waits unsent: a close would wait behind it for a client that does not read. */
    const drop = (why: string) => {
      if (gone) return;
      logger.warn({ path: req.baseUrl + req.path, user: input.userId, buffered: res.writableLength }, `event stream dropped: ${why}`);
      end();
      res.destroy();
    };
    const write = (chunk: string) => {
      if (gone || res.writableEnded || res.destroyed) return;
      // A client that stopped reading: stop buffering for it; it resumes from its last id. (Checked
      // before the write, so one message larger than the bound still reaches a client that reads.)
      if (res.writableLength > maxBufferedBytes || admission.tooFarBehind()) {
        drop('the client is not reading');
        return;
      }
      // As bytes: the response then holds this one buffer while the client is slow, not also the text.
      res.write(Buffer.from(chunk, 'utf8'));
      // A compression middleware (e.g. `compression`) buffers unless told to flush.
      (res as Response & { flush?: () => void }).flush?.();
    };
    const send = (message: SseMessage) => {
      if (gone) return;
      if (held) held.push(message);
      else {
        sent++;
        write(formatSse(message));
      }
    };
    res.on('close', () => {
      const wasOpen = held === null;
      end();
      if (wasOpen) logger.info({ path: req.baseUrl + req.path, user: input.userId, events: sent, ms: Math.round(performance.now() - started) }, 'event stream closed');
    });
    res.on('error', (error: unknown) => {
      logger.warn({ path: req.baseUrl + req.path, err: error instanceof Error ? error.message : String(error) }, 'event stream write failed');
      end();
    });

    const pacing: StreamPacing = { outbound, stallMs: options.live.limits.stallMs, userHasRoom: admission.userHasRoom, drop };
    route
      .stream(
        input,
        send,
        () => {
          // Flush what the replay held, then finish: the client sees a clean end, not a cut.
          if (held) {
            const replay = held;
            held = null;
            if (res.headersSent) write(replay.map(formatSse).join(''));
          }
          end();
        },
        pacing,
      )
      .match(
        (handle) => {
          close = () => handle.close();
          if (gone) {
            // The client left while the source was opening.
            handle.close();
            return;
          }
          res.writeHead(200, {
            'Content-Type': 'text/event-stream',
            'Cache-Control': 'no-cache',
            'X-Accel-Buffering': 'no',
          });
          res.flushHeaders();
          if (req.method === 'HEAD') {
            end();
            return;
          }
          const replay = held ?? [];
          held = null;
          sent += replay.length;
          if (replay.length > 0) write(replay.map(formatSse).join(''));
          heartbeat = setInterval(() => write(': ping\n\n'), heartbeatMs);
          heartbeat.unref();
          handle.start?.();
        },
        (error) => {
          held = null;
          options.onBackendFailure(req, route, error);
          if (!gone) sendDomainError(res, error);
        },
      )
      .catch((error: unknown) => {
        if (res.headersSent) {
          logger.error({ path: req.baseUrl + req.path, err: error instanceof Error ? error.message : String(error) }, 'event stream failed');
          end();
        } else next(error);
      });
  }

  return { open };
}

/** One SSE message; JSON never contains a raw line break, so `data` is one line. */
function formatSse(message: SseMessage): string {
  return `id: ${String(message.id)}\nevent: ${message.event}\ndata: ${JSON.stringify(message.data)}\n\n`;
}
