import type { NextFunction, Request, Response } from 'express';
import type { DomainError } from '@acs/core';
import type { Logger } from '@acs/core/ports';
import { HTTP_ERROR_CODES, sendDomainError, sendError } from './http-error.js';
import type { Caller } from './auth/caller.js';
import type { Admission, Admitted, LiveConnections } from './realtime/live-connections.js';
import { roomForDelta } from './realtime/deltas.js';
import { httpResponseOutbound, type Outbound } from './realtime/outbound.js';
import type { EventStreamHandle, RouteDefinition, SseMessage, StreamPacing, StreamRouteDefinition } from './route.js';

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
  /** The open event streams. */
  const openStreams = new Set<SseStream>();
  options.shutdownSignal?.addEventListener(
    'abort',
    () => {
      for (const stream of [...openStreams]) stream.end();
    },
    { once: true },
  );
  return {
    open: (route: StreamRouteDefinition, input: StreamInput, req: Request, res: Response, next: NextFunction) =>
      open(options, openStreams, route, input, req, res, next),
  };
}

type StreamInput = Parameters<StreamRouteDefinition['stream']>[0];

/**
 * Opens the route's source; its messages are held until it is open, so a refusal is
 * still a JSON error. Then switches to text/event-stream, writes what was held and
 * follows; the source is closed when the client goes away.
 */
function open(
  options: EventStreamOptions,
  openStreams: Set<SseStream>,
  route: StreamRouteDefinition,
  input: StreamInput,
  req: Request,
  res: Response,
  next: NextFunction,
): void {
  if (options.shutdownSignal?.aborted) {
    res.set('Retry-After', '1');
    sendError(
      res,
      503,
      HTTP_ERROR_CODES.SHUTTING_DOWN,
      'The server is shutting down; reconnect in a moment (send Last-Event-ID to resume).',
    );
    return;
  }
  const stream = new SseStream(options, openStreams, input, req, res);
  if (!stream.admitted) {
    sendError(res, 429, HTTP_ERROR_CODES.TOO_MANY_CONNECTIONS, `Refused: ${stream.refusal}.`);
    return;
  }
  route
    .stream(
      input,
      (message) => stream.send(message),
      () => stream.finish(),
      stream.pacing,
    )
    .match(
      (handle) => stream.opened(handle),
      (error) => {
        stream.refused();
        options.onBackendFailure(req, route, error);
        if (!stream.gone) sendDomainError(res, error);
      },
    )
    .catch((error: unknown) => {
      if (res.headersSent) {
        options.logger.error(
          { path: req.baseUrl + req.path, err: error instanceof Error ? error.message : String(error) },
          'event stream failed',
        );
        stream.end();
      } else next(error);
    });
}

/** One event stream's response: what is held until its source is open, what was sent, its heartbeat, and how it ends. */
class SseStream {
  /** Messages of the replay while the source opens; null once the stream is open (or refused). */
  #held: SseMessage[] | null = [];
  gone = false;
  #sent = 0;
  #heartbeat: NodeJS.Timeout | undefined;
  #close: (() => void) | undefined;
  readonly #started = performance.now();
  readonly #admission: Admission;
  readonly #outbound: Outbound;
  readonly #options: EventStreamOptions;
  readonly #openStreams: Set<SseStream>;
  readonly #input: StreamInput;
  readonly #req: Request;
  readonly #res: Response;

