/**
 * @acs/adapter-sqlite: every store port of @acs/core on one SQLite database, with secrets
 * encrypted at rest, on Node's built-in node:sqlite (or a better-sqlite3 Database).
 *
 * ```ts
 * const storage = await createSqliteStorage({ path: 'data/acs.sqlite', cipher, migrations: 'auto' });
 * const service = createAgentConversationService({ ...storage, sandboxSpecs, runtime, llm, agent });
 * ```
 */
export { createSqliteStorage, migrateSqlite, type SqliteStorage, type SqliteStorageOptions } from './storage.js';
export { openNodeSqlite, type SqliteDatabase, type SqliteStatement, type SqliteValue } from './driver.js';
export { LATEST_SCHEMA_VERSION, MIGRATIONS, type Migration } from './migrations.js';
export { RECORD_TABLES, type ImportBatch, type TableCounts } from './import.js';
export { SecretKeyMismatchError } from '@acs/core';
