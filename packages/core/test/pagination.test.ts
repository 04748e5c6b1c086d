import { describe, expect, it } from 'vitest';
import type { Page } from '../src/index.js';
import { decodeCursor, encodeCursor, PAGE_ID_PATTERN, pageInMemory, type PageCursor } from '../src/ports.js';

interface Item extends PageCursor {
  label: string;
}

const item = (created_at: string, id: string): Item => ({ created_at, id, label: `${created_at}/${id}` });
const t = (second: number) => `2024-05-01T10:00:${String(second).padStart(2, '0')}.000Z`;

/** 7 items, created_at ties at t(2) and t(5), inserted in a scrambled order. */
function fixture(): Item[] {
  return [
    item(t(5), 'b'),
    item(t(1), 'a'),
    item(t(2), 'c'),
    item(t(9), 'z'),
    item(t(2), 'a'),
    item(t(5), 'a'),
    item(t(2), 'b'),
  ];
}
const NEWEST_FIRST = [`${t(9)}/z`, `${t(5)}/b`, `${t(5)}/a`, `${t(2)}/c`, `${t(2)}/b`, `${t(2)}/a`, `${t(1)}/a`];
const OLDEST_FIRST = [...NEWEST_FIRST].reverse();

/** Walks every page; `between` runs before each follow-up page (to simulate concurrent inserts). */
function walk(
  items: Item[],
  limit: number,
  order: 'newest_first' | 'oldest_first',
  between: (items: Item[], pageNo: number) => void = () => {},
): Page<Item>[] {
  const pages: Page<Item>[] = [];
  let pageId: string | null = null;
  do {
    if (pages.length > 0) between(items, pages.length);
    const after: PageCursor | null = pageId === null ? null : decodeCursor(pageId);
    if (pageId !== null && after === null) throw new Error(`page id ${pageId} did not decode`);
    const page: Page<Item> = pageInMemory(items, { limit, after }, order);
    pages.push(page);
    pageId = page.next_page_id;
    if (pages.length > 100) throw new Error('walk does not end');
  } while (pageId !== null);
  return pages;
}

const labels = (pages: Page<Item>[]) => pages.flatMap((p) => p.items.map((i) => i.label));

describe('encodeCursor / decodeCursor', () => {
  it.each([
    { created_at: t(1), id: '0123456789abcdef0123456789abcdef' },
    { created_at: '2024-01-01T00:00:00.000Z', id: 'client-chosen_id' },
    { created_at: '1970-01-01T00:00:00.000Z', id: 'ünïcødé/id with spaces?&=' },
    { created_at: '2024-01-01T00:00:00.000Z', id: '' },
  ])('round-trips %j', (cursor) => {
    const encoded = encodeCursor(cursor);
    expect(encoded).toMatch(new RegExp(PAGE_ID_PATTERN));
    expect(decodeCursor(encoded)).toEqual(cursor);
  });

  it('is opaque: neither part appears in clear', () => {
    const encoded = encodeCursor({ created_at: t(1), id: 'abcdef' });
    expect(encoded).not.toContain('abcdef');
    expect(encoded).not.toContain('2024');
  });

  it('refuses to encode a created_at that is not a date after 1970 (a defect, not a page)', () => {
    expect(() => encodeCursor({ created_at: 'x', id: 'a' })).toThrow(/created_at/);
    expect(() => encodeCursor({ created_at: '1969-12-31T23:59:59.999Z', id: 'a' })).toThrow(/created_at/);
  });

  it.each([
    '',
    'garbage',
    '!!!!',
    '%7B%7D',
    'null',
    '{"c":"a","i":"b"}',
    '....',
    '🙂',
    '5AAAAAAA',
    'AAAAAAAAA',
    'AAAAAAAAAB',
    'AAAAAAAAAAB',
  ])('returns null for %j, which is not of the form PAGE_ID_PATTERN states', (pageId) => {
    expect(pageId).not.toMatch(new RegExp(PAGE_ID_PATTERN));
    expect(decodeCursor(pageId)).toBeNull();
  });

  it('returns null for strings outside the base64url alphabet, even when they would decode', () => {
    const valid = encodeCursor({ created_at: t(1), id: 'abc' });
    expect(decodeCursor(valid)).not.toBeNull();
    for (const mangled of [
      `${valid}!`,
      `${valid.slice(0, 4)}*${valid.slice(4)}`,
      ` ${valid}`,
      `${valid}\n`,
      `${valid}.`,
      `${valid}==`,
    ]) {
      expect(decodeCursor(mangled), JSON.stringify(mangled)).toBeNull();
    }
    // standard base64 (with + / =) is not what we issue
    expect(decodeCursor(Buffer.from([0, 0, 0, 0, 0, 0, 0xfb, 0xff]).toString('base64'))).toBeNull();
  });

  it('takes every string of the documented form as a position: a date with a four-digit year, and an id without U+0000', () => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const pattern = new RegExp(PAGE_ID_PATTERN);
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    let taken = 0;
    for (let i = 0; i < 5000; i++) {
      const text = Array.from({ length: 8 + (next() % 24) }, () => alphabet[next() % 64]).join('');
      if (!pattern.test(text)) continue;
      taken++;
      const cursor = decodeCursor(text);
      expect(cursor, text).not.toBeNull();
      expect(cursor?.created_at, text).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      expect(cursor?.id, text).not.toContain('\u0000');
    }
    expect(taken).toBeGreaterThan(1000);
    // The largest time the first character allows is still a four-digit year.
    expect(decodeCursor('4_______')?.created_at).toMatch(/^9\d{3}-/);
  });
});

