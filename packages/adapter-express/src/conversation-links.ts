import type { AppConversation, ConversationInfo } from '@acs/core/schemas';
import type { ConversationKeys } from './auth/conversation-keys.js';

/**
 * Where a conversation's agent routes and realtime channels are, for the client: relative to the
 * router's mount point (so one origin serves the UI, the API and the channels), and the
 * conversation's own key, which opens only those.
 */
export function withLinks<T extends ConversationInfo | AppConversation>(conversation: T, userId: string, mountPath: string, keys: ConversationKeys): T {
  const id = 'conversation_id' in conversation ? conversation.conversation_id : conversation.id;
  const url = `${mountPath.replace(/\/+$/, '')}/api/conversations/${id}`;
  const session_api_key = keys.mint(userId, id);
  return 'conversation_id' in conversation ? { ...conversation, url, session_api_key } : { ...conversation, conversation_url: url, session_api_key };
}
