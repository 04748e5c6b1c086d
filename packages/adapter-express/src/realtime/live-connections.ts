import type { Logger } from '@acs/core/ports';
import type { Caller } from '../auth/caller.js';
import { LOW_WATER_BYTES, type Outbound } from './outbound.js';

/** The bounds every live channel (SSE, socket.io, the agent-server WebSocket) shares. */
export interface LiveChannelLimits {
  /** Live connections one user may hold at once, over every channel, in this process (default 32). */
  maxPerUser?: number;
  /**
   * A connection whose client lets more than this wait unsent is dropped (default 8 MiB); it
   * resumes from its last event. A replay waits for the client instead of piling up.
   */
  maxBufferedBytes?: number;
  /**
   * What one user's connections together may let wait unsent (default 32 MiB): past it their
   * replays wait, and a connection that is behind is dropped rather than sent more.
   */
  maxBufferedBytesPerUser?: number;
  /** A replay that waits this long for a client that takes nothing gives up and closes the connection (default 60 s). */
  stallMs?: number;
  /** A connection that has not proved who it is after this long is closed (default 10 s). */
  authDeadlineMs?: number;
  /**
   * A WebSocket that opened with no credentials proves who it is in its first frame, as the
   * OpenHands SDK 1.58 does (`{"type":"auth","session_api_key":…}`): that frame must come
   * within this long (default 5 s) …
   */
  authFrameMs?: number;
  /**
   * … and be at most this large (default 4 KiB). Until a connection is authenticated, nothing
   * more than this (and the frame's header) is read from it: a client that sends more, or
   * anything but the authentication frame, is closed and nothing it sent is kept.
   */
  maxAuthFrameBytes?: number;
  /**
   * Connections from one client address (an IPv6 /64) that have not authenticated yet, at once
   * (default 8); past it a new one is refused with 429 before the WebSocket opens.
   */
  maxUnauthenticatedPerAddress?: number;
  /**
   * How often each connection's credentials are checked again (default 1 s): a session that
   * ended (signed out elsewhere, expired) or a key the host no longer accepts closes its
   * connections. Sign-out in this process closes them at once.
   */
  recheckMs?: number;
}

export type ResolvedLiveChannelLimits = Required<LiveChannelLimits>;

export function resolveLiveChannelLimits(limits: LiveChannelLimits = {}): ResolvedLiveChannelLimits {
  const given = Object.fromEntries(Object.entries(limits).filter(([, value]) => value !== undefined));
  const resolved = {
    maxPerUser: 32,
    maxBufferedBytes: 8 * 1024 * 1024,
    maxBufferedBytesPerUser: 32 * 1024 * 1024,
    stallMs: 60_000,
    authDeadlineMs: 10_000,
    authFrameMs: 5_000,
    maxAuthFrameBytes: 4096,
    maxUnauthenticatedPerAddress: 8,
    recheckMs: 1_000,
    ...given,
  };
  for (const [name, value] of Object.entries(resolved)) {
    if (!(Number.isFinite(value) && value > 0)) throw new Error(`liveChannels.${name} must be a positive number.`);
  }
  return resolved;
}

/** One open live connection, as the registry sees it. */
export interface LiveConnection {
  readonly caller: Caller;
  /** What the channel is, for the log ('sse', 'socket.io', 'websocket'). */
  readonly channel: string;
  /** What the connection has sent that waits unsent. */
  readonly outbound: Outbound;
  /** Whether the credentials the connection opened with would still be accepted now. */
  stillValid(): Promise<boolean>;
  /** Ends the connection, telling the client why. */
  close(reason: LiveCloseReason): void;
}

/** Why the registry closes a connection; each has a sentence for the client in `CLOSE_MESSAGES`. */
export type LiveCloseReason = 'signed_out' | 'revoked' | 'shutting_down';

export const CLOSE_MESSAGES: Record<LiveCloseReason, string> = {
  signed_out: 'signed out: sign in again to reconnect',
  revoked: 'the credentials of this connection are no longer valid',
  shutting_down: 'the server is shutting down; reconnect in a moment',
};

/** An admitted connection: how it paces itself among its user's others, and how it stops counting. */
export interface Admitted {
  /** Whether the user's connections together leave room for more to be sent (a replay waits while they do not). */
  readonly userHasRoom: () => boolean;
  /** Whether this connection should be dropped rather than sent more: too much waits for it, or for its user while it is behind too. */
  readonly tooFarBehind: () => boolean;
  readonly release: () => void;
}

