import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { encodeCursor } from '@acs/core/ports';
import { arr, createConversation, errorCode, obj, startHarness, storeSettings, type Harness } from './harness.js';

/** Every paged list route, with how to read its items and ids. */
const PAGED = [
  { path: '/api/conversations', list: 'results', id: 'conversation_id' },
  { path: '/api/v1/app-conversations', list: 'items', id: 'id' },
  { path: '/api/v1/app-conversations/search', list: 'items', id: 'id' },
  { path: '/api/v1/app-conversations/start-tasks/search', list: 'items', id: 'id' },
  { path: '/api/v1/sandboxes/search', list: 'items', id: 'id' },
  { path: '/api/v1/sandbox-specs/search', list: 'items', id: 'id' },
] as const;

type Paged = (typeof PAGED)[number];

function pageOf(route: Pick<Paged, 'list' | 'id'>, body: unknown): { ids: string[]; next: string | null } {
  const page = obj(body);
  return {
    ids: arr(page[route.list]).map((x) => obj(x)[route.id] as string),
    next: page.next_page_id as string | null,
  };
}

const join = (path: string, query: string) => `${path}${path.includes('?') ? '&' : '?'}${query}`;

describe('limit and page_id validation', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  it.each(PAGED)('$path: limit 0, 101, -1, abc, 1.5, empty or repeated → 422 naming query.limit', async (route) => {
    for (const limit of ['0', '101', '-1', 'abc', '1.5', '', '1e3', 'Infinity', 'NaN']) {
      const r = await h.call('GET', join(route.path, `limit=${encodeURIComponent(limit)}`));
      expect(r.status, `limit=${limit}: ${r.text}`).toBe(422);
      expect(errorCode(r.body)).toBe('VALIDATION_FAILED');
      expect(arr(obj(r.body).issues).map((i) => obj(i).path)).toContain('query.limit');
    }
    expect((await h.call('GET', join(route.path, 'limit=1&limit=2'))).status).toBe(422);
    for (const limit of ['1', '100', '50']) {
      expect((await h.call('GET', join(route.path, `limit=${limit}`))).status, `limit=${limit}`).toBe(200);
    }
  });

  it.each(PAGED)('$path: a page_id not of the documented form → 422 naming query.page_id', async (route) => {
    const malformed = [
      'garbage',
      '!!!',
      Buffer.from('20').toString('base64'),
      '5AAAAAAA',
      'AAAAAAAAB',
      'x'.repeat(2000),
    ];
    for (const pageId of malformed) {
      const r = await h.call('GET', join(route.path, `page_id=${encodeURIComponent(pageId)}`));
      expect(r.status, `page_id=${pageId.slice(0, 40)}: ${r.text}`).toBe(422);
      expect(errorCode(r.body)).toBe('VALIDATION_FAILED');
      expect(arr(obj(r.body).issues).map((i) => obj(i).path)).toContain('query.page_id');
    }
    expect((await h.call('GET', join(route.path, 'page_id='))).status).toBe(422);
  });

  it.each(PAGED)(
    '$path: any page_id of the documented form is taken: a place in the list (200), or for specs a spec that is not there (404)',
    async (route) => {
      for (const pageId of [
        Buffer.from('{"x":1}').toString('base64url'),
        Buffer.from('not json').toString('base64url'),
        'AAAAAAAA',
        '4_______',
        encodeCursor({ created_at: '2026-01-01T00:00:00.000Z', id: 'nothing' }),
      ]) {
        const r = await h.call('GET', join(route.path, `page_id=${encodeURIComponent(pageId)}`));
        if (route.path === '/api/v1/sandbox-specs/search') {
          expect(r.status, `page_id=${pageId}: ${r.text}`).toBe(404);
          expect(errorCode(r.body)).toBe('SANDBOX_SPEC_NOT_FOUND');
        } else expect(r.status, `page_id=${pageId}: ${r.text}`).toBe(200);
      }
    },
  );
});

describe('default page size', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
    await storeSettings(h);
    // 101 conversations: also 101 sandboxes and 101 start tasks.
    for (let i = 0; i < 101; i++) await createConversation(h);
    await h.idle();
  });
  afterAll(async () => {
    await h.close();
  });

  it.each(PAGED.filter((r) => !r.path.includes('sandbox-specs')))(
    '$path: 100 items by default, then the rest',
    async (route) => {
      const first = pageOf(route, (await h.call('GET', route.path)).body);
      expect(first.ids).toHaveLength(100);
      expect(first.next).toEqual(expect.any(String));
      const second = pageOf(
        route,
        (await h.call('GET', join(route.path, `page_id=${encodeURIComponent(first.next as string)}`))).body,
      );
      expect(second.ids).toHaveLength(1);
      expect(second.next).toBeNull();
      expect(new Set([...first.ids, ...second.ids]).size).toBe(101);
    },
  );

  it('a page that ends exactly at the last item has no next_page_id', async () => {
    const first = pageOf(PAGED[4], (await h.call('GET', '/api/v1/sandboxes/search?limit=100')).body);
    const second = pageOf(
      PAGED[4],
      (await h.call('GET', `/api/v1/sandboxes/search?limit=1&page_id=${encodeURIComponent(first.next as string)}`))
        .body,
    );
    expect(second.ids).toHaveLength(1);
    expect(second.next).toBeNull();
  });
});

