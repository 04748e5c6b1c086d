import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AgentConversationService } from '@acs/core';
import type { Logger } from '@acs/core/ports';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { channelAccess, type Caller } from '../auth/caller.js';
import { openFeed, type Feed } from './feed.js';
import { CLOSE_MESSAGES, type LiveConnections } from './live-connections.js';
import { webSocketOutbound, type Pacing } from './outbound.js';
import {
  authKeyIn,
  frameJson,
  pendingAuthentication,
  type Frame,
  type PendingAuthentication,
} from './pending-authentication.js';
import { refuseUpgrade } from './upgrades.js';
import { userMessage } from './user-message.js';
import { deltaGate, roomForDelta } from './deltas.js';
import { agentError, stateUpdate, streamingDeltaEvent, V1EventTranslator } from './v1-events.js';

export interface V1ChannelDeps {
  service: AgentConversationService;
  /** Who is connecting: from the conversation key in the query, else the request's header or session cookie. */
  resolveCaller(req: IncomingMessage, conversationKey: string | null): Promise<Caller | null>;
  logger: Logger;
  live: LiveConnections;
  /** The largest message a client may send (the router's body limit: one limit whichever way a message comes). */
  maxMessageBytes: number;
  /** Who a connection comes from, for the limit of unauthenticated connections per address (auth/client-address.ts). */
  clientAddressOf(req: IncomingMessage): string;
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

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * The OpenHands agent-server's event socket, which the UI opens in V1 mode:
 * `<mount>/sockets/events/<conversation id>?resend_all=true&session_api_key=…`, and SDK 1.58
 * without the key, sending `{"type":"auth","session_api_key":…}` as its first frame instead.
 * Frames are agent-server events (see v1-events.ts); with `resend_all` the whole history comes
 * first, then each new event, and, live only, each piece of an answer being written as a
 * `StreamingDeltaEvent` (as the agent-server sends them to its socket subscribers; never
 * replayed, left out for a client that falls behind: see deltas.ts). A frame the client sends
 * is a user message that runs the agent.
 * Unknown key: close 4001; unknown conversation: close 4004; more live connections than the
 * user may hold: close 4029. Until it has authenticated a connection may send only its
 * authentication frame (pending-authentication.ts), and one address may hold only a few such
 * connections (429 at the upgrade). A frame that breaks the protocol or exceeds the message
 * limit closes that connection only (ws answers 1002, 1007 or 1009).
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
      // A socket that offers a key is answered at once; one that does not may wait for its first frame, and counts.
      const leave = offersKey(req, query) ? () => {} : deps.live.enterUnauthenticated(deps.clientAddressOf(req));
      if (!leave) {
        refuseUpgrade(socket, 429, TOO_MANY_UNAUTHENTICATED);
        return;
      }
      // However the handshake ends (ws answers a bad one itself), the place is given back.
      socket.once('close', leave);
      wss.handleUpgrade(req, socket, head, (ws) => serve(ws, socket, req, conversationId, query, deps, leave));
    },
    close(): void {
      for (const client of wss.clients) closeWith(client, CLOSE.goingAway, CLOSE_MESSAGES.shutting_down);
      wss.close();
    },
  };
}

/** Whether the upgrade itself carries a key (in the query, X-Session-API-Key or Authorization). */
const offersKey = (req: IncomingMessage, query: URLSearchParams) =>
  !!query.get('session_api_key') || req.headers['x-session-api-key'] !== undefined || !!req.headers.authorization;

/** Why an upgrade is refused before the WebSocket opens (429). */
export const TOO_MANY_UNAUTHENTICATED =
  'Too many connections from this address have not authenticated yet: authenticate one (or close it) first.';

