import type { Sqlite } from './driver.js';

export interface Migration {
  version: number;
  name: string;
  /** Statements run in order, in one transaction. Only additive DDL: never drop or rewrite data. */
  statements: readonly string[];
}

/**
 * Shipped inside the package; append new versions, never edit old ones. The tables are those of
 * the PostgreSQL adapter (the same names and records), but for the conversation leases, which
 * one process does not need. Records are JSON text; timestamps that are filtered or sorted on are
 * kept as fixed-width UTC text (`instant`), which sorts as the instants do.
 */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial',
    statements: [
      `CREATE TABLE acs_settings (
        user_id TEXT PRIMARY KEY,
        data TEXT NOT NULL,
        key_ids TEXT NOT NULL DEFAULT '[]',
        updated_at TEXT NOT NULL
      ) STRICT`,
      `CREATE TABLE acs_secret_keys (
        key_id TEXT PRIMARY KEY,
        check_value TEXT NOT NULL,
        created_at TEXT NOT NULL
      ) STRICT`,
      `CREATE TABLE acs_conversations (
        user_id TEXT NOT NULL,
        id TEXT NOT NULL,
        title_folded TEXT NOT NULL,
        status TEXT NOT NULL,
        execution_status TEXT,
        sandbox_id TEXT,
        parent_conversation_id TEXT,
        selected_repository TEXT,
        "trigger" TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (user_id, id)
      ) STRICT`,
      `CREATE INDEX acs_conversations_by_created ON acs_conversations (user_id, created_at DESC, id DESC)`,
      `CREATE INDEX acs_conversations_by_sandbox ON acs_conversations (user_id, sandbox_id)`,
      `CREATE INDEX acs_conversations_by_parent ON acs_conversations (user_id, parent_conversation_id)`,
      `CREATE INDEX acs_conversations_by_execution_status ON acs_conversations (execution_status) WHERE execution_status IS NOT NULL`,
      `CREATE TABLE acs_start_tasks (
        user_id TEXT NOT NULL,
        id TEXT NOT NULL,
        app_conversation_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (user_id, id)
      ) STRICT`,
      `CREATE INDEX acs_start_tasks_by_created ON acs_start_tasks (user_id, created_at DESC, id DESC)`,
      `CREATE INDEX acs_start_tasks_by_conversation ON acs_start_tasks (user_id, app_conversation_id)`,
      `CREATE TABLE acs_sandboxes (
        user_id TEXT NOT NULL,
        id TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (user_id, id)
      ) STRICT`,
      `CREATE INDEX acs_sandboxes_by_created ON acs_sandboxes (user_id, created_at DESC, id DESC) WHERE status <> 'DELETED'`,
      `CREATE INDEX acs_sandboxes_by_id ON acs_sandboxes (id)`,
      `CREATE INDEX acs_sandboxes_by_status ON acs_sandboxes (status, created_at)`,
      // Ids are max + 1 inside the append's transaction: one writer at a time, so gap-free.
      `CREATE TABLE acs_events (
        user_id TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        id INTEGER NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (user_id, conversation_id, id)
      ) STRICT, WITHOUT ROWID`,
      `CREATE TABLE acs_installation (
        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
        id TEXT NOT NULL,
        created_at TEXT NOT NULL
      ) STRICT`,
      `CREATE TABLE acs_api_keys (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        name TEXT NOT NULL,
        key_hash TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL,
        last_used_at TEXT
      ) STRICT`,
      `CREATE INDEX acs_api_keys_by_user ON acs_api_keys (user_id, created_at, id)`,
      `CREATE TABLE acs_device_grants (
        device_code_hash TEXT PRIMARY KEY,
        user_code TEXT NOT NULL UNIQUE,
        expires_at TEXT NOT NULL,
        record TEXT NOT NULL
      ) STRICT`,
      `CREATE INDEX acs_device_grants_by_expiry ON acs_device_grants (expires_at)`,
      `CREATE TABLE acs_device_code_failures (
        user_id TEXT PRIMARY KEY,
        opened_at TEXT NOT NULL,
        failures INTEGER NOT NULL
      ) STRICT`,
    ],
  },
  {
    version: 2,
    name: 'key expiry and device sign-ins per client',
    // Keys that expire (device sign-ins' keys); the client (a digest of its address) a device
    // sign-in came from, so one client's waiting sign-ins are counted alone.
    statements: [
      `ALTER TABLE acs_api_keys ADD COLUMN expires_at TEXT`,
      `ALTER TABLE acs_device_grants ADD COLUMN client TEXT`,
      `CREATE INDEX acs_device_grants_by_client ON acs_device_grants (client, expires_at)`,
    ],
  },
];

export const LATEST_SCHEMA_VERSION = Math.max(...MIGRATIONS.map((m) => m.version));

const MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS acs_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL) STRICT`;

/** Versions applied so far (empty on a fresh database). */
export function appliedMigrations(db: Sqlite): number[] {
  const table = db.get<{ n: number }>(
    `SELECT count(*) AS n FROM sqlite_schema WHERE type = 'table' AND name = 'acs_migrations'`,
  );
  if (!table?.n) return [];
  return db
    .all<{ version: number }>(`SELECT version FROM acs_migrations ORDER BY version`)
    .map((r) => Number(r.version));
}

/**
 * Applies the migrations this database lacks, all in one write transaction (another process
 * migrating the same file waits for it, then finds nothing left to do). Idempotent; never
 * destructive. Returns the versions it applied.
 */
export function migrate(db: Sqlite): number[] {
  return db.transaction(() => {
    db.db.exec(MIGRATIONS_TABLE);
    const done = new Set(
      db.all<{ version: number }>(`SELECT version FROM acs_migrations`).map((r) => Number(r.version)),
    );
    const applied: number[] = [];
    for (const migration of MIGRATIONS) {
      if (done.has(migration.version)) continue;
      for (const statement of migration.statements) db.db.exec(statement);
      db.run(
        `INSERT INTO acs_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
        migration.version,
        migration.name,
        new Date().toISOString(),
      );
      applied.push(migration.version);
    }
    return applied;
  });
}
