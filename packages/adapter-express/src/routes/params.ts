import { z } from 'zod';
import { recordPathParams } from '../route.js';

/** `{conversation_id}` in a path: an id no conversation can have is that conversation's 404. */
export const conversationIdParams = recordPathParams(z.object({ conversation_id: z.string().min(1).max(100) }), 'ConversationNotFound', (p) => ({
  type: 'ConversationNotFound',
  conversationId: p.conversation_id ?? '',
}));
