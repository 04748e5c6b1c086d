/**
 * @acs/adapter-memory: every store port of @acs/core in memory, plus a
 * programmable fake sandbox runtime and a scripted LLM. For tests and demos; nothing survives a restart.
 *
 * ```ts
 * const service = createAgentConversationService({ ...createMemoryPorts(), agent: createAgent() });
 * ```
 */
import type { AgentConversationServicePorts } from '@acs/core';
import { MemoryConversationStore } from './conversation-store.js';
import { MemoryEventStore } from './event-store.js';
import { MemoryInstallationStore } from './installation-store.js';
import { FakeSandboxRuntime, type FakeSandboxRuntimeOptions } from './fake-sandbox-runtime.js';
import { StaticSandboxSpecCatalog, type SandboxSpecPreset } from './sandbox-spec-catalog.js';
import { ScriptedLlm, type ScriptedLlmOptions } from './scripted-llm.js';
import { MemorySandboxStore } from './sandbox-store.js';
import { MemorySettingsStore } from './settings-store.js';
import { MemoryStartTaskStore } from './start-task-store.js';

export { MemoryConversationStore, matchesConversationFilter } from './conversation-store.js';
export { MemoryEventStore } from './event-store.js';
export { MemoryInstallationStore } from './installation-store.js';
export { FakeSandboxRuntime, type FakeExecContext, type FakeExecHandler, type FakeRuntimeOperation, type FakeSandboxRuntimeOptions } from './fake-sandbox-runtime.js';
export { FakeProcess, type FakeProcessOutput, type FakeSpawnContext, type FakeSpawnHandler } from './fake-process.js';
export { fakeBash, type FakeBashHost } from './fake-bash.js';
export { fakeGit } from './fake-git.js';
export { DEFAULT_MEMORY_SPEC, StaticSandboxSpecCatalog, type SandboxSpecPreset } from './sandbox-spec-catalog.js';
export { MemorySandboxStore } from './sandbox-store.js';
export { ScriptedLlm, type ScriptedLlmOptions, type ScriptedResponder, type ScriptedToolCall, type ScriptedTurn } from './scripted-llm.js';
export { MemorySettingsStore } from './settings-store.js';
export { MemoryStartTaskStore } from './start-task-store.js';

export interface MemoryPortsOptions {
  specs?: readonly SandboxSpecPreset[];
  /** The installation's identity (default: a new random one, so each set of memory ports is its own installation). */
  installationId?: string;
  runtime?: FakeSandboxRuntimeOptions;
  llm?: ScriptedLlmOptions;
}

/** The stores the service keeps its records in, all in memory: one installation, nothing survives the process. */
export type MemoryStores = Pick<AgentConversationServicePorts, 'settings' | 'conversations' | 'startTasks' | 'events' | 'sandboxes' | 'installation'>;

/** Every store in memory (no runtime, model or spec catalog): for a host that brings those itself. */
export function createMemoryStores(options: { installationId?: string } = {}): MemoryStores {
  return {
    settings: new MemorySettingsStore(),
    conversations: new MemoryConversationStore(),
    startTasks: new MemoryStartTaskStore(),
    events: new MemoryEventStore(),
    sandboxes: new MemorySandboxStore(),
    installation: new MemoryInstallationStore(options.installationId),
  };
}

/** All ports in memory, with the fake runtime exposed for steering in tests; add the agent (`createAgent()` from `@acs/agent`). */
export function createMemoryPorts(options: MemoryPortsOptions = {}): Omit<AgentConversationServicePorts, 'agent'> & { runtime: FakeSandboxRuntime; llm: ScriptedLlm } {
  return {
    ...createMemoryStores(options.installationId !== undefined ? { installationId: options.installationId } : {}),
    sandboxSpecs: new StaticSandboxSpecCatalog(options.specs),
    runtime: new FakeSandboxRuntime(options.runtime),
    llm: new ScriptedLlm(options.llm),
  };
}
