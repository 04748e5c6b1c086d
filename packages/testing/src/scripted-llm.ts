import { err, ok, type Result, type ResultAsync } from 'neverthrow';
import type {
  LlmClient,
  LlmDelta,
  LlmError,
  LlmErrorCode,
  LlmFinishReason,
  LlmRequest,
  LlmResponse,
  LlmUsage,
} from '@acs/core/ports';
import { resultAsync } from '@acs/core/ports';

export interface ScriptedToolCall {
  name: string;
  /** An object is sent as JSON; a string is sent as is (to script malformed arguments). */
  arguments: Record<string, unknown> | string;
  id?: string;
}

/**
 * How a scripted answer is streamed to a request that asks for it (`onDelta`): its reasoning,
 * then its text, in pieces. Without it a streamed answer comes in pieces of 4 characters, at once.
 */
export interface ScriptedStream {
  /**
   * Attempts whose stream dropped before the answer's: what each wrote before it broke (as a
   * retrying adapter streams afresh). The answer is streamed by the attempt after them.
   */
  dropped?: { content?: string; reasoning_content?: string }[];
  /** Characters per piece (default 4, about a token). */
  pieceChars?: number;
  /** A wait before each piece (a slow model); a stop ends it, and the call is cancelled. */
  pieceDelayMs?: number;
  /** The answer's attempt stops after this many pieces until `until` settles (or the request is aborted: cancelled). */
  hold?: { afterPieces: number; until: PromiseLike<unknown> };
}

/** One scripted answer: a reply and/or tool calls, or a failure. */
export type ScriptedTurn =
  | {
      content?: string | null;
      /** The model's reasoning (`reasoning_content`), streamed before the text. */
      reasoning_content?: string | null;
      /** How it streams when the request asks for it (see ScriptedStream). */
      stream?: ScriptedStream;
      tool_calls?: ScriptedToolCall[];
      usage?: Partial<LlmUsage>;
      model?: string;
      /** Default: `tool_calls` when the turn has tool calls, else `stop`. `length` scripts an answer cut off by the output token limit. */
      finish_reason?: LlmFinishReason | null;
      /** Answer after this long (an aborted request ends the wait with `cancelled`). */
      delayMs?: number;
    }
  | { error: LlmErrorCode; message?: string; status?: number; delayMs?: number };

/** Answers computed from the request (e.g. from how many tool results it holds). */
export type ScriptedResponder = (request: LlmRequest, callIndex: number) => ScriptedTurn | Promise<ScriptedTurn>;

export interface ScriptedLlmOptions {
  turns?: readonly ScriptedTurn[];
  /** Used once the queued turns are used up. */
  responder?: ScriptedResponder;
  /** The answer when nothing is queued and there is no responder. Default: a short text reply (the agent then finishes). */
  whenEmpty?: ScriptedTurn;
  /** cost_usd of every call unless a turn says otherwise. Default null (unknown), like a model without a price. */
  costPerCallUsd?: number | null;
}

const estimateTokens = (chars: number) => Math.ceil(chars / 4);

/**
 * An LlmClient that answers from a script, for tests and benchmarks: queued turns first,
 * then a responder function. Every request is kept in `requests` so tests can look at the
 * prompts the engine built. A request with `onDelta` gets the answer's text streamed to it
 * first (see ScriptedStream); the result is the same whole answer.
 */
export class ScriptedLlm implements LlmClient {
  readonly requests: LlmRequest[] = [];
  readonly #queue: ScriptedTurn[];
  #responder: ScriptedResponder | null;
  readonly #whenEmpty: ScriptedTurn;
  readonly #cost: number | null;
  #calls = 0;
  #keepRequests = true;

  constructor(options: ScriptedLlmOptions = {}) {
    this.#queue = [...(options.turns ?? [])];
    this.#responder = options.responder ?? null;
    this.#whenEmpty = options.whenEmpty ?? { content: 'The scripted model has nothing more to say.' };
    this.#cost = options.costPerCallUsd ?? null;
  }

  /** Queues answers, used in order. */
  push(...turns: ScriptedTurn[]): this {
    this.#queue.push(...turns);
    return this;
  }

  respondWith(responder: ScriptedResponder | null): this {
    this.#responder = responder;
    return this;
  }

  /** Stop keeping requests (benchmarks with many calls). */
  forgetRequests(): this {
    this.#keepRequests = false;
    this.requests.length = 0;
    return this;
  }

  /** Queued answers not used yet. */
  get pending(): number {
    return this.#queue.length;
  }

  get calls(): number {
    return this.#calls;
  }

