import type { IncomingMessage, Server as HttpServer } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AgentConversationService, EventSubscription } from '@acs/core';
import type { Logger } from '@acs/core/ports';
import { WebSocketServer, type WebSocket } from 'ws';
import { channelAccess, type Caller } from '../auth/caller.js';
import { followConversation } from './feed.js';
import { userMessage } from './user-message.js';
import { agentError, stateUpdate, V1EventTranslator } from './v1-events.js';

export interface V1ChannelDeps {
  service: AgentConversationService;
  /** Who is connecting: from the conversation key in the query, else the request's header or session cookie. */
  resolveCaller(req: IncomingMessage, conversationKey: string | null): Promise<Caller | null>;
  logger: Logger;
}

/** Close codes of the agent-server's socket. */
const CLOSE_UNAUTHENTICATED = 4001;
const CLOSE_NOT_FOUND = 4004;

/** What the UI writes to send a message: `{role: "user", content: [{type: "text", text} | {type: "image_url", image_url: {url}}]}`. */
function messageOf(data: unknown): { text: string; images: string[] } | null {
  const frame = data as { role?: unknown; content?: unknown } | null;
  if (!frame || frame.role !== 'user' || !Array.isArray(frame.content)) return null;
  const parts = frame.content as { type?: unknown; text?: unknown; image_url?: { url?: unknown }; image_urls?: unknown }[];
  const text = parts.filter((p) => p.type === 'text' && typeof p.text === 'string').map((p) => p.text as string).join('\n\n');
  const images = parts.flatMap((p) =>
    p.type === 'image_url' && typeof p.image_url?.url === 'string' ? [p.image_url.url] : p.type === 'image' && Array.isArray(p.image_urls) ? p.image_urls.filter((u): u is string => typeof u === 'string') : [],
  );
  return { text, images };
}

/**
 * The OpenHands agent-server's event socket, which the UI opens in V1 mode:
 * `<mount>/sockets/events/<conversation id>?resend_all=true&session_api_key=…`. Frames are
 * agent-server events (see v1-events.ts); with `resend_all` the whole history comes first, then
 * each new event. A frame the client sends is a user message that runs the agent. Unknown
 * key: close 4001; unknown conversation: close 4004.
 */
export function attachV1Channel(server: HttpServer, prefix: string, deps: V1ChannelDeps): { close(): void } {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 4 * 1024 * 1024 });
  const { service, logger } = deps;

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://local');
    if (!url.pathname.startsWith(prefix)) return;
    const conversationId = decodeURIComponent(url.pathname.slice(prefix.length)).replace(/\/$/, '');
    wss.handleUpgrade(req, socket, head, (ws) => {
      open(ws, req, conversationId, url.searchParams).catch((error: unknown) => {
        logger.error({ conversationId, err: error instanceof Error ? error.message : String(error) }, 'agent-server socket failed');
        ws.close(1011, 'internal error');
      });
    });
  };
  server.on('upgrade', onUpgrade);

  async function open(ws: WebSocket, req: IncomingMessage, conversationId: string, query: URLSearchParams): Promise<void> {
    const key = query.get('session_api_key') || null;
    const access = channelAccess(await deps.resolveCaller(req, key), key, conversationId);
    if ('refused' in access) {
      ws.close(CLOSE_UNAUTHENTICATED, 'not authenticated for this conversation');
      return;
    }
    const userId = access.caller.userId;
    const resendAll = /^(true|1)$/i.test(query.get('resend_all') ?? '');
    const translator = new V1EventTranslator();
    const send = (frame: unknown) => {
      if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(frame));
    };
    const refuse = (error: string) => send(agentError(`refused-${Date.now()}`, new Date().toISOString(), error));
    let subscription: EventSubscription | null = null;
    let closed = false;
    ws.on('close', () => {
      closed = true;
      subscription?.close();
    });
    ws.on('message', (raw: Buffer) => {
      let data: unknown;
      try {
        data = JSON.parse(raw.toString('utf8'));
      } catch {
        data = null;
      }
      const message = messageOf(data);
      if (!message) {
        refuse('Send a message as {"role":"user","content":[{"type":"text","text":"…"}]}.');
        return;
      }
      service.conversations.sendMessage(userId, conversationId, userMessage(message.text, message.images)).then(
        (sent) => {
          if (sent.isErr()) refuse(sent.error.type === 'ValidationFailed' ? sent.error.message : `The message was not sent (${sent.error.type}).`);
        },
        (error: unknown) => logger.error({ conversationId, err: error instanceof Error ? error.message : String(error) }, 'agent-server socket message failed'),
      );
    });

    const opened = await followConversation(service, userId, conversationId, {
      history: (events) => {
        for (const event of events) for (const frame of translator.translate(event)) if (resendAll) send(frame);
      },
      live: (event) => {
        for (const frame of translator.translate(event)) send(frame);
      },
      end: () => ws.close(CLOSE_NOT_FOUND, 'the conversation was deleted'),
    });
    if (opened.isErr()) {
      ws.close(opened.error.type === 'ConversationNotFound' ? CLOSE_NOT_FOUND : 1011, opened.error.type === 'ConversationNotFound' ? 'conversation not found' : 'storage failed');
      return;
    }
    subscription = opened.value;
    if (closed) {
      subscription.close();
      return;
    }
    // The whole state, as the agent-server sends on connect; an agent that has not run yet is idle.
    const current = await service.conversations.get(userId, conversationId);
    const status = current.isOk() ? (current.value.record.execution_status ?? 'idle') : null;
    if (status) send(stateUpdate(`state-${subscription.lastId}`, new Date().toISOString(), status, 'full_state'));
  }

  return {
    close: () => {
      server.off('upgrade', onUpgrade);
      for (const client of wss.clients) client.close(1001, 'the server is shutting down');
      wss.close();
    },
  };
}
