import { z } from 'zod';

/** A page of results in the V1 shape. */
export interface Page<T> {
  items: T[];
  next_page_id: string | null;
}

export const MAX_PAGE_SIZE = 100;

/**
 * Keyset position: the (created_at, id) of the last item of the previous page.
 * Lists are ordered newest first by (created_at desc, id desc), a total order, so a
 * page never repeats or skips an item, even while new items are being created.
 */
export interface PageCursor {
  created_at: string;
  id: string;
}

export interface PageRequest {
  limit: number;
  after: PageCursor | null;
}

const cursorSchema = z.object({ c: z.string().min(1), i: z.string().min(1) });

export function encodeCursor(cursor: PageCursor): string {
  return Buffer.from(JSON.stringify({ c: cursor.created_at, i: cursor.id })).toString('base64url');
}

/** Returns null when the page id is not one we issued. */
export function decodeCursor(pageId: string): PageCursor | null {
  try {
    const bytes = Buffer.from(pageId, 'base64url');
    // Node's decoder skips characters outside the alphabet; only accept what encodeCursor could have produced.
    if (bytes.toString('base64url') !== pageId) return null;
    const parsed = cursorSchema.safeParse(JSON.parse(bytes.toString('utf8')));
    return parsed.success ? { created_at: parsed.data.c, id: parsed.data.i } : null;
  } catch {
    return null;
  }
}

/** Newest first: (created_at desc, id desc). */
export function compareNewestFirst(a: PageCursor, b: PageCursor): number {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? 1 : -1;
  if (a.id !== b.id) return a.id < b.id ? 1 : -1;
  return 0;
}

/** Oldest first: (created_at asc, id asc). */
export function compareOldestFirst(a: PageCursor, b: PageCursor): number {
  return -compareNewestFirst(a, b);
}

/**
 * Pages an already filtered collection in memory. Store adapters that cannot push
 * paging down to their backend use this; SQL adapters do the same in a query.
 */
export function pageInMemory<T extends PageCursor>(
  all: Iterable<T>,
  request: PageRequest,
  order: 'newest_first' | 'oldest_first' = 'newest_first',
): Page<T> {
  const compare = order === 'newest_first' ? compareNewestFirst : compareOldestFirst;
  const sorted = [...all].sort(compare);
  const after = request.after;
  const start = after ? sorted.filter((item) => compare(item, after) > 0) : sorted;
  const items = start.slice(0, request.limit);
  const last = items.at(-1);
  const more = start.length > request.limit && last !== undefined;
  return { items, next_page_id: more ? encodeCursor({ created_at: last.created_at, id: last.id }) : null };
}
