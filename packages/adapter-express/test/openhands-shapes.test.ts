import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { expectOpenHandsShape, openHandsProblems } from './openhands-shapes.js';

describe('the OpenHands 1.11 shape check', () => {
  it('accepts what the 1.11 server answered and refuses what its models refuse', () => {
    const captured = JSON.parse(
      readFileSync(new URL('./openhands-1.11/examples/app-conversation.json', import.meta.url), 'utf8'),
    ) as Record<string, unknown>;
    expectOpenHandsShape('AppConversation', captured);
    expect(
      openHandsProblems('AppConversation', {
        ...captured,
        metrics: { ...(captured.metrics as object), accumulated_cost: null },
      }),
    ).not.toEqual([]);
    expect(openHandsProblems('AppConversation', { ...captured, created_at: 'yesterday' })).not.toEqual([]);
  });
});
