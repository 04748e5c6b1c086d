import { resultAsync } from '@acs/core/ports';
import { err, ok, type Result, type ResultAsync } from 'neverthrow';
import type { AgentConversationService, ConversationServiceError, EventSubscription, TransientEvent } from '@acs/core';
import type { ConversationEvent } from '@acs/core/schemas';
import { drained, type Pacing } from './outbound.js';

/** What a live channel hears about one conversation. */
export interface FeedHandlers {
  /** The next event of the log as it was when the feed opened, oldest first (the channel decides what to send of it). */
  history(event: ConversationEvent): void;
  /** The replay reached the end of the log (the id of its last event); live events follow. */
  caughtUp?(lastId: number): void;
  /** Each event appended afterwards, once, in order. */
  live(event: ConversationEvent): void;
  /**
   * Each transient event (a piece of an answer being written) published from the end of the
   * replay on; never one from before (the stored event that follows holds the whole text).
   * A channel without it hears none.
   */
  transient?(event: TransientEvent): void;
  /** The service ended the feed (the conversation was deleted). */
  end(reason: string): void;
  /** The feed could not go on after it opened: storage failed, or the client took nothing for the stall deadline. */
  failed(failure: FeedFailure): void;
}

type FeedFailure = { type: 'StoreUnavailable' } | { type: 'ClientNotReading' };

/** An open feed: `start` begins the replay once the channel can send; `close` stops the replay or the live follow, whichever is under way. */
export interface Feed {
  start(): void;
  close(): void;
}

const PAGE = 100;

/** A conversation's whole log as it is now, oldest first. */
export function readWholeLog(
  service: AgentConversationService,
  userId: string,
  conversationId: string,
): ResultAsync<ConversationEvent[], ConversationServiceError<'searchEvents'>> {
  return resultAsync(readWholeLogOf(service, userId, conversationId));
}

async function readWholeLogOf(
  service: AgentConversationService,
  userId: string,
  conversationId: string,
): Promise<Result<ConversationEvent[], ConversationServiceError<'searchEvents'>>> {
  const read: ConversationEvent[] = [];
  for (let after: number | null = 0; after !== null;) {
    const page = await service.conversations.searchEvents(userId, conversationId, { after, kinds: null, limit: PAGE });
    if (page.isErr()) return err(page.error);
    read.push(...page.value.items);
    after = page.value.next_after;
  }
  return ok(read);
}

/** The first replay page is small; later ones hold about this many bytes of events (at most PAGE events). */
const REPLAY_PAGE_BYTES = 512 * 1024;
const FIRST_REPLAY_PAGE = 2;

/** How many events the next replay page should hold, from the largest event of the last one. */
function nextPageSize(events: readonly ConversationEvent[]): number {
  const largest = Math.max(1, ...events.map((e) => textLength(e)));
  return Math.max(1, Math.min(PAGE, Math.floor(REPLAY_PAGE_BYTES / largest)));
}

/** About how large a value is as JSON: the length of its strings plus a little per value (no copy is made to measure it). */
function textLength(value: unknown): number {
  if (typeof value === 'string') return value.length + 2;
  if (Array.isArray(value)) return value.reduce((sum: number, item) => sum + textLength(item), 2);
  if (value && typeof value === 'object')
    return Object.entries(value).reduce((sum, [key, item]) => sum + key.length + 3 + textLength(item), 2);
  return 8;
}

/**
 * Opens a feed of a conversation's events after `after`: it resolves once the first page is
 * read (so an unknown conversation is an error the channel can answer with), then replays the
 * log at the pace the client reads (each event waits until what was sent before has mostly
 * gone out; pages are read as needed, a few large events or up to a hundred small ones at a
 * time, and let go of as they are sent), then follows the log live from exactly there:
 * nothing between the replay and the follow is missed or repeated (the log's subscription
 * fills any gap).
 */
export function openFeed(
  service: AgentConversationService,
  userId: string,
  conversationId: string,
  after: number,
  handlers: FeedHandlers,
  pacing: Pacing,
): ResultAsync<Feed, ConversationServiceError<'get'>> {
  let closed = false;
  let started = false;
  let subscription: EventSubscription | null = null;
  const read = (from: number, limit: number) =>
    service.conversations.searchEvents(userId, conversationId, { after: from, kinds: null, limit });

  /** Waits for room to send; false (and the handlers told why, unless the feed was closed) when the replay must stop. */
  const mayGoOn = async () => {
    if (await drained(pacing)) return !closed;
    if (!closed && pacing.outbound.isOpen()) handlers.failed({ type: 'ClientNotReading' });
    return false;
  };

  const replay = async (): Promise<void> => {
    let last = after;
    let limit = FIRST_REPLAY_PAGE;
    for (;;) {
      // A page is read only when it can be sent, so a client that waits holds no events.
      if (!(await mayGoOn())) return;
      const page = await read(last, limit);
      if (closed) return;
      if (page.isErr()) {
        handlers.failed({ type: 'StoreUnavailable' });
        return;
      }
      limit = nextPageSize(page.value.items);
      const events = page.value.items;
      // The first of a page goes at once (room was just waited for); each later one waits for room again.
      for (let event = events.shift(), waited = true; event; event = events.shift(), waited = false) {
        if (!waited && !(await mayGoOn())) return;
        handlers.history(event);
        last = event.id;
      }
      if (page.value.next_after === null) break;
    }
    handlers.caughtUp?.(last);
    const followed = await service.conversations.subscribeEvents(
      userId,
      conversationId,
      last,
      (event) => handlers.live(event),
      (reason) => handlers.end(reason),
      handlers.transient && ((event) => handlers.transient?.(event)),
    );
    if (followed.isErr()) {
      if (followed.error.type === 'ConversationNotFound') handlers.end('the conversation was deleted');
      else handlers.failed({ type: 'StoreUnavailable' });
      return;
    }
    subscription = followed.value;
    if (closed) subscription.close();
  };

  // The conversation is looked up first, so an unknown one is an error the channel answers with.
  return service.conversations.get(userId, conversationId).map((): Feed => ({
    start: () => {
      if (started || closed) return;
      started = true;
      // The rest happens as the client reads; its outcome reaches the handlers.
      replay().catch(() => handlers.failed({ type: 'StoreUnavailable' }));
    },
    close: () => {
      closed = true;
      subscription?.close();
    },
  }));
}
