/**
 * The `EventNotifier` port on PostgreSQL's LISTEN/NOTIFY: replicas that share a database tell
 * each other "the log of conversation C of user U reaches event N", and their live streams read
 * the new events from the event store. NOTIFY is delivered only after its transaction commits,
 * so the events are there to read. A notification is a wake-up, never the data: one that is
 * lost costs nothing once the next arrives, and when the listening connection is lost and found
 * again every subscription is told to look (`resync`). Notifications this replica could not
 * send (no connection) are sent when it is back.
 *
 * Transient events (pieces of an answer being written) travel on the same channel, as the data
 * itself: a payload of their own (`transient-payload.ts`), at most 8000 bytes, told apart from
 * the append notifications and carrying this notifier's origin id, so it does not tell its own
 * process's listeners (that process's log delivered them already). One channel rather than a
 * second `<channel>_transient`: a channel name may already take PostgreSQL's 63 characters, and
 * one LISTEN keeps the connection's single queue in the order things were sent. They are best
 * effort: none is kept across a lost connection, and what waits to be sent is bounded.
 */
import { randomBytes } from 'node:crypto';
import { continuesDelta, joinDeltas } from '@acs/core/ports';
import type { EventNotifier, EventNotifierListener, TransientEvent } from '@acs/core/ports';
import type * as pgModule from 'pg';
import {
  decodeTransient,
  encodeTransient,
  fitDelta,
  joinedCost,
  PAYLOAD_LIMIT,
  type FittedDelta,
} from './transient-payload.js';

export interface PostgresEventNotifierOptions {
  /** The database the replicas share (a connection string: the notifier keeps one connection of its own). */
  connectionString: string;
  /** The channel name; replicas of one installation must agree. Default `acs_events`. */
  channel?: string;
  /** How long to wait before connecting again after the connection was lost. Default 1 s. */
  reconnectDelayMs?: number;
  /** Told when the connection is lost or cannot be made (the notifier keeps trying). */
  onError?: (error: Error) => void;
}

export interface PostgresEventNotifier extends EventNotifier {
  close(): Promise<void>;
}

interface Notification {
  channel: string;
  payload?: string | undefined;
}

