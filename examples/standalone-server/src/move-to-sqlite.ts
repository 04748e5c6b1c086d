import { access, open, rename, rm } from 'node:fs/promises';
import { PGlite } from '@electric-sql/pglite';
import type { DeviceGrant, StoredEvent } from '@acs/core/ports';
import type { ConversationRecord, SandboxRecord, StartTaskRecord, StoredSettings } from '@acs/core/schemas';
import { createPostgresStorage } from '@acs/adapter-postgres';
import { createSqliteStorage, RECORD_TABLES as TABLES, type ImportBatch, type TableCounts } from '@acs/adapter-sqlite';
import { lockDataDir } from './data-dir-lock.js';
import { loadCipher } from './secret-key.js';
import { dropSqliteExperimentalWarning } from './sqlite-warning.js';
import { holdsPglite, pgliteDirectory, sqliteFile } from './storage.js';

export interface MoveResult {
  counts: TableCounts;
  sqliteFile: string;
  /** Where the PGlite database was renamed to. */
  pgliteMovedTo: string;
}

/** Events are copied this many at a time (one SQLite transaction each). */
const EVENT_BATCH = 2_000;

const iso = (value: Date | string) => new Date(value).toISOString();

/**
 * Copies every record of the data directory's PGlite database into a new SQLite database in the
 * same directory, checks that each table holds as many rows as PGlite's, and renames the PGlite
 * directory aside (`pglite.moved-<time>`; delete it once the server runs well on SQLite).
 * Settings are copied sealed, as they are (the same secret key reads them), events with their
 * ids, and the installation's id with the rest, so the server finds its sandboxes again.
 * Conversation leases are not copied: they are for several processes, and SQLite is one's.
 *
 * Takes the data directory's lock (refused while the server runs). Writes to a temporary file
 * first and renames it into place only when every count matched; a failed move leaves the
 * PGlite database as it was and no SQLite database.
 */