describe('pageInMemory', () => {
  it('orders newest first by (created_at desc, id desc)', () => {
    expect(labels([pageInMemory(fixture(), { limit: 100, after: null })])).toEqual(NEWEST_FIRST);
    expect(labels([pageInMemory(fixture(), { limit: 100, after: null }, 'newest_first')])).toEqual(NEWEST_FIRST);
  });

  it('orders oldest first by (created_at asc, id asc)', () => {
    expect(labels([pageInMemory(fixture(), { limit: 100, after: null }, 'oldest_first')])).toEqual(OLDEST_FIRST);
  });

  it.each([1, 2, 3, 4, 6])('walks newest first with limit %d without repeating or skipping', (limit) => {
    const pages = walk(fixture(), limit, 'newest_first');
    expect(labels(pages)).toEqual(NEWEST_FIRST);
    expect(pages).toHaveLength(Math.ceil(NEWEST_FIRST.length / limit));
    for (const page of pages.slice(0, -1)) expect(page.items).toHaveLength(limit);
    expect(pages.at(-1)?.next_page_id).toBeNull();
  });

  it.each([1, 2, 3, 5])('walks oldest first with limit %d without repeating or skipping', (limit) => {
    const pages = walk(fixture(), limit, 'oldest_first');
    expect(labels(pages)).toEqual(OLDEST_FIRST);
    expect(pages.at(-1)?.next_page_id).toBeNull();
  });

  it('points next_page_id at the last item of the page', () => {
    const page = pageInMemory(fixture(), { limit: 3, after: null });
    expect(page.next_page_id).not.toBeNull();
    expect(decodeCursor(page.next_page_id ?? '')).toEqual({ created_at: t(5), id: 'a' });
  });

  it('has next_page_id null when exactly `limit` items remain', () => {
    expect(pageInMemory(fixture(), { limit: 7, after: null }).next_page_id).toBeNull();
    expect(pageInMemory(fixture(), { limit: 7, after: null }).items).toHaveLength(7);
    const first = pageInMemory(fixture(), { limit: 4, after: null });
    const second = pageInMemory(fixture(), { limit: 3, after: decodeCursor(first.next_page_id ?? '') });
    expect(second.items.map((i) => i.label)).toEqual(NEWEST_FIRST.slice(4));
    expect(second.next_page_id).toBeNull();
  });

  it('has next_page_id non-null when one more item than `limit` remains', () => {
    expect(pageInMemory(fixture(), { limit: 6, after: null }).next_page_id).not.toBeNull();
  });

  it('returns an empty last page for an empty collection or a cursor past the end', () => {
    expect(pageInMemory([], { limit: 10, after: null })).toEqual({ items: [], next_page_id: null });
    expect(pageInMemory(fixture(), { limit: 10, after: { created_at: t(0), id: '0' } })).toEqual({
      items: [],
      next_page_id: null,
    });
  });

  it('starts strictly after a cursor that ties on created_at', () => {
    const page = pageInMemory(fixture(), { limit: 10, after: { created_at: t(2), id: 'b' } });
    expect(page.items.map((i) => i.label)).toEqual([`${t(2)}/a`, `${t(1)}/a`]);
  });

  it('keeps the walk intact when newer items are inserted between pages (newest first)', () => {
    let n = 0;
    const pages = walk(fixture(), 2, 'newest_first', (items) => {
      n += 1;
      // newer than everything, and a tie with the newest created_at but a higher id
      items.push(item(t(30 + n), `new${n}`), item(t(9), `zz${n}`));
    });
    expect(labels(pages)).toEqual(NEWEST_FIRST);
  });

  it('keeps the walk intact when newer items are inserted between pages (oldest first)', () => {
    let n = 0;
    const pages = walk(fixture(), 2, 'oldest_first', (items, pageNo) => {
      if (pageNo > 2) return;
      n += 1;
      items.push(item(t(40 + n), `new${n}`));
    });
    const seen = labels(pages);
    expect(seen).toEqual([...OLDEST_FIRST, `${t(41)}/new1`, `${t(42)}/new2`]);
    expect(new Set(seen).size).toBe(seen.length);
  });

  it('keeps the walk going when the cursor item is deleted between pages', () => {
    const pages = walk(fixture(), 3, 'newest_first', (items, pageNo) => {
      if (pageNo !== 1) return;
      const index = items.findIndex((i) => i.created_at === t(5) && i.id === 'a');
      items.splice(index, 1);
    });
    // it was already on page 1; the rest follows without a gap
    expect(pages[0]?.items.at(-1)?.label).toBe(`${t(5)}/a`);
    expect(labels(pages)).toEqual(NEWEST_FIRST);
  });

  it('does not reorder or change the collection it is given', () => {
    const items = fixture();
    const copy = structuredClone(items);
    pageInMemory(items, { limit: 2, after: null });
    pageInMemory(items, { limit: 2, after: null }, 'oldest_first');
    expect(items).toEqual(copy);
  });

  it('accepts any iterable', () => {
    const set = new Set(fixture());
    expect(pageInMemory(set.values(), { limit: 2, after: null }).items.map((i) => i.label)).toEqual(
      NEWEST_FIRST.slice(0, 2),
    );
  });
});
