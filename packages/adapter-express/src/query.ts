import type { PageRequest } from '@acs/core';
import { decodeCursor, MAX_PAGE_SIZE } from '@acs/core/ports';
import { CONVERSATION_EVENT_KINDS, ConversationEventKindSchema } from '@acs/core/schemas';
import { z } from 'zod';

/** `limit` 1–100, default 100. */
export const limitParam = z.coerce
  .number({ error: 'must be an integer between 1 and 100' })
  .int('must be an integer between 1 and 100')
  .min(1, 'must be an integer between 1 and 100')
  .max(MAX_PAGE_SIZE, 'must be an integer between 1 and 100')
  .default(MAX_PAGE_SIZE)
  .meta({ description: 'Page size, 1 to 100 (default 100).' });

/** An opaque page id from a previous page's `next_page_id`. */
export const pageIdParam = z
  .string()
  .min(1)
  .max(1024)
  .optional()
  .meta({ description: "Opaque: the previous page's next_page_id." });

export const pagingQuery = z.object({ page_id: pageIdParam, limit: limitParam });

/** Page query → page request; a page id this server did not issue is a validation issue. */
export function pageRequestOf(query: { page_id?: string | undefined; limit: number }): PageRequest | { invalidPageId: true } {
  if (query.page_id === undefined) return { limit: query.limit, after: null };
  const after = decodeCursor(query.page_id);
  return after ? { limit: query.limit, after } : { invalidPageId: true };
}

/** Ids for batch reads: repeated (`?id=a&id=b`) or comma-separated, 1 to 100. */
export const idList = z
  .preprocess(
    (v: unknown): unknown =>
      v === undefined ? v : (Array.isArray(v) ? (v as unknown[]) : [v]).flatMap((x) => (typeof x === 'string' ? x.split(',') : [x])).filter((x) => x !== ''),
    z.array(z.string().min(1).max(128)).min(1, 'give at least one id').max(100, 'at most 100 ids per request'),
  )
  .meta({ description: 'Repeat the parameter or separate ids with commas; 1 to 100.' });

/** ISO-8601 timestamps; without an offset they are taken as UTC. Normalised to UTC with milliseconds. */
export const timestampParam = z
  .string()
  .refine((v) => /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(v) && !Number.isNaN(Date.parse(withZone(v))), {
    message: 'must be an ISO-8601 date or date-time, e.g. 2026-01-31T12:00:00Z',
  })
  .transform((v) => new Date(Date.parse(withZone(v))).toISOString())
  .optional();

function withZone(v: string): string {
  if (!v.includes('T')) return `${v}T00:00:00Z`;
  return /(Z|[+-]\d{2}:?\d{2})$/.test(v) ? v : `${v}Z`;
}

export const booleanParam = z
  .enum(['true', 'false', '1', '0'])
  .transform((v) => v === 'true' || v === '1')
  .optional();

/** The largest event id (event ids are 32-bit integers in every store). */
const MAX_EVENT_ID = 2_147_483_647;

/** A non-negative event id: digits only (no signs, decimals, exponents or blanks). */
export const eventIdParam = z
  .preprocess(
    (v: unknown): unknown => (typeof v === 'string' && /^\d{1,10}$/.test(v.trim()) ? Number(v.trim()) : v),
    z.int({ error: `must be an event id: an integer between 0 and ${MAX_EVENT_ID}` }).min(0, 'must not be negative').max(MAX_EVENT_ID, `must be at most ${MAX_EVENT_ID}`),
  );

/** Event kinds: repeated (`?kind=a&kind=b`) or comma-separated; duplicates are ignored. */
export const kindList = z
  .preprocess(
    (v: unknown): unknown =>
      v === undefined
        ? v
        : [
            ...new Set(
              (Array.isArray(v) ? (v as unknown[]) : [v])
                .flatMap((x) => (typeof x === 'string' ? x.split(',') : [x]))
                .map((x) => (typeof x === 'string' ? x.trim() : x))
                .filter((x) => x !== ''),
            ),
          ],
    z.array(ConversationEventKindSchema).min(1, 'give at least one kind'),
  )
  .optional()
  .meta({ description: `Only these kinds (${CONVERSATION_EVENT_KINDS.join(', ')}). Repeat the parameter or separate kinds with commas.` });
