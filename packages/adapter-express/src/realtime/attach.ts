import type { IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AgentConversationService } from '@acs/core';
import type { Logger } from '@acs/core/ports';
import type { Caller } from '../auth/caller.js';
import type { SandboxProxy } from '../sandbox-proxy.js';
import { createV1Channel } from './agent-server-channel.js';
import type { LiveConnections } from './live-connections.js';
import { createV0Channel } from './socketio-channel.js';
import { decodeSegment, isUnder, refuseUpgrade, requestTarget } from './upgrades.js';

export interface RealtimeChannels {
  /** Ends every open channel (clients reconnect and resume) and stops taking new ones. */
  close(): Promise<void>;
}

export interface RealtimeDeps {
  service: AgentConversationService;
  resolveCaller(req: IncomingMessage, conversationKey: string | null): Promise<Caller | null>;
  logger: Logger;
  live: LiveConnections;
  maxMessageBytes: number;
  /** Takes the upgrades of sandboxes' exposed URLs (by their host names). */
  sandboxProxy: SandboxProxy;
  /** Who a connection comes from, for the limit of unauthenticated connections per address. */
  clientAddressOf(req: IncomingMessage): string;
}

/**
 * Adds the OpenHands UI's realtime channels to an HTTP server: socket.io (V0) at
 * `<mount>/socket.io` and the agent-server event socket (V1) at `<mount>/sockets/events/<id>`.
 *
 * Every upgrade request passes one guard first, whatever its URL or headers: a target that is
 * not a plain path, or a conversation id that is not valid percent-encoding, is answered 400
 * and closed; an upgrade for a path no channel serves is answered 404, unless the host listens
 * for upgrades itself (then it is the host's). A socket error during any of it ends only that
 * connection.
 */
export function attachRealtime(server: HttpServer, mountPath: string, deps: RealtimeDeps): RealtimeChannels {
  const mount = mountPath.replace(/\/+$/, '');
  const socketIoPath = `${mount}/socket.io`;
  const v1Prefix = `${mount}/sockets/events`;
  const v0 = createV0Channel(deps);
  const v1 = createV1Channel(deps);

  // socket.io's long polling comes as plain requests: they are taken before the host's listeners see them.
  const hostRequestListeners = server.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
  server.removeAllListeners('request');
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (req.url?.startsWith(`${socketIoPath}/`)) {
      v0.handleRequest(req, res);
      return;
    }
    for (const listener of hostRequestListeners) listener.call(server, req, res);
  });

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // A reset while the request is looked at must not become an unhandled 'error'.
    socket.on('error', (error: Error) => deps.logger.debug({ err: error.message }, 'upgrade socket error'));
    if (deps.sandboxProxy.claims(req)) {
      deps.sandboxProxy.upgrade(req, socket, head);
      return;
    }
    const target = requestTarget(req.url);
    if (!target) {
      refuseUpgrade(socket, 400, 'The request target must be a path (/…).');
      return;
    }
    if (target.path.startsWith(`${socketIoPath}/`)) {
      v0.handleUpgrade(req, socket, head);
      return;
    }

    if (isUnder(target.path, v1Prefix)) {
      const id = decodeSegment(target.path.slice(v1Prefix.length + 1).replace(/\/$/, ''));
      if (id === null || id === '' || id.includes('/')) {
        refuseUpgrade(socket, 400, 'Open /sockets/events/<conversation id>; the id in this path is not valid.');
        return;
      }
      v1.handleUpgrade(req, socket, head, id, target.query);
      return;
    }
    const hostListens = server.listeners('upgrade').some((l) => l !== onUpgrade);
    if (!hostListens) refuseUpgrade(socket, 404, `No channel is served at ${target.path.slice(0, 200)}.`);
  };
  server.on('upgrade', onUpgrade);

  let closing: Promise<void> | null = null;
  return {
    close: () =>
      (closing ??= Promise.resolve().then(() => {
        server.off('upgrade', onUpgrade);
        deps.live.closeAll();
        v1.close();
        deps.sandboxProxy.close();
        v0.close();
      })),
  };
}
