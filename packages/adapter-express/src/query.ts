import type { DomainErrorOf, PageRequest } from '@acs/core';
import { decodeCursor, MAX_PAGE_SIZE, PAGE_ID_PATTERN } from '@acs/core/ports';
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

/** An opaque page id from a previous page's `next_page_id`; any of its form is a position in the list. */
export const pageIdParam = z
  .string()
  .max(1024)
  .regex(new RegExp(PAGE_ID_PATTERN), 'is not a page id; use next_page_id from the previous page')
  .optional()
  .meta({ description: "Opaque: the previous page's next_page_id." });

export const pagingQuery = z.object({ page_id: pageIdParam, limit: limitParam });

/** Page query → page request (the schema let only page ids of the form decodeCursor reads through). */
export function pageRequestOf(query: { page_id?: string | undefined; limit: number }): PageRequest {
  const after = query.page_id === undefined ? null : decodeCursor(query.page_id);
  if (query.page_id !== undefined && after === null) throw new Error('a page id of the documented form did not decode');
  return { limit: query.limit, after };
}

/** Ids for batch reads: repeated (`?id=a&id=b`) or comma-separated, 1 to 100; an id holds no comma. */
export const idList = z
  .preprocess(
    (v: unknown): unknown =>
      v === undefined
        ? v
        : (Array.isArray(v) ? (v as unknown[]) : [v])
            .flatMap((x) => (typeof x === 'string' ? x.split(',') : [x]))
            .filter((x) => x !== ''),
    z
      .array(
        z
          .string()
          .min(1)
          .max(128)
          // eslint-disable-next-line no-control-regex -- U+0000 is left out as the router refuses it (findUnstorableText).
          .regex(/^[^,\u0000]+$/, 'holds a comma (which separates ids) or U+0000'),
      )
      .min(1, 'give at least one id')
      .max(100, 'at most 100 ids per request'),
  )
  .meta({ description: 'Repeat the parameter or separate ids with commas; 1 to 100.' });

/** A UUID: 32 hex digits, dashed (8-4-4-4-12) or not. */
export const UUID_PATTERN =
  '^(?:[0-9a-fA-F]{32}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$';

/**
 * Ids for a batch read whose limits OpenHands answers with 400 (`checkBatchIds`): repeated or
 * comma-separated, each 1 to 128 characters and of the form `item` says (the document states
 * it; the router takes any, for checkBatchIds to answer); how many is left to the check (the
 * URL's own limit bounds it).
 */
export const batchIdList = (item: z.ZodString = z.string()) =>
  z.preprocess(
    (v: unknown): unknown =>
      v === undefined
        ? v
        : (Array.isArray(v) ? (v as unknown[]) : [v])
            .flatMap((x) => (typeof x === 'string' ? x.split(',') : [x]))
            .filter((x) => x !== ''),
    z
      .array(
        item
          .min(1)
          .max(128)
          // eslint-disable-next-line no-control-regex -- U+0000 is left out as the router refuses it (findUnstorableText).
          .regex(/^[^,\u0000]+$/, 'holds a comma (which separates ids) or U+0000'),
      )
      .min(1, 'give at least one id'),
  );

const UUID = new RegExp(UUID_PATTERN);

/**
 * OpenHands' limits of a batch read, as the 400 it answers with: at most `max` ids, each a UUID
 * (when `uuid`) or an event id (digits, when `digits`). Null when the ids pass.
 */
export function checkBatchIds(
  field: string,
  ids: readonly string[],
  rule: { max: number; form?: 'uuid' | 'digits' },
): DomainErrorOf<'InvalidIds'> | null {
  if (ids.length > rule.max)
    return { type: 'InvalidIds', field, reason: `at most ${rule.max} ids per request; got ${ids.length}` };
  const pattern = rule.form === 'uuid' ? UUID : rule.form === 'digits' ? /^\d{1,10}$/ : null;
  const bad = pattern ? ids.filter((id) => !pattern.test(id)) : [];
  if (bad.length === 0) return null;
  const shown = bad
    .slice(0, 5)
    .map((id) => JSON.stringify(id))
    .join(', ');
  return {
    type: 'InvalidIds',
    field,
    reason: `${rule.form === 'uuid' ? 'not a UUID' : 'not an event id'}: ${shown}${bad.length > 5 ? ` and ${bad.length - 5} more` : ''}`,
  };
}

/**
 * An ISO-8601 date or date-time: a date, optionally a time to the minute, second or
 * nanosecond, optionally an offset (Z, ±hh:mm or ±hhmm); without an offset it is UTC. Every
 * string of this form is a date (a day past the month's end runs into the next month, as
 * Date.parse reads it), so the pattern is the whole rule and the document states it.
 */
const TIMESTAMP =
  /^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])(?:T(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,9})?)?(?:Z|[+-](?:[01][0-9]|2[0-3]):?[0-5][0-9])?)?$/;

/** ISO-8601 timestamps (TIMESTAMP); normalised to UTC with milliseconds. */
export const timestampParam = z
  .string()
  .regex(TIMESTAMP, 'must be an ISO-8601 date or date-time, e.g. 2026-01-31T12:00:00Z')
  .transform((v) => new Date(Date.parse(withZone(v))).toISOString())
  .optional()
  .meta({
    description: 'An ISO-8601 date or date-time, e.g. 2026-01-31 or 2026-01-31T12:00:00Z; without an offset, UTC.',
  });

function withZone(v: string): string {
  if (!v.includes('T')) return `${v}T00:00:00Z`;
  return /(Z|[+-][0-9]{2}:?[0-9]{2})$/.test(v) ? v : `${v}Z`;
}

export const booleanParam = z
  .enum(['true', 'false', '1', '0'])
  .transform((v) => v === 'true' || v === '1')
  .optional();

/** The largest event id (event ids are 32-bit integers in every store). */
const MAX_EVENT_ID = 2_147_483_647;

/** A non-negative event id: digits only (no signs, decimals, exponents or blanks). */
export const eventIdParam = z.preprocess(
  (v: unknown): unknown => (typeof v === 'string' && /^\d{1,10}$/.test(v.trim()) ? Number(v.trim()) : v),
  z
    .int({ error: `must be an event id: an integer between 0 and ${MAX_EVENT_ID}` })
    .min(0, 'must not be negative')
    .max(MAX_EVENT_ID, `must be at most ${MAX_EVENT_ID}`),
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
  .meta({
    description: `Only these kinds (${CONVERSATION_EVENT_KINDS.join(', ')}). Repeat the parameter or separate kinds with commas.`,
  });
