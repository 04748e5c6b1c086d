import { afterEach, describe, expect, it } from 'vitest';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import type { ConversationEvent, SettingsInput } from '@acs/core/schemas';
import { sequentialIdGenerator, type LlmDelta, type StreamingDelta, type TransientEvent } from '@acs/core/ports';
import { expectOk, settlesWithin } from '@acs/core/testing';
import { createMemoryPorts, type ScriptedTurn } from '@acs/testing';
import { createAgent } from '../src/index.js';
import { deltaPublisher } from '../src/engine/deltas.js';
import { Runner } from '../src/engine/runner.js';
import { eventsOf, conversationOf } from './conversation-reads.js';

/**
 * The model's answer as it is written: each piece published to the conversation's live
 * subscribers as a transient delta (never stored), the stored event holding the whole text;
 * `llm_stream: false` asks for the answer whole; a retried stream shows no text twice; a stop
 * cancels the stream at once.
 */

const LLM: SettingsInput = { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test-key' };

/** Gates a test opens; any left shut are opened after it, so nothing waits on past its end. */
const gates: (() => void)[] = [];
afterEach(() => {
  for (const open of gates.splice(0)) open();
});

function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  gates.push(open);
  return { opened, open };
}

/** Each piece published as it comes (`deltaWindowMs: 0`), unless a window is given. */
async function setup(settings: SettingsInput = {}, deltaWindowMs = 0) {
  const ports = createMemoryPorts();
  const service = createAgentConversationService(
    { agent: createAgent({ deltaWindowMs }), ...ports, ids: sequentialIdGenerator() },
    { pollIntervalMs: 1 },
  );
  await expectOk(service.settings.store('alice', { ...LLM, ...settings }));
  return { service, llm: ports.llm };
}

/** Waits (at most 60 s) until `done()` holds. */
async function until(done: () => boolean, what: string): Promise<void> {
  await settlesWithin(
    (async () => {
      while (!done()) await new Promise((resolve) => setTimeout(resolve, 2));
    })(),
    what,
  );
}

/** What a live subscriber sees, in order: stored events and deltas. */
type Seen = { stored: ConversationEvent } | { delta: TransientEvent };

/**
 * Starts a conversation whose first model call waits until the test has subscribed to it
 * (so the subscriber sees every piece), then answers with `turn`.
 */
async function startSubscribed(
  service: AgentConversationService,
  llm: ReturnType<typeof createMemoryPorts>['llm'],
  turn: ScriptedTurn,
) {
  const subscribed = gate();
  llm.respondWith(async (_request, index) => {
    if (index === 0) {
      await subscribed.opened;
      return turn;
    }
    return { content: 'unused' };
  });
  const created = await expectOk(service.conversations.create('alice', { initial_user_msg: 'go' }));
  const id = created.conversation_id;
  await until(() => llm.calls > 0, 'the first model call');
  const seen: Seen[] = [];
  const subscription = await expectOk(
    service.conversations.subscribeEvents(
      'alice',
      id,
      0,
      (event) => seen.push({ stored: event }),
      undefined,
      (event) => seen.push({ delta: event }),
    ),
  );
  subscribed.open();
  return { id, seen, subscription };
}

const deltasIn = (seen: Seen[]): StreamingDelta[] => seen.flatMap((s) => ('delta' in s ? [s.delta] : []));
const joined = (deltas: StreamingDelta[], field: 'content' | 'reasoning_content') =>
  deltas.map((d) => d[field] ?? '').join('');

