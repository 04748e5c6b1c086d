import { errAsync, okAsync, type ResultAsync } from 'neverthrow';
import type { LeaseFence, LeaseLost } from './lease.js';
import type { StoreFailure } from '../store-failure.js';
import { fromOwnAppend, fromStoredEvent, toNewEvent, type ConversationEvent, type ConversationEventDraft, type EventQuery, type EventPage } from './schema.js';
import type { EventNotifier } from './notifier.js';
import type { EventStore } from './store.js';

/** Receives events of one conversation, in id order, each exactly once. */
export type EventListener = (event: ConversationEvent) => void;

export interface EventSubscription {
  /** The id of the last event delivered so far. */
  readonly lastId: number;
  close(): void;
}

const READ_BATCH = 500;

interface LiveSubscriber {
  live(event: ConversationEvent): void;
  /** The log reaches `lastId` (appended by another process), or, with null, may have grown unseen: read the store. */
  wake(lastId: number | null): void;
  end(reason: string): void;
}

/**
 * The event log as the engine and clients use it: typed appends that also notify live
 * subscribers in this process, paged reads, and subscriptions that replay from an id
 * and then follow without a gap or a duplicate. With an `EventNotifier`, appends made by other
 * processes on the same store reach this process's subscriptions too: the notifier wakes them,
 * they read the store.
 */
export class EventLog {
  readonly #store: EventStore;
  readonly #notifier: EventNotifier | null;
  readonly #listening: { close(): void } | null;
  /** The live subscriptions of each conversation: how to hand one an event, and how to end it. */
  readonly #subscribers = new Map<string, Set<LiveSubscriber>>();
  /**
   * Only as the sole writer: the id each conversation's log is known to end at (every append
   * goes through this log, so nothing can follow it unseen). A read after it returns nothing
   * without asking the store: the agent catches up before every step (issue 27).
   */
  readonly #knownEnds: Map<string, number> | null;

