import type { DeviceGrant, StoredApiKey, StoredEvent } from '@acs/core/ports';
import type { ConversationRecord, SandboxRecord, StartTaskRecord, StoredSettings } from '@acs/core/schemas';
import type { Sqlite } from './driver.js';
import { insertApiKey } from './api-key-store.js';
import { conversationTable } from './conversation-store.js';
import { instant } from './query-helpers.js';
import { sandboxTable } from './sandbox-store.js';
import { startTaskTable } from './start-task-store.js';

/**
 * Records copied in from another store as they are (e.g. from PGlite by the example server's
 * `storage move-to-sqlite`): settings stay sealed (the same cipher reads them), events keep
 * their ids. Each batch is one transaction; a record that is there already fails the batch (but a
 * key's check value: a key that is recorded already keeps its own).
 */
export interface ImportBatch {
  /** `data` sealed as core's `sealSettings` seals it; `key_ids` the keys it used. */
  settings?: readonly { user_id: string; data: StoredSettings; key_ids: readonly string[]; updated_at: string }[];
  /** Check values of the keys that sealed secrets (core's `secretKeyCheckValue`). */
  secretKeys?: readonly { key_id: string; check_value: string; created_at: string }[];
  apiKeys?: readonly StoredApiKey[];
  deviceGrants?: readonly DeviceGrant[];
  deviceCodeFailures?: readonly { user_id: string; opened_at: string; failures: number }[];
  conversations?: readonly ConversationRecord[];
  startTasks?: readonly StartTaskRecord[];
  sandboxes?: readonly SandboxRecord[];
  /** Each with its id (1, 2, 3… per conversation) and `conversation_id`. */
  events?: readonly { user_id: string; event: StoredEvent }[];
  installation?: { id: string; created_at: string };
}

/** How many rows each table holds: what a copy is checked against. */
export interface TableCounts {
  settings: number;
  secretKeys: number;
  apiKeys: number;
  deviceGrants: number;
  deviceCodeFailures: number;
  conversations: number;
  startTasks: number;
  sandboxes: number;
  events: number;
  installation: number;
}

/** The table of each kind of record; PostgreSQL and PGlite name theirs alike (without a schema). */
export const RECORD_TABLES: Readonly<Record<keyof TableCounts, string>> = {
  settings: 'acs_settings',
  secretKeys: 'acs_secret_keys',
  apiKeys: 'acs_api_keys',
  deviceGrants: 'acs_device_grants',
  deviceCodeFailures: 'acs_device_code_failures',
  conversations: 'acs_conversations',
  startTasks: 'acs_start_tasks',
  sandboxes: 'acs_sandboxes',
  events: 'acs_events',
  installation: 'acs_installation',
};

export function countRows(db: Sqlite): TableCounts {
  const counts = {} as TableCounts;
  for (const [name, table] of Object.entries(RECORD_TABLES) as [keyof TableCounts, string][]) {
    counts[name] = Number(db.get<{ n: number }>(`SELECT count(*) AS n FROM ${table}`)?.n ?? 0);
  }
  return counts;
}

export function importBatch(db: Sqlite, batch: ImportBatch): void {
  // Through the stores' own tables: one definition of the columns copied out of a record.
  const conversations = conversationTable(db);
  const startTasks = startTaskTable(db);
  const sandboxes = sandboxTable(db);
  db.transaction(() => {
    for (const s of batch.settings ?? []) {
      db.run(
        `INSERT INTO acs_settings (user_id, data, key_ids, updated_at) VALUES (?, ?, ?, ?)`,
        s.user_id,
        JSON.stringify(s.data),
        JSON.stringify(s.key_ids),
        s.updated_at,
      );
    }
    // The current key's check value was recorded when the storage opened; the source has one for it too.
    for (const k of batch.secretKeys ?? []) {
      db.run(
        `INSERT INTO acs_secret_keys (key_id, check_value, created_at) VALUES (?, ?, ?) ON CONFLICT (key_id) DO NOTHING`,
        k.key_id,
        k.check_value,
        k.created_at,
      );
    }
    for (const key of batch.apiKeys ?? []) insertApiKey(db, key);
    for (const g of batch.deviceGrants ?? []) {
      db.run(
        `INSERT INTO acs_device_grants (device_code_hash, user_code, expires_at, client, record) VALUES (?, ?, ?, ?, ?)`,
        g.device_code_hash,
        g.user_code,
        instant(g.expires_at),
        g.client ?? null,
        JSON.stringify(g),
      );
    }
    for (const f of batch.deviceCodeFailures ?? []) {
      db.run(
        `INSERT INTO acs_device_code_failures (user_id, opened_at, failures) VALUES (?, ?, ?)`,
        f.user_id,
        instant(f.opened_at),
        f.failures,
      );
    }
    for (const c of batch.conversations ?? []) insertOrFail(conversations.insert(c), 'conversation', c.id);
    for (const t of batch.startTasks ?? []) insertOrFail(startTasks.insert(t), 'start task', t.id);
    for (const s of batch.sandboxes ?? []) insertOrFail(sandboxes.insert(s), 'sandbox', s.id);
    for (const { user_id, event } of batch.events ?? []) {
      db.run(
        `INSERT INTO acs_events (user_id, conversation_id, id, event) VALUES (?, ?, ?, ?)`,
        user_id,
        event.conversation_id,
        event.id,
        JSON.stringify(event),
      );
    }
    if (batch.installation)
      db.run(
        `INSERT INTO acs_installation (singleton, id, created_at) VALUES (1, ?, ?)`,
        batch.installation.id,
        batch.installation.created_at,
      );
  });
}

function insertOrFail(inserted: boolean, what: string, id: string): void {
  if (!inserted) throw new Error(`${what} ${id} is there already`);
}
