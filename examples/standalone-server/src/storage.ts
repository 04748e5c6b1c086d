import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentConversationServicePorts } from '@acs/core';
import type { SecretCipher } from '@acs/core/ports';
import { createMemoryStores } from '@acs/adapter-memory';
import { createSqliteStorage } from '@acs/adapter-sqlite';
import type { StandaloneConfig } from './config.js';
import { lockDataDir, type DataDirLock } from './data-dir-lock.js';
import { loadCipher } from './secret-key.js';
import { dropSqliteExperimentalWarning } from './sqlite-warning.js';

/** The SQLite database file in the data directory. */
export const sqliteFile = (dataDir: string) => join(dataDir, 'acs.sqlite');
/** The PGlite database directory in the data directory (the default storage before SQLite). */
export const pgliteDirectory = (dataDir: string) => join(dataDir, 'pglite');
/** Whether the data directory holds a PGlite database (PostgreSQL's PG_VERSION is written when one is made). */
export const holdsPglite = (dataDir: string) => existsSync(join(pgliteDirectory(dataDir), 'PG_VERSION'));

const MOVE_COMMAND = 'npm run storage -- move-to-sqlite';

/** Start-up steps, so a start that is interrupted or stuck can say where it was. */
export type StartPhase =
  | 'locking the data directory'
  | 'opening storage'
  | 'connecting to the sandbox runtime'
  | 'recovering sandboxes and agents';

/**
 * The stores the service keeps its records in: all from one adapter, memory, SQLite or PostgreSQL/PGlite;
 * on a PostgreSQL server also the event notifier, the conversation leases and the locks, so
 * several processes on one database see each other's event appends live, each conversation's
 * agent runs in one of them (taken over by another when that one dies), the per-user sandbox
 * limit holds across them and one of them runs sandbox maintenance.
 */
type StoragePorts = Pick<
  AgentConversationServicePorts,
  | 'settings'
  | 'apiKeys'
  | 'deviceGrants'
  | 'conversations'
  | 'startTasks'
  | 'events'
  | 'sandboxes'
  | 'installation'
  | 'eventNotifier'
  | 'conversationLeases'
  | 'locks'
>;

export interface Storage {
  ports: StoragePorts;
  /** Signs conversation keys; derived from the secret key, so keys survive restarts (random with memory storage). */
  signingSecret: Uint8Array | null;
  description: Record<string, unknown>;
  close(): Promise<void>;
}

/**
 * The configured storage, migrated and with its secret key verified; throws with a clear
 * message otherwise. SQLite and PGlite are one process's databases, so their data directory is
 * locked first (`warn` says when that waits for a holder that is still exiting).
 *
 * A data directory an earlier version made holds a PGlite database (the default then). With the
 * storage left to its default it is used as it is, with a warning that says how to move it to
 * SQLite (`npm run storage -- move-to-sqlite`): an upgrade never hides a user's records. With
 * ACS_STORAGE=sqlite set, the start is refused while the PGlite database is there and no SQLite
 * one is, rather than starting empty beside it.
 */
export async function openStorage(
  config: StandaloneConfig,
  phase: (p: StartPhase) => void,
  warn: (fields: Record<string, unknown>, message: string) => void = () => {},
): Promise<Storage> {
  if (config.storage.kind === 'memory') {
    return {
      ports: createMemoryStores(),
      signingSecret: null,
      description: { storage: 'memory (nothing survives a restart)' },
      close: async () => {},
    };
  }
  let lock: DataDirLock | null = null;
  if (config.storage.kind === 'pglite' || config.storage.kind === 'sqlite') {
    phase('locking the data directory');
    lock = await lockDataDir(config.dataDir, {
      onWaitingForExit: (pid, waitMs) =>
        warn(
          { dataDir: config.dataDir, holder: pid },
          `the data directory's holder, process ${pid}, was killed or has ended and is still exiting; waiting up to ${waitMs / 1000} s for it`,
        ),
    });
  }
  phase('opening storage');
  try {
    const { cipher, source, keyFile, signingSecret } = await loadCipher(config);
    const keys: OpenKeys = {
      cipher,
      signingSecret,
      info: { secretKey: source, secretKeyId: cipher.currentKeyId, ...(keyFile ? { secretKeyFile: keyFile } : {}) },
    };
    if (config.storage.kind === 'postgres') return await openPostgresWhenUp(config.storage, keys, warn);
    const embedded =
      config.storage.kind === 'sqlite' ? sqliteOrPglite(config.dataDir, config.storage.chosen) : config.storage.kind;
    if (embedded === 'sqlite') {
      const synchronous = config.storage.kind === 'sqlite' ? config.storage.synchronous : 'full';
      return await openSqlite({ dataDir: config.dataDir, synchronous }, keys, lock, warn);
    }
    if (config.storage.kind === 'sqlite') {
      warn(
        { dataDir: config.dataDir, pglite: pgliteDirectory(config.dataDir), move: MOVE_COMMAND },
        `this data directory holds a PGlite database made by an earlier version, and it is used as it is; SQLite, the default now, takes a fraction of PGlite's memory: stop the server and run \`${MOVE_COMMAND}\` (same DATA_DIR) to move every record to it`,
      );
    }
    return await openPglite(config.dataDir, keys, lock);
  } catch (error) {
    await lock?.release();
    throw error;
  }
}

