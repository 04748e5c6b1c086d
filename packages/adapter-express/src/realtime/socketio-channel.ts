import type { Server as HttpServer } from 'node:http';
import type { AgentConversationService, EventSubscription } from '@acs/core';
import type { Logger } from '@acs/core/ports';
import type { ConversationEvent } from '@acs/core/schemas';
import { Server as SocketIoServer, type Socket } from 'socket.io';
import { channelAccess, type Caller } from '../auth/caller.js';
import { followConversation } from './feed.js';
import { agentStateChanged, agentStateOf, V0EventTranslator, type V0Event } from './v0-events.js';
import { userMessage } from './user-message.js';

export interface V0ChannelDeps {
  service: AgentConversationService;
  /** Who is connecting: from the conversation key the UI puts in the query, else the request's header or session cookie. */
  resolveCaller(req: Socket['request'], conversationKey: string | null): Promise<Caller | null>;
  logger: Logger;
}

const first = (value: unknown): string | null => (Array.isArray(value) ? first(value[0]) : typeof value === 'string' && value !== '' ? value : null);

/**
 * The OpenHands V0 realtime channel: socket.io at `<mount>/socket.io`, one socket per
 * conversation (`conversation_id` in the handshake query). On connect it replays the events
 * after `latest_event_id` as `oh_event`s in V0 form, holding the agent-state changes back and
 * sending only the latest one, last (as OpenHands does); then it follows the log live. The
 * client's `oh_user_action`s are messages to the agent, and `change_agent_state` (stop the
 * agent, confirm or reject waiting actions).
 */
export function attachV0Channel(server: HttpServer, path: string, deps: V0ChannelDeps): SocketIoServer {
  const io = new SocketIoServer(server, { path, serveClient: false, maxHttpBufferSize: 4 * 1024 * 1024, destroyUpgrade: false });
  const { service, logger } = deps;

  io.use((socket, next) => {
    const conversationId = first(socket.handshake.query.conversation_id);
    if (!conversationId) {
      next(new Error('No conversation_id in the query.'));
      return;
    }
    const key = first(socket.handshake.query.session_api_key) ?? first((socket.handshake.auth as Record<string, unknown>).session_api_key);
    deps.resolveCaller(socket.request, key).then(
      (caller) => {
        const access = channelAccess(caller, key, conversationId);
        if ('refused' in access) {
          next(Object.assign(new Error(access.refused), { data: { msg_id: 'STATUS$ERROR_AUTH' } }));
          return;
        }
        socket.data = { caller: access.caller, conversationId };
        next();
      },
      (error: unknown) => next(error instanceof Error ? error : new Error(String(error))),
    );
  });

  io.on('connection', (socket) => {
    const { caller, conversationId } = socket.data as { caller: Caller; conversationId: string };
    const userId = caller.userId;
    const latest = Number.parseInt(first(socket.handshake.query.latest_event_id) ?? '-1', 10);
    const after = Number.isFinite(latest) ? latest : -1;
    const translator = new V0EventTranslator();
    const emit = (event: V0Event) => socket.emit('oh_event', event);
    let subscription: EventSubscription | null = null;
    let gone = false;

    socket.on('disconnect', () => {
      gone = true;
      subscription?.close();
    });

    void followConversation(service, userId, conversationId, {
      history: (events) => replay(events, after, translator, emit),
      live: (event: ConversationEvent) => {
        for (const v0 of translator.translate(event)) emit(v0);
      },
      end: (reason) => {
        socket.emit('oh_event', { error: true, message: `The conversation ended: ${reason}` });
        socket.disconnect(true);
      },
    }).match(
      (opened) => {
        subscription = opened;
        if (gone) opened.close();
      },
      (error) => {
        socket.emit('oh_event', { error: true, message: error.type === 'ConversationNotFound' ? `Conversation ${conversationId} was not found.` : 'Storage failed; reconnect to try again.' });
        socket.disconnect(true);
      },
    );

    const onUserAction = (action: unknown) => {
      handleUserAction(action).catch((error: unknown) => {
        logger.error({ conversationId, err: error instanceof Error ? error.message : String(error) }, 'socket.io user action failed');
      });
    };
    socket.on('oh_user_action', onUserAction);
    // The legacy name of the same event.
    socket.on('oh_action', onUserAction);

    async function handleUserAction(action: unknown): Promise<void> {
      const { action: kind, args } = (action ?? {}) as { action?: unknown; args?: Record<string, unknown> };
      const refuse = (message: string) => socket.emit('oh_event', { error: true, message });
      if (kind === 'message') {
        const text = typeof args?.content === 'string' ? args.content : '';
        const images = Array.isArray(args?.image_urls) ? args.image_urls.filter((u): u is string => typeof u === 'string') : [];
        const sent = await service.conversations.sendMessage(userId, conversationId, userMessage(text, images));
        if (sent.isErr()) refuse(sent.error.type === 'ValidationFailed' ? sent.error.message : `The message was not sent (${sent.error.type}).`);
        return;
      }
      if (kind === 'change_agent_state') {
        const state = args?.agent_state;
        const done =
          state === 'stopped' || state === 'paused'
            ? await service.conversations.pauseAgent(userId, conversationId)
            : state === 'running'
              ? await service.conversations.runAgent(userId, conversationId)
              : state === 'user_confirmed' || state === 'user_rejected'
                ? await service.conversations.respondToConfirmation(userId, conversationId, { accept: state === 'user_confirmed', reason: null })
                : null;
        if (done === null) refuse(`Agent state ${String(state)} cannot be asked for.`);
        else if (done.isErr()) refuse(done.error.type === 'ConfirmationNotPending' ? 'No action is waiting for confirmation.' : `That did not work (${done.error.type}).`);
        return;
      }
      refuse(`Unknown action ${String(kind)}.`);
    }
  });
  return io;
}

/**
 * Sends the events after `after`, agent-state changes held back: only the latest of them is
 * sent, last. So that the client's last event id (which it resumes from) is the last id sent,
 * that closing state carries the id of the last event replayed when it is not itself the last.
 * A log with no state change at all (a conversation whose agent has not run yet) still ends
 * with one, `awaiting_user_input`: the UI waits for an agent state before it lets the user type.
 */
function replay(events: readonly ConversationEvent[], after: number, translator: V0EventTranslator, emit: (event: V0Event) => void): void {
  let state: V0Event | null = null;
  let anyState = false;
  let lastSent = Math.max(after, 0);
  for (const event of events) {
    for (const v0 of translator.translate(event)) {
      if (v0.observation === 'agent_state_changed') anyState = true;
      if (event.id <= after) continue;
      if (v0.observation === 'agent_state_changed') {
        state = v0;
        continue;
      }
      emit(v0);
      lastSent = v0.id;
    }
  }
  if (state) emit(state.id >= lastSent ? state : { ...state, id: lastSent });
  else if (!anyState) emit(agentStateChanged(lastSent, new Date().toISOString(), agentStateOf(null), ''));
}
