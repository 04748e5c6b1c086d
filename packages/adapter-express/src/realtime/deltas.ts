import type { TransientEvent } from '@acs/core';

/**
 * A delta goes out only while at most this much waits unsent for its connection. A delta is
 * worth something only while it is fresh, and the stored event that ends the answer holds the
 * whole text: so a client that falls behind is not sent deltas (nor cut off for them, as it
 * would be for stored events); what a delta adds to a connection's buffers stays below this
 * plus one delta (at most `MAX_DELTA_TEXT` characters of each text).
 */
const DELTA_ROOM_BYTES = 64 * 1024;

/**
 * Whether a connection has room for a delta now: little waits unsent for it (well below the
 * bound past which it would be cut off, so a delta never gets it cut off), it is not behind,
 * and its user's connections together have room.
 */
export function roomForDelta(
  pending: number,
  maxBufferedBytes: number,
  admission: { tooFarBehind(): boolean; userHasRoom(): boolean },
): boolean {
  return (
    pending <= Math.min(DELTA_ROOM_BYTES, maxBufferedBytes / 2) && !admission.tooFarBehind() && admission.userHasRoom()
  );
}

/**
 * Decides, delta by delta, which of them a connection is sent: those that come while `hasRoom`
 * says it has room. Once one is left out, the rest of the same answer (the same `message_id`
 * and `attempt`) is left out too, so what the client shows is always the start of the answer,
 * never text with a hole in it; the stored event that follows replaces it. The next answer
 * (or attempt) starts afresh.
 */
export function deltaGate(hasRoom: () => boolean): (event: TransientEvent) => boolean {
  // Only the answer being written is remembered: one at a time per conversation.
  let skipping: string | null = null;
  return (event) => {
    const answer = `${event.attempt}:${event.message_id}`;
    if (answer === skipping) return false;
    if (hasRoom()) return true;
    skipping = answer;
    return false;
  };
}
