import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AgentConversationService } from '@acs/core';
import type { Logger } from '@acs/core/ports';
import type { ConversationEvent } from '@acs/core/schemas';
import type { Server as SocketIoServer, Socket } from 'socket.io';
import { channelAccess, type Caller } from '../auth/caller.js';
import { openFeed, type Feed } from './feed.js';
import { CLOSE_MESSAGES, type Admitted, type LiveConnections } from './live-connections.js';
import { socketIoOutbound, type Outbound } from './outbound.js';
import { agentStateChanged, agentStateOf, V0EventTranslator, type V0Event } from './v0-events.js';
import { userMessage } from './user-message.js';

export interface V0ChannelDeps {
  service: AgentConversationService;
  /** Who is connecting: from the conversation key the UI puts in the query, else the request's header or session cookie. */
  resolveCaller(req: Socket['request'], conversationKey: string | null): Promise<Caller | null>;
  logger: Logger;
  live: LiveConnections;
  /** The largest message a client may send (the router's body limit: one limit whichever way a message comes). */
  maxMessageBytes: number;
}

/** What the handshake found out, for the connection. */
interface ChannelData {
  caller: Caller;
  conversationId: string;
  outbound: Outbound;
  admission: Admitted;
}

const first = (value: unknown): string | null =>
  Array.isArray(value) ? first(value[0]) : typeof value === 'string' && value !== '' ? value : null;

/** The V0 channel as the router holds it: socket.io and engine.io are loaded at its first request. */
export interface V0Channel {
  /** Takes a long-polling request of the channel (its path is under the channel's). */
  handleRequest(req: IncomingMessage, res: ServerResponse): void;
  /** Takes a WebSocket upgrade of the channel. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Disconnects every socket and stops taking new ones; requests after it are answered 503. */
  close(): void;
}

/**
 * The V0 channel, loaded when it is first used: socket.io and engine.io hold about 11 MiB, and
 * a server that no OpenHands V0 UI talks to never needs them. A load that fails is answered
 * 503 and tried again at the next request.
 */
export function createV0Channel(deps: V0ChannelDeps): V0Channel {
  let loading: Promise<SocketIoServer> | null = null;
  let closed = false;
  const load = () =>
    (loading ??= (async () => {
      const [{ Server: SocketIo }, { Server: Engine }] = await Promise.all([import('socket.io'), import('engine.io')]);
      const io = new SocketIo({ serveClient: false, connectTimeout: deps.live.limits.authDeadlineMs });
      io.bind(new Engine({ maxHttpBufferSize: deps.maxMessageBytes }));
      configureV0Channel(io, deps);
      return io;
    })().catch((error: unknown) => {
      loading = null;
      throw error;
    }));
  const unavailable = (error: unknown) => {
    deps.logger.error(
      { err: error instanceof Error ? error.message : String(error) },
      'could not load socket.io for the V0 channel',
    );
    return 'The realtime channel is not available right now; try again.';
  };
  return {
    handleRequest(req, res) {
      if (closed) {
        res.writeHead(503, { 'Content-Type': 'text/plain' }).end('The server is shutting down.');
        return;
      }
      load().then(
        (io) => io.engine.handleRequest(req, res),
        (error: unknown) => res.writeHead(503, { 'Content-Type': 'text/plain' }).end(unavailable(error)),
      );
    },
    handleUpgrade(req, socket, head) {
      if (closed) {
        socket.destroy();
        return;
      }
      load().then(
        (io) => io.engine.handleUpgrade(req, socket, head),
        (error: unknown) => {
          unavailable(error);
          socket.destroy();
        },
      );
    },
    close() {
      closed = true;
      void loading?.then(
        (io) => {
          io.disconnectSockets(true);
          // socket.io's own close would close the HTTP server too: only the engine here.
          io.engine.close();
        },
        () => undefined,
      );
    },
  };
}

/**
 * The OpenHands V0 realtime channel: socket.io at `<mount>/socket.io`, one socket per
 * conversation (`conversation_id` in the handshake query). On connect it replays the events
 * after `latest_event_id` as `oh_event`s in V0 form, at the pace the client reads, holding the
 * agent-state changes back and sending only the latest one, last (as OpenHands does); then it
 * follows the log live. The client's `oh_user_action`s are messages to the agent, and
 * `change_agent_state` (stop the agent, confirm or reject waiting actions). A client that has
 * not connected to the namespace within the auth deadline, holds more live connections than
 * its user may, or stops reading, is disconnected.
 */
