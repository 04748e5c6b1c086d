/**
 * The `EventNotifier` port on PostgreSQL's LISTEN/NOTIFY: replicas that share a database tell
 * each other "the log of conversation C of user U reaches event N", and their live streams read
 * the new events from the event store. NOTIFY is delivered only after its transaction commits,
 * so the events are there to read. A notification is a wake-up, never the data: one that is
 * lost costs nothing once the next arrives, and when the listening connection is lost and found
 * again every subscription is told to look (`resync`). Notifications this replica could not
 * send (no connection) are sent when it is back.
 */
import type { EventNotifier, EventNotifierListener } from '@acs/core/ports';
import type * as pgModule from 'pg';

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
  };
  state.client = await open(state);
  return {
    notify: (userId, conversationId, lastId) => send(state, userId, conversationId, lastId),
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
  current
    .query('SELECT pg_notify($1, $2)', [state.channel, JSON.stringify([userId, conversationId, lastId])])
    .catch(() => keep(state, userId, conversationId, lastId));
}

/** Tells every listener of a notification on our channel; anything else is ignored. */
function onNotification(state: NotifierState, message: Notification): void {
  if (message.channel !== state.channel || !message.payload) return;
  const appended = parsePayload(message.payload);
  if (!appended) return;
  const [userId, conversationId, lastId] = appended;
  for (const listener of [...state.listeners]) listener.appended(userId, conversationId, lastId);
}

/** A payload `send` wrote, `[userId, conversationId, lastId]`; null when it is not one of ours. */
function parsePayload(payload: string): [string, string, number] | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload);
  } catch {
    return null;
  }
  if (
    !Array.isArray(parsed) ||
    typeof parsed[0] !== 'string' ||
    typeof parsed[1] !== 'string' ||
    typeof parsed[2] !== 'number'
  )
    return null;
  return parsed as [string, string, number];
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
  await current?.end().catch(() => {});
}
