import type { SqlExecutor } from './sql.js';
import { tablesIn, type Tables } from './tables.js';

export interface Migration {
  version: number;
  name: string;
  /** Statements run in order, in one transaction. Only additive DDL: never drop or rewrite data. */
  statements: (t: Tables) => string[];
}

/** Shipped inside the package; append new versions, never edit old ones. */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial',
    statements: (t) => [
      `CREATE TABLE IF NOT EXISTS ${t.settings} (
        user_id text PRIMARY KEY,
        data jsonb NOT NULL,
        key_ids text[] NOT NULL DEFAULT '{}',
        updated_at timestamptz NOT NULL DEFAULT now()
      )`,
      `CREATE TABLE IF NOT EXISTS ${t.secretKeys} (
        key_id text PRIMARY KEY,
        check_value text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`,
      `CREATE TABLE IF NOT EXISTS ${t.conversations} (
        user_id text NOT NULL,
        id text NOT NULL,
        title text NOT NULL,
        status text NOT NULL,
        sandbox_id text,
        parent_conversation_id text,
        selected_repository text,
        trigger text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        record jsonb NOT NULL,
        PRIMARY KEY (user_id, id)
      )`,
      `CREATE INDEX IF NOT EXISTS acs_conversations_by_created ON ${t.conversations} (user_id, created_at DESC, id DESC)`,
      `CREATE INDEX IF NOT EXISTS acs_conversations_by_sandbox ON ${t.conversations} (user_id, sandbox_id)`,
      `CREATE INDEX IF NOT EXISTS acs_conversations_by_parent ON ${t.conversations} (user_id, parent_conversation_id)`,
      `CREATE TABLE IF NOT EXISTS ${t.startTasks} (
        user_id text NOT NULL,
        id text NOT NULL,
        app_conversation_id text NOT NULL,
        created_at timestamptz NOT NULL,
        record jsonb NOT NULL,
        PRIMARY KEY (user_id, id)
      )`,
      `CREATE INDEX IF NOT EXISTS acs_start_tasks_by_created ON ${t.startTasks} (user_id, created_at DESC, id DESC)`,
      `CREATE INDEX IF NOT EXISTS acs_start_tasks_by_conversation ON ${t.startTasks} (user_id, app_conversation_id)`,
      `CREATE TABLE IF NOT EXISTS ${t.sandboxes} (
        user_id text NOT NULL,
        id text NOT NULL,
        status text NOT NULL,
        created_at timestamptz NOT NULL,
        record jsonb NOT NULL,
        PRIMARY KEY (user_id, id)
      )`,
      `CREATE INDEX IF NOT EXISTS acs_sandboxes_by_created ON ${t.sandboxes} (user_id, created_at DESC, id DESC) WHERE status <> 'DELETED'`,
      `CREATE TABLE IF NOT EXISTS ${t.eventCounters} (
        user_id text NOT NULL,
        conversation_id text NOT NULL,
        last_id integer NOT NULL,
        PRIMARY KEY (user_id, conversation_id)
      )`,
      `CREATE TABLE IF NOT EXISTS ${t.events} (
        user_id text NOT NULL,
        conversation_id text NOT NULL,
        id integer NOT NULL,
        event jsonb NOT NULL,
        PRIMARY KEY (user_id, conversation_id, id)
      )`,
    ],
  },
  {
    version: 2,
    name: 'conversations by agent status',
    // The engine looks up running conversations across users when the service starts.
    statements: (t) => [
      `CREATE INDEX IF NOT EXISTS acs_conversations_by_execution_status ON ${t.conversations} ((record->>'execution_status'))`,
    ],
  },
  {
    version: 3,
    name: 'installation identity',
    // One row at most: the id this installation labels its sandboxes with (written on first use).
    statements: (t) => [
      `CREATE TABLE IF NOT EXISTS ${t.installation} (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        id text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`,
    ],
  },
  {
    version: 4,
    name: 'conversation leases',
    // Which process runs each conversation's agent (several replicas on one database). A row
    // outlives its holder: the epoch only grows, so a stale holder's fenced append is refused.
    statements: (t) => [
      `CREATE TABLE IF NOT EXISTS ${t.conversationLeases} (
        user_id text NOT NULL,
        conversation_id text NOT NULL,
        owner text,
        epoch bigint NOT NULL,
        expires_at timestamptz,
        wake_requested boolean NOT NULL DEFAULT false,
        stop_requested boolean NOT NULL DEFAULT false,
        PRIMARY KEY (user_id, conversation_id)
      )`,
      `CREATE INDEX IF NOT EXISTS acs_conversation_leases_by_owner ON ${t.conversationLeases} (owner) WHERE owner IS NOT NULL`,
    ],
  },
  {
    version: 5,
    name: 'api keys and device sign-ins',
    // Keys users make (only the SHA-256 of each secret), device sign-ins waiting for an answer
    // (shared by every replica), and one counter per user of user codes that matched nothing.
    statements: (t) => [
      `CREATE TABLE IF NOT EXISTS ${t.apiKeys} (
        id text PRIMARY KEY,
        user_id text NOT NULL,
        name text NOT NULL,
        key_hash text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL,
        last_used_at timestamptz
      )`,
      `CREATE INDEX IF NOT EXISTS acs_api_keys_by_user ON ${t.apiKeys} (user_id, created_at, id)`,
      `CREATE TABLE IF NOT EXISTS ${t.deviceGrants} (
        device_code_hash text PRIMARY KEY,
        user_code text NOT NULL UNIQUE,
        expires_at timestamptz NOT NULL,
        record jsonb NOT NULL
      )`,
      `CREATE INDEX IF NOT EXISTS acs_device_grants_by_expiry ON ${t.deviceGrants} (expires_at)`,
      `CREATE TABLE IF NOT EXISTS ${t.deviceCodeFailures} (
        user_id text PRIMARY KEY,
        opened_at timestamptz NOT NULL,
        failures integer NOT NULL
      )`,
    ],
  },
  {
    version: 6,
    name: 'sandboxes by id',
    // A sandbox's exposed URL names only the sandbox: its proxy finds the owner by id (ownerOf).
    statements: (t) => [`CREATE INDEX IF NOT EXISTS acs_sandboxes_by_id ON ${t.sandboxes} (id)`],
  },
  {
    version: 7,
    name: 'key expiry and device sign-ins per client',
    // Keys that expire (device sign-ins' keys); the client (a digest of its address) a device
    // sign-in came from, so one client's waiting sign-ins are counted alone.
    statements: (t) => [
      `ALTER TABLE ${t.apiKeys} ADD COLUMN IF NOT EXISTS expires_at timestamptz`,
      `ALTER TABLE ${t.deviceGrants} ADD COLUMN IF NOT EXISTS client text`,
      `CREATE INDEX IF NOT EXISTS acs_device_grants_by_client ON ${t.deviceGrants} (client, expires_at)`,
    ],
  },
];

