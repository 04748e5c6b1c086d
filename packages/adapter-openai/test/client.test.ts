import type { LlmError, LlmMessage, LlmRequest, LlmResponse, LlmToolDefinition } from '@acs/core/ports';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOpenAiLlmClient, PLACEHOLDER_API_KEY, type OpenAiLlmClientOptions } from '../src/index.js';
import { closedPort, completion, errorBody, startFakeOpenAi, type FakeOpenAi } from '@acs/testing';

const KEY = 'sk-test-0123456789abcdefSECRET';
const FAST: OpenAiLlmClientOptions = { maxRetries: 2, initialBackoffMs: 10, maxBackoffMs: 50, timeoutMs: 5_000 };

let fake: FakeOpenAi;
beforeAll(async () => {
  fake = await startFakeOpenAi();
});
afterAll(async () => {
  await fake.close();
});

const TOOLS: LlmToolDefinition[] = [
  {
    name: 'execute_bash',
    description: 'Run a shell command.',
    parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
  },
];

const request = (
  overrides: Partial<LlmRequest> & { model?: string; api_key?: string | null; base_url?: string | null } = {},
): LlmRequest => ({
  credentials: {
    model: overrides.model ?? 'gpt-4o',
    api_key: overrides.api_key === undefined ? KEY : overrides.api_key,
    base_url: overrides.base_url === undefined ? fake.baseUrl : overrides.base_url,
  },
  messages: overrides.messages ?? [{ role: 'user', content: 'Hi' }],
  tools: overrides.tools ?? TOOLS,
  ...(overrides.signal ? { signal: overrides.signal } : {}),
});

async function succeed(options: OpenAiLlmClientOptions, req: LlmRequest): Promise<LlmResponse> {
  const result = await createOpenAiLlmClient(options).complete(req);
  if (result.isErr()) throw new Error(`expected success, got ${JSON.stringify(result.error)}`);
  return result.value;
}

async function fail(options: OpenAiLlmClientOptions, req: LlmRequest): Promise<LlmError> {
  const result = await createOpenAiLlmClient(options).complete(req);
  if (result.isOk()) throw new Error(`expected an error, got ${JSON.stringify(result.value)}`);
  return result.error;
}

