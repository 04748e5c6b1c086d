import { z } from 'zod';
import { recordPathParams } from '../route.js';

/**
 * A path parameter: 1 to `max` characters without U+0000, and not `.` or `..`, which a URL
 * drops with the segment before them (the request would reach another route).
 */
export const pathSegment = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .regex(
      // eslint-disable-next-line no-control-regex -- U+0000 is left out as the router refuses it (findUnstorableText).
      /^(?:[^.\u0000][^\u0000]*|\.[^.\u0000][^\u0000]*|\.\.[^\u0000]+)$/,
      'cannot be . or .. (a URL drops such a path segment), nor hold U+0000',
    );

/** `{conversation_id}` in a path: an id no conversation can have is that conversation's 404. */
export const conversationIdParams = recordPathParams(
  z.object({ conversation_id: pathSegment(100) }),
  'ConversationNotFound',
  (p) => ({
    type: 'ConversationNotFound',
    conversationId: p.conversation_id ?? '',
  }),
);
