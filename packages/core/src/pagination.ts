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

/**
 * A page id is base64url of 6 bytes of created_at (milliseconds since 1970, big-endian) and
 * then the id in UTF-8. Every string of that form is a position: the document states the form
 * as a pattern (PAGE_ID_PATTERN), and the server takes any page id that has it, so a client is
 * never refused one the document allows. Neither part appears in clear.
 */
const TIME_BYTES = 6;
/**
 * Canonical base64url of at least the 6 time bytes. The first character keeps the time below
 * 57 × 2^42 ms (year 9914), so it is always a date with a four-digit year.
 */
export const PAGE_ID_PATTERN =
  '^[A-Za-z0-4][A-Za-z0-9_-]{7}(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-]{2}[AEIMQUYcgkosw048]|[A-Za-z0-9_-][AQgw])?$';
const PAGE_ID = new RegExp(PAGE_ID_PATTERN);

export function encodeCursor(cursor: PageCursor): string {
  const ms = Date.parse(cursor.created_at);
  if (!Number.isSafeInteger(ms) || ms < 0)
    throw new Error(`cannot page after created_at ${JSON.stringify(cursor.created_at)}: not a date after 1970`);
  const time = Buffer.alloc(TIME_BYTES);
  time.writeUIntBE(ms, 0, TIME_BYTES);
  return Buffer.concat([time, Buffer.from(cursor.id, 'utf8')]).toString('base64url');
}

/** Returns null when the page id does not have the form of one (PAGE_ID_PATTERN). */
export function decodeCursor(pageId: string): PageCursor | null {
  if (!PAGE_ID.test(pageId)) return null;
  const bytes = Buffer.from(pageId, 'base64url');
  // No id holds U+0000 (text storage cannot), so a made-up one ending there names the same place without it.
  const id = bytes.subarray(TIME_BYTES).toString('utf8').split('\u0000', 1)[0] ?? '';
  return { created_at: new Date(bytes.readUIntBE(0, TIME_BYTES)).toISOString(), id };
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
  return pageOf(start, request.limit);
}

/**
 * A page of the first `limit` of `records`, in their order, with a next page id when there are
 * more: SQL stores fetch `limit + 1` rows in page order and pass them here.
 */
export function pageOf<R extends PageCursor>(records: readonly R[], limit: number): Page<R> {
  const items = records.slice(0, limit);
  const last = items.at(-1);
  const more = records.length > limit && last !== undefined;
  return { items, next_page_id: more ? encodeCursor({ created_at: last.created_at, id: last.id }) : null };
}