/** One connection, from the handshake to its close. Every listener is in place before anything is awaited. */
function serve(
  ws: WebSocket,
  socket: Duplex,
  req: IncomingMessage,
  conversationId: string,
  query: URLSearchParams,
  deps: V1ChannelDeps,
  leave: () => void,
): void {
  const connection = new V1Connection(deps, ws, socket, req, conversationId, query, leave);
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
  /** Messages that came once it was known who sent them, before the conversation is followed. */
  readonly #early: RawData[] = [];
  #onMessage: ((raw: RawData) => void) | null = null;
  #feed: Feed | null = null;
  #release: (() => void) | null = null;
  #closed = false;
  readonly #authDeadline: NodeJS.Timeout;
  readonly #pending: PendingAuthentication;
  /** The key the connection authenticated with: the query's, else its authentication frame's. */
  #key: string | null;

  constructor(
    private readonly deps: V1ChannelDeps,
    private readonly ws: WebSocket,
    private readonly socket: Duplex,
    private readonly req: IncomingMessage,
    private readonly conversationId: string,
    private readonly query: URLSearchParams,
    leave: () => void,
  ) {
    this.#key = query.get('session_api_key') || null;
    this.#pending = pendingAuthentication(ws, socket, deps.live.limits, leave);
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
    this.#authDeadline = setTimeout(
      () => this.#refuse(CLOSE.unauthenticated, 'not authenticated in time'),
      deps.live.limits.authDeadlineMs,
    );
    this.#authDeadline.unref();
  }

  /** Who is connecting, and whether they may: then admitted among the user's live connections, and followed. */
  async open(): Promise<void> {
    const { deps } = this;
    const urlKey = this.#key;
    const access = channelAccess(await this.#caller(), urlKey, this.conversationId);
    clearTimeout(this.#authDeadline);
    if (this.#closed) return;
    if ('refused' in access) {
      this.#refuse(CLOSE.unauthenticated, 'not authenticated for this conversation');
      return;
    }
    const caller = access.caller;
    const outbound = webSocketOutbound(this.ws, this.socket);
    const admission = deps.live.admit({
      caller,
      channel: 'websocket',
      outbound,
      stillValid: () =>
        deps.resolveCaller(this.req, this.#key).then((now) => now !== null && now.userId === caller.userId),
      close: (reason) =>
        closeWith(
          this.ws,
          reason === 'shutting_down' ? CLOSE.goingAway : CLOSE.unauthenticated,
          CLOSE_MESSAGES[reason],
        ),
    });
    if ('refused' in admission) {
      this.#refuse(CLOSE.tooMany, admission.refused);
      return;
    }
    this.#release = admission.release;
    this.#admitFrames(this.#pending.authenticated());
    await this.#follow(
      caller.userId,
      { outbound, stallMs: deps.live.limits.stallMs, userHasRoom: admission.userHasRoom },
      admission.tooFarBehind,
    );
  }

  /**
   * Who is connecting: by the query's key, a key in a header or the session cookie; else, when
   * the upgrade offered no key at all, by the key of its authentication frame.
   */
  async #caller(): Promise<Caller | null> {
    const found = await this.deps.resolveCaller(this.req, this.#key);
    if (found || offersKey(this.req, this.query) || this.#closed) return found;
    const frameKey = await this.#pending.authFrame();
    if (frameKey === null || this.#closed) return null;
    this.#key = frameKey;
    return this.deps.resolveCaller(this.req, frameKey);
  }

  /** From now on the client's frames are its messages: those that came before, then each as it comes. */
  #admitFrames(before: Frame[]): void {
    const take = (raw: RawData) => {
      if (this.#onMessage) this.#onMessage(raw);
      else if (this.#early.length < MAX_EARLY_MESSAGES) this.#early.push(raw);
      else closeWith(this.ws, CLOSE.policy, 'too many messages before the conversation is followed');
    };
    for (const frame of before) take(frame.data);
    this.ws.on('message', take);
  }

  /** Closes a connection that is not let in; nothing it sends from now on is kept. */
  #refuse(code: number, reason: string): void {
    this.#pending.abandon();
    closeWith(this.ws, code, reason);
  }

  async #follow(userId: string, pacing: Pacing, tooFarBehind: () => boolean): Promise<void> {
    const { ws } = this;
    const translator = new V1EventTranslator();
    // Deltas go out while the client has room for them, never at the cost of cutting it off (deltas.ts).
    const mayGo = deltaGate(() =>
      roomForDelta(pacing.outbound.pending(), this.deps.live.limits.maxBufferedBytes, {
        tooFarBehind,
        userHasRoom: pacing.userHasRoom,
      }),
    );
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
        transient: (event) => {
          if (mayGo(event)) this.#send(streamingDeltaEvent(event));
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
    const value = frameJson(raw);
    // An authentication frame once authenticated (a client that sends one whatever the URL held) is passed over, as the agent-server does.
    if (authKeyIn(value) !== null) return;
    const message = messageOf(value);
    if (!message) {
      this.#refuseMessage('Send a message as {"role":"user","content":[{"type":"text","text":"…"}]}.');
      return;
    }
    this.deps.service.conversations
      .sendMessage(userId, this.conversationId, userMessage(message.text, message.images))
      .then(
        (sent) => {
          if (sent.isErr())
            this.#refuseMessage(
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

  #refuseMessage(error: string): void {
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
