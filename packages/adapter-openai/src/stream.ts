import type { LlmDelta, LlmFinishReason, LlmToolCall } from '@acs/core/ports';
import { classifyStatus, type AnswerHeaders, type AttemptFailure } from './errors.js';
import {
  argumentsText,
  asRecord,
  normaliseFinishReason,
  readUsage,
  reasoningOf,
  textOf,
  toolCallId,
  type ParsedCompletion,
  type TokenCounts,
} from './mapping.js';

/**
 * A streamed chat completion (`stream: true`) put together from its chunks, so that the call
 * ends with exactly the answer a whole one gives: text from `choices[0].delta.content`,
 * reasoning from `delta.reasoning_content` (or `delta.reasoning`), tool calls from
 * `delta.tool_calls[]` whose `index` says which call a piece belongs to (the id and name come
 * once, the arguments in pieces across chunks), the finish reason, the usage (in the last chunk,
 * with `stream_options.include_usage`), and the `data: [DONE]` that ends it.
 */

/** A tool call as far as its pieces have come. */
interface ToolCallParts {
  index: number;
  id: string;
  name: string;
  /** The argument pieces, joined once at the end. */
  arguments: string[];
  /** Arguments a server sent as an object (not text): taken whole. */
  whole: unknown;
}

/** A streamed answer as far as it has come. */
export interface StreamAssembly {
  id: string | null;
  model: string | null;
  content: string[];
  reasoning: string[];
  calls: Map<number, ToolCallParts>;
  finish_reason: LlmFinishReason | null;
  /** A finish reason came (any word, even one the port does not list): the answer is whole. */
  finished: boolean;
  usage: TokenCounts | null;
  /** `data: [DONE]` came: what follows is not read. */
  done: boolean;
  /** A chunk carried an `error` object (a provider failing mid-answer): the body of that chunk. */
  error: Record<string, unknown> | null;
}

export function newAssembly(): StreamAssembly {
  return {
    id: null,
    model: null,
    content: [],
    reasoning: [],
    calls: new Map(),
    finish_reason: null,
    finished: false,
    usage: null,
    done: false,
    error: null,
  };
}

/** The text an event adds, for `onDelta`: null when it adds none. */
export type Piece = Omit<LlmDelta, 'attempt'>;

const nonEmpty = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null);

/**
 * Reads one event's data into `assembly`; returns the text it adds. Data that is not JSON (a
 * keep-alive some servers send as data) is passed over; nothing is read after `[DONE]` or an error.
 */
export function feedEvent(assembly: StreamAssembly, data: string): Piece | null {
  if (assembly.done || assembly.error) return null;
  if (data.trim() === '[DONE]') {
    assembly.done = true;
    return null;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    return null;
  }
  const chunk = asRecord(parsed);
  if (!chunk) return null;
  if (chunk['error'] !== undefined && chunk['error'] !== null) {
    assembly.error = chunk;
    return null;
  }
  assembly.id ??= nonEmpty(chunk['id']);
  assembly.model ??= nonEmpty(chunk['model']);
  const usage = readUsage(chunk['usage']);
  if (usage) assembly.usage = usage;
  const choice = firstChoice(chunk['choices']);
  if (!choice) return null;
  if (choice['finish_reason'] !== undefined && choice['finish_reason'] !== null) {
    assembly.finished = true;
    assembly.finish_reason = normaliseFinishReason(choice['finish_reason']);
  }
  const delta = asRecord(choice['delta']);
  if (!delta) return null;
  const calls = delta['tool_calls'];
  if (Array.isArray(calls)) for (const call of calls) addToolCallPiece(assembly, call);
  const content = textOf(delta['content']);
  const reasoning = reasoningOf(delta);
  if (content !== '') assembly.content.push(content);
  if (reasoning !== '') assembly.reasoning.push(reasoning);
  return content === '' && reasoning === '' ? null : { content: content || null, reasoning_content: reasoning || null };
}

/** The choice with index 0 (a server asked for one choice sends one; a stray `n` must not mix answers). */
function firstChoice(choices: unknown): Record<string, unknown> | null {
  if (!Array.isArray(choices)) return null;
  for (const raw of choices) {
    const choice = asRecord(raw);
    if (choice && (choice['index'] === undefined || choice['index'] === 0)) return choice;
  }
  return null;
}

