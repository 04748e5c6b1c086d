import type { LlmError, LlmErrorCode } from '@acs/core/ports';

/** An answer's headers, by name (any case): a fetch `Headers` will do. */
export interface AnswerHeaders {
  get(name: string): string | null;
}

/** One failed attempt, classified: what to report and whether another attempt may help. */
export interface AttemptFailure {
  code: LlmErrorCode;
  /** Provider's words or the transport's, not yet redacted. */
  detail: string;
  status: number | null;
  /** Worth another attempt now (after a backoff). */
  retry: boolean;
  /** Whether trying again later may succeed, once our retries are spent (`LlmError.retryable`). */
  retryableLater: boolean;
  /** What the server asked for (`retry-after-ms` / `retry-after`), in ms. */
  retryAfterMs: number | null;
}

/** HTTP statuses retried with backoff (529: Anthropic's "overloaded"). */
export const RETRIED_STATUSES: ReadonlySet<number> = new Set([408, 429, 500, 502, 503, 504, 529]);

const CONTEXT_CODES = new Set(['context_length_exceeded', 'string_above_max_length', 'context_window_exceeded']);
const CONTEXT_WORDS =
  /maximum context length|context[ _-]?length|context[ _-]?window|too many tokens|prompt is too long|input is too long|exceeds? the maximum number of tokens|reduce the length of the messages/i;
const CONTENT_CODES = new Set([
  'content_filter',
  'content_policy_violation',
  'content_filtered',
  'responsibleaipolicyviolation',
]);
/** LiteLLM proxies name the exception class in the message (`litellm.ContentPolicyViolationError: …`). */
const CONTENT_WORDS = /ContentPolicyViolationError/;
/** A LiteLLM proxy answers an unknown model with 400 `Invalid model name passed in model=…`. */
const MODEL_WORDS = /invalid model name/i;
const QUOTA_CODES = new Set(['insufficient_quota', 'billing_hard_limit_reached', 'insufficient_balance']);

const MAX_DETAIL = 600;
/**
 * Of an error body that is not JSON (a proxy's or some other server's page), the start of its
 * text: enough to tell nginx's 502 from a login page, not a page of whatever answered.
 */
const MAX_TEXT_DETAIL = 200;

/** A page's text without its tags, its spaces collapsed, cut at MAX_TEXT_DETAIL characters. */
function textExcerpt(text: string): string {
  const flat = text
    .replace(/<[^>]*>/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  return flat.length > MAX_TEXT_DETAIL ? `${flat.slice(0, MAX_TEXT_DETAIL)}…` : flat;
}

/** Seconds or an HTTP date (`retry-after`), or milliseconds (`retry-after-ms`); null when absent or nonsense. */
export function retryAfterMs(headers: AnswerHeaders | undefined, now = Date.now()): number | null {
  if (!headers) return null;
  const ms = headers.get('retry-after-ms');
  if (ms !== null && ms.trim() !== '') {
    const value = Number(ms);
    if (Number.isFinite(value) && value >= 0) return value;
  }
  const after = headers.get('retry-after');
  if (after === null || after.trim() === '') return null;
  const seconds = Number(after);
  if (Number.isFinite(seconds)) return seconds >= 0 ? seconds * 1000 : null;
  const date = Date.parse(after);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

const asRecord = (value: unknown): Record<string, unknown> | null =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;

/**
 * The provider's message and codes out of whatever shape its error body has: usually
 * `{ error: { message, type, code } }`; Ollama sends `{ error: "…" }`, vLLM `{ detail }` or
 * `{ object: "error", message, … }`, and a proxy may answer with text.
 */
function describeBody(status: number, body: unknown): { message: string; codes: string[] } {
  const outer = asRecord(body);
  const raw: unknown = outer && 'error' in outer ? outer['error'] : body;
  const inner = asRecord(raw);
  const codes = [inner?.['code'], inner?.['type'], inner?.['status'], outer?.['code'], outer?.['type']]
    .filter((c): c is string | number => typeof c === 'string' || typeof c === 'number')
    .map((c) => String(c).toLowerCase());
  let message: string;
  if (typeof body === 'string') message = body.trim() === '' ? `${status} status code (no body)` : textExcerpt(body);
  else if (typeof raw === 'string') message = raw.trim() === '' ? `${status} status code (no body)` : raw;
  else if (typeof inner?.['message'] === 'string') message = inner['message'];
  else if (typeof inner?.['detail'] === 'string') message = inner['detail'];
  else if (typeof inner?.['error'] === 'string') message = inner['error'];
  else if (raw !== undefined && raw !== null) message = JSON.stringify(raw);
  else message = `${status} status code (no body)`;
  return { message, codes };
}

/** Classifies an answer with a status outside 2xx, from its body (parsed JSON, or text) and headers. */
export function classifyStatus(status: number, body: unknown, headers: AnswerHeaders | undefined): AttemptFailure {
  const { message, codes } = describeBody(status, body);
  const has = (set: ReadonlySet<string>) => codes.some((c) => set.has(c));
  const after = retryAfterMs(headers);
  const failure = (code: LlmErrorCode, retry: boolean, retryableLater = retry): AttemptFailure => ({
    code,
    detail: message,
    status,
    retry,
    retryableLater,
    retryAfterMs: after,
  });
  if (status === 401 || status === 403) return failure('auth_failed', false);
  if (status === 402 || has(QUOTA_CODES)) return failure('rate_limited', false);
  if (status === 429) return failure('rate_limited', true);
  if (status === 408) return failure('timeout', true);
  if (status >= 500) return failure('provider_error', RETRIED_STATUSES.has(status), true);
  if (has(CONTENT_CODES) || CONTENT_WORDS.test(message)) return failure('content_refused', false);
  if (has(CONTEXT_CODES) || CONTEXT_WORDS.test(message)) return failure('context_too_long', false);
  if (status === 404 || codes.includes('model_not_found') || MODEL_WORDS.test(message))
    return failure('model_not_found', false);
  return failure('bad_request', false);
}

/**
 * Classifies what an attempt threw instead of answering: `stage` says whether no answer came
 * (the connection failed: `fetch` threw) or the answer broke off while it was being read.
 */
export function classifyError(error: unknown, stage: 'connecting' | 'reading'): AttemptFailure {
  const base = { retryAfterMs: null, status: null } as const;
  if (stage === 'connecting') {
    return { ...base, code: 'unreachable', detail: connectionDetail(error), retry: true, retryableLater: true };
  }
  if (isDroppedConnection(error)) {
    return {
      ...base,
      code: 'unreachable',
      detail: `the connection dropped while reading the answer (${chainText(error)})`,
      retry: true,
      retryableLater: true,
    };
  }
  const detail = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return {
    ...base,
    code: 'provider_error',
    detail: `the answer is not a chat completion (${detail})`,
    retry: false,
    retryableLater: false,
  };
}

const SOCKET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

/** undici's `TypeError: terminated` (cause: `SocketError: other side closed`) when a connection drops mid-answer. */
function isDroppedConnection(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 4; depth++) {
    const code = (current as Error & { code?: unknown }).code;
    if (
      (typeof code === 'string' && SOCKET_CODES.has(code)) ||
      (current.name === 'TypeError' && current.message === 'terminated')
    )
      return true;
    current = current.cause;
  }
  return false;
}

function chainText(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 4; depth++) {
    parts.push(current.message);
    current = current.cause;
  }
  return parts.join(': ');
}

