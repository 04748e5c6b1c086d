import { PGlite } from '@electric-sql/pglite';
import { ok } from 'neverthrow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversationFixture, expectOk, settingsFixture } from '@acs/core/testing';
import type { ConversationRecord } from '@acs/core/schemas';
import { createPostgresStorage, fromPGlite, type SqlExecutor } from '@acs/adapter-postgres';
import { RecordCache } from '../src/record-cache.js';
import { testCipher } from './databases.js';

/** An executor that counts what reaches the database, and can be told to fail the next UPDATE. */
function counting(inner: SqlExecutor) {
  const seen: string[] = [];
  let failNextUpdate = false;
  const executor: SqlExecutor = {
    kind: inner.kind,
    query: (text, params) => {
      seen.push(text.trim().split(/\s+/)[0]!.toUpperCase());
      if (failNextUpdate && text.trim().startsWith('UPDATE')) {
        failNextUpdate = false;
        return Promise.reject(new Error('disk full'));
      }
      return inner.query(text, params);
    },
    transaction: (work) => {
      seen.push('TRANSACTION');
      return inner.transaction(work);
    },
    close: () => inner.close(),
  };
  return {
    executor,
    seen,
    failNextUpdate: () => {
      failNextUpdate = true;
    },
  };
}

describe('an exclusive storage (nothing else writes the database): conversations and settings held in memory', () => {
  let pglite: PGlite;
  beforeAll(async () => {
    pglite = await PGlite.create();
  });
  afterAll(async () => {
    await pglite.close();
  });

  const open = async (exclusive: boolean) => {
    const db = counting(fromPGlite(pglite));
    const schema = `s_${Math.random().toString(36).slice(2, 10)}`;
    const storage = await createPostgresStorage({
      db: db.executor,
      cipher: testCipher(),
      schema,
      migrations: 'auto',
      exclusive,
    });
    db.seen.length = 0;
    return { storage, db, schema };
  };

  it("reads an agent step's records without a query, and updates a conversation with one UPDATE", async () => {
    const { storage, db } = await open(true);
    const record = conversationFixture({ user_id: 'alice', id: 'c1' });
    await expectOk(storage.conversations.insert(record));
    await expectOk(storage.settings.update('alice', () => settingsFixture({ llm_api_key: 'sk-1' })));
    db.seen.length = 0;
    for (let step = 0; step < 5; step++) {
      expect(await expectOk(storage.conversations.get('alice', 'c1'))).toMatchObject({ id: 'c1' });
      expect((await expectOk(storage.settings.get('alice')))?.llm_api_key).toBe('sk-1');
      await expectOk(storage.conversations.update('alice', 'c1', (c) => ok({ ...c, title: `step ${step}` })));
    }
    expect(db.seen).toEqual(Array(5).fill('UPDATE'));
    expect((await expectOk(storage.conversations.get('alice', 'c1')))?.title).toBe('step 4');
  });

  it('without it, every read is a query and an update a transaction (what a shared database needs)', async () => {
    const { storage, db } = await open(false);
    await expectOk(storage.conversations.insert(conversationFixture({ user_id: 'alice', id: 'c1' })));
    db.seen.length = 0;
    await expectOk(storage.conversations.get('alice', 'c1'));
    await expectOk(storage.conversations.update('alice', 'c1', (c) => ok({ ...c, title: 'x' })));
    expect(db.seen).toEqual(['SELECT', 'TRANSACTION']);
  });

  it('hands out copies: changing a record it returned changes nothing held', async () => {
    const { storage } = await open(true);
    await expectOk(storage.conversations.insert(conversationFixture({ user_id: 'alice', id: 'c1', title: 'kept' })));
    const first = (await expectOk(storage.conversations.get('alice', 'c1')))!;
    first.title = 'changed by a caller';
    first.pr_number.push(7);
    expect(await expectOk(storage.conversations.get('alice', 'c1'))).toMatchObject({ title: 'kept', pr_number: [] });
  });

  it('drops a record whose UPDATE failed, so the next read is what the database holds', async () => {
    const { storage, db } = await open(true);
    await expectOk(storage.conversations.insert(conversationFixture({ user_id: 'alice', id: 'c1', title: 'before' })));
    db.failNextUpdate();
    const failed = await storage.conversations.update('alice', 'c1', (c) => ok({ ...c, title: 'lost' }));
    expect(failed.isErr() && failed.error).toMatchObject({ type: 'StoreUnavailable', message: 'disk full' });
    db.seen.length = 0;
    expect((await expectOk(storage.conversations.get('alice', 'c1')))?.title).toBe('before');
    expect(db.seen).toEqual(['SELECT']);
  });

  it('applies concurrent updates of one record one after the other: none is lost', async () => {
    const { storage, schema } = await open(true);
    await expectOk(storage.conversations.insert(conversationFixture({ user_id: 'alice', id: 'c1', pr_number: [] })));
    await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        expectOk(storage.conversations.update('alice', 'c1', (c) => ok({ ...c, pr_number: [...c.pr_number, i] }))),
      ),
    );
    const held = (await expectOk(storage.conversations.get('alice', 'c1')))!;
    expect(held.pr_number).toEqual(Array.from({ length: 50 }, (_, i) => i));
    const stored = await pglite.query<{ record: ConversationRecord }>(
      `SELECT record FROM "${schema}".acs_conversations WHERE user_id = 'alice' AND id = 'c1'`,
    );
    expect(stored.rows[0]?.record.pr_number).toEqual(held.pr_number);
  });

  it('writes through: what it holds is what another storage opened on the database reads', async () => {
    const { storage, schema } = await open(true);
    await expectOk(storage.conversations.insert(conversationFixture({ user_id: 'alice', id: 'c1' })));
    await expectOk(storage.conversations.update('alice', 'c1', (c) => ok({ ...c, title: 'written' })));
    await expectOk(storage.settings.update('alice', () => settingsFixture({ llm_api_key: 'sk-2' })));
    await expectOk(storage.conversations.delete('alice', 'c1'));
    await expectOk(storage.conversations.insert(conversationFixture({ user_id: 'alice', id: 'c2', title: 'second' })));
    const reader = await createPostgresStorage({ db: fromPGlite(pglite), cipher: testCipher(), schema });
    expect(await expectOk(reader.conversations.get('alice', 'c1'))).toBeNull();
    expect((await expectOk(reader.conversations.get('alice', 'c2')))?.title).toBe('second');
    expect(await expectOk(storage.conversations.get('alice', 'c1'))).toBeNull();
    expect((await expectOk(reader.settings.get('alice')))?.llm_api_key).toBe('sk-2');
  });
});

