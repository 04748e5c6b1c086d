import type { ResultAsync } from 'neverthrow';

/**
 * The LLM port: one chat-completion call with tools. Adapters (OpenAI-compatible
 * HTTP, a scripted fake) implement it; the agent engine calls it once per step.
 */

/** A tool the model may call; `parameters` is a JSON Schema object passed to the model as is. */
export interface LlmToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export type LlmContentPart = { type: 'text'; text: string } | { type: 'image_url'; url: string };

/** One tool call as the model produced it; `arguments` is the raw JSON text (it may be malformed). */
export interface LlmToolCall {
  id: string;
  name: string;
  arguments: string;
}

export type LlmMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string | LlmContentPart[] }
  | { role: 'assistant'; content: string | null; tool_calls: LlmToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string };

/** Which model to call and how to reach it: the user's `llm_model`, `llm_api_key` and `llm_base_url`. */
export interface LlmCredentials {
  model: string;
  api_key: string | null;
  base_url: string | null;
}

export interface LlmRequest {
  credentials: LlmCredentials;
  messages: readonly LlmMessage[];
  tools: readonly LlmToolDefinition[];
  /** Aborting it cancels the call (and any retry wait); the result is then a `cancelled` error. */
  signal?: AbortSignal;
  /**
   * Asks for the answer as a stream (`stream: true`) and is called with each piece of text or
   * reasoning as it arrives; the result is still the whole answer, as without it. Without it
   * the adapter asks for the answer whole.
   */
  onDelta?: (delta: LlmDelta) => void;
}

/** A piece of an answer being streamed. `attempt` is the adapter's attempt (1-based): a retried call streams afresh. */
export interface LlmDelta {
  content: string | null;
  reasoning_content: string | null;
  attempt: number;
}

export interface LlmUsage {
  prompt_tokens: number;
  completion_tokens: number;
  /** Prompt tokens served from the provider's cache, when it says so. */
  cached_prompt_tokens: number;
  /** USD for this call; null when the price of the model is not known (never a silent 0). */
  cost_usd: number | null;
}

/**
 * Why the model stopped writing, normalised by the adapter from the provider's word:
 * - `stop`: it was done (a reply, or a natural end);
 * - `tool_calls`: it stopped to have its tool calls run;
 * - `length`: it hit the output token limit, so the answer (text or a tool call's arguments)
 *   is cut off and must not be taken as complete;
 * - `content_filter`: the provider's filter cut or withheld the answer.
 */
export type LlmFinishReason = 'stop' | 'tool_calls' | 'length' | 'content_filter';

export interface LlmResponse {
  /** The provider's response id, when it gives one. */
  id: string | null;
  /** The model that answered, as the provider names it. */
  model: string;
  /** Text the model wrote (a reply to the user, or its thought next to tool calls). */
  content: string | null;
  /** The model's reasoning, for providers that return it (`reasoning_content`); absent or null otherwise. */
  reasoning_content?: string | null;
  tool_calls: LlmToolCall[];
  /** Why the model stopped; null when the provider did not say, or said something not listed in `LlmFinishReason`. */
  finish_reason: LlmFinishReason | null;
  usage: LlmUsage;
  /** Wall time of the call including retries. */
  latency_ms: number;
  /** How many HTTP attempts it took (1 = no retry). */
  attempts: number;
}

/**
 * Why a call failed, in words a client can branch on:
 * - `auth_failed`: the key was refused (401/403) — fix the settings.
 * - `rate_limited`: 429 after all retries, or quota exhausted.
 * - `unreachable`: no connection to `llm_base_url` (DNS, refused, reset) after all retries.
 * - `timeout`: no answer within the request timeout after all retries.
 * - `context_too_long`: the prompt exceeds the model's context window.
 * - `content_refused`: the provider's content filter refused the request or the answer.
 * - `model_not_found`: the provider does not know `llm_model` (404).
 * - `bad_request`: any other 4xx (the message carries the provider's words).
 * - `provider_error`: 5xx after all retries, or an answer that is not a chat completion.
 * - `cancelled`: the request's signal was aborted.
 */
export const LLM_ERROR_CODES = [
  'auth_failed',
  'rate_limited',
  'unreachable',
  'timeout',
  'context_too_long',
  'content_refused',
  'model_not_found',
  'bad_request',
  'provider_error',
  'cancelled',
] as const;
export type LlmErrorCode = (typeof LLM_ERROR_CODES)[number];

export interface LlmError {
  type: LlmErrorCode;
  /** Says what happened and, where it can, what to do; never contains the API key. */
  message: string;
  /** The last HTTP status seen, when there was one. */
  status: number | null;
  /** Whether trying again later may succeed (the adapter has already retried what it could). */
  retryable: boolean;
  attempts: number;
}

export interface LlmClient {
  complete(request: LlmRequest): ResultAsync<LlmResponse, LlmError>;
}
