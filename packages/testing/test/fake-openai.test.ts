import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  completion,
  marker,
  scriptedCompletion,
  sseMessages,
  startFakeOpenAi,
  tokenPieces,
  toolCall,
  type FakeOpenAi,
} from '../src/index.js';

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

/** Posts a chat request asking for a stream; the events' data, in order, and the content type. */
const streamed = async (body: Record<string, unknown>) => {
  const response = await fetch(`${fake.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, ...body }),
  });
  const data: string[] = [];
  for await (const message of sseMessages(response.body!)) data.push(message.fields.data ?? '');
  return { status: response.status, type: response.headers.get('content-type'), data };
};

type Chunk = {
  object: string;
  id: string;
  model: string;
  choices: {
    index: number;
    delta: {
      role?: string;
      content?: string;
      reasoning_content?: string;
      tool_calls?: { index: number; id?: string; type?: string; function: { name?: string; arguments: string } }[];
    };
    finish_reason: string | null;
  }[];
  usage?: unknown;
};

describe('the fake OpenAI-compatible server, asked to stream', () => {
  it('sends the text in token-like chunk pieces, the finish reason, then [DONE]; no usage unless asked', async () => {
    const text = 'Streaming works: each piece is a word or so, like tokens.';
    fake.script([{ status: 200, body: completion({ content: text, id: 'chatcmpl-s1' }) }]);
    const r = await streamed({});
    expect(r.status).toBe(200);
    expect(r.type).toContain('text/event-stream');
    expect(r.data.at(-1)).toBe('[DONE]');
    const chunks = r.data.slice(0, -1).map((d) => JSON.parse(d) as Chunk);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === 'chatcmpl-s1')).toBe(true);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    const pieces = chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? '')).filter((p) => p !== '');
    expect(pieces.join('')).toBe(text);
    expect(pieces.length).toBeGreaterThan(8);
    expect(pieces).toEqual(tokenPieces(text));
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('stop');
    expect(chunks.some((c) => 'usage' in c)).toBe(false);
  });

  it('sends tool-call arguments in pieces across chunks, reasoning first, and the usage last when include_usage', async () => {
    const args = JSON.stringify({ command: 'ls -la /workspace && cat README.md', timeout: 30 });
    fake.script([
      {
        status: 200,
        body: {
          ...completion({
            content: 'Looking.',
            tool_calls: [toolCall('call_1', 'execute_bash', JSON.parse(args) as Record<string, unknown>)],
          }),
          choices: [
            {
              index: 0,
              message: {
                role: 'assistant',
                content: 'Looking.',
                reasoning_content: 'List the files first.',
                tool_calls: [toolCall('call_1', 'execute_bash', JSON.parse(args) as Record<string, unknown>)],
              },
              finish_reason: 'tool_calls',
            },
          ],
        },
      },
    ]);
    const r = await streamed({ stream_options: { include_usage: true } });
    const chunks = r.data.slice(0, -1).map((d) => JSON.parse(d) as Chunk);
    const deltas = chunks.flatMap((c) => c.choices.map((ch) => ch.delta));
    const reasoning = deltas.map((d) => d.reasoning_content ?? '').join('');
    expect(reasoning).toBe('List the files first.');
    const firstContent = deltas.findIndex((d) => d.content);
    expect(deltas.findIndex((d) => d.reasoning_content)).toBeLessThan(firstContent);
    const calls = deltas.flatMap((d) => d.tool_calls ?? []);
    expect(calls[0]).toMatchObject({ index: 0, id: 'call_1', type: 'function', function: { name: 'execute_bash' } });
    const argumentPieces = calls.map((c) => c.function.arguments).filter((a) => a !== '');
    expect(argumentPieces.length).toBeGreaterThan(3);
    expect(argumentPieces.join('')).toBe(args);
    // The usage comes alone, last, with no choices; every chunk before it says usage: null.
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({ prompt_tokens: 1000, completion_tokens: 100, total_tokens: 1100 });
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe('tool_calls');
  });

  it('answers plain JSON when not asked to stream, and sends errors as they are when asked', async () => {
    fake.script([
      { status: 200, body: completion({ content: 'whole' }) },
      { status: 429, body: { error: { message: 'slow down' } } },
    ]);
    const whole = await chat('plain');
    expect(whole.status).toBe(200);
    expect(whole.body).toMatchObject({ object: 'chat.completion', choices: [{ message: { content: 'whole' } }] });
    const refused = await fetch(`${fake.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [], stream: true }),
    });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toEqual({ error: { message: 'slow down' } });
  });

  it('waits before each chunk as told (a reply may say otherwise), and drops the connection mid-stream when told', async () => {
    // An hour before each chunk after the first: the first arrives on its own, the test ends the rest.
    const slow = await startFakeOpenAi({ streamPieceDelayMs: 3_600_000 });
    try {
      slow.script([{ status: 200, body: completion({ content: 'one two three four' }) }]);
      const controller = new AbortController();
      const response = await fetch(`${slow.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [], stream: true }),
        signal: controller.signal,
      });
      const messages = sseMessages(response.body!);
      const first = await messages.next();
      if (first.done) throw new Error('the stream ended before its first chunk');
      expect((JSON.parse(first.value.fields.data!) as Chunk).choices[0]!.delta.role).toBe('assistant');
      controller.abort();
      await messages.return(undefined).catch(() => undefined);

      slow.script([
        {
          status: 200,
          body: completion({ content: 'cut short here' }),
          streamDropAfterChunks: 2,
          streamPieceDelayMs: 0,
        },
      ]);
      const dropped = await fetch(`${slow.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [], stream: true }),
      });
      const received: string[] = [];
      await expect(
        (async () => {
          for await (const message of sseMessages(dropped.body!)) received.push(message.fields.data ?? '');
        })(),
      ).rejects.toThrow();
      expect(received).toHaveLength(2);
    } finally {
      await slow.close();
    }
  });
});
