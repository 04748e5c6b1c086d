/**
 * The answer being written (app/src/events/live-text.ts), as the console's stream applies it:
 * pieces join, a newer attempt starts afresh, the stored event with the whole answer replaces
 * the text (and its entry takes over the key of the text it replaced), a reconnect drops it.
 * Pure functions: driven here as the stream's messages would drive them, without a browser (how
 * the entries are drawn is event-view.test.ts's; the live flow is the example server's
 * console-streaming.test.ts).
 */
import { describe, expect, it } from 'vitest';
import {
  NO_LIVE_TEXT,
  parseDelta,
  shownWriting,
  withDelta,
  withoutWriting,
  withStoredEvent,
  type LiveText,
  type StreamingDelta,
} from '../app/src/events/live-text.js';
import type { components } from '../src/client.js';

type ConversationEvent = components['schemas']['ConversationEvent'];

const delta = (
  message_id: string,
  content: string | null,
  extra: { attempt?: number; reasoning?: string | null } = {},
): StreamingDelta => ({
  kind: 'delta',
  message_id,
  attempt: extra.attempt ?? 1,
  content,
  reasoning_content: extra.reasoning ?? null,
  timestamp: '2026-11-25T09:00:00.000Z',
});

const event = (id: number, fields: Record<string, unknown>) =>
  ({ id, timestamp: '2026-11-25T09:00:01.000Z', ...fields }) as unknown as ConversationEvent;
const agentMessage = (id: number, text: string) =>
  event(id, { kind: 'message', source: 'agent', text, image_urls: [] });
const userMessage = (id: number, text: string) => event(id, { kind: 'message', source: 'user', text, image_urls: [] });
const llmCall = (id: number) =>
  event(id, {
    kind: 'llm_call',
    source: 'environment',
    response_id: 'r',
    model: 'm',
    prompt_tokens: 1,
    completion_tokens: 1,
    cached_prompt_tokens: 0,
    cost_usd: null,
    latency_ms: 1,
    attempts: 1,
  });
const status = (id: number, execution_status: string) =>
  event(id, { kind: 'status', source: 'environment', execution_status, reason: null });

/** Applies the deltas in order, as they arrive after stored event `lastId`. */
const written = (live: LiveText, deltas: StreamingDelta[], lastId = 3) =>
  deltas.reduce((state, d) => withDelta(state, d, lastId), live);

