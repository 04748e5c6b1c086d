import { randomBytes } from 'node:crypto';
import pg from 'pg';

const ADMIN_URL = () => process.env.DATABASE_URL ?? 'postgres://acs:acs@127.0.0.1:5432/acs_test';

/** A database of its own for one test on the PostgreSQL server of DATABASE_URL, and how to drop it. */
export interface ScratchDatabase {
  /** Its connection string (DATABASE_URL's, naming this database). */
  url: string;
  /** Drops it (connections still open to it are ended) and lets go of the admin connection. */
  drop(): Promise<void>;
}

/** Creates `<prefix>_<random>` on DATABASE_URL's server (default postgres://acs:acs@127.0.0.1:5432/acs_test). */
export async function scratchDatabase(prefix: string): Promise<ScratchDatabase> {
  const admin = new pg.Client({ connectionString: ADMIN_URL() });
  await admin.connect();
  const database = `${prefix}_${randomBytes(5).toString('hex')}`;
  try {
    await admin.query(`CREATE DATABASE ${database}`);
  } catch (error) {
    await admin.end();
    throw error;
  }
  const url = new URL(ADMIN_URL());
  url.pathname = `/${database}`;
  return {
    url: url.toString(),
    drop: async () => {
      try {
        await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      } finally {
        await admin.end();
      }
    },
  };
}
