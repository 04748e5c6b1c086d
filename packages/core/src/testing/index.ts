/**
 * @acs/core/testing: contract suites every adapter runs, and fixtures.
 *
 * Call one suite per port from your adapter's test file (vitest):
 *
 * ```ts
 * import { describeConversationStoreContract } from '@acs/core/testing';
 * describeConversationStoreContract('postgres', () => createPgConversationStore(pool));
 * ```
 */
export * from './fixtures.js';
export { describeApiKeyStoreContract, describeDeviceGrantStoreContract } from './access.js';
export { describeConversationLeaseStoreContract } from './leases.js';
export { describeLocksContract, type LocksFixture, type ProcessLocksFixture } from './locks.js';
export {
  collectPages,
  describeConversationStoreContract,
  describeSandboxSpecCatalogContract,
  describeSandboxStoreContract,
  describeSettingsStoreContract,
  describeStartTaskStoreContract,
  expectOk,
  type StoreFactory,
} from './stores.js';
export { describeSandboxRuntimeContract, type SandboxRuntimeContractOptions } from './runtime.js';
export { collectProcessOutput, SPAWN_CONTRACT_PROGRAMS } from './runtime-spawn.js';
export { describeSandboxExecContract } from './runtime-exec.js';
export { describeClockContract } from './clock.js';
export { describeIdGeneratorContract } from './ids.js';
export { describeEventStoreContract } from './events.js';
export { describeInstallationStoreContract, type InstallationStoreFixture } from './installation.js';
export { describeSandboxShellContract } from './shell.js';
export { settlesWithin, waitUntil } from './waits.js';
export { describeSecretCipherContract, type SecretCipherFixture } from './cipher.js';
export { describeLlmClientContract, type LlmClientFixture, type LlmContractTurn } from './llm.js';
export { describeMcpConnectorContract, type McpConnectorFixture } from './mcp.js';