describe('RecordCache', () => {
  it('keeps at most its capacity, dropping the least recently used', () => {
    const cache = new RecordCache<{ n: number }>(3);
    for (const key of ['a', 'b', 'c']) cache.set(key, { n: key.charCodeAt(0) });
    cache.get('a');
    cache.set('d', { n: 4 });
    expect(cache.size).toBe(3);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toEqual({ n: 97 });
    expect(cache.get('d')).toEqual({ n: 4 });
  });

  it('copies in and out', () => {
    const cache = new RecordCache<{ list: number[] }>(3);
    const value = { list: [1] };
    cache.set('a', value);
    value.list.push(2);
    const out = cache.get('a')!;
    out.list.push(3);
    expect(cache.get('a')).toEqual({ list: [1] });
  });

  it('runs the work of one key in arrival order, also after a failure, and forgets a key once idle', async () => {
    const cache = new RecordCache<number>(3);
    const order: number[] = [];
    const slow = (n: number, ms: number, fail = false) =>
      cache.serially('k', async () => {
        await new Promise((resolve) => setTimeout(resolve, ms));
        order.push(n);
        if (fail) throw new Error(`work ${n} failed`);
        return n;
      });
    const results = await Promise.allSettled([slow(1, 20), slow(2, 1, true), slow(3, 5)]);
    expect(order).toEqual([1, 2, 3]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    await new Promise((resolve) => setImmediate(resolve));
    expect(cache.waiting).toBe(0);
  });
});
