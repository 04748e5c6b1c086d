import type { LlmClient, LlmDelta, LlmError, LlmRequest, LlmResponse } from '@acs/core/ports';
import { allowedHostSet, describeAllowedHosts, isHostAllowed } from '@acs/core/ports';
import { err, ok, ResultAsync, type Result } from 'neverthrow';
import {
  classifyError,
  classifyStatus,
  redact,
  toLlmError,
  type AnswerHeaders,
  type AttemptFailure,
} from './errors.js';
import {
  parseCompletion,
  toChatMessages,
  toChatTools,
  type ChatCompletionRequest,
  type ParsedCompletion,
} from './mapping.js';
import { resolveModel } from './models.js';
import { costOf, type PriceTable } from './prices.js';
import { createDefaultTransport } from './default-transport.js';
import {
  assembled,
  feedEvent,
  isWhole,
  newAssembly,
  refusesStreamOptions,
  streamErrorFailure,
  tell,
  type StreamAssembly,
} from './stream.js';
import { DEFAULT_MAX_RESPONSE_BYTES, fetchTransport, type Exchange, type Transport } from './transport.js';

export interface OpenAiLlmClientOptions {
  /** Retries after the first attempt, on 408/429/5xx (500, 502, 503, 504, 529), connection errors and timeouts. Default 4. */
  maxRetries?: number;
  /** Backoff before the first retry; doubles each time, minus up to 25% jitter. Default 1000 ms. */
  initialBackoffMs?: number;
  /** Upper bound of one backoff, including a server's `retry-after` / `retry-after-ms`. Default 30000 ms. */
  maxBackoffMs?: number;
  /**
   * Time limit of one HTTP attempt, from sending the request to the end of the answer. Default
   * 120000 ms. A streamed call (`onDelta`) is cut by it only when it falls silent: the limit runs
   * until the answer's first bytes and restarts on each piece; `streamTimeoutMs` bounds it whole.
   */
  timeoutMs?: number;
  /** Time limit of one streamed attempt, from sending the request to the end of the stream. Default 600000 ms (never less than `timeoutMs`). */
  streamTimeoutMs?: number;
  /** Largest event of a streamed answer, in bytes (what is held of a stream at a time). Default 4 MiB, never more than `maxResponseBytes`. */
  maxEventBytes?: number;
  /** Add or override prices (USD per 1M tokens) by model name; see `priceFor`. */
  prices?: PriceTable;
  /** Headers sent with every call (e.g. OpenRouter's `HTTP-Referer` and `X-Title`). */
  headers?: Record<string, string>;
  /**
   * The fetch each request is sent with. Default: none, Node's own HTTP client on keep-alive
   * agents that honour `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY` and trust Node's roots,
   * `NODE_EXTRA_CA_CERTS`, the system's store and `ca` (default-transport.ts); one for every
   * client made without a fetch, `ca` or bound of its own, so they share connections.
   */
  fetch?: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
  /** Certificates to trust for https besides the default ones (added to them, never in their place). Ignored with `fetch`. */
  ca?: readonly (string | Buffer)[];
  /** Largest answer body read, in bytes (as sent, and once a content coding is undone). Default 32 MiB. */
  maxResponseBytes?: number;
  /**
   * The hosts (`host` or `host:port`) the client may send to: a call whose URL names another is
   * refused before any connection (`bad_request`, no attempt). It applies to the URL a call
   * resolves to, so a model name routed to a provider's own endpoint (`openai/…` →
   * api.openai.com) needs that provider's host on the list. Default: any host.
   */
  allowedHosts?: readonly string[] | null;
  /** What the list is called where the operator sets it (e.g. `ACS_LLM_ALLOWED_HOSTS`), for refusals. */
  allowedHostsName?: string;
}

/** Sent as the key to servers that need none (Ollama, vLLM, a local LiteLLM proxy) when `llm_api_key` is empty. */
export const PLACEHOLDER_API_KEY = 'not-needed';
export const LITELLM_COST_HEADER = 'x-litellm-response-cost';

const DEFAULTS = {
  maxRetries: 4,
  initialBackoffMs: 1000,
  maxBackoffMs: 30_000,
  timeoutMs: 120_000,
  streamTimeoutMs: 600_000,
  maxEventBytes: 4 * 1024 * 1024,
};
/** How many base URLs a client remembers as refusing `stream_options` (then it forgets them all and learns again). */
const MAX_REFUSING_BASES = 1000;

