import { describe, expect, it } from 'vitest';
import { backoffMs, parseCompletion, redact, retryAfterMs } from '../src/index.js';

describe('retryAfterMs', () => {
  it('reads retry-after-ms first, then retry-after in seconds or as a date', () => {
    expect(retryAfterMs(new Headers({ 'retry-after-ms': '250', 'retry-after': '9' }))).toBe(250);
    expect(retryAfterMs(new Headers({ 'retry-after': '2' }))).toBe(2_000);
    expect(retryAfterMs(new Headers({ 'retry-after': '0.5' }))).toBe(500);
    const now = Date.parse('2025-01-01T00:00:00Z');
    expect(retryAfterMs(new Headers({ 'retry-after': 'Wed, 01 Jan 2025 00:00:03 GMT' }), now)).toBe(3_000);
    expect(retryAfterMs(new Headers({ 'retry-after': 'Tue, 31 Dec 2024 00:00:00 GMT' }), now)).toBe(0);
  });

  it('is null when absent or nonsense', () => {
    expect(retryAfterMs(undefined)).toBeNull();
    expect(retryAfterMs(new Headers())).toBeNull();
    expect(retryAfterMs(new Headers({ 'retry-after': 'soon' }))).toBeNull();
    expect(retryAfterMs(new Headers({ 'retry-after-ms': '-5' }))).toBeNull();
  });
});

describe('backoffMs', () => {
  const options = { initialBackoffMs: 1_000, maxBackoffMs: 30_000 };
  it('doubles from the initial backoff, minus up to 25% jitter, capped', () => {
    expect(backoffMs(1, null, options, () => 0)).toBe(1_000);
    expect(backoffMs(3, null, options, () => 0)).toBe(4_000);
    expect(backoffMs(3, null, options, () => 0.999)).toBeGreaterThan(3_000);
    expect(backoffMs(10, null, options, () => 0)).toBe(30_000);
  });

  it("follows the server's wish, capped", () => {
    expect(backoffMs(1, 5_000, options)).toBe(5_000);
    expect(backoffMs(1, 3_600_000, options)).toBe(30_000);
  });
});

describe('redact', () => {
  it('removes the key, bearer tokens, sk- keys and key query parameters', () => {
    const key = 'my-secret-key-123';
    expect(redact(`got ${key} twice: ${key}`, key)).toBe('got [REDACTED] twice: [REDACTED]');
    expect(redact('Authorization: Bearer abc.def-ghi (sent)', null)).toBe('Authorization: Bearer [REDACTED] (sent)');
    expect(redact('Incorrect API key provided: sk-proj-abcd****wxyz.', null)).toBe(
      'Incorrect API key provided: sk-[REDACTED]',
    );
    expect(redact('GET /v1?key=AIzaSyXYZ&alt=json', null)).toBe('GET /v1?key=[REDACTED]&alt=json');
    expect(redact(`(Bearer ${key})`, key)).toBe('(Bearer [REDACTED])');
    expect(redact('llm_base_url "ftp://bob:hunter2@host/v1"', null)).toBe('llm_base_url "ftp://[REDACTED]@host/v1"');
  });
});

describe('parseCompletion', () => {
  it('reads arguments given as an object, missing arguments, content parts and no usage', () => {
    const parsed = parseCompletion({
      choices: [
        {
          message: {
            content: [
              { type: 'text', text: 'a' },
              { type: 'text', text: 'b' },
            ],
            tool_calls: [
              { id: 'x', function: { name: 'f', arguments: { a: 1 } } },
              { id: 'y', function: { name: 'g' } },
              { id: 'z', type: 'custom', custom: { name: 'h', input: '' } },
            ],
          },
          finish_reason: 'tool_calls',
        },
      ],
    });
    expect(parsed).toEqual({
      id: null,
      model: null,
      content: 'ab',
      reasoning_content: null,
      tool_calls: [
        { id: 'x', name: 'f', arguments: '{"a":1}' },
        { id: 'y', name: 'g', arguments: '{}' },
      ],
      finish_reason: 'tool_calls',
      usage: null,
    });
  });

  it('is null for what is not a chat completion', () => {
    expect(parseCompletion('<html>')).toBeNull();
    expect(parseCompletion({ choices: [] })).toBeNull();
    expect(parseCompletion({ object: 'list', data: [] })).toBeNull();
  });
});
