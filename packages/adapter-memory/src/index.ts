/**
 * @acs/adapter-memory: every store port of @acs/core in memory, and a static sandbox spec
 * catalog. For tests, demos and single-process hosts; nothing survives a restart. The fake
 * runtime and the scripted model are in `@acs/testing` (`createMemoryPorts()` puts all together).
 *
 * ```ts
 * const service = createAgentConversationService({ ...createMemoryStores(), sandboxSpecs, runtime, llm, agent: createAgent() });
 * ```
 */
import type { AgentConversationServicePorts } from '@acs/core';
import { InProcessLocks } from '@acs/core/ports';
import { MemoryApiKeyStore } from './api-key-store.js';
import { MemoryConversationStore } from './conversation-store.js';
import { MemoryDeviceGrantStore } from './device-grant-store.js';
import { MemoryEventStore } from './event-store.js';
import { MemoryInstallationStore } from './installation-store.js';
import { MemoryConversationLeaseStore } from './lease-store.js';
import { MemorySandboxStore } from './sandbox-store.js';
import { MemorySettingsStore } from './settings-store.js';
import { MemoryStartTaskStore } from './start-task-store.js';

export { MemoryApiKeyStore } from './api-key-store.js';
export { MemoryConversationStore, matchesConversationFilter } from './conversation-store.js';
export { MemoryDeviceGrantStore } from './device-grant-store.js';
export { MemoryEventStore } from './event-store.js';
export { MemoryInstallationStore } from './installation-store.js';
export { MemoryConversationLeaseStore } from './lease-store.js';
export { DEFAULT_MEMORY_SPEC, StaticSandboxSpecCatalog, type SandboxSpecPreset } from './sandbox-spec-catalog.js';
export { MemorySandboxStore } from './sandbox-store.js';
export { MemorySettingsStore } from './settings-store.js';
export { MemoryStartTaskStore } from './start-task-store.js';

/** The stores the service keeps its records in, all in memory: one installation, nothing survives the process. */
export type MemoryStores = Pick<
  AgentConversationServicePorts,
  | 'settings'
  | 'apiKeys'
  | 'deviceGrants'
  | 'conversations'
  | 'startTasks'
  | 'events'
  | 'sandboxes'
  | 'installation'
  | 'conversationLeases'
  | 'locks'
>;

/**
 * Every store in memory (no runtime, model or spec catalog): for a host that brings those itself.
 * One service needs no leases. `{ leases: true }` adds conversation leases (the event store then
 * checks fences) and locks: for several services sharing these stores in one process, as
 * replicas would share a database (tests of takeover, fencing and the per-user limit).
 */
export function createMemoryStores(options: { installationId?: string; leases?: boolean } = {}): MemoryStores {
  const conversationLeases = options.leases ? new MemoryConversationLeaseStore() : undefined;
  return {
    ...(conversationLeases ? { conversationLeases, locks: new InProcessLocks() } : {}),
    settings: new MemorySettingsStore(),
    apiKeys: new MemoryApiKeyStore(),
    deviceGrants: new MemoryDeviceGrantStore(),
    conversations: new MemoryConversationStore(),
    startTasks: new MemoryStartTaskStore(),
    events: new MemoryEventStore(conversationLeases ? { leases: conversationLeases } : {}),
    sandboxes: new MemorySandboxStore(),
    installation: new MemoryInstallationStore(options.installationId),
  };
}