describe('the answer being written', () => {
  it('joins the pieces of a message, its text and its reasoning', () => {
    const live = written(NO_LIVE_TEXT, [
      delta('m1', null, { reasoning: 'The user wants ' }),
      delta('m1', null, { reasoning: 'a greeting.' }),
      delta('m1', 'Hello'),
      delta('m1', ', '),
      delta('m1', 'world', { reasoning: null }),
    ]);
    expect(live.writing).toMatchObject({
      messageId: 'm1',
      attempt: 1,
      content: 'Hello, world',
      reasoning: 'The user wants a greeting.',
      sinceId: 3,
    });
    expect(shownWriting(live)).toBe(live.writing);
    // Nothing to show yet: a message whose pieces are empty so far.
    expect(shownWriting(written(NO_LIVE_TEXT, [delta('m2', ''), delta('m2', '  ')]))).toBeNull();
  });

  it('starts afresh with a newer attempt of the same message, and ignores pieces of an older one', () => {
    let live = written(NO_LIVE_TEXT, [delta('m1', 'Hel'), delta('m1', 'lo from the first try')]);
    live = written(live, [delta('m1', 'Hello', { attempt: 2 }), delta('m1', ' again', { attempt: 2 })]);
    expect(live.writing).toMatchObject({ messageId: 'm1', attempt: 2, content: 'Hello again' });
    // A late piece of the dropped attempt.
    live = withDelta(live, delta('m1', ' (late)', { attempt: 1 }), 3);
    expect(live.writing?.content).toBe('Hello again');
  });

  it('starts a new message with a new message id', () => {
    let live = written(NO_LIVE_TEXT, [delta('m1', 'First')]);
    live = withDelta(live, delta('m2', 'Second'), 5);
    expect(live.writing).toMatchObject({ messageId: 'm2', content: 'Second', sinceId: 5 });
    // The earlier one is done: a late piece of it does not come back.
    expect(withDelta(live, delta('m1', ' more'), 5).writing?.messageId).toBe('m2');
  });

  it('is replaced by the stored agent message, which keeps its key and reasoning; later pieces of it are not shown', () => {
    let live = written(NO_LIVE_TEXT, [delta('m1', 'Hello, ', { reasoning: 'Be brief.' }), delta('m1', 'world')]);
    // The model call's accounting comes first (same append): the text stays until the answer.
    live = withStoredEvent(live, llmCall(4));
    expect(live.writing?.content).toBe('Hello, world');
    live = withStoredEvent(live, agentMessage(5, 'Hello, world'));
    expect(live.writing).toBeNull();
    expect(live.replaced.get(5)).toEqual({ messageId: 'm1', reasoning: 'Be brief.' });
    expect(withDelta(live, delta('m1', ' (late piece)'), 5).writing).toBeNull();
    expect(withDelta(live, delta('m1', 'a retry after the end', { attempt: 9 }), 5).writing).toBeNull();
  });

  it('is ended by what the agent did (an action), an error, or the agent no longer running, but not by the user', () => {
    const live = written(NO_LIVE_TEXT, [delta('m1', 'Let me look.')]);
    const action = event(4, {
      kind: 'action',
      source: 'agent',
      tool_call_id: 'c1',
      tool_name: 'execute_bash',
      arguments: { command: 'ls' },
      raw_arguments: '{"command":"ls"}',
      thought: 'Let me look.',
      response_id: 'r',
    });
    expect(withStoredEvent(live, action).writing).toBeNull();
    // An action is drawn as itself: no message takes the text's key.
    expect(withStoredEvent(live, action).replaced.size).toBe(0);
    const error = event(4, { kind: 'error', source: 'environment', code: 'llm_timeout', message: 'slow', fatal: true });
    expect(withStoredEvent(live, error).writing).toBeNull();
    expect(withStoredEvent(live, status(4, 'paused')).writing).toBeNull();
    expect(withStoredEvent(live, status(4, 'running')).writing).not.toBeNull();
    expect(withStoredEvent(live, userMessage(4, 'and also…')).writing).not.toBeNull();
  });

  it('is not ended by a stored event from before it began (one the client had not taken yet)', () => {
    const live = written(NO_LIVE_TEXT, [delta('m1', 'Hello')], 7);
    expect(withStoredEvent(live, agentMessage(6, 'an earlier answer')).writing?.content).toBe('Hello');
    expect(withStoredEvent(live, agentMessage(8, 'Hello')).writing).toBeNull();
  });

  it('is dropped on a reconnect; the rest of that attempt is not shown (it would start mid-sentence), a newer attempt is', () => {
    let live = written(NO_LIVE_TEXT, [delta('m1', 'Hello, ')]);
    live = withoutWriting(live);
    expect(live.writing).toBeNull();
    live = withDelta(live, delta('m1', 'world'), 3);
    expect(live.writing).toBeNull();
    live = withDelta(live, delta('m1', 'Hello again', { attempt: 2 }), 3);
    expect(live.writing?.content).toBe('Hello again');
    // A reconnect with nothing being written changes nothing.
    expect(withoutWriting(NO_LIVE_TEXT)).toBe(NO_LIVE_TEXT);
  });

  it('leaves the state as it is when nothing changes (no render for an event that ends nothing)', () => {
    const live = written(NO_LIVE_TEXT, [delta('m1', 'Hello')]);
    expect(withStoredEvent(live, llmCall(4))).toBe(live);
    expect(withStoredEvent(NO_LIVE_TEXT, agentMessage(4, 'Hi'))).toBe(NO_LIVE_TEXT);
    expect(withDelta(live, delta('m1', null), 3)).toBe(live);
  });

  it('reads only well-formed delta messages', () => {
    expect(parseDelta(JSON.stringify(delta('m1', 'Hi', { reasoning: 'r' })))).toEqual(
      delta('m1', 'Hi', { reasoning: 'r' }),
    );
    expect(parseDelta('not json')).toBeNull();
    expect(parseDelta(JSON.stringify({ ...delta('m1', 'Hi'), kind: 'message' }))).toBeNull();
    expect(parseDelta(JSON.stringify({ ...delta('m1', 'Hi'), attempt: 1.5 }))).toBeNull();
    expect(parseDelta(JSON.stringify({ ...delta('m1', 'Hi'), content: 42 }))).toBeNull();
  });
});
