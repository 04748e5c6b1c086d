import { okAsync, type ResultAsync } from 'neverthrow';
import type { AgentConversationService, ConversationServiceError, EventSubscription } from '@acs/core';
import type { ConversationEvent } from '@acs/core/schemas';

/** What a realtime channel hears about one conversation. */
export interface FeedHandlers {
  /** The whole log as it is when the channel opens, oldest first (the channel decides what to send of it). */
  history(events: ConversationEvent[]): void;
  /** Each event appended afterwards, once, in order. */
  live(event: ConversationEvent): void;
  /** The service ended the feed (the conversation was deleted). */
  end(reason: string): void;
}

const PAGE = 100;

/** A conversation's whole log as it is now, oldest first. */
export function readWholeLog(
  service: AgentConversationService,
  userId: string,
  conversationId: string,
): ResultAsync<ConversationEvent[], ConversationServiceError<'searchEvents'>> {
  const readFrom = (after: number, read: ConversationEvent[]): ResultAsync<ConversationEvent[], ConversationServiceError<'searchEvents'>> =>
    service.conversations.searchEvents(userId, conversationId, { after, kinds: null, limit: PAGE }).andThen((page) => {
      read.push(...page.items);
      return page.next_after === null ? okAsync(read) : readFrom(page.next_after, read);
    });
  return readFrom(0, []);
}

/**
 * Reads a conversation's log to its end, then follows it from exactly there: nothing between
 * the read and the follow is missed or repeated (the log's subscription fills any gap).
 */
export function followConversation(
  service: AgentConversationService,
  userId: string,
  conversationId: string,
  handlers: FeedHandlers,
): ResultAsync<EventSubscription, ConversationServiceError<'searchEvents'> | ConversationServiceError<'subscribeEvents'>> {
  return readWholeLog(service, userId, conversationId).andThen((history) => {
    handlers.history(history);
    const last = history.at(-1)?.id ?? 0;
    return service.conversations.subscribeEvents(userId, conversationId, last, (event) => handlers.live(event), (reason) => handlers.end(reason));
  });
}