describe('answers', () => {
  it('maps a text answer with usage, cached tokens and a priced cost', async () => {
    fake.script([
      {
        status: 200,
        body: completion({
          content: 'Hello there',
          usage: {
            prompt_tokens: 2000,
            completion_tokens: 500,
            total_tokens: 2500,
            prompt_tokens_details: { cached_tokens: 1000 },
          },
        }),
      },
    ]);
    const response = await succeed(FAST, request());
    expect(response).toMatchObject({
      id: 'chatcmpl-123',
      model: 'gpt-4o-2024-08-06',
      content: 'Hello there',
      tool_calls: [],
      finish_reason: 'stop',
      attempts: 1,
      usage: { prompt_tokens: 2000, completion_tokens: 500, cached_prompt_tokens: 1000 },
    });
    // gpt-4o: 1000 × $2.50 + 1000 cached × $1.25 + 500 × $10, per 1M tokens
    expect(response.usage.cost_usd).toBeCloseTo(0.00875, 10);
    expect(response.latency_ms).toBeGreaterThanOrEqual(0);
  });

  it('maps tool calls, keeping malformed arguments raw and naming calls that lack an id', async () => {
    fake.script([
      {
        status: 200,
        body: completion({
          content: 'Let me look.',
          tool_calls: [
            { id: 'call_abc', type: 'function', function: { name: 'execute_bash', arguments: '{"command":"ls -la"}' } },
            { type: 'function', function: { name: 'execute_bash', arguments: '{"command": "echo' } },
          ],
        }),
      },
    ]);
    const response = await succeed(FAST, request());
    expect(response.content).toBe('Let me look.');
    expect(response.finish_reason).toBe('tool_calls');
    expect(response.tool_calls).toHaveLength(2);
    expect(response.tool_calls[0]).toEqual({ id: 'call_abc', name: 'execute_bash', arguments: '{"command":"ls -la"}' });
    expect(response.tool_calls[1]?.name).toBe('execute_bash');
    expect(response.tool_calls[1]?.arguments).toBe('{"command": "echo');
    expect(response.tool_calls[1]?.id).toMatch(/^call_\w+$/);
  });

  it('reports an answer cut off by the token limit as finish_reason length, with its call as written', async () => {
    const cut = '{"command": "create", "path": "/workspace/big.py", "file_text": "print(1)\\nprint(';
    fake.script([
      {
        status: 200,
        body: completion({
          content: null,
          tool_calls: [{ id: 'call_cut', type: 'function', function: { name: 'str_replace_editor', arguments: cut } }],
          finish_reason: 'length',
        }),
      },
    ]);
    const response = await succeed(FAST, request());
    expect(response.finish_reason).toBe('length');
    expect(response.tool_calls).toEqual([{ id: 'call_cut', name: 'str_replace_editor', arguments: cut }]);
  });

  it.each([
    ['stop', 'stop'],
    ['eos', 'stop'],
    ['end_turn', 'stop'],
    ['tool_calls', 'tool_calls'],
    ['function_call', 'tool_calls'],
    ['tool_use', 'tool_calls'],
    ['length', 'length'],
    ['max_tokens', 'length'],
    ['MAX_TOKENS', 'length'],
    ['content_filter', 'content_filter'],
    ['something_new', null],
  ] as const)('normalises the finish_reason %j to %j', async (sent, expected) => {
    fake.script([{ status: 200, body: completion({ content: 'Some text', finish_reason: sent }) }]);
    expect((await succeed(FAST, request())).finish_reason).toBe(expected);
  });

  it('reports a missing finish_reason as null', async () => {
    const body = completion({ content: 'Some text' });
    const { finish_reason: _dropped, ...choice } = body.choices[0]!;
    fake.script([{ status: 200, body: { ...body, choices: [choice] } }]);
    expect((await succeed(FAST, request())).finish_reason).toBeNull();
  });

  it('sends the resolved model, the tools, the mapped messages and the bearer key', async () => {
    fake.script([{ status: 200, body: completion() }]);
    const messages: LlmMessage[] = [
      { role: 'system', content: 'You are a helpful agent.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is in this picture?' },
          { type: 'image_url', url: 'data:image/png;base64,iVBORw0KGgo=' },
        ],
      },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', name: 'execute_bash', arguments: '{"command":"ls"}' }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'README.md' },
      { role: 'assistant', content: 'There is a README.', tool_calls: [] },
      { role: 'user', content: 'Thanks' },
    ];
    await succeed(FAST, request({ model: 'openai/gpt-4o-mini', messages }));
    expect(fake.requests).toHaveLength(1);
    const [seen] = fake.requests;
    expect(seen?.method).toBe('POST');
    expect(seen?.path).toBe('/v1/chat/completions');
    expect(seen?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(seen?.body['model']).toBe('gpt-4o-mini');
    expect(seen?.body['stream']).toBeUndefined();
    expect(seen?.body['tools']).toEqual([
      {
        type: 'function',
        function: {
          name: 'execute_bash',
          description: 'Run a shell command.',
          parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
        },
      },
    ]);
    expect(seen?.body['messages']).toEqual([
      { role: 'system', content: 'You are a helpful agent.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is in this picture?' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
        ],
      },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'execute_bash', arguments: '{"command":"ls"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'README.md' },
      { role: 'assistant', content: 'There is a README.' },
      { role: 'user', content: 'Thanks' },
    ]);
  });

  it('sends no tools when there are none, and a placeholder key when there is no key', async () => {
    fake.script([{ status: 200, body: completion() }]);
    await succeed(FAST, request({ tools: [], api_key: null }));
    const [seen] = fake.requests;
    expect(seen?.body).not.toHaveProperty('tools');
    expect(seen?.headers.authorization).toBe(`Bearer ${PLACEHOLDER_API_KEY}`);
  });

  it('reaches an Ollama server root under /v1 with the prefix stripped', async () => {
    fake.script([{ status: 200, body: completion({ model: 'llama3.1:8b' }) }]);
    const response = await succeed(
      FAST,
      request({ model: 'ollama_chat/llama3.1:8b', base_url: fake.root, api_key: null }),
    );
    expect(fake.requests[0]?.path).toBe('/v1/chat/completions');
    expect(fake.requests[0]?.body['model']).toBe('llama3.1:8b');
    expect(response.usage.cost_usd).toBeNull();
  });

  it('takes the cost from x-litellm-response-cost when the proxy sends it', async () => {
    fake.script([{ status: 200, body: completion(), headers: { 'x-litellm-response-cost': '0.0123' } }]);
    const response = await succeed(FAST, request({ model: 'litellm_proxy/gpt-4o' }));
    expect(fake.requests[0]?.body['model']).toBe('gpt-4o');
    expect(response.usage.cost_usd).toBe(0.0123);
  });

  it('reports a null cost for a model without a known price, and without usage', async () => {
    fake.script([{ status: 200, body: completion({ model: 'my-private-model' }) }]);
    const unknown = await succeed(FAST, request({ model: 'my-private-model' }));
    expect(unknown.usage).toMatchObject({ prompt_tokens: 1000, completion_tokens: 100, cost_usd: null });

    fake.script([{ status: 200, body: completion({ usage: null }) }]);
    const noUsage = await succeed(FAST, request({ model: 'gpt-4o' }));
    expect(noUsage.usage).toEqual({ prompt_tokens: 0, completion_tokens: 0, cached_prompt_tokens: 0, cost_usd: null });
  });

  it('lets the embedder price a model', async () => {
    fake.script([{ status: 200, body: completion({ model: 'my-private-model' }) }]);
    const response = await succeed(
      { ...FAST, prices: { 'My-Private-Model': { input: 1, output: 2 } } },
      request({ model: 'my-private-model' }),
    );
    expect(response.usage.cost_usd).toBeCloseTo((1000 * 1 + 100 * 2) / 1e6, 12);
  });
});

