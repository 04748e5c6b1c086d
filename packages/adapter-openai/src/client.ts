import type { LlmClient, LlmError, LlmRequest, LlmResponse } from '@acs/core/ports';
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
import { parseCompletion, toChatMessages, toChatTools, type ChatCompletionRequest } from './mapping.js';
import { resolveModel } from './models.js';
import { costOf, type PriceTable } from './prices.js';
import { createDefaultTransport } from './default-transport.js';
import { DEFAULT_MAX_RESPONSE_BYTES, fetchTransport, type Transport } from './transport.js';

export interface OpenAiLlmClientOptions {
  /** Retries after the first attempt, on 408/429/5xx (500, 502, 503, 504, 529), connection errors and timeouts. Default 4. */
  maxRetries?: number;
  /** Backoff before the first retry; doubles each time, minus up to 25% jitter. Default 1000 ms. */
  initialBackoffMs?: number;
  /** Upper bound of one backoff, including a server's `retry-after` / `retry-after-ms`. Default 30000 ms. */
  maxBackoffMs?: number;
  /** Time limit of one HTTP attempt, from sending the request to the end of the answer. Default 120000 ms. */
  timeoutMs?: number;
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

const DEFAULTS = { maxRetries: 4, initialBackoffMs: 1000, maxBackoffMs: 30_000, timeoutMs: 120_000 };

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

type Attempt =
  { ok: true; data: unknown; headers: AnswerHeaders; status: number } | { ok: false; failure: AttemptFailure };

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
  /** By lower-cased model name. */
  prices: PriceTable;
  extraHeaders: Record<string, string>;
  send: Transport;
  /** The hosts calls may go to (see `allowedHosts`); null: any. */
  allowedHosts: { hosts: ReadonlySet<string>; name: string | null } | null;
  /** What an aborted attempt, and one past the time limit, fail with. */
  cancelled: AttemptFailure;
  timedOut: AttemptFailure;
}

function settingsOf(options: OpenAiLlmClientOptions): ClientSettings {
  const timeoutMs = Math.max(1, nonNegative(options.timeoutMs, DEFAULTS.timeoutMs));
  return {
    maxRetries: Math.floor(nonNegative(options.maxRetries, DEFAULTS.maxRetries)),
    backoff: {
      initialBackoffMs: nonNegative(options.initialBackoffMs, DEFAULTS.initialBackoffMs),
      maxBackoffMs: nonNegative(options.maxBackoffMs, DEFAULTS.maxBackoffMs),
    },
    timeoutMs,
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
    cancelled: {
      code: 'cancelled',
      detail: 'the request was aborted',
      status: null,
      retry: false,
      retryableLater: false,
      retryAfterMs: null,
    },
    timedOut: {
      code: 'timeout',
      detail: `no answer within ${timeoutMs} ms`,
      status: null,
      retry: true,
      retryableLater: true,
      retryAfterMs: null,
    },
  };
}

/** One HTTP attempt: the answer, or why there was none (classified for the retry loop). */
async function attempt(
  settings: ClientSettings,
  url: string,
  apiKey: string,
  body: ChatCompletionRequest,
  signal: AbortSignal | undefined,
): Promise<Attempt> {
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
    // One timer covers the whole attempt, reading the answer included.
    timeoutMs: settings.timeoutMs,
  });
  switch (exchange.outcome) {
    case 'cancelled':
      return { ok: false, failure: settings.cancelled };
    case 'timed_out':
      return { ok: false, failure: settings.timedOut };
    case 'failed':
      return { ok: false, failure: classifyError(exchange.error, exchange.stage) };
    case 'unsendable':
      return {
        ok: false,
        failure: {
          code: 'bad_request',
          detail: exchange.detail,
          status: null,
          retry: false,
          retryableLater: false,
          retryAfterMs: null,
        },
      };
    case 'answered': {
      const data = parseBody(exchange.text);
      const headers = { get: exchange.header };
      if (exchange.status < 200 || exchange.status > 299)
        return { ok: false, failure: classifyStatus(exchange.status, data, headers) };
      return { ok: true, data, headers, status: exchange.status };
    }
  }
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
  const refuse = (detail: string) =>
    failWith(
      call,
      { code: 'bad_request', detail, status: null, retry: false, retryableLater: false, retryAfterMs: null },
      0,
    );
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
  for (let attempts = 1; ; attempts++) {
    if (signal?.aborted) return failWith(call, settings.cancelled, attempts - 1);
    const outcome = await attempt(settings, url, apiKey ?? PLACEHOLDER_API_KEY, body, signal);
    if (outcome.ok) return answer(settings, call, outcome, attempts);
    const { failure } = outcome;
    if (failure.code === 'cancelled') return failWith(call, failure, attempts);
    if (!failure.retry || attempts > settings.maxRetries) return failWith(call, failure, attempts);
    if (!(await sleep(backoffMs(attempts, failure.retryAfterMs, settings.backoff), signal)))
      return failWith(call, settings.cancelled, attempts);
  }
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
  const parsed = parseCompletion(outcome.data);
  const status = outcome.status;
  if (!parsed) {
    const shape =
      typeof outcome.data === 'string'
        ? `text starting ${JSON.stringify(outcome.data.slice(0, 80))}`
        : 'JSON without choices';
    return failWith(
      call,
      {
        code: 'provider_error',
        detail: `the answer is not a chat completion (${shape})`,
        status,
        retry: false,
        retryableLater: false,
        retryAfterMs: null,
      },
      attempts,
    );
  }
  if (parsed.finish_reason === 'content_filter' && parsed.content === null && parsed.tool_calls.length === 0) {
    return failWith(
      call,
      {
        code: 'content_refused',
        detail: 'finish_reason content_filter with no content',
        status,
        retry: false,
        retryableLater: false,
        retryAfterMs: null,
      },
      attempts,
    );
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
    tool_calls: parsed.tool_calls,
    finish_reason: parsed.finish_reason,
    usage: { ...tokens, cost_usd },
    latency_ms: Math.round(performance.now() - call.started),
    attempts,
  });
}
