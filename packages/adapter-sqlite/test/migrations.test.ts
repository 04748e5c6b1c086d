import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import { conversationFixture, expectOk } from '@acs/core/testing';
import { createSqliteStorage, LATEST_SCHEMA_VERSION, migrateSqlite, MIGRATIONS } from '@acs/adapter-sqlite';
import { freshPath, openStorage, testCipher } from './databases.js';

const applied = (path: string) => {
  const db = new DatabaseSync(path);
  try {
    return db
      .prepare('SELECT version FROM acs_migrations ORDER BY version')
      .all()
      .map((r) => Number(r['version']));
  } finally {
    db.close();
  }
};

describe('sqlite migrations', () => {
  it('are additive only: no statement drops, deletes or rewrites, and versions only grow', () => {
    const sql = MIGRATIONS.flatMap((m) => m.statements).join('\n');
    expect(sql).not.toMatch(/\b(DROP|DELETE|UPDATE|RENAME)\b/i);
    expect(MIGRATIONS.map((m) => m.version)).toEqual([...MIGRATIONS.map((m) => m.version)].sort((a, b) => a - b));
  });

  it('apply once on a fresh file, and a re-opened file keeps its data and applies nothing', async () => {
    const path = freshPath();
    expect(await migrateSqlite({ path })).toEqual(MIGRATIONS.map((m) => m.version));
    const first = await openStorage(path);
    const record = conversationFixture();
    await expectOk(first.conversations.insert(record));
    await first.close();

    expect(await migrateSqlite({ path })).toEqual([]);
    expect(applied(path)).toEqual(MIGRATIONS.map((m) => m.version));
    const again = await openStorage(path, testCipher(), 'auto');
    expect(await expectOk(again.conversations.get('alice', record.id))).toEqual(record);
  });

  it("refuse to start while migrations are pending with 'check' (the default), and apply them with 'auto'", async () => {
    const path = freshPath();
    await expect(createSqliteStorage({ path, cipher: testCipher() })).rejects.toThrow(
      `The database schema is at version 0 but this adapter needs ${LATEST_SCHEMA_VERSION}: run migrate() first, or pass migrations: 'auto'.`,
    );
    const storage = await openStorage(path, testCipher(), 'auto');
    expect(applied(path)).toEqual(MIGRATIONS.map((m) => m.version));
    await storage.close();
    await openStorage(path, testCipher(), 'check');
  });

  it('take a database a host opened (node:sqlite here; better-sqlite3 has the same shape) and leave it open', async () => {
    const db = new DatabaseSync(freshPath());
    const storage = await createSqliteStorage({ db, cipher: testCipher(), migrations: 'auto' });
    await expectOk(
      storage.events.append('alice', 'c1', [
        { kind: 'MessageEvent', source: 'user', timestamp: new Date().toISOString(), payload: {} },
      ]),
    );
    await storage.close();
    expect(db.prepare('SELECT count(*) AS n FROM acs_events').get()).toEqual({ n: 1 });
    expect(db.prepare('PRAGMA journal_mode').get()).toEqual({ journal_mode: 'wal' });
    expect(db.prepare('PRAGMA synchronous').get()).toEqual({ synchronous: 2 });
    db.close();
  });

  it("fsync only at checkpoints with synchronous: 'normal' (a crash or SIGKILL loses nothing, a power cut may)", async () => {
    const db = new DatabaseSync(freshPath());
    const storage = await createSqliteStorage({ db, cipher: testCipher(), migrations: 'auto', synchronous: 'normal' });
    expect(db.prepare('PRAGMA synchronous').get()).toEqual({ synchronous: 1 });
    await storage.close();
    db.close();
  });
});
