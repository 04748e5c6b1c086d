import type { LlmCredentials } from '@acs/core/ports';

/** OpenAI's own endpoint: where a model name without a provider prefix goes when no `llm_base_url` is set. */
export const OPENAI_BASE_URL = 'https://api.openai.com/v1';
export const OPENROUTER_BASE_URL = 'https://openrouter.ai/api/v1';
export const OLLAMA_BASE_URL = 'http://127.0.0.1:11434/v1';

/**
 * Providers that serve an OpenAI-compatible chat-completions API of their own. A model
 * named `<prefix>/<model>` with no `llm_base_url` is sent as `<model>` to that endpoint
 * (with the user's key); with an `llm_base_url` on the same host the prefix is stripped too.
 */
export const NATIVE_PROVIDER_BASE_URLS: Readonly<Record<string, string>> = {
  anthropic: 'https://api.anthropic.com/v1',
  deepseek: 'https://api.deepseek.com/v1',
  gemini: 'https://generativelanguage.googleapis.com/v1beta/openai',
  groq: 'https://api.groq.com/openai/v1',
  mistral: 'https://api.mistral.ai/v1',
  xai: 'https://api.x.ai/v1',
  together_ai: 'https://api.together.xyz/v1',
  fireworks_ai: 'https://api.fireworks.ai/inference/v1',
};

export interface ResolvedModel {
  /** The model name sent in the request body. */
  model: string;
  /**
   * The base URL of the chat-completions API (the client appends `/chat/completions`), without
   * a trailing slash; null when no endpoint is known (a `litellm_proxy/` or unknown prefix
   * and no `llm_base_url`): the call then fails with `bad_request` and no request is sent.
   */
  baseUrl: string | null;
  /**
   * Who serves the call: `openai`, `openrouter`, `ollama`, `litellm_proxy`, a native provider
   * (`anthropic`, `deepseek`, `gemini`, …), or `custom` when the model name goes unchanged to
   * the user's `llm_base_url` (a gateway, vLLM, …), which decides what it means.
   */
  provider: string;
}

const trimSlashes = (url: string) => url.replace(/\/+$/, '');

const sameHost = (a: string, b: string) => {
  try {
    return new URL(a).host.toLowerCase() === new URL(b).host.toLowerCase();
  } catch {
    return false;
  }
};

/** Ollama's OpenAI-compatible API lives under `/v1`; LiteLLM-style settings give the bare server root (a query stays the query). */
const ollamaBase = (url: string) => {
  const parsed = URL.parse(url);
  // An invalid URL is reported by the caller.
  if (parsed === null || (parsed.pathname !== '/' && parsed.pathname !== '')) return url;
  parsed.pathname = '/v1';
  return parsed.href;
};

/**
 * Where to send `credentials.model` and under which name. Pure; the rules (also in the README):
 *
 * | `llm_model`                     | sent as            | base URL when `llm_base_url` is empty |
 * | ------------------------------- | ------------------ | ------------------------------------- |
 * | `gpt-4o` (no prefix)            | `gpt-4o`           | OpenAI                                |
 * | `openai/gpt-4o`                 | `gpt-4o`           | OpenAI                                |
 * | `litellm_proxy/<model>`         | `<model>`          | none: `llm_base_url` is required      |
 * | `openrouter/<vendor>/<model>`   | `<vendor>/<model>` | `https://openrouter.ai/api/v1`        |
 * | `ollama/<m>`, `ollama_chat/<m>` | `<m>`              | `http://127.0.0.1:11434/v1`           |
 * | `anthropic/<m>`, `deepseek/<m>` …| `<m>`             | the provider's own OpenAI-compatible API |
 * | `<unknown>/<m>`                 | —                  | none: `llm_base_url` is required      |
 *
 * With an `llm_base_url`, the first four rows strip their prefix as shown (a base URL that is
 * the Ollama server root gets `/v1`); any other name — a native-provider prefix, an unknown
 * prefix, `org/model` as vLLM or Hugging Face spell it — goes unchanged to that URL (the
 * gateway decides), except that a native-provider prefix is stripped when `llm_base_url` is
 * on that provider's own host.
 */
export function resolveModel(credentials: Pick<LlmCredentials, 'model' | 'base_url'>): ResolvedModel {
  const name = credentials.model.trim();
  const given = credentials.base_url?.trim() ? trimSlashes(credentials.base_url.trim()) : null;
  const slash = name.indexOf('/');
  const prefix = slash > 0 ? name.slice(0, slash).toLowerCase() : null;
  const rest = slash > 0 ? name.slice(slash + 1) : name;

  if (prefix === null) return { model: name, baseUrl: given ?? OPENAI_BASE_URL, provider: given ? 'custom' : 'openai' };
  switch (prefix) {
    case 'openai':
      return { model: rest, baseUrl: given ?? OPENAI_BASE_URL, provider: 'openai' };
    case 'litellm_proxy':
      return { model: rest, baseUrl: given, provider: 'litellm_proxy' };
    case 'openrouter':
      return { model: rest, baseUrl: given ?? OPENROUTER_BASE_URL, provider: 'openrouter' };
    case 'ollama':
    case 'ollama_chat':
      return { model: rest, baseUrl: given ? ollamaBase(given) : OLLAMA_BASE_URL, provider: 'ollama' };
  }
  const native = NATIVE_PROVIDER_BASE_URLS[prefix];
  if (native !== undefined) {
    if (given === null) return { model: rest, baseUrl: native, provider: prefix };
    if (sameHost(given, native)) return { model: rest, baseUrl: given, provider: prefix };
  }
  return { model: name, baseUrl: given, provider: 'custom' };
}
