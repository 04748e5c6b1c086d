import {
  describeApiKeyStoreContract,
  describeConversationLeaseStoreContract,
  describeDeviceGrantStoreContract,
  describeConversationStoreContract,
  describeEventStoreContract,
  describeInstallationStoreContract,
  describeSandboxSpecCatalogContract,
  describeSandboxStoreContract,
  describeSettingsStoreContract,
  describeStartTaskStoreContract,
} from '@acs/core/testing';
import {
  MemoryApiKeyStore,
  MemoryConversationLeaseStore,
  MemoryDeviceGrantStore,
  MemoryConversationStore,
  MemoryEventStore,
  MemoryInstallationStore,
  MemorySandboxStore,
  MemorySettingsStore,
  MemoryStartTaskStore,
  StaticSandboxSpecCatalog,
} from '@acs/adapter-memory';

describeSettingsStoreContract('memory', () => new MemorySettingsStore());
describeApiKeyStoreContract('memory', () => new MemoryApiKeyStore());
describeDeviceGrantStoreContract('memory', () => new MemoryDeviceGrantStore());
describeConversationStoreContract('memory', () => new MemoryConversationStore());
describeStartTaskStoreContract('memory', () => new MemoryStartTaskStore());
describeEventStoreContract('memory', () => new MemoryEventStore());
describeConversationLeaseStoreContract('memory', () => {
  const leases = new MemoryConversationLeaseStore();
  return { leases, events: new MemoryEventStore({ leases }) };
});
describeSandboxStoreContract('memory', () => new MemorySandboxStore());
describeInstallationStoreContract('memory', () => {
  const store = new MemoryInstallationStore();
  return { store, reopen: () => store };
});
describeSandboxSpecCatalogContract(
  'static',
  () =>
    new StaticSandboxSpecCatalog([
      { id: 'bookworm', image: 'acs-sandbox:bookworm', working_dir: '/workspace' },
      { id: 'python', image: 'python:3.12', working_dir: '/app', command: ['sleep', 'infinity'] },
      { id: 'node', image: 'node:22', working_dir: '/app', initial_env: { NODE_ENV: 'development' } },
    ]),
);