describe('streaming the model’s answer to live clients', () => {
  it('publishes the pieces while the model writes, before the stored message, whose text is theirs joined', async () => {
    const { service, llm } = await setup();
    const rest = gate();
    const text = 'Here is the whole answer, written a few characters at a time.';
    const { id, seen, subscription } = await startSubscribed(service, llm, {
      content: text,
      reasoning_content: 'The user wants an answer.',
      stream: { pieceChars: 5, hold: { afterPieces: 6, until: rest.opened } },
    });
    await until(() => deltasIn(seen).length === 6, 'the first six pieces');
    // The model is still writing: nothing of its answer is stored yet.
    expect((await eventsOf(service, id)).map((e) => e.kind)).toEqual(['message', 'status']);
    expect(deltasIn(seen).map((d) => d.reasoning_content)).toEqual(['The u', 'ser w', 'ants ', 'an an', 'swer.', null]);
    rest.open();
    await service.idle();
    subscription.close();

    const message = seen.findIndex((s) => 'stored' in s && s.stored.kind === 'message' && s.stored.source === 'agent');
    expect(message).toBeGreaterThan(0);
    const deltas = deltasIn(seen);
    // Every delta came before the stored answer, and together they are it.
    expect(seen.slice(message).some((s) => 'delta' in s)).toBe(false);
    expect(joined(deltas, 'content')).toBe(text);
    expect(joined(deltas, 'reasoning_content')).toBe('The user wants an answer.');
    expect(new Set(deltas.map((d) => d.message_id)).size).toBe(1);
    expect(deltas.every((d) => d.kind === 'delta' && d.attempt === 1 && !Number.isNaN(Date.parse(d.timestamp)))).toBe(
      true,
    );
    const stored = (await eventsOf(service, id)).find((e) => e.kind === 'message' && e.source === 'agent');
    expect(stored).toMatchObject({ text });
    // Nothing of the deltas is in the log.
    expect((await eventsOf(service, id)).map((e) => e.kind)).toEqual([
      'message',
      'status',
      'llm_call',
      'message',
      'status',
    ]);
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
  });

  it('joins the pieces that come within the window into one delta, and sends what it holds before the stored answer', async () => {
    // A window far longer than the test: only the end of the call sends the second delta.
    const { service, llm } = await setup({}, 60_000);
    const rest = gate();
    const text = 'Here is the whole answer, written a few characters at a time.';
    const { seen, subscription } = await startSubscribed(service, llm, {
      content: text,
      reasoning_content: 'The user wants an answer.',
      stream: { pieceChars: 5, hold: { afterPieces: 6, until: rest.opened } },
    });
    // Nothing goes out while the window is open, though six pieces came.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(deltasIn(seen)).toEqual([]);
    rest.open();
    await service.idle();
    subscription.close();
    const deltas = deltasIn(seen);
    // One delta held it all (the call's end sent it), before the stored answer.
    expect(deltas).toHaveLength(1);
    expect(deltas[0]).toMatchObject({ content: text, reasoning_content: 'The user wants an answer.', attempt: 1 });
    const message = seen.findIndex((s) => 'stored' in s && s.stored.kind === 'message' && s.stored.source === 'agent');
    expect(seen.findIndex((s) => 'delta' in s)).toBeLessThan(message);
  });

  it('streams the thought next to tool calls, one message id per model call', async () => {
    const { service, llm } = await setup();
    const { id, seen, subscription } = await startSubscribed(service, llm, {
      content: 'Let me think about it first.',
      tool_calls: [{ name: 'think', arguments: { thought: 'plan' } }],
    });
    llm.push({ content: 'And now the reply.' });
    await service.idle();
    subscription.close();
    const deltas = deltasIn(seen);
    const ids = [...new Set(deltas.map((d) => d.message_id))];
    expect(ids).toHaveLength(2);
    const events = await eventsOf(service, id);
    const action = events.find((e) => e.kind === 'action');
    expect(action).toMatchObject({ thought: 'Let me think about it first.' });
    expect(
      joined(
        deltas.filter((d) => d.message_id === ids[0]),
        'content',
      ),
    ).toBe('Let me think about it first.');
    expect(
      joined(
        deltas.filter((d) => d.message_id === ids[1]),
        'content',
      ),
    ).toBe('And now the reply.');
  });

  it('with llm_stream false asks for the answer whole and publishes no delta', async () => {
    const { service, llm } = await setup({ llm_stream: false });
    const { id, seen, subscription } = await startSubscribed(service, llm, { content: 'A whole answer.' });
    await service.idle();
    subscription.close();
    expect(llm.requests[0]?.onDelta).toBeUndefined();
    expect(deltasIn(seen)).toEqual([]);
    expect((await eventsOf(service, id)).find((e) => e.kind === 'message' && e.source === 'agent')).toMatchObject({
      text: 'A whole answer.',
    });
    // Turned on again, the next call streams.
    await expectOk(service.settings.store('alice', { llm_stream: true }));
    llm.respondWith(() => ({ content: 'Streamed now.' }));
    await expectOk(
      service.conversations.sendMessage('alice', id, {
        role: 'user',
        content: [{ type: 'text', text: 'again' }],
        run: true,
      }),
    );
    await service.idle();
    expect(llm.requests.at(-1)?.onDelta).toBeTypeOf('function');
  });

  it('a stream retried after it dropped shows no text twice: the same text goes on, other text starts over', async () => {
    const { service, llm } = await setup();
    const text = 'The answer is 42, as always.';
    const { id, seen, subscription } = await startSubscribed(service, llm, {
      content: text,
      // Attempt 1 drops after "The answer"; attempt 2 writes the same and drops further on; attempt 3 finishes.
      stream: { dropped: [{ content: 'The answer' }, { content: 'The answer is 4' }] },
    });
    await service.idle();
    subscription.close();
    const deltas = deltasIn(seen);
    expect(joined(deltas, 'content')).toBe(text);
    // Clients never start over: every piece carries the attempt they first saw.
    expect(deltas.every((d) => d.attempt === 1)).toBe(true);
    const call = (await eventsOf(service, id)).find((e) => e.kind === 'llm_call');
    expect(call).toMatchObject({ attempts: 3 });

    const second = await setup();
    const other = await startSubscribed(second.service, second.llm, {
      content: 'Something else entirely.',
      stream: { dropped: [{ content: 'Somewhere' }] },
    });
    await second.service.idle();
    other.subscription.close();
    const retried = deltasIn(other.seen);
    expect(
      joined(
        retried.filter((d) => d.attempt === 1),
        'content',
      ),
    ).toBe('Somewhere');
    // The new attempt diverged: shown from its start under its own number, which clients take as a new text.
    expect(
      joined(
        retried.filter((d) => d.attempt === 2),
        'content',
      ),
    ).toBe('Something else entirely.');
  });

  it('a stop mid-stream cancels the call at once and records what a stop records', async () => {
    const { service, llm } = await setup();
    const never = gate(); // the model would go on only once this opens: only a cancelled call ends
    const { id, seen, subscription } = await startSubscribed(service, llm, {
      content: 'A long answer that is never finished.',
      stream: { hold: { afterPieces: 2, until: never.opened } },
    });
    await until(() => deltasIn(seen).length === 2, 'two pieces');
    expect(
      (await settlesWithin(service.conversations.stop('alice', id), 'the stop (the stream should end)')).isOk(),
    ).toBe(true);
    await service.idle();
    subscription.close();
    expect(llm.requests[0]?.signal?.aborted).toBe(true);
    expect(deltasIn(seen)).toHaveLength(2);
    const conversation = await conversationOf(service, id);
    expect(conversation.record.execution_status).toBe('paused');
    expect(conversation.status).toBe('STOPPED');
    const events = await eventsOf(service, id);
    expect(events.map((e) => (e.kind === 'status' ? `status:${e.execution_status}` : e.kind))).toEqual([
      'message',
      'status:running',
      'status:paused',
    ]);
  });
});