describe('walking pages while new items are created', () => {
  let h: Harness;
  beforeEach(async () => {
    // The system clock: many items share a millisecond, so the order must not rely on timestamps alone.
    h = await startHarness();
    await storeSettings(h);
  });
  afterEach(async () => {
    await h.close();
  });

  /**
   * Walks every page of `path` with limit 7, creating two conversations before each page request.
   * Returns the ids seen in order.
   */
  async function walk(route: Pick<Paged, 'list' | 'id'>, path: string): Promise<string[]> {
    const seen: string[] = [];
    let next: string | null = null;
    let pages = 0;
    do {
      if (pages < 12) {
        await createConversation(h);
        await createConversation(h);
      }
      const r = await h.call('GET', join(path, `limit=7${next ? `&page_id=${encodeURIComponent(next)}` : ''}`));
      expect(r.status, r.text).toBe(200);
      const page = pageOf(route, r.body);
      expect(page.ids.length).toBeLessThanOrEqual(7);
      if (page.next !== null) expect(page.ids).toHaveLength(7);
      seen.push(...page.ids);
      next = page.next;
      pages++;
      expect(pages).toBeLessThan(40);
    } while (next !== null);
    return seen;
  }

  const cases: {
    name: string;
    route: Pick<Paged, 'list' | 'id'>;
    path: string;
    originals: (h: Harness) => Promise<string[]>;
  }[] = [
    {
      name: 'V0 conversations',
      route: PAGED[0],
      path: '/api/conversations',
      originals: async (hh) => pageOf(PAGED[0], (await hh.call('GET', '/api/conversations')).body).ids,
    },
    {
      name: 'V1 app conversations (search)',
      route: PAGED[2],
      path: '/api/v1/app-conversations/search',
      originals: async (hh) => pageOf(PAGED[2], (await hh.call('GET', '/api/v1/app-conversations/search')).body).ids,
    },
    {
      name: 'V1 app conversations (list)',
      route: PAGED[1],
      path: '/api/v1/app-conversations',
      originals: async (hh) => pageOf(PAGED[1], (await hh.call('GET', '/api/v1/app-conversations')).body).ids,
    },
    {
      name: 'sandboxes',
      route: PAGED[4],
      path: '/api/v1/sandboxes/search',
      originals: async (hh) => pageOf(PAGED[4], (await hh.call('GET', '/api/v1/sandboxes/search')).body).ids,
    },
    {
      name: 'start tasks, newest first',
      route: PAGED[3],
      path: '/api/v1/app-conversations/start-tasks/search',
      originals: async (hh) =>
        pageOf(PAGED[3], (await hh.call('GET', '/api/v1/app-conversations/start-tasks/search')).body).ids,
    },
    {
      name: 'start tasks, oldest first',
      route: PAGED[3],
      path: '/api/v1/app-conversations/start-tasks/search?sort_order=CREATED_AT',
      originals: async (hh) =>
        pageOf(
          PAGED[3],
          (await hh.call('GET', '/api/v1/app-conversations/start-tasks/search?sort_order=CREATED_AT')).body,
        ).ids,
    },
  ];

  it.each(cases)('$name: every one of 50 items exactly once, no repeats', async ({ route, path, originals }) => {
    for (let i = 0; i < 50; i++) await createConversation(h);
    const before = await originals(h);
    expect(before).toHaveLength(50);
    const seen = await walk(route, path);
    expect(new Set(seen).size, 'no item is repeated').toBe(seen.length);
    for (const id of before)
      expect(
        seen.filter((x) => x === id),
        `item ${id}`,
      ).toHaveLength(1);
    // Items created during the walk may or may not appear; the originals keep their relative order.
    const originalOrder = seen.filter((id) => before.includes(id));
    expect(originalOrder).toEqual(before);
    await h.idle();
  });

  const threeSpecs = () =>
    startHarness({
      ports: {
        specs: [
          { id: 'one', image: 'i1', working_dir: '/w' },
          { id: 'two', image: 'i2', working_dir: '/w' },
          { id: 'three', image: 'i3', working_dir: '/w' },
        ],
      },
    });

  it('sandbox specs page one by one', async () => {
    const many = await threeSpecs();
    try {
      const seen: string[] = [];
      let next: string | null = null;
      do {
        const r = await many.call(
          'GET',
          `/api/v1/sandbox-specs/search?limit=1${next ? `&page_id=${encodeURIComponent(next)}` : ''}`,
        );
        const page = pageOf(PAGED[5], r.body);
        seen.push(...page.ids);
        next = page.next;
      } while (next !== null && seen.length < 10);
      expect(seen).toEqual(['one', 'two', 'three']);
    } finally {
      await many.close();
    }
  });

  it('a sandbox-spec page id naming a spec that does not exist is a 404 or ends the list; it never restarts from the first page', async () => {
    const many = await threeSpecs();
    try {
      // Well-formed, but not issued by the spec list: e.g. a sandbox page id, or one from before the catalog changed.
      const forged = encodeCursor({ created_at: '2026-01-01T00:00:00.000Z', id: 'no-such-spec' });
      const r = await many.call('GET', `/api/v1/sandbox-specs/search?limit=1&page_id=${forged}`);
      expect(r.status === 404 || pageOf(PAGED[5], r.body).ids.length === 0, `forged spec cursor: ${r.text}`).toBe(true);
    } finally {
      await many.close();
    }
  });
});
