import pg from 'pg';
import { describe, expect, it } from 'vitest';
import {
  appliedMigrations,
  createPostgresStorage,
  fromPgPool,
  LATEST_SCHEMA_VERSION,
  migrate,
  MIGRATIONS,
  tablesIn,
} from '@acs/adapter-postgres';
import { expectOk, conversationFixture } from '@acs/core/testing';
import { DATABASE_URL, DATABASES, freshSchema, postgresDatabase, testCipher } from './databases.js';

describe('migrations', () => {
  it('are additive only: no statement drops, truncates, deletes or rewrites', () => {
    const sql = MIGRATIONS.flatMap((m) => m.statements(tablesIn('s'))).join('\n');
    expect(sql).not.toMatch(/\b(DROP|TRUNCATE|DELETE|UPDATE|RENAME)\b/i);
    expect(MIGRATIONS.map((m) => m.version)).toEqual([...MIGRATIONS.map((m) => m.version)].sort((a, b) => a - b));
  });

  for (const db of DATABASES) {
    it(`apply once and are idempotent on ${db.name}, keeping data`, async () => {
      const schema = freshSchema(db);
      const exec = await db.executor();
      expect(await appliedMigrations(exec, { schema })).toEqual([]);
      expect(await migrate(exec, { schema })).toEqual(MIGRATIONS.map((m) => m.version));
      const storage = await createPostgresStorage({ db: exec, cipher: testCipher(), schema });
      const record = conversationFixture();
      await expectOk(storage.conversations.insert(record));
      expect(await migrate(exec, { schema })).toEqual([]);
      expect(await appliedMigrations(exec, { schema })).toEqual(MIGRATIONS.map((m) => m.version));
      expect(await expectOk(storage.conversations.get('alice', record.id))).toEqual(record);
    });

    it(`refuse to start on ${db.name} while migrations are pending, unless told to apply them`, async () => {
      const schema = freshSchema(db);
      await expect(createPostgresStorage({ db: await db.executor(), cipher: testCipher(), schema })).rejects.toThrow(
        `The database schema is at version 0 but this adapter needs ${LATEST_SCHEMA_VERSION}: run migrate() first, or pass migrations: 'auto'.`,
      );
      await createPostgresStorage({ db: await db.executor(), cipher: testCipher(), schema, migrations: 'auto' });
    });
  }

  it('are safe when several processes migrate at once (separate connections)', async () => {
    await postgresDatabase.executor();
    const schema = freshSchema(postgresDatabase);
    const pools = Array.from({ length: 4 }, () => new pg.Pool({ connectionString: DATABASE_URL, max: 1 }));
    try {
      const results = await Promise.all(pools.map((pool) => migrate(fromPgPool(pool), { schema })));
      expect(results.flat()).toEqual(MIGRATIONS.map((m) => m.version));
      const rows = await postgresDatabase.raw<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".acs_migrations`,
      );
      expect(rows[0]?.n).toBe(MIGRATIONS.length);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });
});