export async function moveToSqlite(
  config: { dataDir: string; secretKey: string | null; previousSecretKeys: string[] },
  say: (line: string) => void,
): Promise<MoveResult> {
  const { dataDir } = config;
  const lock = await lockDataDir(dataDir);
  try {
    const target = sqliteFile(dataDir);
    if (!holdsPglite(dataDir))
      throw new Error(
        `There is no PGlite database in ${dataDir} (no ${pgliteDirectory(dataDir)}/PG_VERSION): nothing to move.`,
      );
    if (await exists(target))
      throw new Error(`${target} exists already: the data directory holds a SQLite database. Nothing was changed.`);
    const { cipher } = await loadCipher(config);
    const temporary = `${target}.moving`;
    await removeDatabase(temporary);
    dropSqliteExperimentalWarning();
    const pglite = await PGlite.create(pgliteDirectory(dataDir));
    let counts: TableCounts;
    try {
      // Brings an older PGlite database's schema up to date and proves the key reads its secrets.
      const source = await createPostgresStorage({ db: pglite, cipher, migrations: 'auto' });
      await source.close();
      const sqlite = await createSqliteStorage({ path: temporary, cipher, migrations: 'auto' });
      try {
        await copy(pglite, sqlite.importRecords, say);
        const written = sqlite.countRows();
        const expected = await countPglite(pglite);
        // SQLite recorded the current key's check value when it opened, as PGlite had.
        const wrong = (Object.keys(expected) as (keyof TableCounts)[]).filter(
          (table) => written[table] !== expected[table],
        );
        if (wrong.length > 0) {
          throw new Error(
            `The copy does not match: ${wrong.map((t) => `${TABLES[t]} has ${expected[t]} rows in PGlite, ${written[t]} in SQLite`).join('; ')}. Nothing was changed.`,
          );
        }
        counts = written;
      } finally {
        await sqlite.close();
      }
    } catch (error) {
      await removeDatabase(temporary);
      throw error;
    } finally {
      await pglite.close();
    }
    await rename(temporary, target);
    const movedTo = `${pgliteDirectory(dataDir)}.moved-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    await rename(pgliteDirectory(dataDir), movedTo);
    await syncDirectory(dataDir);
    return { counts, sqliteFile: target, pgliteMovedTo: movedTo };
  } finally {
    await lock.release();
  }
}

async function copy(
  pglite: PGlite,
  importRecords: (batch: ImportBatch) => void,
  say: (line: string) => void,
): Promise<void> {
  const rows = async <R>(sql: string, params: unknown[] = []) => (await pglite.query<R>(sql, params)).rows;
  const settings = await rows<{ user_id: string; data: StoredSettings; key_ids: string[]; updated_at: Date }>(
    `SELECT user_id, data, key_ids, updated_at FROM acs_settings ORDER BY user_id`,
  );
  const secretKeys = await rows<{ key_id: string; check_value: string; created_at: Date }>(
    `SELECT key_id, check_value, created_at FROM acs_secret_keys ORDER BY created_at`,
  );
  const apiKeys = await rows<{
    id: string;
    user_id: string;
    name: string;
    key_hash: string;
    created_at: Date;
    last_used_at: Date | null;
    expires_at: Date | null;
  }>(
    `SELECT id, user_id, name, key_hash, created_at, last_used_at, expires_at FROM acs_api_keys ORDER BY created_at, id`,
  );
  const deviceGrants = await rows<{ record: DeviceGrant }>(`SELECT record FROM acs_device_grants`);
  const deviceCodeFailures = await rows<{ user_id: string; opened_at: Date; failures: number }>(
    `SELECT user_id, opened_at, failures FROM acs_device_code_failures`,
  );
  const conversations = await rows<{ record: ConversationRecord }>(
    `SELECT record FROM acs_conversations ORDER BY created_at, id`,
  );
  const startTasks = await rows<{ record: StartTaskRecord }>(
    `SELECT record FROM acs_start_tasks ORDER BY created_at, id`,
  );
  const sandboxes = await rows<{ record: SandboxRecord }>(`SELECT record FROM acs_sandboxes ORDER BY created_at, id`);
  const installation = (await rows<{ id: string; created_at: Date }>(`SELECT id, created_at FROM acs_installation`))[0];
  importRecords({
    settings: settings.map((s) => ({
      user_id: s.user_id,
      data: s.data,
      key_ids: s.key_ids,
      updated_at: iso(s.updated_at),
    })),
    // The current key's check value is in SQLite already (recorded when it opened): the others join it.
    secretKeys: secretKeys.map((k) => ({
      key_id: k.key_id,
      check_value: k.check_value,
      created_at: iso(k.created_at),
    })),
    apiKeys: apiKeys.map((k) => ({
      ...k,
      created_at: iso(k.created_at),
      last_used_at: k.last_used_at === null ? null : iso(k.last_used_at),
      expires_at: k.expires_at === null ? null : iso(k.expires_at),
    })),
    deviceGrants: deviceGrants.map((g) => ({ ...g.record, client: g.record.client ?? null })),
    deviceCodeFailures: deviceCodeFailures.map((f) => ({
      user_id: f.user_id,
      opened_at: iso(f.opened_at),
      failures: Number(f.failures),
    })),
    conversations: conversations.map((c) => c.record),
    startTasks: startTasks.map((t) => t.record),
    sandboxes: sandboxes.map((s) => s.record),
    ...(installation ? { installation: { id: installation.id, created_at: iso(installation.created_at) } } : {}),
  });
  say(
    `copied ${settings.length} settings, ${apiKeys.length} API keys, ${deviceGrants.length} device sign-ins, ${conversations.length} conversations, ` +
      `${startTasks.length} start tasks, ${sandboxes.length} sandboxes${installation ? ` and the installation id ${installation.id}` : ''}`,
  );
  // Events in pages, keyset on the primary key, so a long log never sits in memory whole.
  let after: { user_id: string; conversation_id: string; id: number } | null = null;
  let events = 0;
  for (;;) {
    const page: { user_id: string; conversation_id: string; id: number; event: StoredEvent }[] = await rows(
      after
        ? `SELECT user_id, conversation_id, id, event FROM acs_events WHERE (user_id, conversation_id, id) > ($1, $2, $3) ORDER BY user_id, conversation_id, id LIMIT ${EVENT_BATCH}`
        : `SELECT user_id, conversation_id, id, event FROM acs_events ORDER BY user_id, conversation_id, id LIMIT ${EVENT_BATCH}`,
      after ? [after.user_id, after.conversation_id, after.id] : [],
    );
    if (page.length === 0) break;
    importRecords({
      events: page.map((e) => ({
        user_id: e.user_id,
        event: { ...e.event, id: Number(e.id), conversation_id: e.conversation_id },
      })),
    });
    events += page.length;
    const last = page.at(-1)!;
    after = { user_id: last.user_id, conversation_id: last.conversation_id, id: Number(last.id) };
  }
  say(`copied ${events} events`);
}

async function countPglite(pglite: PGlite): Promise<TableCounts> {
  const counts = {} as TableCounts;
  for (const [name, table] of Object.entries(TABLES) as [keyof TableCounts, string][]) {
    counts[name] = Number(
      (await pglite.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]?.n ?? 0,
    );
  }
  return counts;
}

const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

/** The renames of a directory's entries are on disk once the directory is synced. */
async function syncDirectory(path: string): Promise<void> {
  const directory = await open(path, 'r');
  try {
    await directory.sync();
  } finally {
    await directory.close();
  }
}

/** A SQLite database file and what SQLite keeps beside it. */
async function removeDatabase(path: string): Promise<void> {
  for (const suffix of ['', '-wal', '-shm', '-journal']) await rm(`${path}${suffix}`, { force: true });
}
