import type { Server as HttpServer } from 'node:http';
import type { AgentConversationService } from '@acs/core';
import type { Logger } from '@acs/core/ports';
import type { Caller } from '../auth/caller.js';
import { attachV1Channel } from './agent-server-channel.js';
import { attachV0Channel } from './socketio-channel.js';

export interface RealtimeChannels {
  /** Ends every open channel (clients reconnect and resume) and stops taking new ones. */
  close(): Promise<void>;
}

export interface RealtimeDeps {
  service: AgentConversationService;
  resolveCaller(req: Parameters<Parameters<typeof attachV1Channel>[2]['resolveCaller']>[0], conversationKey: string | null): Promise<Caller | null>;
  logger: Logger;
}

/**
 * Adds the OpenHands UI's realtime channels to an HTTP server: socket.io (V0) at
 * `<mount>/socket.io` and the agent-server event socket (V1) at `<mount>/sockets/events/<id>`.
 */
export function attachRealtime(server: HttpServer, mountPath: string, deps: RealtimeDeps): RealtimeChannels {
  const mount = mountPath.replace(/\/+$/, '');
  const io = attachV0Channel(server, `${mount}/socket.io`, deps);
  const v1 = attachV1Channel(server, `${mount}/sockets/events/`, deps);
  let closing: Promise<void> | null = null;
  return {
    close: () =>
      (closing ??= (async () => {
        v1.close();
        io.disconnectSockets(true);
        await new Promise<void>((resolve) => {
          // socket.io's close also closes the HTTP server it is attached to: only detach here.
          io.engine.close();
          resolve();
        });
      })()),
  };
}