const nonNegative = (value: number | undefined, fallback: number) =>
  value !== undefined && Number.isFinite(value) && value >= 0 ? value : fallback;

/** The backoff before retry number `retry` (1-based): exponential with up to 25% jitter off, or the server's wish; both capped. */
export function backoffMs(
  retry: number,
  serverWishMs: number | null,
  options: { initialBackoffMs: number; maxBackoffMs: number },
  random = Math.random,
): number {
  if (serverWishMs !== null) return Math.min(serverWishMs, options.maxBackoffMs);
  const exponential = Math.min(options.initialBackoffMs * 2 ** (retry - 1), options.maxBackoffMs);
  return Math.round(exponential * (1 - random() * 0.25));
}

/** Resolves true after `ms`, or false as soon as `signal` aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** A 2xx answer: read as a chat completion (null when it is not one: `shape` says what it is), or a failure. */
type Attempt =
  | { ok: true; parsed: ParsedCompletion | null; shape: string; headers: AnswerHeaders; status: number }
  | { ok: false; failure: AttemptFailure };

const NO_HEADERS: AnswerHeaders = { get: () => null };

const USER_AGENT = 'acs-adapter-openai';

let shared: Transport | undefined;
/** The default client, one for every client made without a fetch, `ca` or bound of its own, so they share connections. */
const sharedTransport = () => (shared ??= createDefaultTransport());

/** How a client sends: the host's fetch, the shared default, or a default of its own for its `ca` or bound. */
function transportOf(options: OpenAiLlmClientOptions): Transport {
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  if (options.fetch) return fetchTransport(options.fetch, { maxResponseBytes });
  if (options.ca || maxResponseBytes !== DEFAULT_MAX_RESPONSE_BYTES)
    return createDefaultTransport({ ...(options.ca ? { ca: options.ca } : {}), maxResponseBytes });
  return sharedTransport();
}

/**
 * The chat-completions URL of a base URL, composed as a URL: `/chat/completions` is appended to
 * the base's path, and a query the base has stays the query (Azure's `api-version`), so no
 * character of the base can turn the path into another (`/v1?x=` asks for `/v1/chat/completions?x=`).
 * Null for what is not a URL.
 */