describe('retries', () => {
  it('honours retry-after on 429, then succeeds on the second attempt', async () => {
    fake.script([
      {
        status: 429,
        body: errorBody('Rate limit reached', 'requests', 'rate_limit_exceeded'),
        headers: { 'retry-after': '1' },
      },
      { status: 200, body: completion() },
    ]);
    const response = await succeed({ ...FAST, initialBackoffMs: 10, maxBackoffMs: 5_000 }, request());
    expect(response.attempts).toBe(2);
    expect(fake.requests).toHaveLength(2);
    // Backoff alone would be 10 ms: the second attempt came after the server's 1 s.
    const waited = fake.requests[1]!.at - fake.requests[0]!.at;
    expect(waited).toBeGreaterThanOrEqual(900);
    expect(response.latency_ms).toBeGreaterThanOrEqual(900);
  });

  it('caps a long retry-after at maxBackoffMs', async () => {
    fake.script([
      { status: 429, body: errorBody('Slow down', 'requests'), headers: { 'retry-after': '3600' } },
      { status: 200, body: completion() },
    ]);
    // Uncapped, the retry would wait an hour: the caller's 60 s signal would cancel it first.
    const response = await succeed({ ...FAST, maxBackoffMs: 100 }, request({ signal: AbortSignal.timeout(60_000) }));
    expect(response.attempts).toBe(2);
  });

  it('retries 500 twice, then succeeds', async () => {
    fake.script([
      { status: 500, body: errorBody('The server had an error', 'server_error') },
      { status: 500, body: errorBody('The server had an error', 'server_error') },
      { status: 200, body: completion() },
    ]);
    const response = await succeed(FAST, request());
    expect(response.attempts).toBe(3);
    expect(fake.requests).toHaveLength(3);
  });

  it('gives up on a persistent 503 with provider_error after maxRetries + 1 attempts', async () => {
    fake.script([{ status: 503, body: errorBody('Overloaded', 'server_error') }]);
    const error = await fail({ ...FAST, maxRetries: 3 }, request());
    expect(error).toMatchObject({ type: 'provider_error', status: 503, retryable: true, attempts: 4 });
    expect(fake.requests).toHaveLength(4);
  });

  it('reports rate_limited after all retries on a persistent 429', async () => {
    fake.script([{ status: 429, body: errorBody('Rate limit reached', 'requests', 'rate_limit_exceeded') }]);
    const error = await fail(FAST, request());
    expect(error).toMatchObject({ type: 'rate_limited', status: 429, retryable: true, attempts: 3 });
  });

  it('does not retry a 429 for an exhausted quota', async () => {
    fake.script([
      { status: 429, body: errorBody('You exceeded your current quota.', 'insufficient_quota', 'insufficient_quota') },
    ]);
    const error = await fail(FAST, request());
    expect(error).toMatchObject({ type: 'rate_limited', status: 429, retryable: false, attempts: 1 });
    expect(error.message).toMatch(/quota/);
    expect(fake.requests).toHaveLength(1);
  });
});

