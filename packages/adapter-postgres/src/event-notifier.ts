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

/** Connects and LISTENs before it resolves, so a wrong URL fails the start with the server's words. */
export async function createPostgresEventNotifier(
  options: PostgresEventNotifierOptions,
): Promise<PostgresEventNotifier> {
  const channel = options.channel ?? 'acs_events';
  if (!CHANNEL.test(channel))
    throw new Error(
      `createPostgresEventNotifier: channel must be a lower-case identifier (got ${JSON.stringify(channel)})`,
    );
  let pg: PgModule;
  try {
    pg = await import('pg');
  } catch (error) {
    throw new Error('createPostgresEventNotifier needs the "pg" package: npm install pg', { cause: error });
  }
  const listeners = new Set<EventNotifierListener>();
  /** What could not be sent yet, per conversation: the highest id. */
  const unsent = new Map<string, [string, string, number]>();
  let client: ListeningClient | null = null;
  let closed = false;

  /** Keeps what could not be sent, the highest id per conversation, for when the connection is back. */
  const keep = (userId: string, conversationId: string, lastId: number) => {
    const key = `${userId}\u0000${conversationId}`;
    const queued = unsent.get(key);
    if (!queued || queued[2] < lastId) unsent.set(key, [userId, conversationId, lastId]);
  };
  const send = (userId: string, conversationId: string, lastId: number) => {
    const current = client;
    if (!current) return keep(userId, conversationId, lastId);
    current
      .query('SELECT pg_notify($1, $2)', [channel, JSON.stringify([userId, conversationId, lastId])])
      .catch(() => keep(userId, conversationId, lastId));
  };

  const onNotification = (message: Notification) => {
    if (message.channel !== channel || !message.payload) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(message.payload);
    } catch {
      return; // not one of ours
    }
    if (
      !Array.isArray(parsed) ||
      typeof parsed[0] !== 'string' ||
      typeof parsed[1] !== 'string' ||
      typeof parsed[2] !== 'number'
    )
      return;
    const [userId, conversationId, lastId] = parsed as [string, string, number];
    for (const listener of [...listeners]) listener.appended(userId, conversationId, lastId);
  };

  const open = async (): Promise<ListeningClient> => {
    // Named, so an operator sees the notifier's connection for what it is in pg_stat_activity.
    const next = new pg.default.Client({
      connectionString: options.connectionString,
      application_name: `acs-events ${channel}`,
    }) as unknown as ListeningClient;
    next.on('error', (error) => options.onError?.(error));
    await next.connect();
    await next.query(`LISTEN ${channel}`);
    next.on('notification', onNotification);
    next.on('end', () => {
      if (client !== next) return;
      client = null;
      if (!closed) void reconnect();
    });
    return next;
  };

  const reconnect = async () => {
    while (!closed) {
      await new Promise((resolve) => setTimeout(resolve, options.reconnectDelayMs ?? 1_000));
      if (closed) return;
      try {
        const next = await open();
        if (closed) {
          await next.end().catch(() => {});
          return;
        }
        client = next;
        const held = [...unsent.values()];
        unsent.clear();
        for (const [userId, conversationId, lastId] of held) send(userId, conversationId, lastId);
        // Whatever was notified while we were away is lost: every subscription looks at the store.
        for (const listener of [...listeners]) listener.resync();
        return;
      } catch (error) {
        options.onError?.(error instanceof Error ? error : new Error(String(error)));
      }
    }
  };

  client = await open();
  return {
    notify: send,
    listen: (listener) => {
      listeners.add(listener);
      return { close: () => void listeners.delete(listener) };
    },
    close: async () => {
      closed = true;
      const current = client;
      client = null;
      await current?.end().catch(() => {});
    },
  };
}
