import { normalizeId } from '../ids.js';
import { createMicroagentMessage, suggestedTaskMessage } from './first-message.js';
import type { NewConversationRequest, SendMessageRequest } from './schema.js';
import type { StartTaskFilter } from './store.js';

/** Reading what a request asks for: its first message, its filter. */

/** Conversation ids in a start-task filter, in the stored (32 hex) form. */
export function normalizedTaskFilter(filter: StartTaskFilter): StartTaskFilter {
  return filter.app_conversation_id
    ? { ...filter, app_conversation_id: normalizeId(filter.app_conversation_id) }
    : filter;
}

/** The text and images of a message, or null when it has neither. */
export function userMessageOf(message: SendMessageRequest | null): { text: string; image_urls: string[] } | null {
  if (!message) return null;
  const text = message.content
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n\n');
  const image_urls = message.content.flatMap((c) => (c.type === 'image' ? c.image_urls : []));
  return text.trim() === '' && image_urls.length === 0 ? null : { text, image_urls };
}

/** A suggested task or microagent request becomes the first message; the user's own text follows it. */
export function initialMessageFromV0(request: NewConversationRequest): SendMessageRequest | null {
  const content: SendMessageRequest['content'] = [];
  const template = request.suggested_task
    ? suggestedTaskMessage(request.suggested_task)
    : request.create_microagent
      ? createMicroagentMessage(request.create_microagent)
      : null;
  if (template) content.push({ type: 'text', text: template });
  if (request.initial_user_msg)
    content.push({
      type: 'text',
      text: template ? `Also, from the user:\n${request.initial_user_msg}` : request.initial_user_msg,
    });
  if (request.image_urls && request.image_urls.length > 0)
    content.push({ type: 'image', image_urls: request.image_urls });
  return content.length > 0 ? { role: 'user', content, run: true } : null;
}