describe('errors', () => {
  it('maps 401 to auth_failed without retrying, and never leaks the key even when the server echoes it', async () => {
    fake.script((req) => ({
      status: 401,
      body: errorBody(
        `Incorrect API key provided. You sent: ${String(req.headers.authorization)} (key ${KEY})`,
        'invalid_request_error',
        'invalid_api_key',
      ),
    }));
    const error = await fail(FAST, request());
    expect(error).toMatchObject({ type: 'auth_failed', status: 401, retryable: false, attempts: 1 });
    expect(fake.requests).toHaveLength(1);
    expect(error.message).toContain('Incorrect API key provided');
    expect(error.message).toContain('You sent: Bearer [REDACTED] (key [REDACTED])');
    expect(error.message).not.toContain(KEY);
    expect(error.message).not.toContain('SECRET');
  });

  it('redacts a non-sk key echoed in a 5xx body after retries', async () => {
    const key = 'plain-gateway-token-42xyz';
    fake.script((req) => ({ status: 502, body: `<html>bad gateway for ${String(req.headers.authorization)}</html>` }));
    const error = await fail(FAST, request({ api_key: key }));
    expect(error).toMatchObject({ type: 'provider_error', status: 502, attempts: 3 });
    expect(error.message).not.toContain(key);
  });

  it('maps 403 to auth_failed', async () => {
    fake.script([
      {
        status: 403,
        body: errorBody(
          'Country, region, or territory not supported',
          'request_forbidden',
          'unsupported_country_region_territory',
        ),
      },
    ]);
    expect(await fail(FAST, request())).toMatchObject({ type: 'auth_failed', status: 403, attempts: 1 });
  });

  it('maps 404 to model_not_found', async () => {
    fake.script([
      {
        status: 404,
        body: errorBody(
          'The model `gpt-9` does not exist or you do not have access to it.',
          'invalid_request_error',
          'model_not_found',
        ),
      },
    ]);
    const error = await fail(FAST, request({ model: 'gpt-9' }));
    expect(error).toMatchObject({ type: 'model_not_found', status: 404, retryable: false, attempts: 1 });
    expect(error.message).toContain('gpt-9');
  });

  it('reads error bodies in the shapes Ollama, vLLM and LiteLLM use', async () => {
    fake.script([{ status: 404, body: { error: "model 'llama9' not found, try pulling it first" } }]);
    const ollama = await fail(FAST, request({ model: 'ollama/llama9' }));
    expect(ollama).toMatchObject({ type: 'model_not_found', status: 404 });
    expect(ollama.message).toContain("model 'llama9' not found");

    fake.script([
      {
        status: 400,
        body: { object: 'error', message: 'temperature must be positive', type: 'BadRequestError', code: 400 },
      },
    ]);
    expect((await fail(FAST, request())).message).toContain('temperature must be positive');

    fake.script([{ status: 422, body: { detail: [{ loc: ['body', 'messages'], msg: 'field required' }] } }]);
    const vllm = await fail(FAST, request());
    expect(vllm).toMatchObject({ type: 'bad_request', status: 422 });
    expect(vllm.message).toContain('field required');

    fake.script([
      {
        status: 400,
        body: {
          error: {
            message: 'litellm.ContextWindowExceededError: litellm.BadRequestError: prompt too big',
            type: null,
            param: null,
            code: '400',
          },
        },
      },
    ]);
    expect(await fail(FAST, request())).toMatchObject({ type: 'context_too_long', status: 400 });

    fake.script([
      {
        status: 400,
        body: {
          error: {
            message:
              '/chat/completions: Invalid model name passed in model=foo. Call `/v1/models` to view available models for your key.',
            type: 'None',
            param: 'None',
            code: '400',
          },
        },
      },
    ]);
    expect(await fail(FAST, request({ model: 'litellm_proxy/foo' }))).toMatchObject({
      type: 'model_not_found',
      status: 400,
    });
  });

  it('maps a 400 context_length_exceeded, or a prompt-too-long message, to context_too_long', async () => {
    fake.script([
      {
        status: 400,
        body: errorBody(
          "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
          'invalid_request_error',
          'context_length_exceeded',
        ),
      },
    ]);
    expect(await fail(FAST, request())).toMatchObject({ type: 'context_too_long', status: 400, attempts: 1 });

    fake.script([
      {
        status: 400,
        body: {
          error: { message: 'prompt is too long: 208310 tokens > 200000 maximum', type: 'invalid_request_error' },
        },
      },
    ]);
    expect(await fail(FAST, request())).toMatchObject({ type: 'context_too_long', status: 400 });
  });

  it('maps a content-filter rejection, or a filtered empty answer, to content_refused', async () => {
    fake.script([
      {
        status: 400,
        body: errorBody(
          'Your request was rejected as a result of our safety system.',
          'invalid_request_error',
          'content_policy_violation',
        ),
      },
    ]);
    expect(await fail(FAST, request())).toMatchObject({ type: 'content_refused', status: 400, attempts: 1 });

    fake.script([
      {
        status: 400,
        body: errorBody(
          'The response was filtered due to the prompt triggering content management policy.',
          null,
          'content_filter',
        ),
      },
    ]);
    expect(await fail(FAST, request())).toMatchObject({ type: 'content_refused', status: 400 });

    fake.script([{ status: 200, body: completion({ content: null, finish_reason: 'content_filter' }) }]);
    expect(await fail(FAST, request())).toMatchObject({ type: 'content_refused', status: 200, attempts: 1 });
  });

  it('returns a filtered answer that has content as an answer', async () => {
    fake.script([{ status: 200, body: completion({ content: 'Partial answer', finish_reason: 'content_filter' }) }]);
    expect(await succeed(FAST, request())).toMatchObject({
      content: 'Partial answer',
      finish_reason: 'content_filter',
    });
  });

  it('maps another 4xx to bad_request with the provider words', async () => {
    fake.script([
      {
        status: 400,
        body: errorBody(
          "Invalid schema for function 'execute_bash'",
          'invalid_request_error',
          'invalid_function_parameters',
        ),
      },
    ]);
    const error = await fail(FAST, request());
    expect(error).toMatchObject({ type: 'bad_request', status: 400, retryable: false, attempts: 1 });
    expect(error.message).toContain("Invalid schema for function 'execute_bash'");
  });

  it('maps an answer that is not a chat completion to provider_error', async () => {
    fake.script([{ status: 200, body: '<html>Welcome to nginx</html>' }]);
    expect(await fail(FAST, request())).toMatchObject({
      type: 'provider_error',
      status: 200,
      retryable: false,
      attempts: 1,
    });

    fake.script([{ status: 200, body: { hello: 'world' } }]);
    expect(await fail(FAST, request())).toMatchObject({ type: 'provider_error', status: 200 });
  });

  it('reports unreachable for a closed port, after retrying', async () => {
    const port = await closedPort();
    const error = await fail(FAST, request({ base_url: `http://127.0.0.1:${port}/v1` }));
    expect(error).toMatchObject({ type: 'unreachable', status: null, retryable: true, attempts: 3 });
    expect(error.message).toMatch(/ECONNREFUSED|connect/i);
  });

  it('retries a connection dropped in the middle of the answer', async () => {
    fake.script(['drop', { status: 200, body: completion() }]);
    expect((await succeed(FAST, request())).attempts).toBe(2);

    fake.script(['drop']);
    const error = await fail(FAST, request());
    expect(error).toMatchObject({ type: 'unreachable', status: null, attempts: 3 });
    expect(error.message).toMatch(/dropped/);
  });

  it('reports timeout for a server that never answers', async () => {
    fake.script(() => 'hang');
    // The server never answers: only the client's own 200 ms timer ends each attempt.
    const error = await fail({ ...FAST, maxRetries: 1, timeoutMs: 200 }, request());
    expect(error).toMatchObject({ type: 'timeout', status: null, retryable: true, attempts: 2 });
    expect(fake.requests).toHaveLength(2);
  });

  it('refuses, without a request, a prefix it cannot route and a base URL that is not http(s)', async () => {
    fake.script([{ status: 200, body: completion() }]);
    const unrouted = await fail(FAST, request({ model: 'litellm_proxy/claude-sonnet-4', base_url: null }));
    expect(unrouted).toMatchObject({ type: 'bad_request', status: null, attempts: 0 });
    expect(unrouted.message).toMatch(/llm_base_url/);
    const badUrl = await fail(FAST, request({ base_url: 'ftp://example.com/v1' }));
    expect(badUrl).toMatchObject({ type: 'bad_request', attempts: 0 });
    expect(fake.requests).toHaveLength(0);
  });
});

