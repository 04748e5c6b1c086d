import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AgentConversationService } from '@acs/core';
import type { Logger } from '@acs/core/ports';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { channelAccess, type Caller } from '../auth/caller.js';
import { openFeed, type Feed } from './feed.js';
import { CLOSE_MESSAGES, type LiveConnections } from './live-connections.js';
import { webSocketOutbound, type Pacing } from './outbound.js';
import { userMessage } from './user-message.js';
import { agentError, stateUpdate, V1EventTranslator } from './v1-events.js';

export interface V1ChannelDeps {
  service: AgentConversationService;
  /** Who is connecting: from the conversation key in the query, else the request's header or session cookie. */
  resolveCaller(req: IncomingMessage, conversationKey: string | null): Promise<Caller | null>;
  logger: Logger;
  live: LiveConnections;
  /** The largest message a client may send (the router's body limit: one limit whichever way a message comes). */
  maxMessageBytes: number;
}

/** Close codes of the agent-server's socket (4xxx: the HTTP status they stand for). */
const CLOSE = {
  goingAway: 1001,
  policy: 1008,
  internal: 1011,
  unauthenticated: 4001,
  notFound: 4004,
  tooMany: 4029,
} as const;

/** Messages a client may send before it is known who it is; they are handled once it is. */
const MAX_EARLY_MESSAGES = 16;
/** What the UI writes to send a message: `{role: "user", content: [{type: "text", text} | {type: "image_url", image_url: {url}}]}`. */
function messageOf(data: unknown): { text: string; images: string[] } | null {
  const frame = data as { role?: unknown; content?: unknown } | null;
  if (!frame || frame.role !== 'user' || !Array.isArray(frame.content)) return null;
  const parts = frame.content as {
    type?: unknown;
    text?: unknown;
    image_url?: { url?: unknown };
    image_urls?: unknown;
  }[];
  const text = parts
    .filter((p) => p.type === 'text' && typeof p.text === 'string')
    .map((p) => p.text as string)
    .join('\n\n');
  const images = parts.flatMap((p) =>
    p.type === 'image_url' && typeof p.image_url?.url === 'string'
      ? [p.image_url.url]
      : p.type === 'image' && Array.isArray(p.image_urls)
        ? p.image_urls.filter((u): u is string => typeof u === 'string')
        : [],
  );
  return { text, images };
}

const textOf = (raw: RawData): string =>
  (Buffer.isBuffer(raw) ? raw : Array.isArray(raw) ? Buffer.concat(raw) : Buffer.from(raw)).toString('utf8');

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * The OpenHands agent-server's event socket, which the UI opens in V1 mode:
 * `<mount>/sockets/events/<conversation id>?resend_all=true&session_api_key=…`. Frames are
 * agent-server events (see v1-events.ts); with `resend_all` the whole history comes first, then
 * each new event. A frame the client sends is a user message that runs the agent. Unknown
 * key: close 4001; unknown conversation: close 4004; more live connections than the user may
 * hold: close 4029. A frame that breaks the protocol or exceeds the message limit closes that
 * connection only (ws answers 1002, 1007 or 1009).
 */
export function createV1Channel(deps: V1ChannelDeps) {
  const wss = new WebSocketServer({ noServer: true, maxPayload: deps.maxMessageBytes, perMessageDeflate: false });

  return {
    /** Takes an upgrade for `<prefix><conversation id>` (already decoded). */
    handleUpgrade(
      req: IncomingMessage,
      socket: Duplex,
      head: Buffer,
      conversationId: string,
      query: URLSearchParams,
    ): void {
      wss.handleUpgrade(req, socket, head, (ws) => serve(ws, socket, req, conversationId, query, deps));
    },
    close(): void {
      for (const client of wss.clients) closeWith(client, CLOSE.goingAway, CLOSE_MESSAGES.shutting_down);
      wss.close();
    },
  };
}

