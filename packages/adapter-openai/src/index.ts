/**
 * @acs/adapter-openai: the `LlmClient` port over any OpenAI-compatible chat-completions API
 * (OpenAI, a LiteLLM proxy, OpenRouter, Ollama, vLLM, Anthropic/Gemini/DeepSeek compatibility
 * endpoints) over Node's own HTTP client (kept connections, the operator's HTTP_PROXY / HTTPS_PROXY /
 * NO_PROXY honoured, NODE_EXTRA_CA_CERTS and the system's roots trusted): tools, retries with
 * backoff, error codes, token usage and cost, and streamed answers (`onDelta`, README "Streaming").
 *
 * ```ts
 * const llm = createOpenAiLlmClient({ maxRetries: 4, timeoutMs: 120_000 });
 * const service = createAgentConversationService({ ...storage, sandboxSpecs, runtime, llm });
 * ```
 */
export {
  backoffMs,
  chatCompletionsUrl,
  createOpenAiLlmClient,
  LITELLM_COST_HEADER,
  PLACEHOLDER_API_KEY,
  type OpenAiLlmClientOptions,
} from './client.js';
export {
  classifyError,
  classifyStatus,
  redact,
  retryAfterMs,
  RETRIED_STATUSES,
  toLlmError,
  type AttemptFailure,
} from './errors.js';
export {
  normaliseFinishReason,
  parseCompletion,
  toChatMessages,
  toChatTools,
  type ChatCompletionContentPart,
  type ChatCompletionFunctionTool,
  type ChatCompletionMessageParam,
  type ChatCompletionRequest,
  type ChatCompletionToolCall,
  type ParsedCompletion,
} from './mapping.js';
export {
  NATIVE_PROVIDER_BASE_URLS,
  OLLAMA_BASE_URL,
  OPENAI_BASE_URL,
  OPENROUTER_BASE_URL,
  resolveModel,
  type ResolvedModel,
} from './models.js';
export {
  costOf,
  DEFAULT_PRICES,
  knownModels,
  priceFor,
  priceKeys,
  type ModelPrice,
  type PriceTable,
  type TokenUsage,
} from './prices.js';
