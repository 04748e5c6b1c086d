import type { GitProviderFailure, GitProviderFailureType } from '@acs/core/ports';
import { BodyTooLargeError, readBoundedBody, resultAsync } from '@acs/core/ports';
import { err, errAsync, ok, okAsync, type Result, type ResultAsync } from 'neverthrow';
import type { z } from 'zod';

/** How the requests to one provider are made. */
export interface HttpSettings {
  /** `GitHub`, `GitLab`: for messages. */
  providerName: string;
  token: string;
  /** Per request, the answer's body included. */
  timeoutMs: number;
  /** An answer longer than this is cut off and the call fails (`unavailable`). */
  maxResponseBytes: number;
  userAgent: string;
  /** Extra headers every request carries (GitHub's API version). */
  headers: Record<string, string>;
  /** Reads a provider's own words out of an error body. */
  messageOf(body: unknown): string | null;
}

/** A JSON answer and the headers the paging reads. */
export interface JsonAnswer {
  body: unknown;
  headers: Headers;
}

/** An answer's body as a schema read it, and the headers the paging reads. */
export interface ParsedAnswer<T> {
  body: T;
  headers: Headers;
}

const MAX_REDIRECTS = 3;
const MAX_MESSAGE_CHARS = 300;

export const failure = (type: GitProviderFailureType, message: string): GitProviderFailure => ({ type, message });

/**
 * Requests to one provider with one user's token: JSON in and out, the token as a Bearer
 * header only, same-origin redirects followed (a redirect elsewhere is not: it would carry the
 * token), a deadline per request, answers read up to a size, and every failure one of the
 * port's types with the provider's own message when it gave one, the token masked.
 */
export class ProviderHttp {
  constructor(private readonly settings: HttpSettings) {}

  get(
    url: string,
    params: Record<string, string | number | boolean | undefined> = {},
  ): ResultAsync<JsonAnswer, GitProviderFailure> {
    const target = new URL(url);
    for (const [key, value] of Object.entries(params))
      if (value !== undefined) target.searchParams.set(key, String(value));
    return this.request(target, { method: 'GET' });
  }

  post(url: string, body: unknown): ResultAsync<JsonAnswer, GitProviderFailure> {
    return this.request(new URL(url), { method: 'POST', body: JSON.stringify(body), contentType: 'application/json' });
  }

  /** Parses an answer's body with a schema; a shape it does not have is `unavailable`, naming where. */
  parse<T>(schema: z.ZodType<T>, answer: JsonAnswer, what: string): ResultAsync<T, GitProviderFailure> {
    const parsed = schema.safeParse(answer.body);
    if (parsed.success) return okAsync(parsed.data);
    const issue = parsed.error.issues[0];
    const at = issue && issue.path.length > 0 ? ` (at ${issue.path.join('.')})` : '';
    return errAsync(
      failure(
        'unavailable',
        `${this.settings.providerName} answered ${what} in a shape this server does not read${at}.`,
      ),
    );
  }

  /** GET, then the body as `schema` reads it (see parse), with the answer's headers for paging. */
  read<T>(
    schema: z.ZodType<T>,
    what: string,
    url: string,
    params: Record<string, string | number | boolean | undefined> = {},
  ): ResultAsync<ParsedAnswer<T>, GitProviderFailure> {
    return resultAsync(this.parsed(this.get(url, params), schema, what));
  }

  /** POST (a GraphQL query), then the body as `schema` reads it. */
  readPost<T>(schema: z.ZodType<T>, what: string, url: string, body: unknown): ResultAsync<T, GitProviderFailure> {
    return resultAsync(this.parsed(this.post(url, body), schema, what)).map((answer) => answer.body);
  }

  private async parsed<T>(
    request: ResultAsync<JsonAnswer, GitProviderFailure>,
    schema: z.ZodType<T>,
    what: string,
  ): Promise<Result<ParsedAnswer<T>, GitProviderFailure>> {
    const answer = await request;
    if (answer.isErr()) return err(answer.error);
    const body = await this.parse(schema, answer.value, what);
    if (body.isErr()) return err(body.error);
    return ok({ body: body.value, headers: answer.value.headers });
  }

  private request(
    url: URL,
    init: { method: string; body?: string; contentType?: string },
  ): ResultAsync<JsonAnswer, GitProviderFailure> {
    return resultAsync(this.requestOf(url, init));
  }

  private async requestOf(
    url: URL,
    init: { method: string; body?: string; contentType?: string },
  ): Promise<Result<JsonAnswer, GitProviderFailure>> {
    // fetch rejects (no answer, a deadline passed): that is caught here, at the foreign boundary, into a failure.
    const outcome = await this.exchange(url, init).catch((error: unknown) => ({
      ok: false as const,
      failure: this.failureOf(error),
    }));
    return outcome.ok ? ok(outcome.answer) : err(outcome.failure);
  }