  complete(request: LlmRequest): ResultAsync<LlmResponse, LlmError> {
    const index = this.#calls++;
    if (this.#keepRequests)
      this.requests.push({ ...request, messages: structuredClone([...request.messages]), tools: [...request.tools] });
    const started = performance.now();
    const turn: Promise<ScriptedTurn> = Promise.resolve(
      this.#queue.shift() ?? (this.#responder ? this.#responder(request, index) : this.#whenEmpty),
    );
    return resultAsync(this.#answer(request, index, started, turn));
  }

  /** The scripted turn, after its delay: the response, or the error it scripts (or cancelled). */
  async #answer(
    request: LlmRequest,
    index: number,
    started: number,
    turn: Promise<ScriptedTurn>,
  ): Promise<Result<LlmResponse, LlmError>> {
    const t = await turn;
    await wait(t.delayMs ?? 0, request.signal);
    if (request.signal?.aborted) return err(failure('cancelled', 'the request was cancelled'));
    if ('error' in t) return err({ ...failure(t.error, t.message ?? `scripted ${t.error}`), status: t.status ?? null });
    const attempts = request.onDelta ? await streamAnswer(t, request.onDelta, request.signal) : 1;
    if (attempts === null) return err(failure('cancelled', 'the request was cancelled while it streamed'));
    const calls = (t.tool_calls ?? []).map((c, i) => ({
      id: c.id ?? `call_${index}_${i}`,
      name: c.name,
      arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments),
    }));
    // Token estimates only when the turn does not give them (building the text costs time on long prompts).
    // The characters of the joined contents, counted without joining them (a long prompt is not copied per call).
    const promptTokens = () =>
      estimateTokens(
        request.messages.reduce(
          (n, m) => n + (typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? '')).length,
          0,
        ),
      );
    const outputText = (t.content ?? '') + calls.map((c) => c.arguments).join('');
    return ok({
      id: `scripted-${index}`,
      model: t.model ?? request.credentials.model,
      content: t.content ?? null,
      ...(t.reasoning_content !== undefined ? { reasoning_content: t.reasoning_content } : {}),
      tool_calls: calls,
      finish_reason: t.finish_reason === undefined ? (calls.length > 0 ? 'tool_calls' : 'stop') : t.finish_reason,
      usage: {
        prompt_tokens: t.usage?.prompt_tokens ?? promptTokens(),
        completion_tokens: estimateTokens(outputText.length),
        cached_prompt_tokens: 0,
        cost_usd: this.#cost,
        ...t.usage,
      },
      latency_ms: performance.now() - started,
      attempts,
    });
  }
}

function failure(code: LlmErrorCode, message: string): LlmError {
  return {
    type: code,
    message,
    status: null,
    retryable: code === 'rate_limited' || code === 'unreachable' || code === 'timeout' || code === 'provider_error',
    attempts: 1,
  };
}

type ScriptedAnswer = Exclude<ScriptedTurn, { error: LlmErrorCode }>;

/** Streams the answer (after the attempts that drop, if scripted): how many attempts it took, or null when the request was aborted. */
async function streamAnswer(
  t: ScriptedAnswer,
  onDelta: (delta: LlmDelta) => void,
  signal: AbortSignal | undefined,
): Promise<number | null> {
  const options = t.stream ?? {};
  const attempts = [
    ...(options.dropped ?? []),
    { content: t.content ?? '', reasoning_content: t.reasoning_content ?? '' },
  ];
  for (const [i, written] of attempts.entries()) {
    const last = i === attempts.length - 1;
    for (const [n, delta] of deltasOf(written, i + 1, options.pieceChars ?? 4).entries()) {
      if (last && options.hold && n === options.hold.afterPieces) await settled(options.hold.until, signal);
      await wait(options.pieceDelayMs ?? 0, signal);
      if (signal?.aborted) return null;
      onDelta(delta);
    }
  }
  return attempts.length;
}

/** One attempt's reasoning, then its text, cut into pieces of `size` characters. */
function deltasOf(
  written: { content?: string; reasoning_content?: string },
  attempt: number,
  size: number,
): LlmDelta[] {
  const pieces = (text: string) =>
    Array.from({ length: Math.ceil(text.length / size) }, (_, i) => text.slice(i * size, (i + 1) * size));
  return [
    ...pieces(written.reasoning_content ?? '').map((piece) => ({ content: null, reasoning_content: piece, attempt })),
    ...pieces(written.content ?? '').map((piece) => ({ content: piece, reasoning_content: null, attempt })),
  ];
}

/** Waits until `until` settles, or the signal is aborted. */
function settled(until: PromiseLike<unknown>, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      signal?.removeEventListener('abort', done);
      resolve();
    };
    signal?.addEventListener('abort', done, { once: true });
    Promise.resolve(until).then(done, done);
  });
}

function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
