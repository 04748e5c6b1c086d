import { describe, expect, it } from 'vitest';
import { createAgentConversationService } from '../src/index.js';
import { createMemoryPorts } from '@acs/testing';
import { createAgent } from '@acs/agent';

describe('smoke', () => {
  it('composes', async () => {
    const service = createAgentConversationService({ ...createMemoryPorts(), agent: createAgent() });
    const loaded = await service.settings.load('u');
    expect(loaded.isErr()).toBe(true);
  });
});
