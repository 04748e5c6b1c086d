import { randomBytes } from 'node:crypto';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll } from 'vitest';
import { createAesGcmCipher } from '@acs/core';
import type { SecretCipher } from '@acs/core/ports';
import {
  createPostgresStorage,
  fromPGlite,
  fromPgPool,
  type PostgresStorage,
  type SqlExecutor,
} from '@acs/adapter-postgres';

/** The PostgreSQL server the tests use. .ci/run creates this role and database. */
export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://acs:acs@127.0.0.1:5432/acs_test';

export interface TestDatabase {
  name: 'pglite' | 'postgres';
  executor(): Promise<SqlExecutor>;
  /** Raw SQL against the same database, for tests that look behind the adapter. */
  raw<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
}

let pglite: PGlite | undefined;
let pool: pg.Pool | undefined;
const schemas: { db: TestDatabase; schema: string }[] = [];

const pgliteDatabase: TestDatabase = {
  name: 'pglite',
  async executor() {
    pglite ??= await PGlite.create();
    return fromPGlite(pglite);
  },
  async raw(text, params) {
    pglite ??= await PGlite.create();
    return (await pglite.query(text, params)).rows as never[];
  },
};

export const postgresDatabase: TestDatabase = {
  name: 'postgres',
  async executor() {
    if (!pool) {
      pool = new pg.Pool({ connectionString: DATABASE_URL, max: 8 });
      pool.on('error', () => {});
      try {
        await pool.query('SELECT 1');
      } catch (error) {
        throw new Error(
          `These tests need a PostgreSQL server at ${DATABASE_URL} (set DATABASE_URL, or run .ci/run once to install and configure one): ${(error as Error).message}`,
          { cause: error },
        );
      }
    }
    return fromPgPool(pool);
  },
  async raw(text, params) {
    await this.executor();
    return (await pool!.query(text, params)).rows as never[];
  },
};

export const DATABASES = [pgliteDatabase, postgresDatabase] as const;

/** A fresh schema name; dropped after the file's tests (the adapter itself never drops anything). */
export function freshSchema(db: TestDatabase): string {
  const schema = `acs_t_${randomBytes(6).toString('hex')}`;
  schemas.push({ db, schema });
  return schema;
}

export const testCipher = (keyId = 'k1', key: Uint8Array = KEY_1): SecretCipher =>
  createAesGcmCipher({ keys: { [keyId]: key }, currentKeyId: keyId });
export const KEY_1 = randomBytes(32);
export const KEY_2 = randomBytes(32);

/** Storage in a fresh schema of `db`, migrated. */
export async function freshStorage(
  db: TestDatabase,
  cipher: SecretCipher = testCipher(),
  options: { exclusive?: boolean } = {},
): Promise<PostgresStorage & { schema: string }> {
  const schema = freshSchema(db);
  const storage = await createPostgresStorage({
    db: await db.executor(),
    cipher,
    schema,
    migrations: 'auto',
    exclusive: options.exclusive ?? false,
  });
  return Object.assign(storage, { schema });
}

afterAll(async () => {
  for (const { db, schema } of schemas.splice(0)) await db.raw(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool?.end();
  pool = undefined;
  await pglite?.close();
  pglite = undefined;
});
