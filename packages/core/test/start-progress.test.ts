import { ResultAsync } from 'neverthrow';
import { describe, expect, it } from 'vitest';
import { createAgentConversationService } from '../src/index.js';
import type { RuntimeCreateRequest, RuntimeObservation, SandboxRuntimeError } from '../src/ports.js';
import { expectOk } from '../src/testing/index.js';
import { createMemoryPorts, FakeSandboxRuntime } from '@acs/testing';
import { createAgent } from '@acs/agent';

/** A runtime whose creates first "build an image", saying so, until the test lets them go on. */
class BuildingRuntime extends FakeSandboxRuntime {
  #finish!: () => void;
  readonly #built = new Promise<void>((resolve) => (this.#finish = resolve));
  finishBuild(): void {
    this.#finish();
  }
  override create(
    request: RuntimeCreateRequest,
    onProgress?: (detail: string) => void,
  ): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    onProgress?.('waiting for the sandbox image to be built: step 1/4: choosing the build method');
    return new ResultAsync(
      (async () => {
        await new Promise((r) => setTimeout(r, 10));
        onProgress?.('waiting for the sandbox image to be built: step 2/4: debootstrap');
        await this.#built;
        return super.create(request);
      })(),
    );
  }
}

const until = async <T>(probe: () => Promise<T>, done: (value: T) => boolean): Promise<T> => {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const value = await probe();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting; last seen: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('a conversation whose sandbox is slow to start (its image is being built)', () => {
  it('waits, and its start task and sandbox say what is happening; once up, the detail is gone', async () => {
    const runtime = new BuildingRuntime();
    const service = createAgentConversationService(
      { agent: createAgent(), ...createMemoryPorts(), runtime },
      { pollIntervalMs: 1, startTimeoutMs: 1_000 },
    );
    await expectOk(service.settings.store('alice', { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test' }));
    const task = await expectOk(service.conversations.startApp('alice', {}));
    const waiting = await until(
      async () => (await expectOk(service.conversations.getStartTasks('alice', [task.id])))[0]!,
      (t) => t.detail?.includes('step 2/4: debootstrap') ?? false,
    );
    expect(waiting.status).toBe('WAITING_FOR_SANDBOX');
    const box = await until(
      () => expectOk(service.sandboxes.get('alice', waiting.sandbox_id!)),
      (b) => b.status_detail?.includes('step 2/4') ?? false,
    );
    expect(box.status).toBe('STARTING');
    // The build outlasts startTimeoutMs: the timeout counts from when the runtime has created the sandbox.
    await new Promise((r) => setTimeout(r, 1_200));
    runtime.finishBuild();
    await service.idle();
    const [ready] = await expectOk(service.conversations.getStartTasks('alice', [task.id]));
    expect({ status: ready!.status, detail: ready!.detail }).toEqual({ status: 'READY', detail: null });
    expect(await expectOk(service.sandboxes.get('alice', waiting.sandbox_id!))).toMatchObject({
      status: 'RUNNING',
      status_detail: null,
    });
    await service.close();
  });
});
