import type { AgentConversationServicePorts } from '@acs/core';
import { InProcessLocks, type Locks, type SecretCipher } from '@acs/core/ports';
import { PostgresLocks } from './locks.js';
import { PostgresApiKeyStore } from './api-key-store.js';
import { PostgresDeviceGrantStore } from './device-grant-store.js';
import { PostgresConversationStore } from './conversation-store.js';
import { PostgresEventStore } from './event-store.js';
import { PostgresInstallationStore } from './installation-store.js';
import { PostgresConversationLeaseStore } from './lease-store.js';
import { appliedMigrations, LATEST_SCHEMA_VERSION, migrate, MIGRATIONS } from './migrations.js';
import { RecordCache } from './record-cache.js';
import { PostgresSandboxStore } from './sandbox-store.js';
import { verifySecretKeys } from './secret-keys.js';
import { PostgresSettingsStore } from './settings-store.js';
import { toExecutor, type DatabaseInput, type SqlExecutor } from './sql.js';
import { PostgresStartTaskStore } from './start-task-store.js';
import { tablesIn } from './tables.js';

export interface PostgresStorageOptions {
  /** A pg.Pool, a PGlite instance, or a connection string (then a pool is created and closed by `close()`). */
  db: DatabaseInput;
  /** Encrypts secret values at rest. */
  cipher: SecretCipher;
  /** Keep the tables in this PostgreSQL schema (created by the migrations). Default: the connection's search_path. */
  schema?: string;
  /**
   * `auto`: apply pending migrations at start. `check` (default): refuse to start while
   * migrations are pending, so a host that runs `migrate()` itself never gets surprised.
   */
  migrations?: 'auto' | 'check';
  /**
   * Set when this process is the only one that writes the database: PGlite in a data directory
   * the process has locked (the example server's `ACS_STORAGE=pglite`). The conversation and
   * settings stores then keep the records they read and write in memory (up to 1,000 of each),
   * so the agent's per-step reads are not queries and an update is one statement. Never set it
   * with replicas, or with anything else (another storage, a script) writing the same tables:
   * it would go on reading what it last wrote. Default false.
   */
  exclusive?: boolean;
}

/** The store ports backed by PostgreSQL, ready for createAgentConversationService. */
export interface PostgresStorage extends Pick<
  AgentConversationServicePorts,
  'settings' | 'apiKeys' | 'deviceGrants' | 'conversations' | 'startTasks' | 'sandboxes' | 'events' | 'installation'
> {
  /**
   * Which replica runs each conversation's agent. Pass it (with `createPostgresEventNotifier`)
   * when several processes share this database; one process leaves it out.
   */
  readonly conversationLeases: PostgresConversationLeaseStore;
  /**
   * The per-user sandbox limit and the lead of sandbox maintenance: session advisory locks on a
   * PostgreSQL server (`PostgresLocks`, one connection of their own); in-process locks on PGlite,
   * which is one process's.
   */
  readonly locks: Locks;
  readonly db: SqlExecutor;
  /** Closes the database connection if this storage opened it (and the locks' own connection). */
  close(): Promise<void>;
}

export async function createPostgresStorage(options: PostgresStorageOptions): Promise<PostgresStorage> {
  const db = await toExecutor(options.db);
  const t = tablesIn(options.schema ?? null);
  try {
    if ((options.migrations ?? 'check') === 'auto') {
      await migrate(db, { schema: t.schema });
    } else {
      const applied = new Set(await appliedMigrations(db, { schema: t.schema }));
      const pending = MIGRATIONS.filter((m) => !applied.has(m.version)).map((m) => m.version);
      if (pending.length > 0) {
        throw new Error(
          `The database schema is at version ${Math.max(0, ...applied)} but this adapter needs ${LATEST_SCHEMA_VERSION}: run migrate() first, or pass migrations: 'auto'.`,
        );
      }
    }
    await verifySecretKeys(db, t, options.cipher);
  } catch (error) {
    await db.close();
    throw error;
  }
  const locks = db.session ? new PostgresLocks(db, { namespace: t.schema ?? '' }) : new InProcessLocks();
  return {
    db,
    settings: new PostgresSettingsStore(db, t, options.cipher, options.exclusive ? new RecordCache() : null),
    apiKeys: new PostgresApiKeyStore(db, t),
    deviceGrants: new PostgresDeviceGrantStore(db, t),
    conversations: new PostgresConversationStore(db, t, options.exclusive ? new RecordCache() : null),
    startTasks: new PostgresStartTaskStore(db, t),
    sandboxes: new PostgresSandboxStore(db, t),
    events: new PostgresEventStore(db, t),
    installation: new PostgresInstallationStore(db, t),
    conversationLeases: new PostgresConversationLeaseStore(db, t),
    locks,
    close: async () => {
      if (locks instanceof PostgresLocks) locks.close();
      await db.close();
    },
  };
}
