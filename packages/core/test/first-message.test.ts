import { describe, expect, it } from 'vitest';
import { createAgentConversationService } from '../src/index.js';
import { sequentialIdGenerator } from '../src/ports.js';
import { expectOk } from '../src/testing/index.js';
import { createMemoryPorts } from '@acs/testing';
import { createAgent } from '@acs/agent';

async function setup() {
  const ports = createMemoryPorts();
  const service = createAgentConversationService(
    { agent: createAgent(), ...ports, ids: sequentialIdGenerator() },
    { pollIntervalMs: 1 },
  );
  await expectOk(service.settings.store('alice', { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test-key' }));
  return { service, llm: ports.llm };
}

const firstUserText = (messages: readonly { role: string; content: unknown }[]) => {
  const user = messages.find((m) => m.role === 'user');
  return typeof user?.content === 'string' ? user.content : JSON.stringify(user?.content);
};

describe('first message of suggested tasks and microagent requests', () => {
  it('turns a suggested task into a first message about that issue and marks the trigger', async () => {
    const { service, llm } = await setup();
    const created = await expectOk(
      service.conversations.create('alice', {
        suggested_task: { repo: 'acme/api', issue_number: 42, title: 'Login fails with SSO' },
      }),
    );
    await service.idle();
    const text = firstUserText(llm.requests[0]!.messages);
    expect(text).toContain('issue #42 of the repository acme/api: "Login fails with SSO"');
    expect(text).toContain('Reproduce the problem');
    const info = await expectOk(service.conversations.get('alice', created.conversation_id));
    expect(info.record).toMatchObject({ trigger: 'suggested_task', selected_repository: 'acme/api' });
  });

  it('turns a microagent request into a first message naming the file to write, with the user’s text after it', async () => {
    const { service, llm } = await setup();
    const created = await expectOk(
      service.conversations.create('alice', {
        create_microagent: { repo: 'acme/web', title: 'release process' },
        initial_user_msg: 'Keep it under 40 lines.',
      }),
    );
    await service.idle();
    const text = firstUserText(llm.requests[0]!.messages);
    expect(text).toContain('microagent for the repository acme/web, about: "release process"');
    expect(text).toContain('triggers:');
    expect(text.indexOf('Also, from the user:\nKeep it under 40 lines.')).toBeGreaterThan(text.indexOf('acme/web'));
    expect((await expectOk(service.conversations.get('alice', created.conversation_id))).record).toMatchObject({
      trigger: 'microagent_management',
    });
  });

  it('asks for repo.md when the microagent request has no topic', async () => {
    const { service, llm } = await setup();
    await expectOk(service.conversations.create('alice', { create_microagent: { repo: 'acme/web' } }));
    await service.idle();
    expect(firstUserText(llm.requests[0]!.messages)).toContain('.openhands/microagents/repo.md');
  });
});