/** The secret key's cipher, the signing secret derived from it, and what the start log says of it. */
interface OpenKeys {
  cipher: SecretCipher;
  signingSecret: Storage['signingSecret'];
  info: Record<string, unknown>;
}

/** SQLite in DATA_DIR/acs.sqlite (the default); the data directory's lock is released when it closes. */
async function openSqlite(
  { dataDir, synchronous }: { dataDir: string; synchronous: 'full' | 'normal' },
  keys: OpenKeys,
  lock: DataDirLock | null,
  warn: (fields: Record<string, unknown>, message: string) => void,
): Promise<Storage> {
  dropSqliteExperimentalWarning();
  const file = sqliteFile(dataDir);
  const {
    importRecords: _import,
    countRows: _count,
    close,
    ...ports
  } = await createSqliteStorage({ path: file, cipher: keys.cipher, migrations: 'auto', synchronous });
  if (holdsPglite(dataDir)) {
    warn(
      { dataDir, unused: pgliteDirectory(dataDir) },
      'the data directory also holds a PGlite database, which is not used (SQLite is)',
    );
  }
  return {
    ports,
    signingSecret: keys.signingSecret,
    description: { storage: 'sqlite', file, synchronous, ...keys.info },
    close: async () => {
      await close();
      await lock?.release();
    },
  };
}

/**
 * Errors of a database that is not there yet rather than one that refuses us: no listener, a name
 * not resolved yet, no socket file yet, or PostgreSQL still starting (57P03). A service started
 * beside its database (a chart's pods, a compose file without health checks) waits for these;
 * a wrong password or a missing database fails at once.
 */
const NOT_UP_YET = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'ECONNRESET', 'ENOENT', '57P03']);

/** openPostgres, tried again while the database is not up yet, for up to ACS_DATABASE_WAIT_SECONDS. */
async function openPostgresWhenUp(
  { url, waitMs }: { url: string; waitMs: number },
  keys: OpenKeys,
  warn: (fields: Record<string, unknown>, message: string) => void,
): Promise<Storage> {
  const deadline = Date.now() + waitMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await openPostgres(url, keys);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (typeof code !== 'string' || !NOT_UP_YET.has(code) || Date.now() >= deadline) throw error;
      if (attempt === 1)
        warn(
          { code, waitSeconds: waitMs / 1000 },
          `the database does not answer yet (${(error as Error).message}); trying again for up to ${waitMs / 1000} s (ACS_DATABASE_WAIT_SECONDS)`,
        );
      await new Promise((resolve) => setTimeout(resolve, Math.min(2_000, 200 * attempt)));
    }
  }
}

/** PostgreSQL at DATABASE_URL, with its live-event notifier; its client is loaded only for it. */
async function openPostgres(url: string, keys: OpenKeys): Promise<Storage> {
  const { createPostgresEventNotifier, createPostgresStorage } = await import('@acs/adapter-postgres');
  const storage = await createPostgresStorage({ db: url, cipher: keys.cipher, migrations: 'auto' });
  try {
    const eventNotifier = await createPostgresEventNotifier({ connectionString: url });
    return {
      ports: { ...storage, eventNotifier },
      signingSecret: keys.signingSecret,
      description: { storage: 'postgres', ...keys.info },
      close: async () => {
        await eventNotifier.close();
        await storage.close();
      },
    };
  } catch (error) {
    await storage.close();
    throw error;
  }
}

/**
 * PGlite in DATA_DIR/pglite (loaded only for it); one process, so no leases to share, and, as the
 * data directory is locked, nothing else writes it: the storage is exclusive (records cached).
 */
async function openPglite(dataDir: string, keys: OpenKeys, lock: DataDirLock | null): Promise<Storage> {
  const directory = pgliteDirectory(dataDir);
  const [{ PGlite }, { createPostgresStorage }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('@acs/adapter-postgres'),
  ]);
  const pglite = await PGlite.create(directory);
  try {
    const { conversationLeases: _unshared, ...storage } = await createPostgresStorage({
      db: pglite,
      cipher: keys.cipher,
      migrations: 'auto',
      exclusive: true,
    });
    return {
      ports: storage,
      signingSecret: keys.signingSecret,
      description: { storage: 'pglite', dataDir: directory, ...keys.info },
      close: async () => {
        await pglite.close();
        await lock?.release();
      },
    };
  } catch (error) {
    await pglite.close();
    throw error;
  }
}

/** Which embedded database a start with SQLite configured uses (see openStorage). */
function sqliteOrPglite(dataDir: string, chosen: boolean): 'sqlite' | 'pglite' {
  if (existsSync(sqliteFile(dataDir)) || !holdsPglite(dataDir)) return 'sqlite';
  if (!chosen) return 'pglite';
  throw new Error(
    `ACS_STORAGE=sqlite, but the data directory ${dataDir} holds a PGlite database (made by an earlier version) and no SQLite database. ` +
      `Move its records to SQLite with \`${MOVE_COMMAND}\` (same DATA_DIR, server stopped), or keep using it with ACS_STORAGE=pglite.`,
  );
}
