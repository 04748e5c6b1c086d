import type { AgentConversationService } from '@acs/core';
import type { ConversationEvent } from '@acs/core/schemas';
import { expectOk } from '@acs/core/testing';

/** Alice's conversation's first 100 events, oldest first. */
export async function eventsOf(service: AgentConversationService, id: string): Promise<ConversationEvent[]> {
  const page = await expectOk(service.conversations.searchEvents('alice', id, { after: 0, kinds: null, limit: 100 }));
  return page.items;
}

/** Alice's conversation as the service shows it: its record, its status as she sees it (fails the test when it does not exist). */
export async function conversationOf(service: AgentConversationService, id: string) {
  const [conversation] = await expectOk(service.conversations.getMany('alice', [id]));
  return conversation!;
}
