import { describe, expect, it } from 'vitest';
import { expectOk, settingsFixture } from '@acs/core/testing';
import { createSqliteStorage, type SqliteDatabase } from '@acs/adapter-sqlite';
import { freshPath, freshStorage, testCipher } from './databases.js';

describe('sqlite store calls in turns', () => {
  it('give the event loop a turn while a backlog of durable writes runs, and keep their order', async () => {
    const storage = await freshStorage();
    const finished: number[] = [];
    let turnSeenAfter: number | null = null;
    // Asked for before the writes: it runs at the first turn of the event loop the writes leave.
    setImmediate(() => (turnSeenAfter = finished.length));
    await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        expectOk(
          storage.events.append('alice', 'c1', [
            { kind: 'MessageEvent', source: 'user', timestamp: new Date().toISOString(), payload: { i } },
          ]),
        ).then(() => finished.push(i)),
      ),
    );
    // 300 fsynced commits take far more than one 2 ms slice: the turn came in between.
    expect(turnSeenAfter).not.toBeNull();
    expect(turnSeenAfter!).toBeLessThan(300);
    expect(finished).toEqual(Array.from({ length: 300 }, (_, i) => i));
    const events = await expectOk(storage.events.readAfter('alice', 'c1', 0, 1000));
    expect(events.map((e) => (e.payload as { i: number }).i)).toEqual(finished);
  });
});

describe('sqlite store calls committed in groups', () => {
  /** A node:sqlite database that counts its commits (one fsync each with synchronous=FULL). */
  async function countingDatabase(path: string) {
    const { DatabaseSync } = await import('node:sqlite');
    const raw = new DatabaseSync(path);
    const counts = { commits: 0 };
    const db: SqliteDatabase = {
      exec: (sql) => {
        if (sql === 'COMMIT') counts.commits++;
        return raw.exec(sql);
      },
      prepare: (sql) => raw.prepare(sql),
      close: () => raw.close(),
    };
    return { db, counts, close: () => raw.close() };
  }

  it('commit the writes waiting together once, and answer each only after that commit', async () => {
    const path = freshPath();
    const { db, counts, close } = await countingDatabase(path);
    const storage = await createSqliteStorage({ db, cipher: testCipher(), migrations: 'auto' });
    try {
      const before = counts.commits;
      const appends = Array.from({ length: 100 }, (_, i) =>
        expectOk(
          storage.events.append('alice', `c${i % 10}`, [
            { kind: 'MessageEvent', source: 'user', timestamp: new Date().toISOString(), payload: { i } },
          ]),
        ),
      );
      await Promise.all(appends);
      // A handful of groups (one per 2 ms turn, at most 64 calls each), not 100 commits.
      expect(counts.commits - before).toBeGreaterThan(0);
      expect(counts.commits - before).toBeLessThan(20);
      // Each acknowledged append is in the file, as another connection reads it.
      const { DatabaseSync } = await import('node:sqlite');
      const reader = new DatabaseSync(path);
      try {
        const row = reader.prepare('SELECT count(*) AS n FROM acs_events').get() as { n: number };
        expect(Number(row.n)).toBe(100);
      } finally {
        reader.close();
      }
    } finally {
      await storage.close();
      close();
    }
  });

  it('roll back a call that fails alone: the others of its group are committed', async () => {
    const storage = await freshStorage();
    const settings = (n: number) => settingsFixture({ llm_model: `model-${n}` });
    const results = await Promise.all([
      storage.settings.update('alice', () => settings(1)),
      storage.settings.update('bob', () => {
        throw new Error('this update fails half way');
      }),
      storage.settings.update('carol', () => settings(3)),
    ]);
    expect(results.map((r) => r.isOk())).toEqual([true, false, true]);
    expect((await expectOk(storage.settings.get('alice')))?.llm_model).toBe('model-1');
    expect(await expectOk(storage.settings.get('bob'))).toBeNull();
    expect((await expectOk(storage.settings.get('carol')))?.llm_model).toBe('model-3');
  });
});
