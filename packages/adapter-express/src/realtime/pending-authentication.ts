import type { Duplex } from 'node:stream';
import type { RawData, WebSocket } from 'ws';

/** A frame as ws delivers it. */
export interface Frame {
  data: RawData;
  isBinary: boolean;
}

/** The limits a WebSocket lives under until it has proved who it is. */
export interface PendingLimits {
  /** How long the first frame may take to arrive. */
  authFrameMs: number;
  /** The most bytes of frames read before authentication (the authentication frame's payload). */
  maxAuthFrameBytes: number;
}

/**
 * A WebSocket that has not authenticated yet. What it may cost is bounded by bytes, not by
 * frames: at most `maxAuthFrameBytes` (and the frames' headers) are read from its socket, and a
 * client that sends more is cut off at once (the socket destroyed, nothing it sent kept). Its
 * frames are held until `authenticated()` hands them over.
 */
export interface PendingAuthentication {
  /**
   * The key of the first frame when it is the authentication frame the OpenHands agent-server
   * takes (`{"type":"auth","session_api_key":"…"}`, as SDK 1.58 sends it on a socket opened
   * without a key); null for any other frame, or none within `authFrameMs`. The frame is used up.
   */
  authFrame(): Promise<string | null>;
  /**
   * The connection proved who it is: its bytes are no longer counted, its place among its
   * address's unauthenticated connections is given back, and the frames that came meanwhile are
   * handed over in order. Attach the connection's own message listener in the same turn.
   */
  authenticated(): Frame[];
  /** The connection will not authenticate (it is being closed): give its place back, keep nothing it sends. */
  abandon(): void;
}

/** Room for the headers of a few frames besides their payload (2 to 14 bytes each). */
const FRAME_HEADER_ROOM = 64;

/**
 * Starts counting a WebSocket's incoming bytes from its handshake on. `leave` gives the
 * connection's place among its address's unauthenticated ones back; it is called once, when
 * the connection authenticates, is abandoned, or closes.
 */
export function pendingAuthentication(
  ws: WebSocket,
  socket: Duplex,
  limits: PendingLimits,
  leave: () => void,
): PendingAuthentication {
  let read = 0;
  let held: Frame[] | null = [];
  let waiter: ((frame: Frame | null) => void) | null = null;
  const budget = limits.maxAuthFrameBytes + FRAME_HEADER_ROOM;
  const onData = (chunk: Buffer) => {
    read += chunk.length;
    if (read > budget) socket.destroy();
  };
  const onMessage = (data: RawData, isBinary: boolean) => {
    if (held === null) return;
    const take = waiter;
    waiter = null;
    if (take) take({ data, isBinary });
    else held.push({ data, isBinary });
  };
  // No more frames are held or waited for, and the address's place is given back (bytes may still be counted).
  const release = () => {
    ws.off('message', onMessage);
    waiter?.(null);
    leave();
  };
  socket.on('data', onData);
  ws.on('message', onMessage);
  ws.once('close', () => {
    socket.off('data', onData);
    release();
  });
  return {
    authFrame: async () => {
      const frame = held?.shift() ?? (held === null ? null : await nextFrame(limits.authFrameMs, (w) => (waiter = w)));
      waiter = null;
      return frame ? authKeyOf(frame) : null;
    },
    authenticated: () => {
      const frames = held ?? [];
      held = null;
      socket.off('data', onData);
      release();
      return frames;
    },
    abandon: () => {
      held = null;
      // Still closing: whatever comes now is dropped, and its bytes still counted, so it cannot run on.
      release();
    },
  };
}

/** The next frame, or null after `ms`. */
function nextFrame(ms: number, listen: (waiter: (frame: Frame | null) => void) => void): Promise<Frame | null> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(null), ms);
    timer.unref();
    listen((frame) => {
      clearTimeout(timer);
      resolve(frame);
    });
  });
}

/** The key of an authentication frame (`{"type":"auth","session_api_key":"…"}`), or null. */
function authKeyOf(frame: Frame): string | null {
  return frame.isBinary ? null : authKeyIn(frameJson(frame.data));
}

/** The key of a parsed authentication frame, or null for any other value. */
export function authKeyIn(value: unknown): string | null {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return null;
  const { type, session_api_key: key } = value as Record<string, unknown>;
  return type === 'auth' && typeof key === 'string' && key !== '' ? key : null;
}

/** A text frame's JSON, or null when it is not JSON. */
export function frameJson(raw: RawData): unknown {
  const text = (Buffer.isBuffer(raw) ? raw : Array.isArray(raw) ? Buffer.concat(raw) : Buffer.from(raw)).toString(
    'utf8',
  );
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
