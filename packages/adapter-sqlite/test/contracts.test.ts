import {
  describeApiKeyStoreContract,
  describeConversationStoreContract,
  describeDeviceGrantStoreContract,
  describeEventStoreContract,
  describeInstallationStoreContract,
  describeSandboxStoreContract,
  describeSettingsStoreContract,
  describeStartTaskStoreContract,
} from '@acs/core/testing';
import { freshStorage, openStorage } from './databases.js';

// The list adapter-postgres runs, but for the conversation leases: a SQLite database is one
// process's, so it has none (see the README).
describeSettingsStoreContract('sqlite', async () => (await freshStorage()).settings);
describeApiKeyStoreContract('sqlite', async () => (await freshStorage()).apiKeys);
describeDeviceGrantStoreContract('sqlite', async () => (await freshStorage()).deviceGrants);
describeConversationStoreContract('sqlite', async () => (await freshStorage()).conversations);
describeStartTaskStoreContract('sqlite', async () => (await freshStorage()).startTasks);
describeSandboxStoreContract('sqlite', async () => (await freshStorage()).sandboxes);
describeEventStoreContract('sqlite', async () => (await freshStorage()).events);
describeInstallationStoreContract('sqlite', async () => {
  const storage = await freshStorage();
  return {
    store: storage.installation,
    // A second storage over the same file: what a restarted process sees.
    reopen: async () => (await openStorage(storage.path)).installation,
  };
});
