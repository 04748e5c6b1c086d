import type { ServerResponse } from 'node:http';

/**
 * A chat completion sent the way OpenAI streams one (`stream: true`): Server-Sent Events of
 * `chat.completion.chunk`s, the text and reasoning in token-like pieces, each tool call's
 * name first and its arguments in pieces, the finish reason, then (with
 * `stream_options.include_usage`) a last chunk with no choices and the usage, and `data: [DONE]`.
 */

/** How a completion is streamed. */
export interface CompletionStreamOptions {
  /** Send the usage in a last chunk (the request's `stream_options.include_usage`); every other chunk then has `usage: null`. */
  includeUsage: boolean;
  /** A wait before each chunk after the first (a model writing); 0: all at once. */
  pieceDelayMs: number;
  /** Drop the connection after this many chunks (a stream that breaks mid-answer); undefined: never. */
  dropAfterChunks?: number | undefined;
}

/** A chat completion as the fake server's replies hold it (what `completion()` builds). */
interface CompletionBody {
  id?: unknown;
  created?: unknown;
  model?: unknown;
  choices: {
    index?: number;
    message?: {
      content?: string | null;
      reasoning_content?: string | null;
      tool_calls?: { id?: string; type?: string; function?: { name?: string; arguments?: string } }[];
    };
    finish_reason?: string | null;
  }[];
  usage?: unknown;
}

/** Whether a reply's body is a chat completion the server can stream (anything else is sent as it is). */
export function isStreamableCompletion(body: unknown): body is CompletionBody {
  if (typeof body !== 'object' || body === null) return false;
  const b = body as Record<string, unknown>;
  return b['object'] === 'chat.completion' && Array.isArray(b['choices']);
}

/**
 * Text cut as a tokenizer roughly would: a word with the spaces before it, at most 6
 * characters of it per piece. Joined, the pieces are the text.
 */
export function tokenPieces(text: string): string[] {
  return text.match(/\s*\S{1,6}|\s+/g) ?? [];
}

/** The chunks' `delta`s and finish reasons of one choice, in order. */
function choiceDeltas(choice: CompletionBody['choices'][number]): {
  delta: Record<string, unknown>;
  finish: string | null;
}[] {
  const message = choice.message ?? {};
  const deltas: { delta: Record<string, unknown>; finish: string | null }[] = [
    { delta: { role: 'assistant', content: '' }, finish: null },
  ];
  for (const piece of tokenPieces(message.reasoning_content ?? ''))
    deltas.push({ delta: { reasoning_content: piece }, finish: null });
  for (const piece of tokenPieces(message.content ?? '')) deltas.push({ delta: { content: piece }, finish: null });
  for (const [index, call] of (message.tool_calls ?? []).entries()) {
    const start = {
      index,
      id: call.id,
      type: call.type ?? 'function',
      function: { name: call.function?.name, arguments: '' },
    };
    deltas.push({ delta: { tool_calls: [start] }, finish: null });
    for (const piece of tokenPieces(call.function?.arguments ?? ''))
      deltas.push({ delta: { tool_calls: [{ index, function: { arguments: piece } }] }, finish: null });
  }
  deltas.push({ delta: {}, finish: choice.finish_reason ?? 'stop' });
  return deltas;
}

/** Every chunk of the completion, as the `data:` of its event. */
function completionChunks(body: CompletionBody, includeUsage: boolean): unknown[] {
  const head = { id: body.id, object: 'chat.completion.chunk', created: body.created, model: body.model };
  const usageNull = includeUsage ? { usage: null } : {};
  const chunks: unknown[] = [];
  for (const [i, choice] of body.choices.entries()) {
    for (const { delta, finish } of choiceDeltas(choice)) {
      chunks.push({ ...head, choices: [{ index: choice.index ?? i, delta, finish_reason: finish }], ...usageNull });
    }
  }
  if (includeUsage && body.usage !== undefined) chunks.push({ ...head, choices: [], usage: body.usage });
  return chunks;
}

/** Streams the completion as Server-Sent Events, a chunk at a time; stops if the client goes. */
export async function streamCompletion(
  res: ServerResponse,
  status: number,
  headers: Record<string, string> | undefined,
  body: CompletionBody,
  options: CompletionStreamOptions,
): Promise<void> {
  res.writeHead(status, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...headers });
  const chunks = completionChunks(body, options.includeUsage);
  let written: Promise<void> = Promise.resolve();
  for (const [n, chunk] of chunks.entries()) {
    if (n === options.dropAfterChunks) break;
    if (n > 0 && options.pieceDelayMs > 0)
      await new Promise((resolve) => setTimeout(resolve, options.pieceDelayMs).unref());
    if (res.destroyed) return;
    written = new Promise((resolve) => res.write(`data: ${JSON.stringify(chunk)}\n\n`, () => resolve()));
  }
  if (options.dropAfterChunks === undefined) {
    res.end('data: [DONE]\n\n');
    return;
  }
  // What was written reaches the client before the connection drops.
  await written;
  res.destroy();
}
