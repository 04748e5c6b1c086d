import { randomUUID } from 'node:crypto';
import type { LlmFinishReason, LlmMessage, LlmToolCall, LlmToolDefinition } from '@acs/core/ports';

/** A content part of a user message in the chat-completions request. */
export type ChatCompletionContentPart =
  { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };

/** A function tool call of an assistant message in the chat-completions request. */
export interface ChatCompletionToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** A message of the chat-completions request, in the shape the API takes. */
export type ChatCompletionMessageParam =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string | ChatCompletionContentPart[] }
  | { role: 'assistant'; content: string | null; tool_calls?: ChatCompletionToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string };

/** A function the model may call, as the chat-completions request declares it. */
export interface ChatCompletionFunctionTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

/** The body of a chat-completions request; `stream` (and `stream_options`) when the caller takes deltas. */
export interface ChatCompletionRequest {
  model: string;
  messages: ChatCompletionMessageParam[];
  tools?: ChatCompletionFunctionTool[];
  stream?: boolean;
  stream_options?: { include_usage: boolean };
}

/** `LlmMessage`s as chat-completions messages (tool calls as `function` tool calls). */
export function toChatMessages(messages: readonly LlmMessage[]): ChatCompletionMessageParam[] {
  return messages.map((message): ChatCompletionMessageParam => {
    switch (message.role) {
      case 'system':
        return { role: 'system', content: message.content };
      case 'user':
        return {
          role: 'user',
          content:
            typeof message.content === 'string'
              ? message.content
              : message.content.map((part): ChatCompletionContentPart =>
                  part.type === 'text'
                    ? { type: 'text', text: part.text }
                    : { type: 'image_url', image_url: { url: part.url } },
                ),
        };
      case 'assistant':
        // Providers reject `tool_calls: []`, and an assistant message needs content or tool calls.
        return message.tool_calls.length > 0
          ? {
              role: 'assistant',
              content: message.content,
              tool_calls: message.tool_calls.map((call) => ({
                id: call.id,
                type: 'function' as const,
                function: { name: call.name, arguments: call.arguments },
              })),
            }
          : { role: 'assistant', content: message.content ?? '' };
      case 'tool':
        return { role: 'tool', tool_call_id: message.tool_call_id, content: message.content };
    }
  });
}

export function toChatTools(tools: readonly LlmToolDefinition[]): ChatCompletionFunctionTool[] {
  return tools.map((tool) => ({
    type: 'function',
    function: { name: tool.name, description: tool.description, parameters: tool.parameters },
  }));
}

export const asRecord = (value: unknown): Record<string, unknown> | null =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;

const count = (value: unknown): number =>
  typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.floor(value) : 0;

/**
 * The words OpenAI-compatible servers use for why the model stopped, lower-cased: OpenAI's own,
 * and those that servers relaying other APIs pass through (Anthropic's `end_turn`, `max_tokens`,
 * `tool_use`; Gemini's `STOP`, `MAX_TOKENS`, `SAFETY`; TGI's `eos_token`; the legacy
 * `function_call`). Anything else is null: the agent then treats the answer as it reads.
 */
const FINISH_REASONS: Readonly<Record<string, LlmFinishReason>> = {
  stop: 'stop',
  eos: 'stop',
  eos_token: 'stop',
  end_turn: 'stop',
  stop_sequence: 'stop',
  tool_calls: 'tool_calls',
  function_call: 'tool_calls',
  tool_use: 'tool_calls',
  length: 'length',
  max_tokens: 'length',
  content_filter: 'content_filter',
  safety: 'content_filter',
};

/** The provider's finish reason in the port's words (see `LlmFinishReason`). */
export function normaliseFinishReason(raw: unknown): LlmFinishReason | null {
  return typeof raw === 'string' ? (FINISH_REASONS[raw.toLowerCase()] ?? null) : null;
}

/** What the adapter reads out of a chat completion; null when the answer is not one. */
export interface ParsedCompletion {
  id: string | null;
  model: string | null;
  content: string | null;
  /** The model's reasoning (`reasoning_content`, or `reasoning` as OpenRouter names it); null when none. */
  reasoning_content: string | null;
  tool_calls: LlmToolCall[];
  finish_reason: LlmFinishReason | null;
  /** Null when the provider reported no usage at all. */
  usage: TokenCounts | null;
}

export interface TokenCounts {
  prompt_tokens: number;
  completion_tokens: number;
  cached_prompt_tokens: number;
}

/** The token counts of a `usage` object (a completion's, or a stream's last chunk's); null when there is none. */
export function readUsage(value: unknown): TokenCounts | null {
  const usage = asRecord(value);
  if (!usage) return null;
  const details = asRecord(usage['prompt_tokens_details']);
  return {
    prompt_tokens: count(usage['prompt_tokens']),
    completion_tokens: count(usage['completion_tokens']),
    cached_prompt_tokens: count(details?.['cached_tokens']),
  };
}

/** Text as providers send it: a string, or a list of parts with `text`; '' for anything else. */
export function textOf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) return '';
  return value
    .map((part) => asRecord(part))
    .map((part) => (part && typeof part['text'] === 'string' ? part['text'] : ''))
    .join('');
}

/** The reasoning of a message or a delta: `reasoning_content` (DeepSeek, vLLM, LiteLLM), else `reasoning` (OpenRouter, Ollama). */
export function reasoningOf(message: Record<string, unknown>): string {
  return textOf(message['reasoning_content']) || textOf(message['reasoning']);
}

/** A tool call's id as given, or `call_<random>` when the provider gave none. */
export function toolCallId(raw: unknown): string {
  return typeof raw === 'string' && raw !== '' ? raw : `call_${randomUUID().replaceAll('-', '').slice(0, 24)}`;
}

/** Tool-call arguments as the raw text the model wrote: an object (some servers) as JSON, none as `{}`. */
export function argumentsText(args: unknown): string {
  return typeof args === 'string' ? args : args === undefined || args === null ? '{}' : JSON.stringify(args);
}

/**
 * Reads the first choice of a chat completion defensively: OpenAI-compatible servers differ
 * (arguments as an object, missing ids, content parts). Tool-call arguments are kept as the
 * raw text the model wrote; a missing id becomes `call_<random>`; missing arguments `{}`.
 */
export function parseCompletion(data: unknown): ParsedCompletion | null {
  const body = asRecord(data);
  const choices = body?.['choices'];
  if (!body || !Array.isArray(choices)) return null;
  const choice = asRecord(choices[0]);
  const message = asRecord(choice?.['message']);
  if (!choice || !message) return null;

  const content = textOf(message['content']) || null;

  const rawCalls = Array.isArray(message['tool_calls']) ? (message['tool_calls'] as unknown[]) : [];
  const tool_calls: LlmToolCall[] = [];
  for (const raw of rawCalls) {
    const call = asRecord(raw);
    const fn = asRecord(call?.['function']);
    if (!call || !fn) continue; // custom (non-function) tool calls are not part of the port
    const args = fn['arguments'];
    tool_calls.push({
      id: toolCallId(call['id']),
      name: typeof fn['name'] === 'string' ? fn['name'] : '',
      arguments: argumentsText(args),
    });
  }

  return {
    id: typeof body['id'] === 'string' && body['id'] !== '' ? body['id'] : null,
    model: typeof body['model'] === 'string' && body['model'] !== '' ? body['model'] : null,
    content,
    reasoning_content: reasoningOf(message) || null,
    tool_calls,
    finish_reason: normaliseFinishReason(choice['finish_reason']),
    usage: readUsage(body['usage']),
  };
}
