import type { TransientEvent } from './transient.js';

/**
 * Tells the processes that share an event store that a conversation's log grew, so their live
 * subscriptions follow appends made elsewhere. A wake-up only: subscribers read the events from
 * the store (the truth), so a notification that is lost, late or repeated loses nothing and
 * shows nothing twice. One process needs none; several on one PostgreSQL use LISTEN/NOTIFY
 * (`createPostgresEventNotifier` in `@acs/adapter-postgres`).
 */
export interface EventNotifier {
  /** Says that the log of the conversation now reaches event `lastId`. Never throws; best effort. */
  notify(userId: string, conversationId: string, lastId: number): void;
  /**
   * Carries a transient event (a piece of the answer being written) to the other processes'
   * listeners; this process's own are not told (its log delivers the event itself). Never
   * throws; best effort: a lost one is a piece of text a client sees only in the final event.
   * A notifier without it keeps transient events in the process that made them.
   */
  publish?(userId: string, conversationId: string, event: TransientEvent): void;
  /** Calls the listener for every notification, this process's own included, until closed. */
  listen(listener: EventNotifierListener): { close(): void };
}

export interface EventNotifierListener {
  /** A conversation's log reaches `lastId` (appended by some process). */
  appended(userId: string, conversationId: string, lastId: number): void;
  /** A transient event another process published. */
  transient?(userId: string, conversationId: string, event: TransientEvent): void;
  /** Notifications may have been missed (the notifier lost its connection and has it again): check every subscription. */
  resync(): void;
}
