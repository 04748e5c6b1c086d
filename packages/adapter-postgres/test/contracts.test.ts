import {
  describeApiKeyStoreContract,
  describeConversationLeaseStoreContract,
  describeDeviceGrantStoreContract,
  describeConversationStoreContract,
  describeEventStoreContract,
  describeInstallationStoreContract,
  describeSandboxStoreContract,
  describeSettingsStoreContract,
  describeStartTaskStoreContract,
} from '@acs/core/testing';
import { createPostgresStorage } from '@acs/adapter-postgres';
import { DATABASES, freshStorage, testCipher } from './databases.js';

// An exclusive storage keeps the conversations and settings it reads and writes in memory: the
// same contracts, with the cache in front of the table.
for (const db of DATABASES) {
  const exclusive = async () => freshStorage(db, testCipher(), { exclusive: true });
  describeSettingsStoreContract(`${db.name}, exclusive`, async () => (await exclusive()).settings);
  describeConversationStoreContract(`${db.name}, exclusive`, async () => (await exclusive()).conversations);
}

for (const db of DATABASES) {
  describeSettingsStoreContract(db.name, async () => (await freshStorage(db)).settings);
  describeApiKeyStoreContract(db.name, async () => (await freshStorage(db)).apiKeys);
  describeDeviceGrantStoreContract(db.name, async () => (await freshStorage(db)).deviceGrants);
  describeConversationStoreContract(db.name, async () => (await freshStorage(db)).conversations);
  describeStartTaskStoreContract(db.name, async () => (await freshStorage(db)).startTasks);
  describeSandboxStoreContract(db.name, async () => (await freshStorage(db)).sandboxes);
  describeEventStoreContract(db.name, async () => (await freshStorage(db)).events);
  describeConversationLeaseStoreContract(db.name, async () => {
    const storage = await freshStorage(db);
    return { leases: storage.conversationLeases, events: storage.events };
  });
  describeInstallationStoreContract(db.name, async () => {
    const storage = await freshStorage(db);
    return {
      store: storage.installation,
      // A second storage over the same schema: what a restarted process sees.
      reopen: async () =>
        (
          await createPostgresStorage({
            db: await db.executor(),
            cipher: testCipher(),
            schema: storage.schema,
            migrations: 'check',
          })
        ).installation,
    };
  });
}
