import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentConversationServicePorts } from '@acs/core';
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
    const keyInfo = {
      secretKey: source,
      secretKeyId: cipher.currentKeyId,
      ...(keyFile ? { secretKeyFile: keyFile } : {}),
    };
    const embedded =
      config.storage.kind === 'sqlite' ? sqliteOrPglite(config.dataDir, config.storage.chosen) : config.storage.kind;
    if (embedded === 'sqlite') {
      dropSqliteExperimentalWarning();
      const file = sqliteFile(config.dataDir);
      const {
        importRecords: _import,
        countRows: _count,
        close,
        ...ports
      } = await createSqliteStorage({ path: file, cipher, migrations: 'auto' });
      const held = lock;
      if (holdsPglite(config.dataDir)) {
        warn(
          { dataDir: config.dataDir, unused: pgliteDirectory(config.dataDir) },
          'the data directory also holds a PGlite database, which is not used (SQLite is)',
        );
      }
      return {
        ports,
        signingSecret,
        description: { storage: 'sqlite', file, ...keyInfo },
        close: async () => {
          await close();
          await held?.release();
        },
      };
    }
    if (embedded === 'pglite' && config.storage.kind === 'sqlite') {
      warn(
        { dataDir: config.dataDir, pglite: pgliteDirectory(config.dataDir), move: MOVE_COMMAND },
        `this data directory holds a PGlite database made by an earlier version, and it is used as it is; SQLite, the default now, takes a fraction of PGlite's memory: stop the server and run \`${MOVE_COMMAND}\` (same DATA_DIR) to move every record to it`,
      );
    }
    if (config.storage.kind === 'postgres') {
      // PostgreSQL's and PGlite's clients are loaded only for the storage that needs them.
      const { createPostgresEventNotifier, createPostgresStorage } = await import('@acs/adapter-postgres');
      const storage = await createPostgresStorage({ db: config.storage.url, cipher, migrations: 'auto' });
      try {
        const eventNotifier = await createPostgresEventNotifier({ connectionString: config.storage.url });
        return {
          ports: { ...storage, eventNotifier },
          signingSecret,
          description: { storage: 'postgres', ...keyInfo },
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
    const directory = pgliteDirectory(config.dataDir);
    const [{ PGlite }, { createPostgresStorage }] = await Promise.all([
      import('@electric-sql/pglite'),
      import('@acs/adapter-postgres'),
    ]);
    const pglite = await PGlite.create(directory);
    try {
      // One process (the data directory is locked): no leases to share.
      const { conversationLeases: _unshared, ...storage } = await createPostgresStorage({
        db: pglite,
        cipher,
        migrations: 'auto',
      });
      const held = lock;
      return {
        ports: storage,
        signingSecret,
        description: { storage: 'pglite', dataDir: directory, ...keyInfo },
        close: async () => {
          await pglite.close();
          await held?.release();
        },
      };
    } catch (error) {
      await pglite.close();
      throw error;
    }
  } catch (error) {
    await lock?.release();
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