/** The innermost cause of a failed connection (fetch throws `TypeError: fetch failed` with it as the cause). */
function connectionDetail(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const parts: string[] = [];
  let cause: unknown = error.cause;
  for (let depth = 0; cause instanceof Error && depth < 3; depth++) {
    const code = (cause as Error & { code?: unknown }).code;
    parts.push(typeof code === 'string' && !cause.message.includes(code) ? `${code}: ${cause.message}` : cause.message);
    cause = cause.cause;
  }
  return parts.length > 0 ? parts[parts.length - 1]! : error.message;
}

/**
 * Removes secrets from text that is about to leave the adapter: the key itself, anything that
 * looks like a bearer token or an `sk-…` key, URL credentials (`//user:pass@`, `?key=`), so a provider (or a proxy) echoing a header
 * cannot leak it into an error message.
 */
export function redact(text: string, apiKey: string | null): string {
  let out = text;
  if (apiKey && apiKey.length >= 4) out = out.split(apiKey).join('[REDACTED]');
  return out
    .replace(/(bearer\s+)(?!\[REDACTED\])[^\s"',;()[\]{}<>]+/gi, '$1[REDACTED]')
    .replace(/\bsk-(?!\[REDACTED\])[A-Za-z0-9_*.-]{6,}/g, 'sk-[REDACTED]')
    .replace(/(\/\/)[^\s/@:]+:[^\s/@]+@/g, '$1[REDACTED]@')
    .replace(/([?&](?:key|api_key|api-key)=)(?!\[REDACTED\])[^&\s"'()<>]+/gi, '$1[REDACTED]');
}

const ADVICE: Record<LlmErrorCode, string> = {
  auth_failed: 'The LLM provider refused the API key; check llm_api_key (and llm_base_url).',
  rate_limited: 'The LLM provider is rate limiting this key; try again later.',
  unreachable: 'Could not connect to the LLM provider; check llm_base_url and that the server is up.',
  timeout: 'The LLM provider did not answer in time; try again later.',
  context_too_long: "The conversation no longer fits the model's context window; condense it or start a new one.",
  content_refused: "The LLM provider's content filter refused the request or the answer.",
  model_not_found:
    'The LLM provider does not know this model; check llm_model (and that llm_base_url points at an OpenAI-compatible API, usually ending in /v1).',
  bad_request: 'The LLM provider rejected the request.',
  provider_error: 'The LLM provider failed to answer.',
  cancelled: 'The LLM call was cancelled.',
};

/** A call refused before anything was sent (no endpoint, a URL that is not one, a host not allowed). */
const NOT_SENT_ADVICE = 'The LLM call was not made; check llm_model and llm_base_url.';

const QUOTA_ADVICE =
  'The LLM provider says the quota or credit of this key is exhausted; top it up or use another key.';

/** The `LlmError` for a final failure: advice first, then the provider's words, redacted and shortened. */
export function toLlmError(
  failure: AttemptFailure,
  context: { apiKey: string | null; attempts: number; model: string },
): LlmError {
  const advice =
    failure.code === 'rate_limited' && !failure.retryableLater
      ? QUOTA_ADVICE
      : failure.code === 'bad_request' && context.attempts === 0
        ? NOT_SENT_ADVICE
        : ADVICE[failure.code];
  const where = failure.status === null ? '' : `HTTP ${failure.status}, `;
  const tries = context.attempts > 1 ? `, after ${context.attempts} attempts` : '';
  // Redact before shortening, so a cut cannot leave half a key behind.
  let detail = redact(failure.detail, context.apiKey).replace(/\s+/g, ' ').trim();
  if (detail.length > MAX_DETAIL) detail = `${detail.slice(0, MAX_DETAIL)}…`;
  const message = `${advice} (${where}model ${context.model}${tries}${detail ? `: ${detail}` : ''})`;
  return {
    type: failure.code,
    message: redact(message, context.apiKey),
    status: failure.status,
    retryable: failure.retryableLater,
    attempts: context.attempts,
  };
}
