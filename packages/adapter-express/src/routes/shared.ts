import type { Page, PageRequest } from '@acs/core';
import type { ResultAsync } from 'neverthrow';
import { z } from 'zod';
import { booleanParam, pageRequestOf, timestampParam } from '../query.js';

/** Schemas and helpers several resource groups' routes share. */

export const pageOf = <T extends z.ZodType>(item: T) =>
  z.object({
    items: z.array(item),
    next_page_id: z
      .string()
      .nullable()
      .meta({ description: 'Pass as page_id for the next page; null on the last page.' }),
  });

export const SuccessSchema = z.object({ success: z.literal(true) });
export const MessageSchema = z.object({ message: z.string() });
export const CountSchema = z.int().min(0);

/** The answer to actions waiting for confirmation (V0 and V1). */
export const ConfirmationRequestSchema = z
  .strictObject({
    accept: z
      .boolean()
      .meta({ description: 'true runs the waiting actions; false rejects them (the agent then waits for a message).' }),
    reason: z.string().max(10_000).nullable().optional().meta({ description: 'Shown to the model with a rejection.' }),
  })
  .meta({ id: 'ConfirmationRequest' });

export const conversationFilterQuery = {
  title__contains: z.string().max(200).optional().meta({ description: 'Case-insensitive substring of the title.' }),
  created_at__gte: timestampParam,
  created_at__lt: timestampParam,
  updated_at__gte: timestampParam,
  updated_at__lt: timestampParam,
  include_sub_conversations: booleanParam,
  sandbox_id__eq: z
    .string()
    .min(1)
    .max(128)
    .optional()
    .meta({ description: 'Only the conversations in this sandbox.' }),
};

export const toFilter = (q: {
  title__contains?: string | undefined;
  created_at__gte?: string | undefined;
  created_at__lt?: string | undefined;
  updated_at__gte?: string | undefined;
  updated_at__lt?: string | undefined;
  include_sub_conversations?: boolean | undefined;
  sandbox_id__eq?: string | undefined;
}) => ({
  ...(q.title__contains !== undefined ? { title_contains: q.title__contains } : {}),
  ...(q.created_at__gte !== undefined ? { created_at_gte: q.created_at__gte } : {}),
  ...(q.created_at__lt !== undefined ? { created_at_lt: q.created_at__lt } : {}),
  ...(q.updated_at__gte !== undefined ? { updated_at_gte: q.updated_at__gte } : {}),
  ...(q.updated_at__lt !== undefined ? { updated_at_lt: q.updated_at__lt } : {}),
  ...(q.include_sub_conversations !== undefined ? { include_sub_conversations: q.include_sub_conversations } : {}),
  ...(q.sandbox_id__eq !== undefined ? { sandbox_id: q.sandbox_id__eq } : {}),
});

/** Runs `list` from the page the query names (the query schema admits only page ids that name one). */
export const paged = <T, E>(
  query: { page_id?: string | undefined; limit: number },
  list: (page: PageRequest) => ResultAsync<Page<T>, E>,
) => list(pageRequestOf(query));
