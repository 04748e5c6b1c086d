import { okAsync } from 'neverthrow';
import {
  createSandboxRuntimePool,
  manualClock,
  randomIdGenerator,
  systemClock,
  type PooledRuntime,
} from '@acs/core/ports';
import {
  describeClockContract,
  describeIdGeneratorContract,
  describeLlmClientContract,
  describeSandboxRuntimeContract,
} from '@acs/core/testing';
import { FakeSandboxRuntime, ScriptedLlm } from '@acs/testing';
import { playSpawnContractPrograms } from './spawn-contract-programs.js';

describeSandboxRuntimeContract('fake (running at once)', () => playSpawnContractPrograms(new FakeSandboxRuntime()));
describeSandboxRuntimeContract('fake (slow start)', () =>
  playSpawnContractPrograms(new FakeSandboxRuntime({ inspectionsUntilRunning: 3 })),
);
// A pool of engines is a runtime like any other: it passes the same contract.
const pooled = (name: string, runtime: FakeSandboxRuntime): PooledRuntime => ({
  name,
  runtime,
  maxRunning: 10,
  running: () => okAsync(runtime.size),
});
describeSandboxRuntimeContract('pool of two fake engines', () =>
  createSandboxRuntimePool([
    pooled('a', playSpawnContractPrograms(new FakeSandboxRuntime())),
    pooled('b', playSpawnContractPrograms(new FakeSandboxRuntime())),
  ]),
);
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
            : {
                error: turn.fail,
                message:
                  turn.fail === 'auth_failed' ? 'the key was refused (401)' : 'no such model on this provider (404)',
              },
      ),
  };
});
