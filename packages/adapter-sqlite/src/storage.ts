import type { AgentConversationServicePorts } from '@acs/core';
import { InProcessLocks, type SecretCipher } from '@acs/core/ports';
import { SqliteApiKeyStore } from './api-key-store.js';
import { SqliteConversationStore } from './conversation-store.js';
import { SqliteDeviceGrantStore } from './device-grant-store.js';
import { openNodeSqlite, Sqlite, type SqliteDatabase } from './driver.js';
import { SqliteEventStore } from './event-store.js';
import { countRows, importBatch, type ImportBatch, type TableCounts } from './import.js';
import { SqliteInstallationStore } from './installation-store.js';
import { appliedMigrations, LATEST_SCHEMA_VERSION, migrate, MIGRATIONS } from './migrations.js';
import { SqliteSandboxStore } from './sandbox-store.js';
import { verifySecretKeys } from './secret-keys.js';
import { SqliteSettingsStore } from './settings-store.js';
import { SqliteStartTaskStore } from './start-task-store.js';

export type SqliteStorageOptions = (
  | {
      /** The database file (created when missing; its directory must exist). Opened with node:sqlite and closed by `close()`. */
      path: string;
      db?: never;
    }
  | {
      /** An open database: node:sqlite's `DatabaseSync`, a better-sqlite3 `Database`, or any driver of that shape. The host closes it. */
      db: SqliteDatabase;
      path?: never;
    }
) & {
  /** Encrypts secret values at rest. */
  cipher: SecretCipher;
  /**
   * `auto`: apply pending migrations at start. `check` (default): refuse to start while
   * migrations are pending, so a host that runs `migrate()` itself never gets surprised.
   */
  migrations?: 'auto' | 'check';
  /** How long a statement waits for another connection's write lock before failing; default 5000 ms. */
  busyTimeoutMs?: number;
  /**
   * `full` (default): each commit is fsynced before its promise resolves; it survives a SIGKILL
   * and a power cut. `normal`: commits survive the process's crash or SIGKILL, but a power cut
   * may take the last ones back; each write costs no fsync (checkpoints still sync).
   */
  synchronous?: 'full' | 'normal';
};

/** The store ports backed by one SQLite database, ready for createAgentConversationService. */
export interface SqliteStorage extends Pick<
  AgentConversationServicePorts,
  'settings' | 'apiKeys' | 'deviceGrants' | 'conversations' | 'startTasks' | 'sandboxes' | 'events' | 'installation'
> {
  /** In-process locks: a SQLite database is one process's (see the README). */
  readonly locks: InProcessLocks;
  /** Copies records in as they are, in one transaction (settings stay sealed, events keep their ids). */
  readonly importRecords: (batch: ImportBatch) => void;
  /** How many rows each table holds. */
  readonly countRows: () => TableCounts;
  /** Closes the database if this storage opened it (`path`); a host's `db` stays open. */
  readonly close: () => Promise<void>;
}

/**
 * Every store on one SQLite database: WAL with synchronous=FULL, so a write is on disk when its
 * promise resolves (a SIGKILL or a power cut after that loses nothing); migrated or checked;
 * the secret keys verified.
 */
export async function createSqliteStorage(options: SqliteStorageOptions): Promise<SqliteStorage> {
  const owned = options.db === undefined;
  const raw = options.db ?? (await openNodeSqlite(options.path));
  const db = new Sqlite(raw);
  try {
    // Pragmas first: busy_timeout so that a second connection waits for the write lock.
    raw.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.floor(options.busyTimeoutMs ?? 5_000))}`);
    raw.exec('PRAGMA journal_mode = WAL');
    raw.exec(`PRAGMA synchronous = ${options.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
    raw.exec('PRAGMA foreign_keys = ON');
    if ((options.migrations ?? 'check') === 'auto') {
      migrate(db);
    } else {
      const applied = new Set(appliedMigrations(db));
      const pending = MIGRATIONS.filter((m) => !applied.has(m.version));
      if (pending.length > 0) {
        throw new Error(
          `The database schema is at version ${Math.max(0, ...applied)} but this adapter needs ${LATEST_SCHEMA_VERSION}: run migrate() first, or pass migrations: 'auto'.`,
        );
      }
    }
    db.transaction(() => verifySecretKeys(db, options.cipher));
  } catch (error) {
    if (owned) raw.close();
    throw error;
  }
  let closed = false;
  return {
    settings: new SqliteSettingsStore(db, options.cipher),
    apiKeys: new SqliteApiKeyStore(db),
    deviceGrants: new SqliteDeviceGrantStore(db),
    conversations: new SqliteConversationStore(db),
    startTasks: new SqliteStartTaskStore(db),
    sandboxes: new SqliteSandboxStore(db),
    events: new SqliteEventStore(db),
    installation: new SqliteInstallationStore(db),
    locks: new InProcessLocks(),
    importRecords: (batch) => importBatch(db, batch),
    countRows: () => countRows(db),
    close: () => {
      if (closed || !owned) return Promise.resolve();
      closed = true;
      // After the calls waiting for their turn.
      return db.callAlone(() => void raw.close());
    },
  };
}

/** Opens the database at `path` (or takes `db`) and applies the pending migrations; returns the versions applied. */
export async function migrateSqlite(target: { path: string } | { db: SqliteDatabase }): Promise<number[]> {
  const raw = 'db' in target ? target.db : await openNodeSqlite(target.path);
  try {
    raw.exec('PRAGMA busy_timeout = 5000');
    raw.exec('PRAGMA journal_mode = WAL');
    raw.exec('PRAGMA synchronous = FULL');
    return migrate(new Sqlite(raw));
  } finally {
    if (!('db' in target)) raw.close();
  }
}
