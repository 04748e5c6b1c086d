import { describeLlmClientContract } from '@acs/core/testing';
import { createOpenAiLlmClient } from '../src/index.js';
import { completion, errorBody, startFakeOpenAi } from '@acs/testing';

// The LlmClient contract over real HTTP: the fake OpenAI-compatible server answers as a provider would.
describeLlmClientContract('OpenAI-compatible client', async () => {
  const fake = await startFakeOpenAi();
  return {
    client: createOpenAiLlmClient({ maxRetries: 0, timeoutMs: 60_000 }),
    credentials: { model: 'openai/gpt-4o', api_key: 'sk-contract-key-0123456789', base_url: fake.baseUrl },
    answerNext: (turn) =>
      fake.script([
        'text' in turn
          ? { status: 200, body: completion({ content: turn.text }) }
          : 'toolCall' in turn
            ? {
                status: 200,
                body: completion({
                  content: null,
                  tool_calls: [
                    {
                      id: 'call_1',
                      type: 'function',
                      function: { name: turn.toolCall.name, arguments: JSON.stringify(turn.toolCall.arguments) },
                    },
                  ],
                }),
              }
            : turn.fail === 'auth_failed'
              ? {
                  status: 401,
                  body: errorBody(
                    'Incorrect API key provided: sk-contr*****6789.',
                    'invalid_request_error',
                    'invalid_api_key',
                  ),
                }
              : {
                  status: 404,
                  body: errorBody(
                    'The model `gpt-4o` does not exist or you do not have access to it.',
                    'invalid_request_error',
                    'model_not_found',
                  ),
                },
      ]),
    close: () => fake.close(),
  };
});
