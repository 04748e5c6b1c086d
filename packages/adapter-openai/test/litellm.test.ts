/**
 * A streamed call against an OpenAI-compatible server we did not write (issue 36): LiteLLM's
 * proxy from PyPI, its model answering with `mock_response` (which it streams in pieces of three
 * characters when asked to stream). The venv is made by scripts/python-venv.sh litellm and kept by
 * .ci/run (ACS_LITELLM_PYTHON, default /var/cache/acs/litellm-venv/bin/python; `litellm` is beside it).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { LlmDelta, LlmRequest } from '@acs/core/ports';
import { describe, expect, it } from 'vitest';
import { createOpenAiLlmClient } from '../src/index.js';

const PYTHON = process.env.ACS_LITELLM_PYTHON ?? '/var/cache/acs/litellm-venv/bin/python';
const LITELLM = join(dirname(PYTHON), 'litellm');
const MASTER_KEY = 'sk-acs-test-0123456789abcdef0123456789abcdef';
const STARTUP_MS = 120_000;

/** Long enough that its stream (about 200 bytes per three characters) comes in many reads. */
const MOCK_TEXT = Array.from(
  { length: 150 },
  (_, n) => `Sentence ${n + 1} of the mock answer, streamed by LiteLLM — ✓. `,
).join('');

const CONFIG = `
model_list:
  - model_name: gpt-4o
    litellm_params:
      model: openai/gpt-4o
      api_key: sk-not-used
      mock_response: ${JSON.stringify(MOCK_TEXT)}
general_settings:
  master_key: ${MASTER_KEY}
`;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Starts the proxy, runs `fn` with its base URL, and kills it (also when `fn` fails). */
async function withLiteLlm(fn: (baseUrl: string) => Promise<void>): Promise<void> {
  if (!existsSync(LITELLM))
    throw new Error(
      `${LITELLM} is missing: make the LiteLLM venv with scripts/python-venv.sh litellm (.ci/run does, and sets ACS_LITELLM_PYTHON)`,
    );
  const dir = mkdtempSync(join(tmpdir(), 'acs-litellm-'));
  writeFileSync(join(dir, 'config.yaml'), CONFIG);
  const port = await freePort();
  const child = spawn(LITELLM, ['--config', join(dir, 'config.yaml'), '--port', String(port), '--host', '127.0.0.1'], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    // The model price list shipped in the package, not fetched (there is no internet here).
    // Only what it needs: LiteLLM takes a DATABASE_URL it finds (CI sets one for our tests) as its own.
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      PYTHONUNBUFFERED: '1',
      LITELLM_LOCAL_MODEL_COST_MAP: 'True',
    },
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  try {
    await waitUntilLive(`http://127.0.0.1:${port}`, child, () => output);
    await fn(`http://127.0.0.1:${port}/v1`);
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

/** Polls /health/liveliness until it answers 200; fails with the proxy's output when it exits or takes past STARTUP_MS. */
async function waitUntilLive(root: string, child: ReturnType<typeof spawn>, output: () => string): Promise<void> {
  const deadline = Date.now() + STARTUP_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(
        `litellm exited (${child.exitCode ?? child.signalCode}) before it was up; its output:\n${output()}`,
      );
    if (Date.now() > deadline) throw new Error(`litellm was not up within ${STARTUP_MS} ms; its output:\n${output()}`);
    const live = await fetch(`${root}/health/liveliness`).then(
      (response) => response.ok,
      () => false,
    );
    if (live) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

const call = (baseUrl: string, onDelta?: (delta: LlmDelta) => void): LlmRequest => ({
  credentials: { model: 'gpt-4o', api_key: MASTER_KEY, base_url: baseUrl },
  messages: [{ role: 'user', content: 'Say something long.' }],
  tools: [],
  ...(onDelta ? { onDelta } : {}),
});

describe('against LiteLLM’s proxy', () => {
  it(
    'streams a mock answer in many pieces that add up to it, and a whole call gives the same content',
    { timeout: STARTUP_MS + 60_000 },
    async () => {
      await withLiteLlm(async (baseUrl) => {
        // Node's own client.
        const llm = createOpenAiLlmClient({ maxRetries: 0, timeoutMs: 60_000 });
        const deltas: LlmDelta[] = [];
        const streamed = (await llm.complete(call(baseUrl, (d) => deltas.push(d))))._unsafeUnwrap();
        expect(streamed.content).toBe(MOCK_TEXT);
        expect(deltas.length).toBeGreaterThan(10);
        expect(deltas.map((d) => d.content).join('')).toBe(MOCK_TEXT);
        expect(deltas.every((d) => d.attempt === 1)).toBe(true);
        // The last chunk's usage (stream_options.include_usage), priced from the table.
        expect(streamed.usage.completion_tokens).toBeGreaterThan(0);
        expect(streamed.usage.cost_usd).toBeGreaterThan(0);

        const whole = (await llm.complete(call(baseUrl)))._unsafeUnwrap();
        expect(whole.content).toBe(MOCK_TEXT);

        // Through a fetch that counts the stream's bytes as they arrive: the first piece was told
        // while most of the stream had still to come.
        let arrived = 0;
        let arrivedAtFirstDelta: number | null = null;
        const counting = async (input: string | URL | Request, init?: RequestInit) => {
          const response = await globalThis.fetch(input, init);
          const body = response.body?.pipeThrough(
            new TransformStream<Uint8Array, Uint8Array>({
              transform: (chunk, controller) => {
                arrived += chunk.byteLength;
                controller.enqueue(chunk);
              },
            }),
          );
          return new Response(body, { status: response.status, headers: response.headers });
        };
        const viaFetch = await createOpenAiLlmClient({ maxRetries: 0, fetch: counting }).complete(
          call(baseUrl, () => (arrivedAtFirstDelta ??= arrived)),
        );
        expect(viaFetch._unsafeUnwrap().content).toBe(MOCK_TEXT);
        console.log('ARRIVED', arrivedAtFirstDelta, arrived, deltas.length);
        expect(arrivedAtFirstDelta).not.toBeNull();
        expect(arrivedAtFirstDelta!).toBeLessThan(arrived / 2);
      });
    },
  );
});