  /**
   * `soleWriter`: nothing else appends to these logs (one process, one service on the store:
   * no notifier, no conversation leases), so this log knows where each log it has seen ends.
   */
  constructor(store: EventStore, notifier?: EventNotifier, options: { soleWriter?: boolean } = {}) {
    this.#store = store;
    this.#notifier = notifier ?? null;
    this.#knownEnds = options.soleWriter && !notifier ? new Map() : null;
    this.#listening =
      notifier?.listen({
        appended: (userId, conversationId, lastId) => {
          for (const subscriber of [...(this.#subscribers.get(EventLog.#key(userId, conversationId)) ?? [])]) subscriber.wake(lastId);
        },
        resync: () => {
          for (const subscribers of this.#subscribers.values()) for (const subscriber of [...subscribers]) subscriber.wake(null);
        },
      }) ?? null;
  }

  /** Stops following other processes' appends (the service's close). */
  close(): void {
    this.#listening?.close();
  }

  static #key(userId: string, conversationId: string): string {
    return `${userId}\u0000${conversationId}`;
  }

  append(userId: string, conversationId: string, drafts: readonly ConversationEventDraft[]): ResultAsync<ConversationEvent[], StoreFailure> {
    return this.#append(userId, conversationId, drafts, undefined).mapErr((failure) => {
      // Only fenced appends can lose a lease.
      if (failure.type === 'LeaseLost') throw new Error(`an unfenced append was refused as fenced: ${failure.message}`);
      return failure;
    });
  }

  /**
   * An agent's append under its lease: refused with LeaseLost once another process holds the
   * conversation's lease. Without a fence (one process, no lease store) a plain append.
   */
  appendAsOwner(
    userId: string,
    conversationId: string,
    fence: LeaseFence | null,
    drafts: readonly ConversationEventDraft[],
  ): ResultAsync<ConversationEvent[], StoreFailure | LeaseLost> {
    return this.#append(userId, conversationId, drafts, fence ?? undefined);
  }

  #append(
    userId: string,
    conversationId: string,
    drafts: readonly ConversationEventDraft[],
    fence: LeaseFence | undefined,
  ): ResultAsync<ConversationEvent[], StoreFailure | LeaseLost> {
    if (drafts.length === 0) return okAsync([]);
    return this.#store.append(userId, conversationId, drafts.map(toNewEvent), fence).map((stored) => {
      const events = stored.map(fromOwnAppend);
      const last = stored.at(-1);
      if (last) this.#knownToEnd(userId, conversationId, last.id);
      if (last) this.#notifier?.notify(userId, conversationId, last.id);
      const subscribers = this.#subscribers.get(EventLog.#key(userId, conversationId));
      if (subscribers) {
        for (const event of events) {
          for (const subscriber of [...subscribers]) {
            // A subscriber's failure is its own; it must not fail the append (the engine's step).
            try {
              subscriber.live(event);
            } catch {
              /* ignored */
            }
          }
        }
      }
      return events;
    });
  }

  /** The log is known to reach `lastId` (only ever moved forward: a read that started before an append may end after it). */
  #knownToEnd(userId: string, conversationId: string, lastId: number): void {
    if (!this.#knownEnds) return;
    const key = EventLog.#key(userId, conversationId);
    if ((this.#knownEnds.get(key) ?? -1) < lastId) this.#knownEnds.set(key, lastId);
  }

  /** Every event after `afterId`, oldest first (reads in batches until the end). */
  readAll(userId: string, conversationId: string, afterId = 0): ResultAsync<ConversationEvent[], StoreFailure> {
    if (this.#knownEnds?.get(EventLog.#key(userId, conversationId)) === afterId) return okAsync([]);
    const collected: ConversationEvent[] = [];
    const step = (after: number): ResultAsync<ConversationEvent[], StoreFailure> =>
      this.#store.readAfter(userId, conversationId, after, READ_BATCH).andThen((batch) => {
        for (const stored of batch) {
          const event = fromStoredEvent(stored);
          if (event) collected.push(event);
        }
        if (batch.length < READ_BATCH) {
          // Only a read from a point the log had reached says where it ends (an empty log, or a read past its end, says nothing).
          if (batch.length > 0) this.#knownToEnd(userId, conversationId, batch[batch.length - 1]!.id);
          return okAsync(collected);
        }
        return step(batch[batch.length - 1]!.id);
      });
    return step(afterId);
  }

  /**
   * One page of events after `query.after`, optionally of some kinds only. A kind
   * filter scans forward in batches until the page is full or the log ends.
   */
  search(userId: string, conversationId: string, query: EventQuery): ResultAsync<EventPage, StoreFailure> {
    const kinds = query.kinds && query.kinds.length > 0 ? new Set<string>(query.kinds) : null;
    const items: ConversationEvent[] = [];
    const step = (after: number): ResultAsync<EventPage, StoreFailure> =>
      this.#store.readAfter(userId, conversationId, after, kinds ? READ_BATCH : query.limit).andThen((batch) => {
        for (const stored of batch) {
          if (kinds && !kinds.has(stored.kind)) continue;
          const event = fromStoredEvent(stored);
          if (!event) continue;
          items.push(event);
          if (items.length === query.limit) return okAsync({ items, next_after: stored.id });
        }
        const requested = kinds ? READ_BATCH : query.limit;
        if (batch.length < requested) return okAsync({ items, next_after: null });
        return step(batch[batch.length - 1]!.id);
      });
    return step(query.after);
  }

  /**
   * Delivers every event after `afterId` (replayed from the store), then each new one
   * as it is appended in this process. Events appended during the replay are held
   * and delivered after it, deduplicated by id; a gap (an append this process did not
   * see) is filled from the store before moving on.
   */
  subscribe(
    userId: string,
    conversationId: string,
    afterId: number,
    listener: EventListener,
    onEnd?: (reason: string) => void,
  ): ResultAsync<EventSubscription, StoreFailure> {
    const key = EventLog.#key(userId, conversationId);
    let lastId = afterId;
    let closed = false;
    let replaying = true;
    let draining = false;
    let pending: ConversationEvent[] = [];
    /** The highest id another process said the log reaches; `recheck`: it may have grown unseen. */
    let told = afterId;
    let recheck = false;

    const deliver = (event: ConversationEvent) => {
      if (closed || event.id <= lastId) return;
      lastId = event.id;
      try {
        listener(event);
      } catch {
        /* the subscriber's problem; the stream goes on */
      }
    };

    // Delivers held live events in order; a gap before them, or events another process said it
    // appended, are read from the store first.
    const drain = async () => {
      if (draining) return;
      draining = true;
      try {
        while (!closed) {
          pending = pending.filter((e) => e.id > lastId).sort((a, b) => a.id - b.id);
          while (pending.length > 0 && pending[0]!.id === lastId + 1) deliver(pending.shift()!);
          const gap = pending.length > 0;
          if (!gap && told <= lastId && !recheck) return;
          recheck = false;
          const before = lastId;
          const target = told;
          const missing = await this.readAll(userId, conversationId, lastId);
          if (missing.isErr()) return; // the next live event or notification tries again
          for (const e of missing.value) deliver(e);
          // Nothing more in the store: what we were told is there (or was a rumour); stop, unless
          // another notification came while we read.
          if (!gap && lastId === before && told === target && !recheck) {
            told = lastId;
            return;
          }
        }
      } finally {
        draining = false;
      }
    };

    const onLive = (event: ConversationEvent) => {
      if (closed) return;
      pending.push(event);
      if (!replaying) void drain();
    };

    const subscriber: LiveSubscriber = {
      live: onLive,
      wake: (id) => {
        if (closed) return;
        if (id === null) recheck = true;
        else if (id > told) told = id;
        else return;
        if (!replaying) void drain();
      },
      end: (reason) => {
        subscription.close();
        onEnd?.(reason);
      },
    };
    let subscribers = this.#subscribers.get(key);
    if (!subscribers) {
      subscribers = new Set();
      this.#subscribers.set(key, subscribers);
    }
    subscribers.add(subscriber);
    const subscription: EventSubscription = {
      get lastId() {
        return lastId;
      },
      close: () => {
        closed = true;
        const current = this.#subscribers.get(key);
        current?.delete(subscriber);
        if (current?.size === 0) this.#subscribers.delete(key);
      },
    };
    // Replay batch by batch, so a long log is never held in memory at once.
    const replay = (after: number): ResultAsync<void, StoreFailure> =>
      this.#store.readAfter(userId, conversationId, after, READ_BATCH).andThen((batch) => {
        for (const stored of batch) {
          const event = fromStoredEvent(stored);
          if (event) deliver(event);
        }
        return batch.length < READ_BATCH ? okAsync(undefined) : replay(batch[batch.length - 1]!.id);
      });
    return replay(afterId)
      .map(() => {
        replaying = false;
        void drain();
        return subscription;
      })
      .orElse((failure) => {
        subscription.close();
        return errAsync(failure);
      });
  }

  /** How many live subscribers a conversation has (for tests and metrics). */
  subscriberCount(userId: string, conversationId: string): number {
    return this.#subscribers.get(EventLog.#key(userId, conversationId))?.size ?? 0;
  }

  /** Removes the log and ends its live subscriptions (their onEnd is told why). */
  deleteConversation(userId: string, conversationId: string): ResultAsync<number, StoreFailure> {
    this.#knownEnds?.delete(EventLog.#key(userId, conversationId));
    return this.#store.deleteConversation(userId, conversationId).map((count) => {
      this.#knownEnds?.delete(EventLog.#key(userId, conversationId));
      for (const subscriber of [...(this.#subscribers.get(EventLog.#key(userId, conversationId)) ?? [])]) subscriber.end('the conversation was deleted');
      return count;
    });
  }
}
