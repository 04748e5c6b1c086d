import { errAsync } from 'neverthrow';
import { describe, expect, it } from 'vitest';
import { createAgentConversationService } from '../src/index.js';
import { storeUnavailable, type StoreFailure } from '../src/ports.js';
import { expectOk } from '../src/testing/index.js';
import { createMemoryPorts, FakeSandboxRuntime } from '@acs/testing';
import { createAgent } from '@acs/agent';

/** An installation: its own stores and identity, on a runtime it may share with others. */
function installation(id: string, runtime: FakeSandboxRuntime, stores = createMemoryPorts({ installationId: id })) {
  const service = createAgentConversationService(
    { ...stores, runtime, agent: createAgent() },
    { pollIntervalMs: 1, maxRunningSandboxesPerUser: 2, idlePauseAfterMs: 1, maintenanceIntervalMs: 3_600_000 },
  );
  return { stores, service };
}

describe('installations sharing one runtime', () => {
  it('never see, count, adopt, pause or delete each other’s sandboxes, also across restarts', async () => {
    const runtime = new FakeSandboxRuntime();
    const a = installation('installation-a', runtime);
    const aBoxes = [
      await expectOk(a.service.sandboxes.start('default')),
      await expectOk(a.service.sandboxes.start('default')),
    ];
    await a.service.idle();
    expect(runtime.peek(aBoxes[0]!.id)?.request.installation_id).toBe('installation-a');

    // A second installation starts on the same runtime, with a user of the same name.
    const b = installation('installation-b', runtime);
    expect(await expectOk(b.service.sandboxes.reconcile())).toEqual({ checked: 0, changed: 0, adopted: 0, removed: 0 });
    expect((await expectOk(b.service.sandboxes.search('default', { limit: 100, after: null }))).items).toEqual([]);
    for (const box of aBoxes) {
      expect((await b.service.sandboxes.get('default', box.id))._unsafeUnwrapErr().type).toBe('SandboxNotFound');
      expect((await b.service.sandboxes.delete('default', box.id))._unsafeUnwrapErr().type).toBe('SandboxNotFound');
      expect((await b.service.sandboxes.pause('default', box.id))._unsafeUnwrapErr().type).toBe('SandboxNotFound');
    }
    // A's two running sandboxes do not count against B's limit of two.
    const bBoxes = [
      await expectOk(b.service.sandboxes.start('default')),
      await expectOk(b.service.sandboxes.start('default')),
    ];
    await b.service.idle();
    // B's idle pause only pauses B's.
    await new Promise((r) => setTimeout(r, 5));
    expect(await b.service.sandboxes.pauseIdle()).toBe(2);
    for (const box of aBoxes) expect(runtime.peek(box.id)?.state).toBe('running');
    for (const box of bBoxes) expect(runtime.peek(box.id)?.state).toBe('paused');

    // A restarts with its data (same stores, same identity): it keeps its own and adopts none of B's.
    await a.service.close();
    const aAgain = installation('installation-a', runtime, a.stores);
    expect(await expectOk(aAgain.service.sandboxes.reconcile())).toMatchObject({ checked: 2, adopted: 0 });
    expect(
      (await expectOk(aAgain.service.sandboxes.search('default', { limit: 100, after: null }))).items
        .map((s) => s.id)
        .sort(),
    ).toEqual(aBoxes.map((s) => s.id).sort());

    // A restarts having lost its records (same identity): it adopts exactly its own containers back.
    await aAgain.service.close();
    const aLost = installation('installation-a', runtime, createMemoryPorts({ installationId: 'installation-a' }));
    expect(await expectOk(aLost.service.sandboxes.reconcile())).toMatchObject({ adopted: 2 });
    expect(
      (await expectOk(aLost.service.sandboxes.search('default', { limit: 100, after: null }))).items
        .map((s) => s.id)
        .sort(),
    ).toEqual(aBoxes.map((s) => s.id).sort());

    // B deletes all of its own; A's are untouched.
    for (const box of bBoxes) await expectOk(b.service.sandboxes.delete('default', box.id));
    await b.service.idle();
    for (const box of aBoxes) expect(runtime.peek(box.id)?.state).toBe('running');
    await aLost.service.close();
    await b.service.close();
  });

  it('reads the installation id from its store once, and refuses a start when it cannot be read', async () => {
    const ports = createMemoryPorts();
    let reads = 0;
    let failing = true;
    const service = createAgentConversationService(
      {
        ...ports,
        agent: createAgent(),
        installation: {
          identity: () => {
            reads++;
            return failing
              ? errAsync<string, StoreFailure>(
                  storeUnavailable('read the installation id', new Error('database is down')) as StoreFailure,
                )
              : ports.installation.identity();
          },
        },
      },
      { pollIntervalMs: 1 },
    );
    expect((await service.sandboxes.start('alice'))._unsafeUnwrapErr().type).toBe('StoreUnavailable');
    expect((await expectOk(ports.sandboxes.listByStatus('alice', ['STARTING', 'RUNNING']))).length).toBe(0);
    failing = false;
    await expectOk(service.sandboxes.start('alice'));
    await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    expect(reads).toBe(2);
    await service.close();
  });
});