export type Admission = Admitted | { refused: string };

/**
 * The live connections of one router: at most `maxPerUser` per user, closed when their
 * credentials stop being valid (sign-out at once, anything else within `recheckMs`), and all
 * closed at shutdown.
 */
export class LiveConnections {
  readonly limits: ResolvedLiveChannelLimits;
  readonly #logger: Logger;
  readonly #open = new Set<LiveConnection>();
  readonly #perUser = new Map<string, Set<LiveConnection>>();
  /** Connections not yet authenticated, by client address group. */
  readonly #unauthenticated = new Map<string, number>();
  #timer: NodeJS.Timeout | null = null;
  #checking = false;

  constructor(limits: ResolvedLiveChannelLimits, logger: Logger) {
    this.limits = limits;
    this.#logger = logger;
  }

  /** Counts the connection against its user's limit, or says why it may not open. */
  admit(connection: LiveConnection): Admission {
    const userId = connection.caller.userId;
    const held = this.#perUser.get(userId) ?? new Set<LiveConnection>();
    if (held.size >= this.limits.maxPerUser) {
      this.#logger.warn(
        { user: userId, channel: connection.channel, held: held.size },
        'live connection refused: the user holds the most allowed',
      );
      return {
        refused: `too many live connections for this user (at most ${this.limits.maxPerUser}); close one first`,
      };
    }
    held.add(connection);
    this.#perUser.set(userId, held);
    this.#open.add(connection);
    this.#startChecking();
    const userHasRoom = () => {
      let waiting = 0;
      for (const other of held) waiting += other.outbound.pending();
      return waiting <= this.limits.maxBufferedBytesPerUser;
    };
    let released = false;
    return {
      userHasRoom,
      tooFarBehind: () => {
        const own = connection.outbound.pending();
        return own > this.limits.maxBufferedBytes || (own > LOW_WATER_BYTES && !userHasRoom());
      },
      release: () => {
        if (released) return;
        released = true;
        this.#open.delete(connection);
        held.delete(connection);
        if (held.size === 0 && this.#perUser.get(userId) === held) this.#perUser.delete(userId);
        if (this.#open.size === 0) this.#stopChecking();
      },
    };
  }

  /**
   * Counts a connection that has not authenticated yet against its client address's limit;
   * null when the address holds the most allowed. Call the function returned once the
   * connection has authenticated or closed (more calls do nothing).
   */
  enterUnauthenticated(address: string): (() => void) | null {
    const held = this.#unauthenticated.get(address) ?? 0;
    if (held >= this.limits.maxUnauthenticatedPerAddress) {
      this.#logger.warn({ address, held }, 'connection refused: too many unauthenticated connections from one address');
      return null;
    }
    this.#unauthenticated.set(address, held + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const now = (this.#unauthenticated.get(address) ?? 1) - 1;
      if (now <= 0) this.#unauthenticated.delete(address);
      else this.#unauthenticated.set(address, now);
    };
  }

  /** Closes every connection of a browser session now (sign-out). */
  endSession(sessionId: string): void {
    for (const connection of [...this.#open])
      if (connection.caller.sessionId === sessionId) connection.close('signed_out');
  }

  /** Closes every connection a browser session of the user opened, now (sign-out everywhere). */
  endSessionsOf(userId: string): void {
    for (const connection of [...(this.#perUser.get(userId) ?? [])])
      if (connection.caller.via === 'session') connection.close('signed_out');
  }

  /** How many live connections the user holds in this process. */
  countOf(userId: string): number {
    return this.#perUser.get(userId)?.size ?? 0;
  }

  /** Closes every connection and stops checking (shutdown). */
  closeAll(): void {
    for (const connection of [...this.#open]) connection.close('shutting_down');
    this.#stopChecking();
  }

  #startChecking(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.#recheck(), this.limits.recheckMs);
    this.#timer.unref();
  }

  #stopChecking(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  /** Asks each connection whether its credentials still hold; a round is never overlapped by the next. */
  async #recheck(): Promise<void> {
    if (this.#checking) return;
    this.#checking = true;
    try {
      await Promise.all(
        [...this.#open].map(async (connection) => {
          const valid = await connection.stillValid().catch(() => true);
          if (!valid && this.#open.has(connection)) {
            this.#logger.info(
              { user: connection.caller.userId, channel: connection.channel, via: connection.caller.via },
              'live connection closed: its credentials are no longer valid',
            );
            connection.close('revoked');
          }
        }),
      );
    } finally {
      this.#checking = false;
    }
  }
}