/** One connection, from the handshake to its close. Every listener is in place before anything is awaited. */
function serve(
  ws: WebSocket,
  socket: Duplex,
  req: IncomingMessage,
  conversationId: string,
  query: URLSearchParams,
  deps: V1ChannelDeps,
): void {
  const connection = new V1Connection(deps, ws, socket, req, conversationId, query);
  connection.open().catch((error: unknown) => {
    deps.logger.error({ conversationId, err: errorText(error) }, 'agent-server socket failed');
    closeWith(ws, CLOSE.internal, 'internal error');
  });
}

/**
 * One client of a conversation's event socket: messages that arrive before it is known who it
 * is are held; once it is, it is admitted among its user's live connections, its messages are
 * sent to the conversation, and the feed (history with `resend_all`, then live events) follows.
 */
class V1Connection {
  /** Messages sent before authentication, handled once it is known who sent them. */
  readonly #early: RawData[] = [];
  #onMessage: ((raw: RawData) => void) | null = null;
  #feed: Feed | null = null;
  #release: (() => void) | null = null;
  #closed = false;
  readonly #authDeadline: NodeJS.Timeout;
  readonly #key: string | null;

  constructor(
    private readonly deps: V1ChannelDeps,
    private readonly ws: WebSocket,
    private readonly socket: Duplex,
    private readonly req: IncomingMessage,
    private readonly conversationId: string,
    private readonly query: URLSearchParams,
  ) {
    this.#key = query.get('session_api_key') || null;
    ws.on('error', (error: Error) => {
      // A protocol error or an oversized frame: ws closes this connection with the matching code.
      deps.logger.info(
        { conversationId, err: error.message },
        'agent-server socket: bad frame from the client; connection closed',
      );
    });
    ws.on('close', () => {
      this.#closed = true;
      clearTimeout(this.#authDeadline);
      this.#feed?.close();
      this.#release?.();
    });
    ws.on('message', (raw: RawData) => {
      if (this.#onMessage) this.#onMessage(raw);
      else if (this.#early.length < MAX_EARLY_MESSAGES) this.#early.push(raw);
      else closeWith(ws, CLOSE.policy, 'too many messages before authentication');
    });
    this.#authDeadline = setTimeout(
      () => closeWith(ws, CLOSE.unauthenticated, 'not authenticated in time'),
      deps.live.limits.authDeadlineMs,
    );
    this.#authDeadline.unref();
  }

  /** Who is connecting, and whether they may: then admitted among the user's live connections, and followed. */
  async open(): Promise<void> {
    const { ws, deps } = this;
    const access = channelAccess(await deps.resolveCaller(this.req, this.#key), this.#key, this.conversationId);
    clearTimeout(this.#authDeadline);
    if (this.#closed) return;
    if ('refused' in access) {
      closeWith(ws, CLOSE.unauthenticated, 'not authenticated for this conversation');
      return;
    }
    const caller = access.caller;
    const outbound = webSocketOutbound(ws, this.socket);
    const admission = deps.live.admit({
      caller,
      channel: 'websocket',
      outbound,
      stillValid: () =>
        deps.resolveCaller(this.req, this.#key).then((now) => now !== null && now.userId === caller.userId),
      close: (reason) =>
        closeWith(ws, reason === 'shutting_down' ? CLOSE.goingAway : CLOSE.unauthenticated, CLOSE_MESSAGES[reason]),
    });
    if ('refused' in admission) {
      closeWith(ws, CLOSE.tooMany, admission.refused);
      return;
    }
    this.#release = admission.release;
    await this.#follow(
      caller.userId,
      { outbound, stallMs: deps.live.limits.stallMs, userHasRoom: admission.userHasRoom },
      admission.tooFarBehind,
    );
  }

  async #follow(userId: string, pacing: Pacing, tooFarBehind: () => boolean): Promise<void> {
    const { ws } = this;
    const translator = new V1EventTranslator();
    this.#onMessage = (raw) => this.#received(userId, raw);
    for (const raw of this.#early.splice(0)) this.#onMessage(raw);

    const resendAll = /^(true|1)$/i.test(this.query.get('resend_all') ?? '');
    const dropSlowClient = (why: string) => {
      // A close frame would wait behind what the client is not reading: the connection is dropped (it resumes by reconnecting).
      this.deps.logger.warn(
        { conversationId: this.conversationId, user: userId, buffered: pacing.outbound.pending() },
        `agent-server socket dropped: ${why}`,
      );
      ws.terminate();
    };
    const opened = await openFeed(
      this.deps.service,
      userId,
      this.conversationId,
      0,
      {
        history: (event) => {
          for (const frame of translator.translate(event)) if (resendAll) this.#send(frame);
        },
        caughtUp: (lastId) => void this.#sendState(userId, lastId),
        live: (event) => {
          // Checked before sending, so one event larger than the bound still reaches a client that reads.
          if (tooFarBehind()) dropSlowClient('it is not reading live events');
          else for (const frame of translator.translate(event)) this.#send(frame);
        },
        end: () => closeWith(ws, CLOSE.notFound, 'the conversation was deleted'),
        failed: (failure) =>
          failure.type === 'ClientNotReading'
            ? dropSlowClient('it took nothing of the replay')
            : closeWith(ws, CLOSE.internal, 'storage failed'),
      },
      pacing,
    );
    if (opened.isErr()) {
      const notFound = opened.error.type === 'ConversationNotFound';
      closeWith(ws, notFound ? CLOSE.notFound : CLOSE.internal, notFound ? 'conversation not found' : 'storage failed');
      return;
    }
    this.#feed = opened.value;
    if (this.#closed) this.#feed.close();
    else this.#feed.start();
  }

  /** A frame from the client: a user message for the conversation, or a refusal saying what to send. */
  #received(userId: string, raw: RawData): void {
    const message = messageOf(parseJson(textOf(raw)));
    if (!message) {
      this.#refuse('Send a message as {"role":"user","content":[{"type":"text","text":"…"}]}.');
      return;
    }
    this.deps.service.conversations
      .sendMessage(userId, this.conversationId, userMessage(message.text, message.images))
      .then(
        (sent) => {
          if (sent.isErr())
            this.#refuse(
              sent.error.type === 'ValidationFailed'
                ? sent.error.message
                : `The message was not sent (${sent.error.type}).`,
            );
        },
        (error: unknown) =>
          this.deps.logger.error(
            { conversationId: this.conversationId, err: errorText(error) },
            'agent-server socket message failed',
          ),
      );
  }

  #send(frame: unknown): void {
    // As bytes: the socket then holds this one buffer while the client is slow, not also a copy of the text.
    if (this.ws.readyState === this.ws.OPEN)
      this.ws.send(Buffer.from(JSON.stringify(frame), 'utf8'), { binary: false });
  }

  #refuse(error: string): void {
    this.#send(agentError(`refused-${Date.now()}`, new Date().toISOString(), error));
  }

  /** The whole state, as the agent-server sends on connect; an agent that has not run yet is idle. */
  async #sendState(userId: string, lastId: number): Promise<void> {
    const current = await this.deps.service.conversations.get(userId, this.conversationId);
    const status = current.isOk() ? (current.value.record.execution_status ?? 'idle') : null;
    if (status) this.#send(stateUpdate(`state-${lastId}`, new Date().toISOString(), status, 'full_state'));
  }
}

/** Closes with a reason ws accepts (at most 123 bytes; a longer one would throw). */
function closeWith(ws: WebSocket, code: number, reason: string): void {
  const bytes = Buffer.from(reason, 'utf8');
  ws.close(
    code,
    bytes.length <= 123
      ? reason
      : bytes
          .subarray(0, 120)
          .toString('utf8')
          .replace(/\uFFFD$/, '') + '…',
  );
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
