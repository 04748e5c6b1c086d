import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { completion, marker, scriptedCompletion, startFakeOpenAi, type FakeOpenAi } from '../src/index.js';

let fake: FakeOpenAi;
beforeAll(async () => {
  fake = await startFakeOpenAi();
});
afterAll(async () => {
  await fake.close();
});

const chat = async (firstUserMessage: string, assistantTurns = 0) => {
  const messages = [
    { role: 'user', content: firstUserMessage },
    ...Array.from({ length: assistantTurns }, () => ({ role: 'assistant', content: 'ok' })),
  ];
  const response = await fetch(`${fake.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
};

describe('the fake OpenAI-compatible server', () => {
  it('refuses with 400 what no script claims and no handler answers', async () => {
    const r = await chat('no marker here');
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.body)).toContain('has no script');
  });

  it('answers a conversation by the script its marker names, given the turn', async () => {
    fake.script('alpha', (turn) => ({
      status: 200,
      body: scriptedCompletion(turn, { content: `alpha turn ${turn}` }),
    }));
    const first = await chat(`${marker('alpha')} go`);
    const third = await chat(`${marker('alpha')} go`, 2);
    expect(first.status).toBe(200);
    expect(JSON.stringify(first.body)).toContain('alpha turn 0');
    expect(JSON.stringify(third.body)).toContain('alpha turn 2');
    expect(fake.requestsFor('alpha').map((r) => r.turn)).toEqual([0, 2]);
  });

  it('answers the rest with the replies given, in order, the last one repeating', async () => {
    fake.script([
      { status: 503, body: { error: { message: 'busy' } } },
      { status: 200, body: completion({ content: 'second' }) },
    ]);
    expect((await chat('plain')).status).toBe(503);
    expect(JSON.stringify((await chat('plain')).body)).toContain('second');
    expect(JSON.stringify((await chat('plain')).body)).toContain('second');
    expect(fake.requests).toHaveLength(3);
  });
});
