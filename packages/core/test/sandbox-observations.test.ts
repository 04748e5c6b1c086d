import { okAsync, ResultAsync } from 'neverthrow';
import { describe, expect, it } from 'vitest';
import { createAgentConversationService } from '../src/index.js';
import type { RuntimeObservation, SandboxRuntimeError } from '../src/ports.js';
import { expectOk } from '../src/testing/index.js';
import { createMemoryPorts } from '@acs/testing';
import { createAgent } from '@acs/agent';

/**
 * An inspection of the runtime that began before a pause and answers after it is older than the
 * pause: it must not be written over the paused record. Under load on Kubernetes, a read's
 * refresh saw the pod going away ("waiting for the container to answer"), wrote STARTING over
 * PAUSED, and the next refresh wrote PAUSED without the reason the sandbox was paused for.
 */
/** `sticky`: every inspection after the held one answers the same (a pod that stays on its way out). */
async function world(sticky = false) {
  const ports = createMemoryPorts();
  const service = createAgentConversationService(
    { agent: createAgent(), ...ports },
    { pollIntervalMs: 1, maintenanceIntervalMs: 24 * 60 * 60_000, reconcileIntervalMs: 0 },
  );
  const box = await expectOk(service.sandboxes.start('alice'));
  await service.idle();
  expect((await expectOk(service.sandboxes.get('alice', box.id))).status).toBe('RUNNING');

  // The next inspection answers only when the test says, with what a pod on its way out looks like.
  const inspect = ports.runtime.inspect.bind(ports.runtime);
  let release: () => void = () => {};
  let asked: () => void = () => {};
  const wasAsked = new Promise<void>((resolve) => (asked = resolve));
  let held = true;
  ports.runtime.inspect = (sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError> => {
    const leaving: RuntimeObservation = {
      state: 'starting',
      detail: 'waiting for the container to answer',
      exposed_urls: [],
    };
    if (!held) return sticky ? okAsync(leaving) : inspect(sandboxId);
    held = false;
    asked();
    const late = new Promise<void>((resolve) => (release = resolve));
    return ResultAsync.fromSafePromise(late).andThen(() => okAsync<RuntimeObservation, SandboxRuntimeError>(leaving));
  };
  /** The record as stored, without the refresh a read through the service makes. */
  const stored = async () => (await expectOk(ports.sandboxes.get('alice', box.id)))?.status;
  return { service, box, wasAsked, release: () => release(), stored };
}

describe('observations of a sandbox', () => {
  it('a read whose inspection began before a pause leaves the paused record as it is', async () => {
    const { service, box, wasAsked, release, stored } = await world();
    const reading = service.sandboxes.get('alice', box.id);
    await wasAsked;
    await expectOk(service.sandboxes.pause('alice', box.id));
    release();
    expect((await expectOk(reading)).status).toBe('PAUSED');
    expect(await stored()).toBe('PAUSED');
    await service.close();
  });

  it('so does a reconciliation whose inspection began before a pause', async () => {
    const { service, box, wasAsked, release, stored } = await world(true);
    const reconciling = service.sandboxes.reconcile();
    await wasAsked;
    await expectOk(service.sandboxes.pause('alice', box.id));
    release();
    await expectOk(reconciling);
    expect(await stored()).toBe('PAUSED');
    await service.close();
  });

  it('an inspection that began after the last write is written', async () => {
    const { service, box, wasAsked, release, stored } = await world();
    const reading = service.sandboxes.get('alice', box.id);
    await wasAsked;
    release();
    expect((await expectOk(reading)).status).toBe('STARTING');
    expect(await stored()).toBe('STARTING');
    await service.close();
  });
});
