import { describe, expect, it } from 'vitest';
import { costOf, DEFAULT_PRICES, priceFor, priceKeys } from '../src/index.js';

describe('priceFor', () => {
  it('finds common models by their plain name', () => {
    for (const model of [
      'gpt-4o',
      'gpt-4o-mini',
      'gpt-4.1',
      'gpt-4.1-mini',
      'gpt-4.1-nano',
      'o3',
      'o4-mini',
      'gpt-5',
      'gpt-5-mini',
      'claude-sonnet-4',
      'claude-sonnet-4-5',
      'claude-opus-4',
      'claude-3-5-haiku',
      'gemini-2.5-pro',
      'gemini-2.5-flash',
      'deepseek-chat',
    ]) {
      expect(priceFor(model), model).not.toBeNull();
    }
    expect(priceFor('gpt-4o')).toEqual({ input: 2.5, cached_input: 1.25, output: 10 });
  });

  it('strips provider prefixes and date suffixes, and reads dotted Claude versions', () => {
    expect(priceFor('gpt-4o-2024-08-06')).toBe(DEFAULT_PRICES['gpt-4o']);
    expect(priceFor('openai/gpt-4o-mini-2024-07-18')).toBe(DEFAULT_PRICES['gpt-4o-mini']);
    expect(priceFor('claude-sonnet-4-20250514')).toBe(DEFAULT_PRICES['claude-sonnet-4']);
    expect(priceFor('anthropic/claude-sonnet-4-5-20250929')).toBe(DEFAULT_PRICES['claude-sonnet-4-5']);
    expect(priceFor('anthropic/claude-sonnet-4.5')).toBe(DEFAULT_PRICES['claude-sonnet-4-5']);
    expect(priceFor('claude-sonnet-4@20250514')).toBe(DEFAULT_PRICES['claude-sonnet-4']);
    expect(priceFor('claude-3-5-haiku-latest')).toBe(DEFAULT_PRICES['claude-3-5-haiku']);
    expect(priceFor('openrouter/google/gemini-2.5-flash')).toBe(DEFAULT_PRICES['gemini-2.5-flash']);
    expect(priceFor('DeepSeek-Chat')).toBe(DEFAULT_PRICES['deepseek-chat']);
  });

  it('does not guess: a longer name is not its prefix, a free variant is unknown', () => {
    expect(priceFor('gpt-4o-mini-tts')).toBeNull();
    expect(priceFor('gpt-4.1-turbo')).toBeNull();
    expect(priceFor('deepseek/deepseek-chat:free')).toBeNull();
    expect(priceFor('llama3.1:8b')).toBeNull();
  });

  it("lets the embedder's table add and override, by full name first", () => {
    const prices = {
      'gpt-4o': { input: 1, output: 1 },
      'openrouter/acme/model-x': { input: 3, output: 4 },
      'model-x': { input: 5, output: 6 },
    };
    expect(priceFor('gpt-4o-2024-08-06', prices)).toEqual({ input: 1, output: 1 });
    expect(priceFor('openrouter/acme/model-x', prices)).toEqual({ input: 3, output: 4 });
    expect(priceFor('other/model-x', prices)).toEqual({ input: 5, output: 6 });
    expect(priceFor('gpt-4o-mini', prices)).toBe(DEFAULT_PRICES['gpt-4o-mini']);
  });

  it('lists the names it tries, most specific first', () => {
    expect(priceKeys('Anthropic/Claude-Sonnet-4.5-20250929')).toEqual([
      'anthropic/claude-sonnet-4.5-20250929',
      'claude-sonnet-4-5-20250929',
      'claude-sonnet-4-5',
    ]);
  });
});

describe('costOf', () => {
  it('prices uncached, cached and completion tokens', () => {
    // gpt-4.1: $2 in, $0.50 cached, $8 out per 1M
    expect(
      costOf('gpt-4.1', { prompt_tokens: 10_000, cached_prompt_tokens: 4_000, completion_tokens: 1_000 }),
    ).toBeCloseTo((6_000 * 2 + 4_000 * 0.5 + 1_000 * 8) / 1e6, 12);
    expect(
      costOf('claude-sonnet-4-20250514', {
        prompt_tokens: 1_000_000,
        cached_prompt_tokens: 0,
        completion_tokens: 1_000_000,
      }),
    ).toBe(18);
  });

  it('charges cached tokens at the input price when the table has no cached price', () => {
    expect(
      costOf(
        'm',
        { prompt_tokens: 100, cached_prompt_tokens: 50, completion_tokens: 0 },
        { m: { input: 10, output: 20 } },
      ),
    ).toBeCloseTo(0.001, 12);
  });

  it('never counts more cached tokens than prompt tokens', () => {
    expect(costOf('gpt-4o', { prompt_tokens: 100, cached_prompt_tokens: 500, completion_tokens: 0 })).toBeCloseTo(
      (100 * 1.25) / 1e6,
      12,
    );
  });

  it('is null, not 0, for an unknown model', () => {
    expect(
      costOf('my-private-model', { prompt_tokens: 100, cached_prompt_tokens: 0, completion_tokens: 10 }),
    ).toBeNull();
  });

  it('is 0 for a known model that used no tokens', () => {
    expect(costOf('gpt-4o', { prompt_tokens: 0, cached_prompt_tokens: 0, completion_tokens: 0 })).toBe(0);
  });
});
