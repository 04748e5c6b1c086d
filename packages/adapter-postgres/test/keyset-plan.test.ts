import { describe, expect, it } from 'vitest';
import { encodeCursor, decodeCursor } from '@acs/core/ports';
import { expectOk } from '@acs/core/testing';
import { DATABASES, freshStorage } from './databases.js';

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  Plans?: PlanNode[];
}
const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

for (const db of DATABASES) {
  describe(`conversation search on ${db.name}`, () => {
    it('reads only one page of rows through the index, as deep in the list as at its start', async () => {
      const storage = await freshStorage(db);
      const t = `"${storage.schema}".acs_conversations`;
      const rows = 20_000;
      await db.raw(
        `INSERT INTO ${t} (user_id, id, title, status, created_at, updated_at, record)
         SELECT CASE WHEN g % 10 = 0 THEN 'bob' ELSE 'alice' END, lpad(to_hex(g), 32, '0'), 'Conversation ' || g, 'RUNNING',
                timestamptz '2026-01-01' + g * interval '1 second', timestamptz '2026-01-01' + g * interval '1 second',
                jsonb_build_object('id', lpad(to_hex(g), 32, '0'), 'created_at', to_char((timestamptz '2026-01-01' + g * interval '1 second') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
         FROM generate_series(1, ${rows}) AS g`,
      );
      await db.raw(`ANALYZE ${t}`);

      const first = await expectOk(storage.conversations.search('alice', {}, { limit: 100, after: null }));
      expect(first.items).toHaveLength(100);
      // A cursor near the end of alice's 18,000 rows.
      const deep = encodeCursor({ created_at: '2026-01-01T00:03:20.000Z', id: (200).toString(16).padStart(32, '0') });
      const last = await expectOk(storage.conversations.search('alice', {}, { limit: 100, after: decodeCursor(deep) }));
      expect(last.items.length).toBeLessThanOrEqual(100);

      for (const after of [null, '2026-01-01T00:03:20.000Z']) {
        const params: unknown[] = ['alice', 101];
        const cursor = after ? `AND (created_at, id) < ($3::timestamptz, $4)` : '';
        if (after) params.push(after, (200).toString(16).padStart(32, '0'));
        const [explained] = await db.raw<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
          `EXPLAIN (ANALYZE, FORMAT JSON) SELECT record FROM ${t} WHERE user_id = $1 AND parent_conversation_id IS NULL ${cursor} ORDER BY created_at DESC, id DESC LIMIT $2`,
          params,
        );
        const plan = nodes(explained!['QUERY PLAN'][0].Plan);
        expect(plan.some((n) => n['Node Type'] === 'Sort')).toBe(false);
        const scan = plan.find((n) => n['Index Name'] === 'acs_conversations_by_created');
        expect(scan, JSON.stringify(plan)).toBeDefined();
        expect(scan!['Actual Rows']).toBeLessThanOrEqual(101);
      }
    });
  });
}
