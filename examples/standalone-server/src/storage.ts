import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import type { AgentConversationServicePorts } from '@acs/core';
import { createPostgresEventNotifier, createPostgresStorage } from '@acs/adapter-postgres';
import { createMemoryStores } from '@acs/adapter-memory';
import type { StandaloneConfig } from './config.js';
import { lockDataDir, type DataDirLock } from './data-dir-lock.js';
import { loadCipher } from './secret-key.js';

/** Start-up steps, so a start that is interrupted or stuck can say where it was. */
export type StartPhase = 'locking the data directory' | 'opening storage' | 'connecting to the sandbox runtime' | 'recovering sandboxes and agents';

/**
 * The stores the service keeps its records in: all from one adapter, memory or PostgreSQL/PGlite;
 * on a PostgreSQL server also the event notifier, the conversation leases and the locks, so
 * several processes on one database see each other's event appends live, each conversation's
 * agent runs in one of them (taken over by another when that one dies), the per-user sandbox
 * limit holds across them and one of them runs sandbox maintenance.
 */
type StoragePorts = Pick<
  AgentConversationServicePorts,
  'settings' | 'apiKeys' | 'deviceGrants' | 'conversations' | 'startTasks' | 'events' | 'sandboxes' | 'installation' | 'eventNotifier' | 'conversationLeases' | 'locks'
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
 * message otherwise. PGlite is one process's database, so its data directory is locked first
 * (`warn` says when that waits for a holder that is still exiting).
 */
export async function openStorage(
  config: StandaloneConfig,
  phase: (p: StartPhase) => void,
  warn: (fields: Record<string, unknown>, message: string) => void = () => {},
): Promise<Storage> {
  if (config.storage.kind === 'memory') {
    return { ports: createMemoryStores(), signingSecret: null, description: { storage: 'memory (nothing survives a restart)' }, close: async () => {} };
  }
  let lock: DataDirLock | null = null;
  if (config.storage.kind === 'pglite') {
    phase('locking the data directory');
    lock = await lockDataDir(config.dataDir, {
      onWaitingForExit: (pid, waitMs) =>
        warn({ dataDir: config.dataDir, holder: pid }, `the data directory's holder, process ${pid}, was killed or has ended and is still exiting; waiting up to ${waitMs / 1000} s for it`),
    });
  }
  phase('opening storage');
  try {
    const { cipher, source, keyFile, signingSecret } = await loadCipher(config);
    const keyInfo = { secretKey: source, secretKeyId: cipher.currentKeyId, ...(keyFile ? { secretKeyFile: keyFile } : {}) };
    if (config.storage.kind === 'postgres') {
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
    const directory = join(config.dataDir, 'pglite');
    const pglite = await PGlite.create(directory);
    try {
      // One process (the data directory is locked): no leases to share.
      const { conversationLeases: _unshared, ...storage } = await createPostgresStorage({ db: pglite, cipher, migrations: 'auto' });
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
