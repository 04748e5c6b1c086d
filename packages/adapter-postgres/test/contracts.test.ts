import {
  describeConversationStoreContract,
  describeEventStoreContract,
  describeSandboxStoreContract,
  describeSettingsStoreContract,
  describeStartTaskStoreContract,
} from '@acs/core/testing';
import { DATABASES, freshStorage } from './databases.js';

for (const db of DATABASES) {
  describeSettingsStoreContract(db.name, async () => (await freshStorage(db)).settings);
  describeConversationStoreContract(db.name, async () => (await freshStorage(db)).conversations);
  describeStartTaskStoreContract(db.name, async () => (await freshStorage(db)).startTasks);
  describeSandboxStoreContract(db.name, async () => (await freshStorage(db)).sandboxes);
  describeEventStoreContract(db.name, async () => (await freshStorage(db)).events);
}