function configureV0Channel(io: SocketIoServer, deps: V0ChannelDeps): void {
  io.use((socket, next) => authorize(deps, socket, next));
  io.on('connection', (socket) => serve(deps, socket));
}

/** The handshake: who connects to which conversation, and whether their user may hold one more live connection. */
function authorize(deps: V0ChannelDeps, socket: Socket, next: (error?: Error) => void): void {
  const conversationId = first(socket.handshake.query.conversation_id);
  if (!conversationId) {
    next(new Error('No conversation_id in the query.'));
    return;
  }
  const key =
    first(socket.handshake.query.session_api_key) ??
    first((socket.handshake.auth as Record<string, unknown>).session_api_key);
  deps.resolveCaller(socket.request, key).then(
    (caller) => {
      const access = channelAccess(caller, key, conversationId);
      if ('refused' in access) {
        next(Object.assign(new Error(access.refused), { data: { msg_id: 'STATUS$ERROR_AUTH' } }));
        return;
      }
      const outbound = socketIoOutbound(socket);
      const admission = deps.live.admit({
        caller: access.caller,
        channel: 'socket.io',
        outbound,
        stillValid: () =>
          deps.resolveCaller(socket.request, key).then((now) => now !== null && now.userId === access.caller.userId),
        close: (reason) => {
          socket.emit('oh_event', { error: true, message: CLOSE_MESSAGES[reason] });
          socket.disconnect(true);
        },
      });
      if ('refused' in admission) {
        next(Object.assign(new Error(admission.refused), { data: { msg_id: 'STATUS$ERROR_TOO_MANY_CONNECTIONS' } }));
        return;
      }
      // However the connection ends (even before it reaches the namespace), it stops counting.
      socket.conn.once('close', admission.release);
      socket.data = { caller: access.caller, conversationId, outbound, admission } satisfies ChannelData;
      next();
    },
    (error: unknown) => next(error instanceof Error ? error : new Error(String(error))),
  );
}

/** A connected socket: the replay after `latest_event_id`, then the live log; what the client sends goes to the conversation. */
function serve(deps: V0ChannelDeps, socket: Socket): void {
  const { caller, conversationId, outbound, admission } = socket.data as ChannelData;
  const userId = caller.userId;
  const latest = Number.parseInt(first(socket.handshake.query.latest_event_id) ?? '-1', 10);
  const after = Number.isFinite(latest) ? latest : -1;
  const translator = new V0EventTranslator();
  const emit = (event: V0Event) => socket.emit('oh_event', event);
  const replay = new V0Replay(after, translator, emit);
  let feed: Feed | null = null;
  let gone = false;

  socket.on('disconnect', () => {
    gone = true;
    feed?.close();
  });

  const failed = (message: string) => {
    socket.emit('oh_event', { error: true, message });
    socket.disconnect(true);
  };
  // No `transient` handler: deltas are not sent here. V0 events (`oh_event`) have no kind for a
  // piece of an answer, and the OpenHands UI that speaks this channel (0.62) renders whole
  // events only; it shows the stored message when it comes, as before.
  void openFeed(
    deps.service,
    userId,
    conversationId,
    0,
    {
      history: (event) => replay.add(event),
      caughtUp: () => replay.finish(),
      live: (event: ConversationEvent) => {
        // Checked before sending, so one event larger than the bound still reaches a client that reads.
        if (admission.tooFarBehind()) {
          deps.logger.warn(
            { conversationId, user: userId, buffered: outbound.pending() },
            'socket.io client is not reading; disconnecting it',
          );
          failed('Disconnected: the client is not reading (too much waits unsent); reconnect to resume.');
          return;
        }
        for (const v0 of translator.translate(event)) emit(v0);
      },
      end: (reason) => failed(`The conversation ended: ${reason}`),
      failed: (failure) =>
        failed(
          failure.type === 'ClientNotReading'
            ? 'Disconnected: the replay made no progress (the client is not reading); reconnect to resume.'
            : 'Storage failed; reconnect to try again.',
        ),
    },
    { outbound, stallMs: deps.live.limits.stallMs, userHasRoom: admission.userHasRoom },
  ).match(
    (opened) => {
      feed = opened;
      if (gone) opened.close();
      else opened.start();
    },
    (error) =>
      failed(
        error.type === 'ConversationNotFound'
          ? `Conversation ${conversationId} was not found.`
          : 'Storage failed; reconnect to try again.',
      ),
  );

  const onUserAction = (action: unknown) => {
    handleUserAction(deps, socket, userId, conversationId, action).catch((error: unknown) => {
      deps.logger.error(
        { conversationId, err: error instanceof Error ? error.message : String(error) },
        'socket.io user action failed',
      );
    });
  };
  socket.on('oh_user_action', onUserAction);
  // The legacy name of the same event.
  socket.on('oh_action', onUserAction);
}

