import { describe, expect, it } from 'vitest';
import { createAgentConversationService, type AgentConversationService } from '../src/index.js';
import type { SettingsInput } from '../src/schemas.js';
import { sequentialIdGenerator } from '../src/ports.js';
import { expectOk, settlesWithin } from '../src/testing/index.js';
import { createMemoryPorts } from '@acs/testing';
import { createAgent } from '@acs/agent';

const LLM: SettingsInput = { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test-key' };

async function setup(options: Parameters<typeof createAgentConversationService>[1] = {}, runtimeOptions = {}) {
  const ports = createMemoryPorts({ runtime: runtimeOptions });
  const service = createAgentConversationService(
    { agent: createAgent(), ...ports, ids: sequentialIdGenerator() },
    { pollIntervalMs: 1, ...options },
  );
  await expectOk(service.settings.store('alice', LLM));
  return { service, runtime: ports.runtime, ports };
}

async function startConversation(service: AgentConversationService, userId = 'alice') {
  const created = await expectOk(service.conversations.create(userId, { initial_user_msg: 'hello' }));
  await service.idle();
  return expectOk(service.conversations.get(userId, created.conversation_id));
}

describe('sandbox start-up', () => {
  it('marks a sandbox that never answers ERROR after the start timeout, with a message that says what to do', async () => {
    const { service, runtime } = await setup({ startTimeoutMs: 20 });
    runtime.hold();
    const box = await expectOk(service.sandboxes.start('alice'));
    expect(box.status).toBe('STARTING');
    await service.idle();
    const after = await expectOk(service.sandboxes.get('alice', box.id));
    expect(after.status).toBe('ERROR');
    expect(after.status_detail).toMatch(/did not become ready within/);
  });

  it('reports a runtime that cannot create a sandbox as ERROR with the runtime message', async () => {
    const { service, runtime } = await setup();
    runtime.failNext('create', {
      message: 'image acs-sandbox:nope not found; build it with scripts/build-sandbox-image.sh',
    });
    const box = await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    const after = await expectOk(service.sandboxes.get('alice', box.id));
    expect(after.status).toBe('ERROR');
    expect(after.status_detail).toContain('image acs-sandbox:nope not found');
  });

  it('cleans up a sandbox deleted while it was still being created', async () => {
    const { service, runtime } = await setup({}, { inspectionsUntilRunning: 1000 });
    const box = await expectOk(service.sandboxes.start('alice'));
    await expectOk(service.sandboxes.delete('alice', box.id));
    await service.close();
    expect(runtime.peek(box.id)).toBeUndefined();
    const get = await service.sandboxes.get('alice', box.id);
    expect(get.isErr() && get.error.type).toBe('SandboxNotFound');
  });

  it('refuses to resume a deleted sandbox with its own error', async () => {
    const { service } = await setup();
    const box = await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    await expectOk(service.sandboxes.delete('alice', box.id));
    const resumed = await service.sandboxes.resume('alice', box.id);
    expect(resumed.isErr() && resumed.error).toMatchObject({
      type: 'IllegalSandboxTransition',
      from: 'DELETED',
      action: 'resume',
    });
    const deletedAgain = await service.sandboxes.delete('alice', box.id);
    expect(deletedAgain.isErr() && deletedAgain.error.type).toBe('SandboxNotFound');
  });

  it('waits through a slow resume and reaches RUNNING', async () => {
    const { service, runtime } = await setup({}, { inspectionsUntilRunning: 3 });
    const box = await expectOk(service.sandboxes.start('alice'));
    await service.idle();
    await expectOk(service.sandboxes.pause('alice', box.id));
    await expectOk(service.sandboxes.resume('alice', box.id));
    expect((await expectOk(service.sandboxes.getMany('alice', [box.id])))[0]?.status).toBe('STARTING');
    await service.idle();
    expect((await expectOk(service.sandboxes.get('alice', box.id))).status).toBe('RUNNING');
    expect(runtime.calls.filter((c) => c.operation === 'resume')).toHaveLength(1);
  });
});

describe('conversation lifecycle', () => {
  it('goes STARTING → RUNNING, and its start task WORKING → READY', async () => {
    const { service } = await setup();
    const created = await expectOk(service.conversations.create('alice', { initial_user_msg: 'hello' }));
    expect(created.status).toBe('STARTING');
    await service.idle();
    const info = await expectOk(service.conversations.get('alice', created.conversation_id));
    expect(info.status).toBe('RUNNING');
    const tasks = await expectOk(
      service.conversations.searchStartTasks(
        'alice',
        { app_conversation_id: created.conversation_id },
        { limit: 10, after: null },
        'newest_first',
      ),
    );
    expect(tasks.items.map((t) => t.status)).toEqual(['READY']);
  });

  it('reports a stop during start-up on the start task and stays STOPPED', async () => {
    const { service, runtime } = await setup({}, { inspectionsUntilRunning: 5 });
    const created = await expectOk(service.conversations.create('alice', { initial_user_msg: 'hello' }));
    await expectOk(service.conversations.stop('alice', created.conversation_id));
    await service.idle();
    const info = await expectOk(service.conversations.get('alice', created.conversation_id));
    expect(info.status).toBe('STOPPED');
    const [task] = (
      await expectOk(service.conversations.searchStartTasks('alice', {}, { limit: 1, after: null }, 'newest_first'))
    ).items;
    expect(task?.status).toBe('ERROR');
    expect(task?.detail).toBe('the conversation was stopped while it was starting');
    expect(runtime.size).toBe(1);
  });

  it('restarts a conversation whose sandbox was lost in a new sandbox', async () => {
    const { service, runtime } = await setup();
    const info = await startConversation(service);
    const oldSandbox = info.record.sandbox_id!;
    runtime.vanish(oldSandbox);
    expect((await expectOk(service.sandboxes.get('alice', oldSandbox))).status).toBe('MISSING');
    const stopped = await expectOk(service.conversations.get('alice', info.record.id));
    expect(stopped.status).toBe('STOPPED');
    expect(stopped.status_detail).toMatch(/vanished/);

    const restarted = await expectOk(service.conversations.start('alice', info.record.id));
    expect(restarted.status).toBe('STARTING');
    await service.idle();
    const after = await expectOk(service.conversations.get('alice', info.record.id));
    expect(after.status).toBe('RUNNING');
    expect(after.record.sandbox_id).not.toBe(oldSandbox);
  });

  it('restarts a stopped conversation in its own (resumed) sandbox', async () => {
    const { service } = await setup();
    const info = await startConversation(service);
    await expectOk(service.conversations.stop('alice', info.record.id));
    expect((await expectOk(service.sandboxes.get('alice', info.record.sandbox_id!))).status).toBe('PAUSED');
    await expectOk(service.conversations.start('alice', info.record.id));
    await service.idle();
    const after = await expectOk(service.conversations.get('alice', info.record.id));
    expect(after).toMatchObject({ status: 'RUNNING', record: { sandbox_id: info.record.sandbox_id } });
  });

  it('keeps a shared sandbox while another conversation uses it', async () => {
    const { service } = await setup();
    const first = await startConversation(service);
    const task = await expectOk(service.conversations.startApp('alice', { sandbox_id: first.record.sandbox_id }));
    await service.idle();
    await expectOk(service.conversations.stop('alice', first.record.id));
    expect((await expectOk(service.sandboxes.get('alice', first.record.sandbox_id!))).status).toBe('RUNNING');
    await expectOk(service.conversations.delete('alice', first.record.id));
    expect((await expectOk(service.sandboxes.get('alice', first.record.sandbox_id!))).status).toBe('RUNNING');
    await expectOk(service.conversations.delete('alice', task.app_conversation_id!));
    const gone = await service.sandboxes.get('alice', first.record.sandbox_id!);
    expect(gone.isErr() && gone.error.type).toBe('SandboxNotFound');
  });

  it('lets a child conversation inherit from its parent and lists it as a sub-conversation', async () => {
    const { service } = await setup();
    const parent = await startConversation(service);
    const child = await expectOk(
      service.conversations.startApp('alice', { parent_conversation_id: parent.record.id, title: 'follow-up' }),
    );
    await service.idle();
    const [parentView, childView] = await expectOk(
      service.conversations.getMany('alice', [parent.record.id, child.app_conversation_id!]),
    );
    expect(parentView?.sub_conversation_ids).toEqual([child.app_conversation_id]);
    expect(childView?.record).toMatchObject({
      parent_conversation_id: parent.record.id,
      sandbox_id: parent.record.sandbox_id,
      title: 'follow-up',
    });
    const topLevel = await expectOk(service.conversations.search('alice', {}, { limit: 10, after: null }));
    expect(topLevel.items.map((c) => c.record.id)).toEqual([parent.record.id]);
  });

  it('refuses a parent that does not exist, storing nothing', async () => {
    const { service, runtime } = await setup();
    const refused = await service.conversations.startApp('alice', { parent_conversation_id: 'f'.repeat(32) });
    expect(refused.isErr() && refused.error.type).toBe('ValidationFailed');
    expect(await expectOk(service.conversations.count('alice', { include_sub_conversations: true }))).toBe(0);
    expect(runtime.calls).toEqual([]);
  });

  it('uses sandbox_base_container_image from settings as an ad-hoc spec, where the operator allows the image', async () => {
    const { service, runtime } = await setup({ sandboxImages: { allowed: ['ghcr.io/acme/*'] } });
    await expectOk(service.settings.store('alice', { sandbox_base_container_image: 'ghcr.io/acme/dev:1' }));
    const info = await startConversation(service);
    const box = await expectOk(service.sandboxes.get('alice', info.record.sandbox_id!));
    expect(box.sandbox_spec_id).toBe('ghcr.io/acme/dev:1');
    expect(runtime.peek(info.record.sandbox_id!)?.request.spec.image).toBe('ghcr.io/acme/dev:1');
  });

  it('refuses a sandbox image the operator does not allow, when it is stored and when a conversation would start with it', async () => {
    const { service, ports } = await setup();
    const refused = await service.settings.store('alice', { sandbox_base_container_image: 'registry.internal/ops:1' });
    expect(refused._unsafeUnwrapErr()).toMatchObject({
      type: 'SandboxImageNotAllowed',
      image: 'registry.internal/ops:1',
    });
    // The image of a spec is always one a user may name.
    await expectOk(service.settings.store('alice', { sandbox_base_container_image: 'acs-sandbox:bookworm' }));
    // Stored before the operator's list (written to the store directly): refused at use, nothing started.
    await expectOk(
      ports.settings.update('alice', (current) => ({
        ...current!,
        sandbox_base_container_image: 'registry.internal/ops:1',
      })),
    );
    const created = await service.conversations.create('alice', { initial_user_msg: 'hello' });
    expect(created._unsafeUnwrapErr()).toMatchObject({ type: 'SandboxImageNotAllowed' });
    expect(ports.runtime.size).toBe(0);
  });

  it('needs no API key for keyless model providers', async () => {
    const ports = createMemoryPorts();
    const service = createAgentConversationService({ ...ports, agent: createAgent() }, { pollIntervalMs: 1 });
    await expectOk(service.settings.store('alice', { llm_model: 'ollama/llama3' }));
    expect((await service.conversations.create('alice', {})).isOk()).toBe(true);
    await expectOk(service.settings.store('bob', { llm_model: 'openai/gpt-4o' }));
    const refused = await service.conversations.create('bob', {});
    expect(refused.isErr() && refused.error).toEqual({ type: 'SettingsRequired', missing: 'llm_api_key' });
    await service.close();
  });

  it('stops waiting for sandboxes when closed', async () => {
    const { service, runtime } = await setup({ startTimeoutMs: 3_600_000, pollIntervalMs: 5 });
    runtime.hold();
    await expectOk(service.sandboxes.start('alice'));
    // The sandbox would be waited for an hour (startTimeoutMs): close must not wait for it.
    await settlesWithin(service.close(), 'the service to close (it should stop waiting for the held sandbox)');
  });
});
