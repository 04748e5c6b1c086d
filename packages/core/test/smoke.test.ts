import { describe, expect, it } from 'vitest';
import { createAgentConversationService } from '@acs/core';
import { createMemoryPorts } from '@acs/adapter-memory';

describe('smoke', () => {
  it('composes', async () => {
    const service = createAgentConversationService(createMemoryPorts());
    const loaded = await service.settings.load('u');
    expect(loaded.isErr()).toBe(true);
  });
});