export const LATEST_SCHEMA_VERSION = Math.max(...MIGRATIONS.map((m) => m.version));

export interface MigrateOptions {
  /** A PostgreSQL schema to keep the tables in (created if missing). Default: the connection's search_path. */
  schema?: string | null;
}

/** Versions applied so far (empty on a fresh database). */
export async function appliedMigrations(db: SqlExecutor, options: MigrateOptions = {}): Promise<number[]> {
  const t = tablesIn(options.schema ?? null);
  const exists = await db.query<{ present: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS present`, [t.migrations]);
  if (!exists.rows[0]?.present) return [];
  const rows = await db.query<{ version: number }>(`SELECT version FROM ${t.migrations} ORDER BY version`);
  return rows.rows.map((r) => Number(r.version));
}

/**
 * Applies the migrations this database lacks, in one transaction under an advisory
 * lock, so two processes starting at once apply each version exactly once.
 * Idempotent; never destructive. Resolves to the versions it applied.
 */
export async function migrate(db: SqlExecutor, options: MigrateOptions = {}): Promise<number[]> {
  const t = tablesIn(options.schema ?? null);
  return db.transaction(async (tx) => {
    await tx.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [`acs.migrate:${t.schema ?? ''}`]);
    if (t.schema) await tx.query(`CREATE SCHEMA IF NOT EXISTS "${t.schema}"`);
    await tx.query(
      `CREATE TABLE IF NOT EXISTS ${t.migrations} (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const done = new Set(
      (await tx.query<{ version: number }>(`SELECT version FROM ${t.migrations}`)).rows.map((r) => Number(r.version)),
    );
    const applied: number[] = [];
    for (const migration of MIGRATIONS) {
      if (done.has(migration.version)) continue;
      for (const statement of migration.statements(t)) await tx.query(statement);
      await tx.query(`INSERT INTO ${t.migrations} (version, name) VALUES ($1, $2)`, [
        migration.version,
        migration.name,
      ]);
      applied.push(migration.version);
    }
    return applied;
  });
}
