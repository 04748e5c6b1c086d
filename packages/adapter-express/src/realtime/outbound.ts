import type { Duplex } from 'node:stream';
import type { Socket as SocketIoSocket } from 'socket.io';
import type { WebSocket } from 'ws';

/**
 * What a live connection has sent that still waits in this process (not yet handed to the
 * kernel), so a channel can wait for a slow client during a replay and cut off one that stops
 * reading, instead of holding whatever it is sent.
 */
export interface Outbound {
  /** Bytes sent on the connection and not yet written out. */
  pending(): number;
  /** Resolves on a sign of progress (something was written out) or after `ms`, whichever is first. */
  progress(ms: number): Promise<void>;
  isOpen(): boolean;
}

/** A replay sends on while less than this waits unsent. */
export const LOW_WATER_BYTES = 256 * 1024;
/** How often a wait looks again when no progress event came. */
const RECHECK_MS = 250;

/** How a replay paces itself: by its own client, and by what its user's connections together hold. */
export interface Pacing {
  outbound: Outbound;
  /** How long a replay waits for a client that takes nothing before giving up on it. */
  stallMs: number;
  /** Whether the user's connections together leave room for more (a replay waits while they do not; that is not this client's stall). */
  readonly userHasRoom: () => boolean;
}

/**
 * Waits until less than the low-water mark waits unsent and the user has room. False when the
 * connection closed, or its client took nothing for `stallMs` (the caller drops it; the client
 * resumes later).
 */
export async function drained(pacing: Pacing): Promise<boolean> {
  const out = pacing.outbound;
  let last = out.pending();
  let since = Date.now();
  while (out.isOpen()) {
    const now = out.pending();
    if (now <= LOW_WATER_BYTES) {
      if (pacing.userHasRoom()) return true;
      // Waiting for the user's other connections is not this client's stall.
      since = Date.now();
    } else if (now < last) {
      since = Date.now();
    } else if (Date.now() - since > pacing.stallMs) return false;
    last = now;
    await out.progress(RECHECK_MS);
  }
  return false;
}

/** Resolves when `emitter` emits one of `events`, or after `ms`. */
function firstOf(
  emitters: readonly { once(event: string, fn: () => void): unknown; off(event: string, fn: () => void): unknown }[],
  event: string,
  ms: number,
): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      for (const emitter of emitters) emitter.off(event, done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    for (const emitter of emitters) emitter.once(event, done);
  });
}

/** The agent-server WebSocket: `bufferedAmount` is what waits; the upgraded TCP socket says when it drained. */
export function webSocketOutbound(ws: WebSocket, socket: Duplex): Outbound {
  return {
    pending: () => ws.bufferedAmount,
    progress: (ms) => firstOf([socket], 'drain', ms),
    isOpen: () => ws.readyState === ws.OPEN,
  };
}

/** An HTTP response (an event stream): what its buffers hold; it emits `drain` when they empty. */
export function httpResponseOutbound(
  res: {
    readonly writableLength: number;
    once(event: string, fn: () => void): unknown;
    off(event: string, fn: () => void): unknown;
  },
  isOpen: () => boolean,
): Outbound {
  return {
    pending: () => res.writableLength,
    progress: (ms) => firstOf([res], 'drain', ms),
    isOpen,
  };
}

/** engine.io's public view of its connection: what its events carry. */
interface EnginePacket {
  data?: unknown;
}
interface EngineTransportView {
  on(event: 'drain', fn: () => void): unknown;
  off(event: 'drain', fn: () => void): unknown;
  once(event: string, fn: () => void): unknown;
}
interface EngineConnectionView {
  transport: EngineTransportView;
  on(event: 'packetCreate', fn: (packet: EnginePacket) => void): unknown;
  on(event: 'flush', fn: (buffer: EnginePacket[]) => void): unknown;
  on(event: 'upgrade', fn: () => void): unknown;
  on(event: 'close', fn: () => void): unknown;
}

const sizeOf = (packet: EnginePacket) =>
  typeof packet.data === 'string' ? packet.data.length : packet.data instanceof Uint8Array ? packet.data.byteLength : 0;

/**
 * A socket.io connection, counted from engine.io's own events: every packet created is
 * waiting until the transport reports (with `drain`) that what was flushed to it before was
 * written out. The count follows the connection across a transport upgrade.
 */
export function socketIoOutbound(socket: SocketIoSocket): Outbound {
  const conn = socket.conn as unknown as EngineConnectionView;
  let created = 0;
  let flushed = 0;
  let written = 0;
  let transport: EngineTransportView | null = null;
  const onDrain = () => {
    written = flushed;
  };
  const bind = () => {
    transport?.off('drain', onDrain);
    transport = conn.transport;
    transport.on('drain', onDrain);
  };
  conn.on('packetCreate', (packet) => {
    created += sizeOf(packet);
  });
  conn.on('flush', (buffer) => {
    for (const packet of buffer) flushed += sizeOf(packet);
  });
  conn.on('upgrade', bind);
  conn.on('close', () => transport?.off('drain', onDrain));
  bind();
  return {
    pending: () => created - written,
    progress: (ms) => firstOf([conn.transport], 'drain', ms),
    isOpen: () => socket.connected,
  };
}
