import { manualClock, randomIdGenerator, systemClock } from '@acs/core';
import {
  describeClockContract,
  describeConversationStoreContract,
  describeEventStoreContract,
  describeIdGeneratorContract,
  describeInstallationStoreContract,
  describeLlmClientContract,
  describeSandboxRuntimeContract,
  describeSandboxSpecCatalogContract,
  describeSandboxStoreContract,
  describeSettingsStoreContract,
  describeStartTaskStoreContract,
} from '@acs/core/testing';
import {
  FakeSandboxRuntime,
  MemoryConversationStore,
  MemoryEventStore,
  MemoryInstallationStore,
  MemorySandboxStore,
  MemorySettingsStore,
  MemoryStartTaskStore,
  ScriptedLlm,
  StaticSandboxSpecCatalog,
} from '@acs/adapter-memory';
import { playSpawnContractPrograms } from './spawn-contract-programs.js';

describeSettingsStoreContract('memory', () => new MemorySettingsStore());
describeConversationStoreContract('memory', () => new MemoryConversationStore());
describeStartTaskStoreContract('memory', () => new MemoryStartTaskStore());
describeEventStoreContract('memory', () => new MemoryEventStore());
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
describeSandboxRuntimeContract('fake (running at once)', () => playSpawnContractPrograms(new FakeSandboxRuntime()));
describeSandboxRuntimeContract('fake (slow start)', () => playSpawnContractPrograms(new FakeSandboxRuntime({ inspectionsUntilRunning: 3 })));
describeClockContract('system', () => systemClock);
describeClockContract('manual', () => manualClock());
describeIdGeneratorContract('random', () => randomIdGenerator);

describeLlmClientContract('ScriptedLlm', () => {
  const llm = new ScriptedLlm();
  return {
    client: llm,
    credentials: { model: 'openai/gpt-4o', api_key: 'sk-contract-key', base_url: null },
    answerNext: (turn) =>
      llm.push(
        'text' in turn
          ? { content: turn.text }
          : 'toolCall' in turn
            ? { tool_calls: [{ name: turn.toolCall.name, arguments: turn.toolCall.arguments }] }
            : { error: turn.fail, message: turn.fail === 'auth_failed' ? 'the key was refused (401)' : 'no such model on this provider (404)' },
      ),
  };
});