interface ListeningClient {
  connect(): Promise<unknown>;
  query(text: string, params?: unknown[]): Promise<unknown>;
  end(): Promise<void>;
  on(event: 'notification', listener: (message: Notification) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
}

const CHANNEL = /^[a-z_][a-z0-9_]{0,62}$/;

type PgModule = typeof pgModule;

/**
 * Most payload bytes one conversation's deltas may hold while they wait to be sent (eight full
 * payloads; a model writes far less between two round trips): past it, deltas are dropped.
 */
const HELD_PER_CONVERSATION = 64 * 1024;
/** Most payload bytes of deltas held or being sent, all conversations together. */
const HELD_IN_ALL = 1024 * 1024;

/** Several payloads in one statement, one round trip; NOTIFYs of a transaction are delivered in the order made. */
const NOTIFY_MANY = 'SELECT pg_notify($1, p) FROM unnest($2::text[]) WITH ORDINALITY AS t(p, n) ORDER BY n';

/** One conversation's deltas waiting to be sent, in order; each fits one payload. */
interface HeldDeltas {
  userId: string;
  conversationId: string;
  deltas: FittedDelta[];
  bytes: number;
}

/**
 * Deltas on their way out. They are sent at the end of the event loop's turn, all that wait in
 * one statement, one statement at a time: what is published meanwhile waits and is joined into
 * fewer payloads (coalescing grows with the load, a lone delta goes out at once).
 */
interface TransientOutbox {
  /** This notifier's id in its payloads: it ignores its own. */
  origin: string;
  seq: number;
  held: Map<string, HeldDeltas>;
  /** Payload bytes held or in a statement not yet answered (bounded by HELD_IN_ALL). */
  bytes: number;
  sending: number;
  scheduled: boolean;
}

/** What the notifier's functions share: made once by `createPostgresEventNotifier`. */
interface NotifierState {
  pg: PgModule;
  options: PostgresEventNotifierOptions;
  channel: string;
  listeners: Set<EventNotifierListener>;
  /** What could not be sent yet, per conversation: the highest id. */
  unsent: Map<string, [string, string, number]>;
  /** The listening connection; null while it is lost (and after close). */
  client: ListeningClient | null;
  closed: boolean;
  outbox: TransientOutbox;
}

/** Connects and LISTENs before it resolves, so a wrong URL fails the start with the server's words. */
export async function createPostgresEventNotifier(
  options: PostgresEventNotifierOptions,
): Promise<PostgresEventNotifier> {
  const channel = options.channel ?? 'acs_events';
  if (!CHANNEL.test(channel))
    throw new Error(
      `createPostgresEventNotifier: channel must be a lower-case identifier (got ${JSON.stringify(channel)})`,
    );
  const state: NotifierState = {
    pg: await loadPg(),
    options,
    channel,
    listeners: new Set(),
    unsent: new Map(),
    client: null,
    closed: false,
    outbox: {
      origin: randomBytes(12).toString('base64url'),
      seq: 0,
      held: new Map(),
      bytes: 0,
      sending: 0,
      scheduled: false,
    },
  };
  state.client = await open(state);
  return {
    notify: (userId, conversationId, lastId) => send(state, userId, conversationId, lastId),
    publish: (userId, conversationId, event) => publish(state, userId, conversationId, event),
    listen: (listener) => {
      state.listeners.add(listener);
      return { close: () => void state.listeners.delete(listener) };
    },
    close: () => close(state),
  };
}

/** `pg`, an optional peer dependency: loaded only when a notifier is made. */
async function loadPg(): Promise<PgModule> {
  try {
    return await import('pg');
  } catch (error) {
    throw new Error('createPostgresEventNotifier needs the "pg" package: npm install pg', { cause: error });
  }
}

/** Keeps what could not be sent, the highest id per conversation, for when the connection is back. */
function keep(state: NotifierState, userId: string, conversationId: string, lastId: number): void {
  const key = `${userId}\u0000${conversationId}`;
  const queued = state.unsent.get(key);
  if (!queued || queued[2] < lastId) state.unsent.set(key, [userId, conversationId, lastId]);
}

/** NOTIFY the other replicas, or keep it for later when there is no connection or the send fails. */
function send(state: NotifierState, userId: string, conversationId: string, lastId: number): void {
  const current = state.client;
  if (!current) return keep(state, userId, conversationId, lastId);
  // Deltas published before this append go first: a replica shows them before the stored event.
  sendHeld(state);
  current
    .query('SELECT pg_notify($1, $2)', [state.channel, JSON.stringify([userId, conversationId, lastId])])
    .catch(() => keep(state, userId, conversationId, lastId));
}

/**
 * Tells every listener of a notification on our channel; anything else is ignored. Any client
 * of the database may NOTIFY on it: nothing here trusts a payload, keeps anything, or throws
 * (a throw would surface in the connection's socket handler).
 */
function onNotification(state: NotifierState, message: Notification): void {
  if (message.channel !== state.channel || !message.payload) return;
  let parsed: unknown;
  try {
    parsed = JSON.parse(message.payload);
  } catch {
    return;
  }
  if (Array.isArray(parsed)) {
    const appended = parseAppended(parsed);
    if (!appended) return;
    const [userId, conversationId, lastId] = appended;
    for (const listener of [...state.listeners]) tell(() => listener.appended(userId, conversationId, lastId));
    return;
  }
  const transient = decodeTransient(parsed);
  if (!transient || transient.origin === state.outbox.origin) return;
  const { userId, conversationId, event } = transient;
  for (const listener of [...state.listeners]) tell(() => listener.transient?.(userId, conversationId, event));
}

/** A listener's failure is its own: the others are told, and the connection goes on. */
function tell(call: () => void): void {
  try {
    call();
  } catch {
    /* the listener's problem */
  }
}

/** An append notification `send` wrote, `[userId, conversationId, lastId]`; null when it is not one. */
function parseAppended(parsed: unknown[]): [string, string, number] | null {
  if (typeof parsed[0] !== 'string' || typeof parsed[1] !== 'string' || typeof parsed[2] !== 'number') return null;
  return [parsed[0], parsed[1], parsed[2]];
}

/**
 * Holds a transient event for the next send: cut to payload size, joined onto the conversation's
 * last held delta when it is of the same message and the payload still fits. Dropped without a
 * connection, or when the bounds are reached (the stored event will hold the whole text).
 */
function publish(state: NotifierState, userId: string, conversationId: string, event: TransientEvent): void {
  const outbox = state.outbox;
  if (!state.client) return;
  const key = `${userId}\u0000${conversationId}`;
  const held = outbox.held.get(key) ?? { userId, conversationId, deltas: [], bytes: 0 };
  for (const piece of fitDelta(outbox.origin, userId, conversationId, event)) {
    const last = held.deltas.at(-1);
    const added = joinedCost(piece.event);
    const joins = last !== undefined && continuesDelta(last.event, piece.event) && last.bytes + added <= PAYLOAD_LIMIT;
    const cost = joins ? added : piece.bytes;
    if (held.bytes + cost > HELD_PER_CONVERSATION || outbox.bytes + cost > HELD_IN_ALL) break;
    if (joins)
      held.deltas[held.deltas.length - 1] = { event: joinDeltas(last.event, piece.event), bytes: last.bytes + added };
    else held.deltas.push(piece);
    held.bytes += cost;
    outbox.bytes += cost;
  }
  if (held.deltas.length === 0) return;
  outbox.held.set(key, held);
  if (outbox.scheduled) return;
  outbox.scheduled = true;
  setImmediate(() => {
    outbox.scheduled = false;
    // While a statement is out, what comes meanwhile waits for it (and is joined): its end sends it.
    if (outbox.sending === 0) sendHeld(state);
  });
}

/** Sends every held delta in one statement. A failure drops them: deltas are never sent late. */
function sendHeld(state: NotifierState): void {
  const { outbox, client } = state;
  if (!client || outbox.held.size === 0) return;
  const payloads: string[] = [];
  let bytes = 0;
  for (const held of outbox.held.values()) {
    for (const { event, bytes: counted } of held.deltas) {
      bytes += counted;
      const payload = encodeTransient(outbox.origin, ++outbox.seq, held.userId, held.conversationId, event);
      // Counted as an upper bound, measured anyway: a payload too long would fail the whole statement.
      if (Buffer.byteLength(payload) <= PAYLOAD_LIMIT) payloads.push(payload);
    }
  }
  outbox.held.clear();
  outbox.sending++;
  void client
    .query(NOTIFY_MANY, [state.channel, payloads])
    .catch(() => {})
    .finally(() => {
      outbox.sending--;
      outbox.bytes -= bytes;
      if (outbox.sending === 0) sendHeld(state);
    });
}

/** Drops the held deltas (the connection is lost or closed): transient events are never kept for later. */
function dropHeld(outbox: TransientOutbox): void {
  for (const held of outbox.held.values()) outbox.bytes -= held.bytes;
  outbox.held.clear();
}

/** A new listening connection; when it ends while it is the notifier's, the notifier reconnects. */
async function open(state: NotifierState): Promise<ListeningClient> {
  // Named, so an operator sees the notifier's connection for what it is in pg_stat_activity.
  const next = new state.pg.default.Client({
    connectionString: state.options.connectionString,
    application_name: `acs-events ${state.channel}`,
  }) as unknown as ListeningClient;
  next.on('error', (error) => state.options.onError?.(error));
  await next.connect();
  await next.query(`LISTEN ${state.channel}`);
  next.on('notification', (message) => onNotification(state, message));
  next.on('end', () => {
    if (state.client !== next) return;
    state.client = null;
    dropHeld(state.outbox);
    if (!state.closed) void reconnect(state);
  });
  return next;
}

/** Tries again after the delay until connected (or closed), then sends what was kept and has every subscription look. */
async function reconnect(state: NotifierState): Promise<void> {
  while (!state.closed) {
    await new Promise((resolve) => setTimeout(resolve, state.options.reconnectDelayMs ?? 1_000));
    if (state.closed) return;
    try {
      const next = await open(state);
      if (state.closed) {
        await next.end().catch(() => {});
        return;
      }
      state.client = next;
      const held = [...state.unsent.values()];
      state.unsent.clear();
      for (const [userId, conversationId, lastId] of held) send(state, userId, conversationId, lastId);
      // Whatever was notified while we were away is lost: every subscription looks at the store.
      for (const listener of [...state.listeners]) listener.resync();
      return;
    } catch (error) {
      state.options.onError?.(error instanceof Error ? error : new Error(String(error)));
    }
  }
}

/** Stops reconnecting and ends the connection; listeners hear nothing more. */
async function close(state: NotifierState): Promise<void> {
  state.closed = true;
  const current = state.client;
  state.client = null;
  dropHeld(state.outbox);
  await current?.end().catch(() => {});
}
