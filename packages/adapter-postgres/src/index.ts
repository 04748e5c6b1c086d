/**
 * @acs/adapter-postgres: every store port of @acs/core on PostgreSQL, with secrets
 * encrypted at rest. The same SQL runs on a PostgreSQL server (node-postgres) and on
 * embedded PGlite.
 *
 * ```ts
 * const storage = await createPostgresStorage({ db: process.env.DATABASE_URL!, cipher, migrations: 'auto' });
 * const service = createAgentConversationService({ ...storage, sandboxSpecs, runtime });
 * ```
 */
export {
  createPostgresEventNotifier,
  type PostgresEventNotifier,
  type PostgresEventNotifierOptions,
} from './event-notifier.js';
export { createPostgresStorage, type PostgresStorage, type PostgresStorageOptions } from './storage.js';
export {
  migrate,
  appliedMigrations,
  MIGRATIONS,
  LATEST_SCHEMA_VERSION,
  type Migration,
  type MigrateOptions,
} from './migrations.js';
export {
  fromPGlite,
  fromPgPool,
  toExecutor,
  type DatabaseInput,
  type PGliteLike,
  type PgPoolLike,
  type SqlExecutor,
  type SqlQueryable,
  type SqlSession,
} from './sql.js';
export { SecretKeyMismatchError, verifySecretKeys } from './secret-keys.js';
export { PostgresApiKeyStore } from './api-key-store.js';
export { PostgresConversationStore } from './conversation-store.js';
export { PostgresDeviceGrantStore } from './device-grant-store.js';
export { PostgresEventStore } from './event-store.js';
export { PostgresInstallationStore } from './installation-store.js';
export { PostgresConversationLeaseStore } from './lease-store.js';
export { PostgresLocks, type PostgresLocksOptions } from './locks.js';
export { PostgresSandboxStore } from './sandbox-store.js';
export { PostgresSettingsStore } from './settings-store.js';
export { PostgresStartTaskStore } from './start-task-store.js';
export { tablesIn, type Tables } from './tables.js';