describe('cancellation', () => {
  it('cancels an in-flight call promptly', async () => {
    fake.script(() => 'hang');
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    // 'cancelled', not 'timeout': the abort ended the call, long before its 100 s limit.
    const error = await fail({ ...FAST, timeoutMs: 100_000 }, request({ signal: controller.signal }));
    expect(error).toMatchObject({ type: 'cancelled', retryable: false, attempts: 1 });
  });

  it('cancels a backoff wait promptly', async () => {
    fake.script([{ status: 503, body: errorBody('Overloaded', 'server_error') }]);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 150);
    // The backoff is 20 minutes: if the abort did not end the wait, the 60 s race below would.
    const outcome = await Promise.race([
      fail(
        { maxRetries: 4, initialBackoffMs: 1_200_000, maxBackoffMs: 1_200_000 },
        request({ signal: controller.signal }),
      ),
      new Promise<'still waiting'>((resolve) => setTimeout(() => resolve('still waiting'), 60_000).unref()),
    ]);
    expect(outcome).toMatchObject({ type: 'cancelled', attempts: 1 });
  });

  it('does not call at all with an aborted signal', async () => {
    fake.script([{ status: 200, body: completion() }]);
    const error = await fail(FAST, request({ signal: AbortSignal.abort() }));
    expect(error).toMatchObject({ type: 'cancelled', attempts: 0 });
    expect(fake.requests).toHaveLength(0);
  });
});