  private async exchange(
    url: URL,
    init: { method: string; body?: string; contentType?: string },
  ): Promise<{ ok: true; answer: JsonAnswer } | { ok: false; failure: GitProviderFailure }> {
    const signal = AbortSignal.timeout(this.settings.timeoutMs);
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.settings.token}`,
      Accept: 'application/json',
      'User-Agent': this.settings.userAgent,
      ...this.settings.headers,
      ...(init.contentType ? { 'Content-Type': init.contentType } : {}),
    };
    let target = url;
    for (let hop = 0; ; hop++) {
      const response = await fetch(target, {
        method: init.method,
        headers,
        redirect: 'manual',
        signal,
        ...(init.body !== undefined ? { body: init.body } : {}),
      });
      const location = response.headers.get('location');
      if (response.status >= 300 && response.status < 400 && location) {
        await response.body?.cancel();
        const next = new URL(location, target);
        if (next.origin !== target.origin)
          return {
            ok: false,
            failure: failure(
              'unavailable',
              `${this.settings.providerName} redirected the request to another host (${next.host}); it was not followed.`,
            ),
          };
        if (hop >= MAX_REDIRECTS)
          return {
            ok: false,
            failure: failure(
              'unavailable',
              `${this.settings.providerName} redirected the request more than ${MAX_REDIRECTS} times.`,
            ),
          };
        target = next;
        continue;
      }
      const text = await this.readBody(response);
      if (text === null)
        return {
          ok: false,
          failure: failure(
            'unavailable',
            `${this.settings.providerName} answered with more than ${this.settings.maxResponseBytes} bytes; the answer was not read.`,
          ),
        };
      const body = parseJson(text);
      if (response.ok) {
        if (body === undefined)
          return {
            ok: false,
            failure: failure(
              'unavailable',
              `${this.settings.providerName} answered ${response.status} with something that is not JSON.`,
            ),
          };
        return { ok: true, answer: { body, headers: response.headers } };
      }
      return { ok: false, failure: this.statusFailure(response, body) };
    }
  }

  /**
   * The body as text, or null when it is longer than allowed (reading stops there). Gathered in
   * one buffer: an answer in a million one-byte pieces costs its bytes, not a million pieces.
   */
  private async readBody(response: Response): Promise<string | null> {
    try {
      return new TextDecoder().decode(await readBoundedBody(response.body, this.settings.maxResponseBytes));
    } catch (error) {
      if (error instanceof BodyTooLargeError) return null;
      throw error;
    }
  }

  private statusFailure(response: Response, body: unknown): GitProviderFailure {
    const said = this.sanitize(this.settings.messageOf(body));
    const message = said ? `${said} (HTTP ${response.status})` : `HTTP ${response.status}`;
    const { status } = response;
    if (status === 401) return failure('token_invalid', message);
    if (status === 429 || (status === 403 && isRateLimit(response, said))) return failure('rate_limited', message);
    if (status === 403) return failure('forbidden', message);
    if (status === 404) return failure('not_found', message);
    if (status === 408 || status === 504) return failure('timeout', message);
    if (status >= 400 && status < 500) return failure('rejected', message);
    return failure('unavailable', message);
  }

  private failureOf(error: unknown): GitProviderFailure {
    const name = error instanceof Error ? error.name : '';
    const deadline =
      this.settings.timeoutMs < 1000
        ? `${this.settings.timeoutMs} ms`
        : `${Math.round(this.settings.timeoutMs / 1000)} s`;
    if (name === 'TimeoutError' || name === 'AbortError') return failure('timeout', `no answer within ${deadline}`);
    const cause =
      error instanceof Error ? (error.cause as { code?: unknown; message?: unknown } | undefined) : undefined;
    const code = typeof cause?.code === 'string' ? cause.code : null;
    if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT')
      return failure('timeout', `no answer within ${deadline}`);
    const detail =
      code ??
      (typeof cause?.message === 'string' ? cause.message : error instanceof Error ? error.message : String(error));
    return failure(
      'unavailable',
      `${this.settings.providerName} could not be reached (${this.sanitize(detail) ?? 'connection failed'}).`,
    );
  }

  /** A provider's words made safe to show: one line, at most 300 characters, the token masked. */
  sanitize(text: string | null): string | null {
    if (!text) return null;
    // eslint-disable-next-line no-control-regex -- control characters are what is being removed.
    let line = text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
    for (const secret of new Set([this.settings.token, encodeURIComponent(this.settings.token)]))
      if (secret.length >= 4) line = line.split(secret).join('****');
    if (line.length > MAX_MESSAGE_CHARS) line = `${line.slice(0, MAX_MESSAGE_CHARS)}…`;
    return line === '' ? null : line;
  }
}

function parseJson(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** GitHub says a 403 is its rate limit with `x-ratelimit-remaining: 0`, `retry-after`, or in its message. */
function isRateLimit(response: Response, message: string | null): boolean {
  return (
    response.headers.get('x-ratelimit-remaining') === '0' ||
    response.headers.has('retry-after') ||
    /rate limit/i.test(message ?? '')
  );
}

/** The `rel="next"` URL of a Link header, if there is one. */
export function hasNextLink(headers: Headers): boolean {
  return /<[^>]*>\s*;\s*rel="?next"?/.test(headers.get('link') ?? '');
}
