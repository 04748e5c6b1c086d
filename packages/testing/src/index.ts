/**
 * @acs/testing: test doubles for the Agent Conversation Service, for its own tests and for the
 * test suites of hosts that embed it:
 *
 * - `createMemoryPorts()`: every port in memory (the stores of `@acs/adapter-memory`), with a
 *   programmable fake sandbox runtime and a scripted model, ready for `createAgentConversationService`;
 * - `FakeSandboxRuntime`: sandboxes as map entries that move through the states a real runtime
 *   reports; commands answered by `onExec` handlers, processes by `onSpawn`, and the persistent
 *   shell's bash played over the handlers (`fakeBash`);
 * - `ScriptedLlm`: a model that answers from a queue or a function;
 * - `startFakeOpenAi()`: a scripted OpenAI-compatible chat-completions server on 127.0.0.1, for
 *   real HTTP through a model adapter; and `closedPort()`;
 * - `startFakeGitHub()`, `startFakeGitLab()`: the REST and GraphQL calls of the git provider
 *   adapter answered on 127.0.0.1 from accounts keyed by token, failures on demand (`intercept`).
 *
 * ```ts
 * const service = createAgentConversationService({ ...createMemoryPorts(), agent: createAgent() });
 * ```
 */
import type { AgentConversationServicePorts } from '@acs/core';
import { createMemoryStores, StaticSandboxSpecCatalog, type SandboxSpecPreset } from '@acs/adapter-memory';
import { FakeSandboxRuntime, type FakeSandboxRuntimeOptions } from './fake-sandbox-runtime.js';
import { ScriptedLlm, type ScriptedLlmOptions } from './scripted-llm.js';

export * from './fake-openai.js';
export { tokenPieces } from './fake-openai-stream.js';
export { startFakeGitHub, type FakeGitHub, type FakeGitHubAccount, type FakeGitHubRepository } from './fake-github.js';
export { startFakeGitLab, type FakeGitLab, type FakeGitLabAccount, type FakeGitLabProject } from './fake-gitlab.js';
export type {
  FakeProviderInterception,
  FakeProviderReply,
  FakeProviderRequest,
  FakeProviderServer,
} from './fake-provider-server.js';
export * from './loopback.js';
export { runWithModuleLog } from './module-log.js';
export { sseMessages, type SseMessage } from './sse.js';
export {
  FakeSandboxRuntime,
  type FakeExecContext,
  type FakeExecHandler,
  type FakeRuntimeOperation,
  type FakeSandboxRuntimeOptions,
} from './fake-sandbox-runtime.js';
export { FakeProcess, type FakeProcessOutput, type FakeSpawnContext, type FakeSpawnHandler } from './fake-process.js';
export { fakeBash, type FakeBashHost } from './fake-bash.js';
export { fakeGit } from './fake-git.js';
export {
  ScriptedLlm,
  type ScriptedLlmOptions,
  type ScriptedResponder,
  type ScriptedStream,
  type ScriptedToolCall,
  type ScriptedTurn,
} from './scripted-llm.js';

export interface MemoryPortsOptions {
  specs?: readonly SandboxSpecPreset[];
  /** The installation's identity (default: a new random one, so each set of memory ports is its own installation). */
  installationId?: string;
  runtime?: FakeSandboxRuntimeOptions;
  llm?: ScriptedLlmOptions;
  /** Conversation leases in the stores (for several services sharing these ports, as replicas share a database). */
  leases?: boolean;
}

/** All ports in memory, with the fake runtime and the scripted model exposed for steering in tests; add the agent (`createAgent()` from `@acs/agent`). */
export function createMemoryPorts(
  options: MemoryPortsOptions = {},
): Omit<AgentConversationServicePorts, 'agent'> & { runtime: FakeSandboxRuntime; llm: ScriptedLlm } {
  return {
    ...createMemoryStores({
      ...(options.installationId !== undefined ? { installationId: options.installationId } : {}),
      ...(options.leases ? { leases: true } : {}),
    }),
    sandboxSpecs: new StaticSandboxSpecCatalog(options.specs),
    runtime: new FakeSandboxRuntime(options.runtime),
    llm: new ScriptedLlm(options.llm),
  };
}
export { startDockerEngine, type DockerEngineProcess } from './docker-engine.js';
