import type { LlmUsage } from '@acs/core/ports';

/** USD per 1 million tokens. `cached_input` (prompt tokens served from the cache) defaults to `input`. */
export interface ModelPrice {
  input: number;
  cached_input?: number;
  output: number;
}

/** Model name → price. Keys are lower case; see {@link priceFor} for how a name is looked up. */
export type PriceTable = Readonly<Record<string, ModelPrice>>;

/**
 * Public list prices, USD per 1M tokens, as the providers published them on their pricing
 * pages in October 2025 (standard tier, no batch discount). Keep it current; an embedder can
 * add or override entries with the `prices` option. Not modelled: Anthropic's cache writes
 * (billed at 1.25× input) and long-context tiers (Gemini 2.5 Pro and Claude Sonnet 4/4.5
 * above 200k prompt tokens cost more) — the prices below are for prompts up to 200k tokens.
 */
export const DEFAULT_PRICES: PriceTable = {
  // OpenAI
  'gpt-4o': { input: 2.5, cached_input: 1.25, output: 10 },
  'gpt-4o-mini': { input: 0.15, cached_input: 0.075, output: 0.6 },
  'gpt-4.1': { input: 2, cached_input: 0.5, output: 8 },
  'gpt-4.1-mini': { input: 0.4, cached_input: 0.1, output: 1.6 },
  'gpt-4.1-nano': { input: 0.1, cached_input: 0.025, output: 0.4 },
  o1: { input: 15, cached_input: 7.5, output: 60 },
  o3: { input: 2, cached_input: 0.5, output: 8 },
  'o3-mini': { input: 1.1, cached_input: 0.55, output: 4.4 },
  'o4-mini': { input: 1.1, cached_input: 0.275, output: 4.4 },
  'gpt-5': { input: 1.25, cached_input: 0.125, output: 10 },
  'gpt-5-mini': { input: 0.25, cached_input: 0.025, output: 2 },
  'gpt-5-nano': { input: 0.05, cached_input: 0.005, output: 0.4 },
  // Anthropic (cached_input = cache reads)
  'claude-opus-4': { input: 15, cached_input: 1.5, output: 75 },
  'claude-opus-4-1': { input: 15, cached_input: 1.5, output: 75 },
  'claude-sonnet-4': { input: 3, cached_input: 0.3, output: 15 },
  'claude-sonnet-4-5': { input: 3, cached_input: 0.3, output: 15 },
  'claude-3-7-sonnet': { input: 3, cached_input: 0.3, output: 15 },
  'claude-haiku-4-5': { input: 1, cached_input: 0.1, output: 5 },
  'claude-3-5-haiku': { input: 0.8, cached_input: 0.08, output: 4 },
  // Google
  'gemini-2.5-pro': { input: 1.25, cached_input: 0.31, output: 10 },
  'gemini-2.5-flash': { input: 0.3, cached_input: 0.075, output: 2.5 },
  'gemini-2.5-flash-lite': { input: 0.1, cached_input: 0.025, output: 0.4 },
  // DeepSeek (V3.2 prices, since 2025-09-29; cached_input = cache hits)
  'deepseek-chat': { input: 0.28, cached_input: 0.028, output: 0.42 },
  'deepseek-reasoner': { input: 0.28, cached_input: 0.028, output: 0.42 },
};

/** `gpt-4o-2024-08-06`, `claude-sonnet-4-20250514`, `claude-sonnet-4@20250514`, `claude-3-5-haiku-latest`. */
const DATE_SUFFIX = /(?:-\d{4}-\d{2}-\d{2}|-\d{8}|@\d{8}|-latest)$/;

/**
 * The names under which a model is looked up, most specific first: the full name in lower
 * case, then its last path segment (the provider prefix dropped: `openrouter`'s
 * `anthropic/claude-sonnet-4.5` → `claude-sonnet-4.5`), with Claude's dotted versions
 * spelled with dashes (`claude-sonnet-4-5`), then without a date or `-latest` suffix.
 */
export function priceKeys(model: string): string[] {
  const full = model.trim().toLowerCase();
  let base = full.slice(full.lastIndexOf('/') + 1);
  if (base.startsWith('claude-')) base = base.replace(/(\d)\.(\d)/g, '$1-$2');
  const undated = base.replace(DATE_SUFFIX, '');
  return [...new Set([full, base, undated])];
}

/**
 * The price of a model, or null when unknown. Entries of `prices` (the embedder's) win over
 * {@link DEFAULT_PRICES}; each table is tried with every name of {@link priceKeys}, the
 * embedder's first, so an embedder can price `openrouter/…` or a gateway alias exactly.
 */
export function priceFor(model: string, prices: PriceTable = {}): ModelPrice | null {
  const keys = priceKeys(model);
  for (const table of [prices, DEFAULT_PRICES]) {
    for (const key of keys) {
      const hit = Object.hasOwn(table, key) ? table[key] : undefined;
      if (hit) return hit;
    }
  }
  return null;
}

export type TokenUsage = Pick<LlmUsage, 'prompt_tokens' | 'completion_tokens' | 'cached_prompt_tokens'>;

/**
 * USD for one call: uncached prompt tokens at `input`, cached ones at `cached_input`,
 * completion tokens at `output`. Null when the model's price is unknown (never a silent 0).
 */
export function costOf(model: string, usage: TokenUsage, prices: PriceTable = {}): number | null {
  const price = priceFor(model, prices);
  if (!price) return null;
  const cached = Math.min(Math.max(usage.cached_prompt_tokens, 0), usage.prompt_tokens);
  const uncached = usage.prompt_tokens - cached;
  const usd =
    (uncached * price.input + cached * (price.cached_input ?? price.input) + usage.completion_tokens * price.output) /
    1_000_000;
  // Round away float noise (0.1 + 0.2) at a precision far below a cent.
  return Math.round(usd * 1e10) / 1e10;
}

/** The provider a model of the price table comes from, by its name. */
function providerOf(model: string): string | null {
  if (/^(gpt-|o\d)/.test(model)) return 'openai';
  if (model.startsWith('claude-')) return 'anthropic';
  if (model.startsWith('gemini-')) return 'gemini';
  if (model.startsWith('deepseek-')) return 'deepseek';
  return null;
}

/**
 * The models this adapter knows a price for, as `provider/model` names (`openai/gpt-4o`,
 * `anthropic/claude-sonnet-4-5`…): what a UI offers in its model picker. Any other name works
 * too (an OpenAI-compatible server with `llm_base_url`, a LiteLLM proxy…); these are the ones
 * whose cost is known.
 */
export function knownModels(prices: PriceTable = DEFAULT_PRICES): string[] {
  return Object.keys(prices)
    .map((model) => {
      const provider = providerOf(model);
      return provider ? `${provider}/${model}` : model;
    })
    .sort();
}