describe('deltaPublisher: what a retried stream shows', () => {
  function publish(deltas: LlmDelta[], stopAfter?: number): StreamingDelta[] {
    const published: StreamingDelta[] = [];
    const r = new Runner('alice', 'c-1');
    const onDelta = deltaPublisher(
      {
        log: { publishTransient: (_userId, _conversationId, event) => published.push(event) },
        now: () => '2026-01-01T00:00:00.000Z',
      },
      r,
    );
    for (const [i, delta] of deltas.entries()) {
      if (i === stopAfter) r.stop('paused');
      onDelta(delta);
    }
    return published;
  }
  const d = (attempt: number, content: string | null, reasoning: string | null = null): LlmDelta => ({
    attempt,
    content,
    reasoning_content: reasoning,
  });
  const shown = (published: StreamingDelta[]) =>
    published.map((p) => [p.attempt, p.content, p.reasoning_content] as const);

  it('publishes each piece under one message id, text and reasoning apart', () => {
    const published = publish([d(1, null, 'Think'), d(1, null, 'ing.'), d(1, 'Hel'), d(1, 'lo')]);
    expect(shown(published)).toEqual([
      [1, null, 'Think'],
      [1, null, 'ing.'],
      [1, 'Hel', null],
      [1, 'lo', null],
    ]);
    expect(new Set(published.map((p) => p.message_id)).size).toBe(1);
    expect(published[0]).toMatchObject({ kind: 'delta', timestamp: '2026-01-01T00:00:00.000Z' });
  });

  it('holds back a new attempt until it writes past what was shown, then sends only the new part under the first attempt', () => {
    const published = publish([d(1, 'Hello '), d(1, 'wor'), d(2, 'Hel'), d(2, 'lo wo'), d(2, 'rld'), d(2, '!')]);
    expect(shown(published)).toEqual([
      [1, 'Hello ', null],
      [1, 'wor', null],
      [1, 'ld', null],
      [1, '!', null],
    ]);
  });

  it('a new attempt that writes something else is shown from its start under its own number', () => {
    const published = publish([d(1, 'Hello wor'), d(2, 'Hel'), d(2, 'p me'), d(2, ' out')]);
    expect(shown(published)).toEqual([
      [1, 'Hello wor', null],
      [2, 'Help me', null],
      [2, ' out', null],
    ]);
  });

  it('reasoning that diverges starts over too, text and reasoning both', () => {
    const published = publish([d(1, null, 'Plan A'), d(1, 'Do'), d(2, null, 'Plan B'), d(2, 'Do it')]);
    expect(shown(published)).toEqual([
      [1, null, 'Plan A'],
      [1, 'Do', null],
      [2, null, 'Plan B'],
      [2, 'Do it', null],
    ]);
  });

  it('publishes nothing once the run is stopped', () => {
    expect(shown(publish([d(1, 'a'), d(1, 'b'), d(1, 'c')], 1))).toEqual([[1, 'a', null]]);
  });
});