/**
 * Adds a piece of a tool call: found by its `index`; a server that sends none is followed by the
 * id (a new id is a new call), and a piece with neither belongs to the last call.
 */
function addToolCallPiece(assembly: StreamAssembly, raw: unknown): void {
  const piece = asRecord(raw);
  if (!piece) return;
  const fn = asRecord(piece['function']);
  const id = nonEmpty(piece['id']);
  let index = typeof piece['index'] === 'number' && Number.isInteger(piece['index']) ? piece['index'] : null;
  if (index === null) {
    const known = id === null ? undefined : [...assembly.calls.values()].find((call) => call.id === id);
    const last = [...assembly.calls.keys()].at(-1);
    index = known?.index ?? (id === null && last !== undefined ? last : assembly.calls.size);
  }
  let call = assembly.calls.get(index);
  if (!call) {
    call = { index, id: '', name: '', arguments: [], whole: undefined };
    assembly.calls.set(index, call);
  }
  if (id !== null && call.id === '') call.id = id;
  const name = nonEmpty(fn?.['name']);
  if (name !== null && call.name === '') call.name = name;
  const args = fn?.['arguments'];
  if (typeof args === 'string') call.arguments.push(args);
  else if (args !== undefined && args !== null) call.whole = args;
}

/** Whether the stream said the answer is whole: `[DONE]`, or a finish reason (a server that never sends `[DONE]`). */
export function isWhole(assembly: StreamAssembly): boolean {
  return assembly.done || assembly.finished;
}

/** The assembled answer, in the shape a whole one is read into (`parseCompletion`). */
export function assembled(assembly: StreamAssembly): ParsedCompletion {
  const tool_calls: LlmToolCall[] = [...assembly.calls.values()]
    .sort((a, b) => a.index - b.index)
    .map((call) => ({
      id: toolCallId(call.id),
      name: call.name,
      arguments: call.arguments.length > 0 ? call.arguments.join('') : argumentsText(call.whole),
    }));
  return {
    id: assembly.id,
    model: assembly.model,
    content: assembly.content.join('') || null,
    reasoning_content: assembly.reasoning.join('') || null,
    tool_calls,
    finish_reason: assembly.finish_reason,
    usage: assembly.usage,
  };
}

/**
 * An error a provider sent inside a stream (the status was 200 by then), classified as an error
 * answer would be: by the status it names (`code` or `status`, as OpenRouter sends it), else by
 * its words (a context or content refusal), else as a provider failure worth another attempt.
 */
export function streamErrorFailure(chunk: Record<string, unknown>, headers: AnswerHeaders): AttemptFailure {
  const inner = asRecord(chunk['error']);
  const named = [inner?.['code'], inner?.['status'], chunk['code'], chunk['status']]
    .map((value) => (typeof value === 'string' && /^\d{3}$/.test(value) ? Number(value) : value))
    .find((value): value is number => typeof value === 'number' && value >= 400 && value <= 599);
  if (named !== undefined) return classifyStatus(named, chunk, headers);
  const byWords = classifyStatus(400, chunk, headers);
  const failure = byWords.code === 'bad_request' ? classifyStatus(500, chunk, headers) : byWords;
  return { ...failure, status: null, detail: `in the stream: ${failure.detail}` };
}

/** How servers that do not take `stream_options` say so (Azure's older API versions, vLLM and other pydantic servers). */
const STREAM_OPTIONS_REFUSAL =
  /stream_options|unrecognized request argument|extra (inputs|fields) (are )?not permitted|extra_forbidden|unknown (field|parameter|argument)/i;

/** Whether a failure is a server refusing `stream_options` (then the call is sent again without it, at once). */
export function refusesStreamOptions(failure: AttemptFailure): boolean {
  return (failure.status === 400 || failure.status === 422) && STREAM_OPTIONS_REFUSAL.test(failure.detail);
}

/** Tells `onDelta` of a piece; what it throws stays with it (a listener's failure must not fail the call). */
export function tell(onDelta: (delta: LlmDelta) => void, piece: Piece, attempt: number): void {
  try {
    onDelta({ content: piece.content, reasoning_content: piece.reasoning_content, attempt });
  } catch {
    // The caller's own error: the answer goes on.
  }
}