/** An `oh_user_action`: a message to the agent, or a change of its state (stop, run, confirm or reject waiting actions). */
async function handleUserAction(
  deps: V0ChannelDeps,
  socket: Socket,
  userId: string,
  conversationId: string,
  action: unknown,
): Promise<void> {
  const conversations = deps.service.conversations;
  const { action: kind, args } = (action ?? {}) as { action?: unknown; args?: Record<string, unknown> };
  const refuse = (message: string) => socket.emit('oh_event', { error: true, message });
  if (kind === 'message') {
    const text = typeof args?.content === 'string' ? args.content : '';
    const images = Array.isArray(args?.image_urls)
      ? args.image_urls.filter((u): u is string => typeof u === 'string')
      : [];
    const sent = await conversations.sendMessage(userId, conversationId, userMessage(text, images));
    if (sent.isErr())
      refuse(
        sent.error.type === 'ValidationFailed' ? sent.error.message : `The message was not sent (${sent.error.type}).`,
      );
    return;
  }
  if (kind === 'change_agent_state') {
    const state = args?.agent_state;
    const done =
      state === 'stopped' || state === 'paused'
        ? await conversations.pauseAgent(userId, conversationId)
        : state === 'running'
          ? await conversations.runAgent(userId, conversationId)
          : state === 'user_confirmed' || state === 'user_rejected'
            ? await conversations.respondToConfirmation(userId, conversationId, {
                accept: state === 'user_confirmed',
                reason: null,
              })
            : null;
    if (done === null) refuse(`Agent state ${String(state)} cannot be asked for.`);
    else if (done.isErr())
      refuse(
        done.error.type === 'ConfirmationNotPending'
          ? 'No action is waiting for confirmation.'
          : `That did not work (${done.error.type}).`,
      );
    return;
  }
  refuse(`Unknown action ${String(kind)}.`);
}

/**
 * Sends the events after `after`, one by one, agent-state changes held back: only the latest
 * of them is sent, last (`finish`). So that the client's last event id (which it resumes from)
 * is the last id sent, that closing state carries the id of the last event replayed when it is
 * not itself the last. A log with no state change at all (a conversation whose agent has not
 * run yet) still ends with one, `awaiting_user_input`: the UI waits for an agent state before
 * it lets the user type.
 */
class V0Replay {
  #state: V0Event | null = null;
  #anyState = false;
  #lastSent: number;

  constructor(
    private readonly after: number,
    private readonly translator: V0EventTranslator,
    private readonly emit: (event: V0Event) => void,
  ) {
    this.#lastSent = Math.max(after, 0);
  }

  add(event: ConversationEvent): void {
    for (const v0 of this.translator.translate(event)) {
      if (v0.observation === 'agent_state_changed') this.#anyState = true;
      if (event.id <= this.after) continue;
      if (v0.observation === 'agent_state_changed') {
        this.#state = v0;
        continue;
      }
      this.emit(v0);
      this.#lastSent = v0.id;
    }
  }

  finish(): void {
    const state = this.#state;
    if (state) this.emit(state.id >= this.#lastSent ? state : { ...state, id: this.#lastSent });
    else if (!this.#anyState)
      this.emit(agentStateChanged(this.#lastSent, new Date().toISOString(), agentStateOf(null), ''));
  }
}
