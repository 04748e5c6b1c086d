import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { isSandboxKey } from '@acs/core';
import type { Logger } from '@acs/core/ports';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import { pendingAuthentication, type Frame, type PendingLimits } from './realtime/pending-authentication.js';

/**
 * A WebSocket to a sandbox's exposed URL opened with no key at all (the OpenHands SDK 1.58 opens
 * `/sockets/events/{id}` so and authenticates with its first frame). The agent-server would take
 * such a socket and wait for that frame, holding whatever a stranger sends meanwhile; so this
 * side takes the socket instead, reads only the authentication frame (bounded in bytes and
 * time: pending-authentication.ts), checks its key against the sandbox's, and only then opens
 * the sandbox's socket with the key in a header (as for a socket opened with the key) and relays
 * messages both ways. Nothing of a client that does not authenticate reaches the sandbox.
 *
 * Why a relay of messages rather than the raw bytes: the client's WebSocket handshake is
 * answered here before the sandbox is asked, so the two connections are two WebSockets; `ws`
 * relays their messages (text or binary as sent; pings are answered on each side). A client
 * or sandbox that does not read makes the other side wait (its socket is paused), so neither
 * piles up in this process.
 */
interface KeylessSocket {
  req: IncomingMessage;
  socket: Duplex;
  head: Buffer;
  /** The sandbox's server, `http://host:port`, and its key (which the authentication frame must hold). */
  target: string;
  sessionApiKey: string;
  /** Gives the connection's place among its address's unauthenticated ones back. */
  leave: () => void;
}

export interface SocketRelay {
  take(keyless: KeylessSocket): void;
  /** Ends every relayed socket. */
  close(): void;
}

/** The agent-server's own limit of one message (uvicorn's default `ws_max_size`, 16 MiB). */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
/** A side that lets more than this wait unsent pauses the other until it drains below half. */
const HIGH_WATER_BYTES = 1024 * 1024;

export function createSocketRelay(limits: PendingLimits, logger: Logger): SocketRelay {
  const server = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MAX_MESSAGE_BYTES });
  const open = new Set<WebSocket>();
  return {
    take: (keyless) =>
      server.handleUpgrade(keyless.req, keyless.socket, keyless.head, (client) => {
        open.add(client);
        client.once('close', () => open.delete(client));
        void authenticateThenRelay(client, keyless, limits, logger, open);
      }),
    close: () => {
      for (const socket of open) socket.terminate();
      open.clear();
      server.close();
    },
  };
}

async function authenticateThenRelay(
  client: WebSocket,
  keyless: KeylessSocket,
  limits: PendingLimits,
  logger: Logger,
  open: Set<WebSocket>,
): Promise<void> {
  client.on('error', (error) => logger.debug({ err: error.message }, 'sandbox socket: client error'));
  const pending = pendingAuthentication(client, keyless.socket, limits, keyless.leave);
  const key = await pending.authFrame();
  if (client.readyState !== WebSocket.OPEN) return;
  if (key === null || !isSandboxKey({ session_api_key: keyless.sessionApiKey }, key)) {
    pending.abandon();
    // The agent-server's own answer to a first frame that does not authenticate.
    client.close(4001, 'Authentication failed');
    return;
  }
  const early = pending.authenticated();
  // Until the sandbox's socket is open the client's frames wait in its socket, not here.
  client.pause();
  const queued: Frame[] = [...early];
  const queue = (data: RawData, isBinary: boolean) => queued.push({ data, isBinary });
  client.on('message', queue);
  const upstream = new WebSocket(`${keyless.target.replace(/^http/, 'ws')}${keyless.req.url ?? '/'}`, {
    headers: { 'x-session-api-key': keyless.sessionApiKey },
    perMessageDeflate: false,
    maxPayload: MAX_MESSAGE_BYTES,
  });
  open.add(upstream);
  upstream.once('close', () => open.delete(upstream));
  upstream.on('error', (error) => {
    logger.warn({ err: error.message }, 'sandbox socket: the sandbox did not take the WebSocket');
    if (client.readyState === WebSocket.OPEN) client.close(1011, 'the sandbox did not take the WebSocket');
  });
  const endUpstream = () => upstream.terminate();
  client.once('close', endUpstream);
  upstream.once('open', () => {
    client.off('message', queue);
    client.off('close', endUpstream);
    for (const frame of queued.splice(0)) upstream.send(frame.data, { binary: frame.isBinary });
    relay(client, upstream);
    relay(upstream, client);
    client.resume();
  });
}

/** Sends `from`'s messages on to `to`, pausing `from` while too much waits for `to`, and ends `to` when `from` ends. */
function relay(from: WebSocket, to: WebSocket): void {
  let waiting = 0;
  from.on('message', (data: RawData, isBinary: boolean) => {
    if (to.readyState !== WebSocket.OPEN) return;
    const size = byteLength(data);
    waiting += size;
    if (waiting > HIGH_WATER_BYTES) from.pause();
    to.send(data, { binary: isBinary }, () => {
      waiting -= size;
      if (waiting <= HIGH_WATER_BYTES / 2 && from.isPaused) from.resume();
    });
  });
  from.once('close', (code: number, reason: Buffer) => {
    if (to.readyState !== WebSocket.OPEN) return;
    // 1005 (no code) and 1006 (no close frame) cannot be sent: the other side just ends.
    if (code === 1005 || code === 1006 || code === 1015) to.close();
    else to.close(code, reason);
  });
}

const byteLength = (data: RawData) =>
  Buffer.isBuffer(data)
    ? data.length
    : Array.isArray(data)
      ? data.reduce((sum, part) => sum + part.length, 0)
      : data.byteLength;