export function chatCompletionsUrl(baseUrl: string): URL | null {
  const url = URL.parse(baseUrl.trim());
  if (url === null) return null;
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/chat/completions`;
  url.hash = '';
  return url;
}

/** The body of an answer: parsed JSON when it is JSON, else its text (a proxy's HTML page, say). */
function parseBody(text: string): unknown {
  if (text.trim() === '') return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * The `LlmClient` port over any OpenAI-compatible chat-completions API: one `POST
 * {base}/chat/completions` per attempt with Node's own HTTP client (connections kept and reused
 * per origin, the operator's proxy honoured), or with a fetch the host gives. This adapter retries, so it can count attempts, honour
 * cancellation during a backoff and cap `retry-after`.
 *
 * ```ts
 * const service = createAgentConversationService({ ...storage, sandboxSpecs, runtime, llm: createOpenAiLlmClient() });
 * ```
 */
export function createOpenAiLlmClient(options: OpenAiLlmClientOptions = {}): LlmClient {
  const settings = settingsOf(options);
  return {
    complete: (request) =>
      new ResultAsync(
        complete(settings, request).catch((error: unknown) =>
          err<LlmResponse, LlmError>({
            type: 'provider_error',
            message: redact(
              `Unexpected failure in the LLM adapter: ${error instanceof Error ? error.message : String(error)}`,
              request.credentials.api_key,
            ),
            status: null,
            retryable: false,
            attempts: 0,
          }),
        ),
      ),
  };
}

/** The options with their defaults, resolved once per client. */
interface ClientSettings {
  maxRetries: number;
  backoff: { initialBackoffMs: number; maxBackoffMs: number };
  timeoutMs: number;
  streamTimeoutMs: number;
  maxEventBytes: number;
  /** The base URLs whose servers refused `stream_options`: streamed calls to them are sent without it. */
  refuseStreamOptions: Set<string>;
  /** By lower-cased model name. */
  prices: PriceTable;
  extraHeaders: Record<string, string>;
  send: Transport;
  /** The hosts calls may go to (see `allowedHosts`); null: any. */
  allowedHosts: { hosts: ReadonlySet<string>; name: string | null } | null;
  /** What an aborted attempt, and one past a time limit (whole, a stream's silence, a stream's whole), fail with. */
  cancelled: AttemptFailure;
  timedOut: AttemptFailure;
  stalled: AttemptFailure;
  streamTimedOut: AttemptFailure;
}

/** A failure that no retry mends. */
const refusal = (code: AttemptFailure['code'], detail: string, status: number | null): AttemptFailure => ({
  code,
  detail,
  status,
  retry: false,
  retryableLater: false,
  retryAfterMs: null,
});

function settingsOf(options: OpenAiLlmClientOptions): ClientSettings {
  const timeoutMs = Math.max(1, nonNegative(options.timeoutMs, DEFAULTS.timeoutMs));
  const streamTimeoutMs = Math.max(timeoutMs, nonNegative(options.streamTimeoutMs, DEFAULTS.streamTimeoutMs));
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const timeout = (detail: string): AttemptFailure => ({
    code: 'timeout',
    detail,
    status: null,
    retry: true,
    retryableLater: true,
    retryAfterMs: null,
  });
  return {
    maxRetries: Math.floor(nonNegative(options.maxRetries, DEFAULTS.maxRetries)),
    backoff: {
      initialBackoffMs: nonNegative(options.initialBackoffMs, DEFAULTS.initialBackoffMs),
      maxBackoffMs: nonNegative(options.maxBackoffMs, DEFAULTS.maxBackoffMs),
    },
    timeoutMs,
    streamTimeoutMs,
    maxEventBytes: Math.max(1, Math.min(nonNegative(options.maxEventBytes, DEFAULTS.maxEventBytes), maxResponseBytes)),
    refuseStreamOptions: new Set(),
    prices: Object.fromEntries(
      Object.entries(options.prices ?? {}).map(([name, price]) => [name.trim().toLowerCase(), price]),
    ),
    extraHeaders: { ...options.headers },
    send: transportOf(options),
    allowedHosts: options.allowedHosts
      ? {
          hosts: allowedHostSet(options.allowedHosts, options.allowedHostsName),
          name: options.allowedHostsName ?? null,
        }
      : null,
    cancelled: refusal('cancelled', 'the request was aborted', null),
    timedOut: timeout(`no answer within ${timeoutMs} ms`),
    stalled: timeout(`the streamed answer stalled: nothing came for ${timeoutMs} ms`),
    streamTimedOut: timeout(`the streamed answer did not end within ${streamTimeoutMs} ms`),
  };
}

/** A streamed call's listener and the attempt it is at (the deltas of each attempt say which). */
interface Streaming {
  onDelta: (delta: LlmDelta) => void;
  attempt: number;
}

/**
 * One HTTP attempt: the answer, or why there was none (classified for the retry loop). With
 * `streaming`, a streamed answer's events are assembled as they come and each piece of text is
 * told to `onDelta`.
 */
async function attempt(
  settings: ClientSettings,
  url: string,
  apiKey: string,
  body: ChatCompletionRequest,
  signal: AbortSignal | undefined,
  streaming: Streaming | null,
): Promise<Attempt> {
  const assembly = streaming ? newAssembly() : null;
  const exchange = await settings.send({
    url,
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json',
      'User-Agent': USER_AGENT,
      ...settings.extraHeaders,
      Authorization: `Bearer ${apiKey}`,
    },
    body: JSON.stringify(body),
    signal,
    // One timer covers the whole attempt, reading the answer included; a stream has a longer one,
    // and a second that restarts on each piece (a silence).
    timeoutMs: streaming ? settings.streamTimeoutMs : settings.timeoutMs,
    ...(streaming && assembly
      ? {
          events: {
            onEvent: (data: string) => {
              const piece = feedEvent(assembly, data);
              if (piece) tell(streaming.onDelta, piece, streaming.attempt);
            },
            maxEventBytes: settings.maxEventBytes,
            idleTimeoutMs: settings.timeoutMs,
          },
        }
      : {}),
  });
  return outcomeOf(settings, exchange, assembly, streaming);
}

/** How an exchange ended, as the retry loop reads it. */
function outcomeOf(
  settings: ClientSettings,
  exchange: Exchange,
  assembly: StreamAssembly | null,
  streaming: Streaming | null,
): Attempt {
  switch (exchange.outcome) {
    case 'cancelled':
      return { ok: false, failure: settings.cancelled };
    case 'timed_out':
      if (!streaming) return { ok: false, failure: settings.timedOut };
      return { ok: false, failure: exchange.idle ? settings.stalled : settings.streamTimedOut };
    case 'failed':
      // The stream had said the answer was whole when the connection broke: it is kept, not bought again.
      if (assembly && !assembly.error && isWhole(assembly) && exchange.stage === 'reading')
        return streamed(assembly, NO_HEADERS, 200);
      return { ok: false, failure: classifyError(exchange.error, exchange.stage) };
    case 'unsendable':
      return { ok: false, failure: refusal('bad_request', exchange.detail, null) };
    case 'streamed':
      return streamed(assembly ?? newAssembly(), { get: exchange.header }, exchange.status);
    case 'answered':
      return answered(exchange, streaming);
  }
}

/** A whole answer: an error's status classified, a 2xx read as a completion (told to `onDelta` at once when the server did not stream). */
function answered(exchange: Extract<Exchange, { outcome: 'answered' }>, streaming: Streaming | null): Attempt {
  const data = parseBody(exchange.text);
  const headers = { get: exchange.header };
  if (exchange.status < 200 || exchange.status > 299)
    return { ok: false, failure: classifyStatus(exchange.status, data, headers) };
  const parsed = parseCompletion(data);
  if (streaming && parsed && (parsed.content || parsed.reasoning_content))
    tell(
      streaming.onDelta,
      { content: parsed.content, reasoning_content: parsed.reasoning_content },
      streaming.attempt,
    );
  const shape =
    typeof data === 'string' ? `text starting ${JSON.stringify(data.slice(0, 80))}` : 'JSON without choices';
  return { ok: true, parsed, shape, headers, status: exchange.status };
}

/** A stream read to its end: its error, a stream that broke off before the answer was whole, or the answer. */
function streamed(assembly: StreamAssembly, headers: AnswerHeaders, status: number): Attempt {
  if (assembly.error) return { ok: false, failure: streamErrorFailure(assembly.error, headers) };
  if (!isWhole(assembly))
    return {
      ok: false,
      // As a connection dropped mid-answer: another attempt may well get it whole.
      failure: {
        code: 'unreachable',
        detail: 'the connection dropped while reading the answer (the stream ended before [DONE] or a finish_reason)',
        status: null,
        retry: true,
        retryableLater: true,
        retryAfterMs: null,
      },
    };
  return { ok: true, parsed: assembled(assembly), shape: 'a stream', headers, status };
}

/** What a call's failures are reported with: the key to mask, the model to name. */
interface CallContext {
  apiKey: string | null;
  model: string;
  /** The model as the provider is asked for it (prices are looked up by it). */
  resolvedModel: string;
  started: number;
}

const failWith = (call: CallContext, failure: AttemptFailure, attempts: number) =>
  err(toLlmError(failure, { apiKey: call.apiKey, attempts, model: call.model }));

async function complete(settings: ClientSettings, request: LlmRequest): Promise<Result<LlmResponse, LlmError>> {
  const { credentials, signal } = request;
  const apiKey = credentials.api_key?.trim() ? credentials.api_key.trim() : null;
  const resolved = resolveModel(credentials);
  const call: CallContext = {
    apiKey,
    model: credentials.model,
    resolvedModel: resolved.model,
    started: performance.now(),
  };
  const refuse = (detail: string) => failWith(call, refusal('bad_request', detail, null), 0);
  if (resolved.baseUrl === null) {
    return refuse(
      `"${credentials.model}" names no provider this adapter can reach on its own; set llm_base_url to the endpoint (e.g. a LiteLLM proxy) that serves it`,
    );
  }
  const target = chatCompletionsUrl(resolved.baseUrl);
  if (target === null || !/^https?:$/.test(target.protocol))
    return refuse(`llm_base_url "${resolved.baseUrl}" is not an http(s) URL`);
  const notAllowed = hostRefusal(settings, target, credentials);
  if (notAllowed !== null) return refuse(notAllowed);
  if (resolved.model === '') return refuse('llm_model is empty');

  const url = target.href;
  const body: ChatCompletionRequest = {
    model: resolved.model,
    messages: toChatMessages(request.messages),
    ...(request.tools.length > 0 ? { tools: toChatTools(request.tools) } : {}),
  };
  const send = sender(settings, url, apiKey ?? PLACEHOLDER_API_KEY, body, request, resolved.baseUrl);
  for (let attempts = 1; ; attempts++) {
    if (signal?.aborted) return failWith(call, settings.cancelled, attempts - 1);
    const outcome = await send(attempts);
    if (outcome.ok) return answer(settings, call, outcome, attempts);
    const { failure } = outcome;
    if (failure.code === 'cancelled') return failWith(call, failure, attempts);
    if (!failure.retry || attempts > settings.maxRetries) return failWith(call, failure, attempts);
    if (!(await sleep(backoffMs(attempts, failure.retryAfterMs, settings.backoff), signal)))
      return failWith(call, settings.cancelled, attempts);
  }
}

/**
 * Sends attempt number n of a call. A streamed call asks for `stream: true` with
 * `stream_options.include_usage` (so the last chunk carries the usage); a server that refuses
 * `stream_options` (a 400 saying so) is asked again at once without it, within the same attempt
 * (no backoff, not counted), and the client remembers its base URL so later calls skip it.
 */
function sender(
  settings: ClientSettings,
  url: string,
  apiKey: string,
  body: ChatCompletionRequest,
  request: LlmRequest,
  baseUrl: string,
): (attempts: number) => Promise<Attempt> {
  const onDelta = request.onDelta;
  if (!onDelta) return () => attempt(settings, url, apiKey, body, request.signal, null);
  const bare: ChatCompletionRequest = { ...body, stream: true };
  const withOptions: ChatCompletionRequest = { ...bare, stream_options: { include_usage: true } };
  let options = !settings.refuseStreamOptions.has(baseUrl);
  return async (attempts) => {
    const streaming = { onDelta, attempt: attempts };
    const outcome = await attempt(settings, url, apiKey, options ? withOptions : bare, request.signal, streaming);
    if (!options || outcome.ok || !refusesStreamOptions(outcome.failure)) return outcome;
    options = false;
    const again = await attempt(settings, url, apiKey, bare, request.signal, streaming);
    if (again.ok || !refusesStreamOptions(again.failure)) {
      if (settings.refuseStreamOptions.size >= MAX_REFUSING_BASES) settings.refuseStreamOptions.clear();
      settings.refuseStreamOptions.add(baseUrl);
    }
    return again;
  };
}

/** Why a call to `target` may not be made (its host is not on the list), or null. */
function hostRefusal(settings: ClientSettings, target: URL, credentials: LlmRequest['credentials']): string | null {
  const list = settings.allowedHosts;
  if (list === null || isHostAllowed(list.hosts, target)) return null;
  const where = credentials.base_url?.trim()
    ? `llm_base_url names the host ${target.host}`
    : `the model ${credentials.model} is served at ${target.host} (no llm_base_url is set)`;
  return `${where}, which this server may not call for models; the hosts it may: ${describeAllowedHosts(list.hosts, 10)}${list.name ? ` (${list.name})` : ''}`;
}

/** A 2xx answer as the port's response: parsed, its cost from the proxy's header or the price table. */
function answer(
  settings: ClientSettings,
  call: CallContext,
  outcome: Extract<Attempt, { ok: true }>,
  attempts: number,
): Result<LlmResponse, LlmError> {
  const { parsed, status } = outcome;
  if (!parsed)
    return failWith(
      call,
      refusal('provider_error', `the answer is not a chat completion (${outcome.shape})`, status),
      attempts,
    );
  if (parsed.finish_reason === 'content_filter' && parsed.content === null && parsed.tool_calls.length === 0) {
    return failWith(call, refusal('content_refused', 'finish_reason content_filter with no content', status), attempts);
  }
  const tokens = parsed.usage ?? { prompt_tokens: 0, completion_tokens: 0, cached_prompt_tokens: 0 };
  const header = outcome.headers.get(LITELLM_COST_HEADER)?.trim();
  const reported = header ? Number(header) : Number.NaN;
  let cost_usd: number | null = null;
  if (Number.isFinite(reported) && reported >= 0) cost_usd = reported;
  else if (parsed.usage)
    cost_usd =
      costOf(call.resolvedModel, tokens, settings.prices) ??
      (parsed.model ? costOf(parsed.model, tokens, settings.prices) : null);
  return ok({
    id: parsed.id,
    model: parsed.model ?? call.resolvedModel,
    content: parsed.content,
    ...(parsed.reasoning_content ? { reasoning_content: parsed.reasoning_content } : {}),
    tool_calls: parsed.tool_calls,
    finish_reason: parsed.finish_reason,
    usage: { ...tokens, cost_usd },
    latency_ms: Math.round(performance.now() - call.started),
    attempts,
  });
}