  constructor(
    options: EventStreamOptions,
    openStreams: Set<SseStream>,
    input: StreamInput,
    req: Request,
    res: Response,
  ) {
    this.#options = options;
    this.#openStreams = openStreams;
    this.#input = input;
    this.#req = req;
    this.#res = res;
    this.#outbound = httpResponseOutbound(res, () => this.#held === null && !this.gone);
    this.#admission = options.live.admit({
      caller: input.caller,
      channel: 'sse',
      outbound: this.#outbound,
      stillValid: () => options.resolveCaller(req).then((now) => now !== null && now.userId === input.caller.userId),
      close: () => this.end(),
    });
    if (!this.admitted) return;
    openStreams.add(this);
    res.on('close', () => {
      const wasOpen = this.#held === null;
      this.end();
      if (wasOpen)
        options.logger.info(
          {
            path: req.baseUrl + req.path,
            user: input.userId,
            events: this.#sent,
            ms: Math.round(performance.now() - this.#started),
          },
          'event stream closed',
        );
    });
    res.on('error', (error: unknown) => {
      options.logger.warn(
        { path: req.baseUrl + req.path, err: error instanceof Error ? error.message : String(error) },
        'event stream write failed',
      );
      this.end();
    });
  }

  get admitted(): boolean {
    return !('refused' in this.#admission);
  }

  get refusal(): string | null {
    return 'refused' in this.#admission ? this.#admission.refused : null;
  }

  get pacing(): StreamPacing {
    const admission = this.#admission as Admitted;
    return {
      outbound: this.#outbound,
      stallMs: this.#options.live.limits.stallMs,
      userHasRoom: admission.userHasRoom,
      drop: (why) => this.drop(why),
      roomForTransient: () => roomForDelta(this.#outbound.pending(), this.#options.maxBufferedBytes, admission),
    };
  }

  end(): void {
    if (this.gone) return;
    this.gone = true;
    if (this.admitted) (this.#admission as Admitted).release();
    this.#openStreams.delete(this);
    clearInterval(this.#heartbeat);
    this.#close?.();
    if (!this.#res.writableEnded && !this.#res.destroyed) this.#res.end();
  }

  /** Ends the response at once, dropping what waits unsent: a close would wait behind it for a client that does not read. */
  drop(why: string): void {
    if (this.gone) return;
    this.#options.logger.warn(
      { path: this.#req.baseUrl + this.#req.path, user: this.#input.userId, buffered: this.#res.writableLength },
      `event stream dropped: ${why}`,
    );
    this.end();
    this.#res.destroy();
  }

  send(message: SseMessage): void {
    if (this.gone) return;
    if (this.#held) this.#held.push(message);
    else {
      // Only stored events count (a delta is a piece of one).
      if (message.id !== undefined) this.#sent++;
      this.#write(formatSse(message));
    }
  }

  /** The source is done: flush what the replay held, then finish (the client sees a clean end, not a cut). */
  finish(): void {
    if (this.#held) {
      const replay = this.#held;
      this.#held = null;
      if (this.#res.headersSent) this.#write(replay.map(formatSse).join(''));
    }
    this.end();
  }

  /** The source is open: the response becomes an event stream, the held replay goes out, the heartbeat starts. */
  opened(handle: EventStreamHandle): void {
    this.#close = () => handle.close();
    if (this.gone) {
      // The client left while the source was opening.
      handle.close();
      return;
    }
    this.#res.writeHead(200, {
      'Content-Type': 'text/event-stream',
      'Cache-Control': 'no-cache',
      'X-Accel-Buffering': 'no',
    });
    this.#res.flushHeaders();
    if (this.#req.method === 'HEAD') {
      this.end();
      return;
    }
    const replay = this.#held ?? [];
    this.#held = null;
    this.#sent += replay.length;
    if (replay.length > 0) this.#write(replay.map(formatSse).join(''));
    this.#heartbeat = setInterval(() => this.#write(': ping\n\n'), this.#options.heartbeatMs);
    this.#heartbeat.unref();
    handle.start?.();
  }

  /** The source refused to open: nothing held is sent. */
  refused(): void {
    this.#held = null;
  }

  #write(chunk: string): void {
    const res = this.#res;
    if (this.gone || res.writableEnded || res.destroyed) return;
    // A client that stopped reading: stop buffering for it; it resumes from its last id. (Checked
    // before the write, so one message larger than the bound still reaches a client that reads.)
    if (res.writableLength > this.#options.maxBufferedBytes || (this.#admission as Admitted).tooFarBehind()) {
      this.drop('the client is not reading');
      return;
    }
    // As bytes: the response then holds this one buffer while the client is slow, not also the text.
    res.write(Buffer.from(chunk, 'utf8'));
    // A compression middleware (e.g. `compression`) buffers unless told to flush.
    (res as Response & { flush?: () => void }).flush?.();
  }
}

/** One SSE message (without an `id:` line when it has no id); JSON never contains a raw line break, so `data` is one line. */
function formatSse(message: SseMessage): string {
  const id = message.id === undefined ? '' : `id: ${String(message.id)}\n`;
  return `${id}event: ${message.event}\ndata: ${JSON.stringify(message.data)}\n\n`;
}
