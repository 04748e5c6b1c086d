import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LlmClient, LlmCredentials, LlmErrorCode, LlmRequest } from '../llm/client.js';

/** One answer the fixture's model gives to the next call. */
export type LlmContractTurn =
  | { text: string }
  | { toolCall: { name: string; arguments: Record<string, unknown> } }
  | { fail: Extract<LlmErrorCode, 'auth_failed' | 'model_not_found'> };

export interface LlmClientFixture {
  client: LlmClient;
  credentials: LlmCredentials;
  /** Makes the model answer the next call this way (however the fixture's model is steered). */
  answerNext(turn: LlmContractTurn): void;
  close?(): Promise<void>;
}

const TOOL = {
  name: 'execute_bash',
  description: 'Run a command',
  parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
};

/**
 * What every `LlmClient` must do, whatever model it speaks to: text and tool calls come back
 * as `LlmResponse`, usage is counted, a refused key and an unknown model are `LlmError`s tagged
 * by `type` (never thrown, never carrying the key), and an aborted request ends as `cancelled`.
 */
export function describeLlmClientContract(
  name: string,
  make: () => LlmClientFixture | Promise<LlmClientFixture>,
): void {
  describe(`LlmClient contract: ${name}`, () => {
    let f: LlmClientFixture;
    beforeAll(async () => {
      f = await make();
    });
    afterAll(async () => {
      await f.close?.();
    });
    const request = (overrides: Partial<LlmRequest> = {}): LlmRequest => ({
      credentials: f.credentials,
      messages: [{ role: 'user', content: 'Say hello.' }],
      tools: [TOOL],
      ...overrides,
    });

    it('returns a text answer with its usage', async () => {
      f.answerNext({ text: 'Hello there.' });
      const response = (await f.client.complete(request()))._unsafeUnwrap();
      expect(response.content).toBe('Hello there.');
      expect(response.tool_calls).toEqual([]);
      expect(response.usage.prompt_tokens).toBeGreaterThanOrEqual(0);
      expect(response.usage.completion_tokens).toBeGreaterThanOrEqual(0);
      expect(response.attempts).toBeGreaterThanOrEqual(1);
    });

    it('returns a tool call with an id, the tool name and its arguments as JSON text', async () => {
      f.answerNext({ toolCall: { name: 'execute_bash', arguments: { command: 'ls -la' } } });
      const response = (await f.client.complete(request()))._unsafeUnwrap();
      expect(response.tool_calls).toHaveLength(1);
      const call = response.tool_calls[0]!;
      expect(call.id.length).toBeGreaterThan(0);
      expect(call.name).toBe('execute_bash');
      expect(JSON.parse(call.arguments)).toEqual({ command: 'ls -la' });
    });

    it.each(['auth_failed', 'model_not_found'] as const)(
      'answers a %s refusal with an LlmError of that type, without the key',
      async (type) => {
        f.answerNext({ fail: type });
        const error = (await f.client.complete(request()))._unsafeUnwrapErr();
        expect(error.type).toBe(type);
        expect(error.retryable).toBe(false);
        expect(error.message.length).toBeGreaterThan(10);
        if (f.credentials.api_key) expect(error.message).not.toContain(f.credentials.api_key);
      },
    );

    it('ends an aborted request as cancelled', async () => {
      const abort = new AbortController();
      abort.abort();
      f.answerNext({ text: 'never read' });
      const error = (await f.client.complete(request({ signal: abort.signal })))._unsafeUnwrapErr();
      expect(error.type).toBe('cancelled');
    });
  });
}
