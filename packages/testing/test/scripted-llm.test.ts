import { describe, expect, it } from 'vitest';
import type { LlmDelta, LlmRequest } from '@acs/core/ports';
import { ScriptedLlm } from '../src/index.js';

const request = (onDelta?: (delta: LlmDelta) => void, signal?: AbortSignal): LlmRequest => ({
  credentials: { model: 'scripted', api_key: null, base_url: null },
  messages: [{ role: 'user', content: 'hi' }],
  tools: [],
  ...(onDelta ? { onDelta } : {}),
  ...(signal ? { signal } : {}),
});

describe('ScriptedLlm, asked to stream', () => {
  it('streams the reasoning then the text in pieces, each dropped attempt first, and answers the whole', async () => {
    const llm = new ScriptedLlm({
      turns: [
        {
          content: 'Hello there',
          reasoning_content: 'Greet.',
          stream: { pieceChars: 3, dropped: [{ content: 'Hel' }] },
        },
      ],
    });
    const deltas: LlmDelta[] = [];
    const answer = (await llm.complete(request((d) => deltas.push(d))))._unsafeUnwrap();
    expect(deltas).toEqual([
      { attempt: 1, content: 'Hel', reasoning_content: null },
      { attempt: 2, content: null, reasoning_content: 'Gre' },
      { attempt: 2, content: null, reasoning_content: 'et.' },
      { attempt: 2, content: 'Hel', reasoning_content: null },
      { attempt: 2, content: 'lo ', reasoning_content: null },
      { attempt: 2, content: 'the', reasoning_content: null },
      { attempt: 2, content: 're', reasoning_content: null },
    ]);
    expect(answer).toMatchObject({ content: 'Hello there', reasoning_content: 'Greet.', attempts: 2 });
  });

  it('answers whole, as before, without onDelta', async () => {
    const llm = new ScriptedLlm({ turns: [{ content: 'Whole', stream: { dropped: [{ content: 'W' }] } }] });
    expect((await llm.complete(request()))._unsafeUnwrap()).toMatchObject({ content: 'Whole', attempts: 1 });
  });

  it('an abort while the stream is held ends the call as cancelled', async () => {
    const llm = new ScriptedLlm({
      turns: [{ content: 'abcdef', stream: { pieceChars: 2, hold: { afterPieces: 1, until: new Promise(() => {}) } } }],
    });
    const controller = new AbortController();
    const deltas: LlmDelta[] = [];
    const call = llm.complete(
      request((d) => {
        deltas.push(d);
        controller.abort();
      }, controller.signal),
    );
    const result = await call;
    expect(result.isErr() && result.error.type).toBe('cancelled');
    expect(deltas.map((d) => d.content)).toEqual(['ab']);
  });
});
