import { describe, expect, it } from 'vitest';
import type { ConversationEvent } from '@acs/core/schemas';
import { MISSING_RESULT, projectMessages, systemPrompt } from '../src/prompt.js';

let nextId = 1;
const ts = '2026-01-01T00:00:00.000Z';
const user = (text: string, image_urls: string[] = []): ConversationEvent => ({
  id: nextId++,
  timestamp: ts,
  kind: 'message',
  source: 'user',
  text,
  image_urls,
});
const agent = (text: string): ConversationEvent => ({
  id: nextId++,
  timestamp: ts,
  kind: 'message',
  source: 'agent',
  text,
  image_urls: [],
});
const action = (callId: string, response: string, thought: string | null = null): ConversationEvent => ({
  id: nextId++,
  timestamp: ts,
  kind: 'action',
  source: 'agent',
  tool_call_id: callId,
  tool_name: 'execute_bash',
  arguments: { command: 'ls' },
  raw_arguments: '{"command":"ls"}',
  thought,
  response_id: response,
});
const result = (callId: string, content: string): ConversationEvent => ({
  id: nextId++,
  timestamp: ts,
  kind: 'observation',
  source: 'environment',
  tool_call_id: callId,
  tool_name: 'execute_bash',
  content,
  is_error: false,
  exit_code: 0,
  details: {},
});
const status: ConversationEvent = {
  id: 999,
  timestamp: ts,
  kind: 'status',
  source: 'environment',
  execution_status: 'running',
  reason: null,
};

describe('projectMessages', () => {
  it('turns one response’s actions into one assistant message followed by each result, in call order', () => {
    const messages = projectMessages([
      user('go'),
      status,
      action('a', 'r1', 'thinking'),
      action('b', 'r1'),
      result('b', 'B'),
      result('a', 'A'),
      agent('done'),
    ]);
    expect(messages).toEqual([
      { role: 'user', content: 'go' },
      {
        role: 'assistant',
        content: 'thinking',
        tool_calls: [
          { id: 'a', name: 'execute_bash', arguments: '{"command":"ls"}' },
          { id: 'b', name: 'execute_bash', arguments: '{"command":"ls"}' },
        ],
      },
      { role: 'tool', tool_call_id: 'a', content: 'A' },
      { role: 'tool', tool_call_id: 'b', content: 'B' },
      { role: 'assistant', content: 'done', tool_calls: [] },
    ]);
  });

  it('keeps results next to their calls when a user message was logged in between, and merges adjacent user turns', () => {
    const messages = projectMessages([
      user('first'),
      action('a', 'r1'),
      user('second'),
      result('a', 'A'),
      user('third'),
    ]);
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'user']);
    expect(messages[3]).toEqual({ role: 'user', content: 'second\n\nthird' });
  });

  it('answers a call without a recorded result and drops a result without a call', () => {
    const messages = projectMessages([user('go'), action('a', 'r1'), result('zzz', 'orphan')]);
    expect(messages).toEqual([
      { role: 'user', content: 'go' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'a', name: 'execute_bash', arguments: '{"command":"ls"}' }],
      },
      { role: 'tool', tool_call_id: 'a', content: MISSING_RESULT },
    ]);
  });

  it('sends a call’s arguments in the history as valid JSON, whatever the model wrote: strict providers refuse a history that is not', () => {
    const call = (callId: string, raw: string, parsed: Record<string, unknown> | null): ConversationEvent => ({
      ...(action(callId, `r-${callId}`) as Extract<ConversationEvent, { kind: 'action' }>),
      arguments: parsed,
      raw_arguments: raw,
    });
    const events = [
      user('go'),
      call('valid', '{"command": "ls -la"}', { command: 'ls -la' }),
      result('valid', 'A'),
      call('broken', '{"command": "ls" oops', null),
      result('broken', 'B'),
      call('not-object', '["ls"]', null),
      result('not-object', 'C'),
      call('raw-newline', '{"command": "printf a\nb"}', { command: 'printf a\nb' }),
      result('raw-newline', 'D'),
      call('empty', '', {}),
      result('empty', 'E'),
    ];
    const sent = projectMessages(events).flatMap((m) =>
      m.role === 'assistant' ? m.tool_calls.map((c) => [c.id, c.arguments]) : [],
    );
    expect(Object.fromEntries(sent)).toEqual({
      valid: '{"command": "ls -la"}', // as written, so the prompt prefix stays the same
      broken: '{}',
      'not-object': '{}',
      'raw-newline': JSON.stringify({ command: 'printf a\nb' }),
      empty: '{}',
    });
  });

  it('sends images as image parts', () => {
    expect(projectMessages([user('look', ['data:image/png;base64,AAAA'])])).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look' },
          { type: 'image_url', url: 'data:image/png;base64,AAAA' },
        ],
      },
    ]);
  });
});

describe('systemPrompt', () => {
  it('names the working directory, adds this conversation’s instructions, and is stable for a conversation', () => {
    const a = systemPrompt({ workingDir: '/workspace/project', instructions: 'Use tabs.', startedAt: ts });
    expect(a).toContain('/workspace/project');
    expect(a).toContain('<CONVERSATION_INSTRUCTIONS>\nUse tabs.\n</CONVERSATION_INSTRUCTIONS>');
    expect(systemPrompt({ workingDir: '/workspace/project', instructions: 'Use tabs.', startedAt: ts })).toBe(a);
    expect(systemPrompt({ workingDir: '/w', instructions: null, startedAt: ts })).not.toContain(
      'CONVERSATION_INSTRUCTIONS',
    );
  });
});
