import { err, ok, okAsync, type Result, type ResultAsync } from 'neverthrow';
import { resultAsync } from '../result.js';
import type { LeaseFence, LeaseLost } from './lease.js';
import type { StoreFailure } from '../store-failure.js';
import {
  fromOwnAppend,
  fromStoredEvent,
  toNewEvent,
  type ConversationEvent,
  type ConversationEventDraft,
  type EventQuery,
  type EventPage,
} from './schema.js';
import type { EventNotifier } from './notifier.js';
import { MAX_DELTA_TEXT, type TransientEvent, type TransientListener } from './transient.js';
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
  /** A transient event (a piece of an answer being written), delivered only to who listens now. */
  transient(event: TransientEvent): void;
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
          for (const subscriber of [...(this.#subscribers.get(EventLog.#key(userId, conversationId)) ?? [])])
            subscriber.wake(lastId);
        },
        transient: (userId, conversationId, event) => this.#deliverTransient(userId, conversationId, event),
        resync: () => {
          for (const subscribers of this.#subscribers.values())
            for (const subscriber of [...subscribers]) subscriber.wake(null);
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

  append(
    userId: string,
    conversationId: string,
    drafts: readonly ConversationEventDraft[],
  ): ResultAsync<ConversationEvent[], StoreFailure> {
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

  /**
   * Publishes a transient event (a piece of the answer being written) to the conversation's live
   * subscriptions here and, through the notifier, in the other processes. Nothing is stored:
   * a subscription that starts later never sees it. Text longer than `MAX_DELTA_TEXT` goes out
   * as several deltas, so one event always fits a notifier's payload.
   */
  publishTransient(userId: string, conversationId: string, event: TransientEvent): void {
    for (const piece of splitDelta(event)) {
      this.#deliverTransient(userId, conversationId, piece);
      this.#notifier?.publish?.(userId, conversationId, piece);
    }
  }

  #deliverTransient(userId: string, conversationId: string, event: TransientEvent): void {
    const subscribers = this.#subscribers.get(EventLog.#key(userId, conversationId));
    if (!subscribers) return;
    for (const subscriber of [...subscribers]) {
      try {
        subscriber.transient(event);
      } catch {
        /* the subscriber's problem */
      }
    }
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
    return resultAsync(this.#readAll(userId, conversationId, afterId));
  }

  async #readAll(
    userId: string,
    conversationId: string,
    afterId: number,
  ): Promise<Result<ConversationEvent[], StoreFailure>> {
    const collected: ConversationEvent[] = [];
    for (let after = afterId; ;) {
      const batch = await this.#store.readAfter(userId, conversationId, after, READ_BATCH);
      if (batch.isErr()) return err(batch.error);
      for (const stored of batch.value) {
        const event = fromStoredEvent(stored);
        if (event) collected.push(event);
      }
      const last = batch.value.at(-1);
      if (batch.value.length < READ_BATCH) {
        // Only a read from a point the log had reached says where it ends (an empty log, or a read past its end, says nothing).
        if (last) this.#knownToEnd(userId, conversationId, last.id);
        return ok(collected);
      }
      after = last!.id;
    }
  }

  /**
   * One page of events after `query.after`, optionally of some kinds only. A kind
   * filter scans forward in batches until the page is full or the log ends.
   */
  search(userId: string, conversationId: string, query: EventQuery): ResultAsync<EventPage, StoreFailure> {
    return resultAsync(this.#search(userId, conversationId, query));
  }

  async #search(userId: string, conversationId: string, query: EventQuery): Promise<Result<EventPage, StoreFailure>> {
    const kinds = query.kinds && query.kinds.length > 0 ? new Set<string>(query.kinds) : null;
    const requested = kinds ? READ_BATCH : query.limit;
    const items: ConversationEvent[] = [];
    for (let after = query.after; ;) {
      const batch = await this.#store.readAfter(userId, conversationId, after, requested);
      if (batch.isErr()) return err(batch.error);
      for (const stored of batch.value) {
        if (kinds && !kinds.has(stored.kind)) continue;
        const event = fromStoredEvent(stored);
        if (!event) continue;
        items.push(event);
        if (items.length === query.limit) return ok({ items, next_after: stored.id });
      }
      if (batch.value.length < requested) return ok({ items, next_after: null });
      after = batch.value.at(-1)!.id;
    }
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
    onTransient?: TransientListener,
  ): ResultAsync<EventSubscription, StoreFailure> {
    const key = EventLog.#key(userId, conversationId);
    const follower: LogFollower = new LogFollower({
      afterId,
      listener,
      onEnd,
      onTransient,
      readAfter: (after) => this.readAll(userId, conversationId, after),
      detach: () => {
        const current = this.#subscribers.get(key);
        current?.delete(follower);
        if (current?.size === 0) this.#subscribers.delete(key);
      },
    });
    let subscribers = this.#subscribers.get(key);
    if (!subscribers) {
      subscribers = new Set();
      this.#subscribers.set(key, subscribers);
    }
    subscribers.add(follower);
    return resultAsync(this.#replay(userId, conversationId, follower, afterId));
  }

  /** Replays the log to a new subscription batch by batch (a long log is never held in memory at once), then lets it follow. */
  async #replay(
    userId: string,
    conversationId: string,
    follower: LogFollower,
    afterId: number,
  ): Promise<Result<EventSubscription, StoreFailure>> {
    for (let after = afterId; ;) {
      const batch = await this.#store.readAfter(userId, conversationId, after, READ_BATCH);
      if (batch.isErr()) {
        follower.close();
        return err(batch.error);
      }
      for (const stored of batch.value) {
        const event = fromStoredEvent(stored);
        if (event) follower.deliver(event);
      }
      if (batch.value.length < READ_BATCH) break;
      after = batch.value.at(-1)!.id;
    }
    follower.replayed();
    return ok(follower);
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
      for (const subscriber of [...(this.#subscribers.get(EventLog.#key(userId, conversationId)) ?? [])])
        subscriber.end('the conversation was deleted');
      return count;
    });
  }
}

/** What a subscription needs from its log. */
interface LogFollowerDeps {
  afterId: number;
  listener: EventListener;
  onEnd: ((reason: string) => void) | undefined;
  /** Transient events published while it follows (none during the replay). */
  onTransient: TransientListener | undefined;
  /** Every event after an id, from the store (to fill a gap, or what another process appended). */
  readAfter: (afterId: number) => ResultAsync<ConversationEvent[], StoreFailure>;
  /** Takes it off the log's live subscribers. */
  detach: () => void;
}

/**
 * One subscription: the replay delivers first; live events that arrive meanwhile are held and
 * delivered after it in id order, each once; a gap before them, or what another process said it
 * appended, is read from the store first.
 */
class LogFollower implements LiveSubscriber, EventSubscription {
  #lastId: number;
  #closed = false;
  #replaying = true;
  #draining = false;
  #pending: ConversationEvent[] = [];
  /** The highest id another process said the log reaches; `recheck`: it may have grown unseen. */
  #told: number;
  #recheck = false;
  readonly #deps: LogFollowerDeps;

  constructor(deps: LogFollowerDeps) {
    this.#deps = deps;
    this.#lastId = deps.afterId;
    this.#told = deps.afterId;
  }

  get lastId(): number {
    return this.#lastId;
  }

  close(): void {
    this.#closed = true;
    this.#deps.detach();
  }

  /** Hands one event to the listener, unless it was delivered already. */
  deliver(event: ConversationEvent): void {
    if (this.#closed || event.id <= this.#lastId) return;
    this.#lastId = event.id;
    try {
      this.#deps.listener(event);
    } catch {
      /* the subscriber's problem; the stream goes on */
    }
  }

  /** The replay is over: what was held meanwhile goes out. */
  replayed(): void {
    this.#replaying = false;
    void this.#drain();
  }

  live(event: ConversationEvent): void {
    if (this.#closed) return;
    this.#pending.push(event);
    if (!this.#replaying) void this.#drain();
  }

  transient(event: TransientEvent): void {
    // During the replay the subscriber is still reading older events: it gets the final one instead.
    if (this.#closed || this.#replaying || !this.#deps.onTransient) return;
    try {
      this.#deps.onTransient(event);
    } catch {
      /* the subscriber's problem */
    }
  }

  wake(id: number | null): void {
    if (this.#closed) return;
    if (id === null) this.#recheck = true;
    else if (id > this.#told) this.#told = id;
    else return;
    if (!this.#replaying) void this.#drain();
  }

  end(reason: string): void {
    this.close();
    this.#deps.onEnd?.(reason);
  }

  /** Delivers held live events in order, reading a gap before them (or what another process appended) from the store first. */
  async #drain(): Promise<void> {
    if (this.#draining) return;
    this.#draining = true;
    try {
      while (!this.#closed) {
        this.#pending = this.#pending.filter((e) => e.id > this.#lastId).sort((a, b) => a.id - b.id);
        while (this.#pending.length > 0 && this.#pending[0]!.id === this.#lastId + 1)
          this.deliver(this.#pending.shift()!);
        const gap = this.#pending.length > 0;
        if (!gap && this.#told <= this.#lastId && !this.#recheck) return;
        this.#recheck = false;
        const before = this.#lastId;
        const target = this.#told;
        const missing = await this.#deps.readAfter(this.#lastId);
        if (missing.isErr()) return; // the next live event or notification tries again
        for (const e of missing.value) this.deliver(e);
        // Nothing more in the store: what we were told is there (or was a rumour); stop, unless
        // another notification came while we read.
        if (!gap && this.#lastId === before && this.#told === target && !this.#recheck) {
          this.#told = this.#lastId;
          return;
        }
      }
    } finally {
      this.#draining = false;
    }
  }
}

/** A delta whose text is longer than `MAX_DELTA_TEXT` (in UTF-16 units) as several, in order; others as they are. */
function splitDelta(event: TransientEvent): TransientEvent[] {
  const content = event.content ?? '';
  const reasoning = event.reasoning_content ?? '';
  if (content.length <= MAX_DELTA_TEXT && reasoning.length <= MAX_DELTA_TEXT) return [event];
  return [
    ...pieces(reasoning).map((piece) => ({ ...event, content: null, reasoning_content: piece })),
    ...pieces(content).map((piece) => ({ ...event, content: piece, reasoning_content: null })),
  ];
}

/** `text` in pieces of at most `MAX_DELTA_TEXT` UTF-16 units, never cutting a surrogate pair in two. */
function pieces(text: string): string[] {
  const out: string[] = [];
  for (let at = 0; at < text.length;) {
    let end = Math.min(text.length, at + MAX_DELTA_TEXT);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--;
    out.push(text.slice(at, end));
    at = end;
  }
  return out;
}
