/**
 * A streamed call as an operator's network carries it (issue 36): through a real forward proxy
 * (HTTP_PROXY's absolute-form request, and HTTPS_PROXY's CONNECT tunnel) and over TLS with a
 * certificate trusted through NODE_EXTRA_CA_CERTS, the pieces arriving while the model still
 * writes (each server holds the rest of its stream until the client has told of a piece).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { LlmDelta } from '@acs/core/ports';
import { afterEach, describe, expect, it } from 'vitest';
import { createOpenAiLlmClient } from '../src/index.js';
import * as fixtures from './network-fixtures.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

const PIECES = ['Through ', 'the ', 'proxy ', 'it ', 'streams.'];
const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
  id: 'chatcmpl-net',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'gpt-4o',
  choices: [{ index: 0, delta, finish_reason: finish }],
});
const event = (data: unknown) => `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;

/**
 * A model that streams PIECES: the first at once, the rest only once `gate` resolves (the client
 * has told of the first), then usage and `[DONE]`. A call that does not stream is refused.
 */
function streamingModel(gate: () => Promise<void>) {
  return (req: IncomingMessage, res: ServerResponse) => {
    let text = '';
    req.on('data', (piece: Buffer) => (text += piece.toString()));
    req.on('end', () => {
      void (async () => {
        if ((JSON.parse(text) as { stream?: boolean }).stream !== true) {
          res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"stream, please"}}');
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(event(chunk({ role: 'assistant', content: PIECES[0] })));
        await gate();
        for (const piece of PIECES.slice(1)) res.write(event(chunk({ content: piece })));
        res.write(event(chunk({}, 'stop')));
        res.write(event({ ...chunk({}), choices: [], usage: { prompt_tokens: 3, completion_tokens: 5 } }));
        res.end(event('[DONE]'));
      })();
    });
  };
}

function firstDelta(): { seen: () => void; gate: () => Promise<void> } {
  let seen!: () => void;
  const promise = new Promise<void>((resolve) => (seen = resolve));
  return { seen, gate: () => promise };
}

describe('a streamed call through the operator’s proxy', () => {
  it('streams through HTTP_PROXY', async () => {
    const delta = firstDelta();
    const model = await fixtures.listen(createServer(streamingModel(delta.gate)), cleanups);
    const proxy = await fixtures.forwardProxy(cleanups);
    const base = `http://127.0.0.1:${fixtures.portOf(model)}/v1`;
    const deltas: LlmDelta[] = [];
    const result = await fixtures.withEnv({ HTTP_PROXY: proxy.url, NO_PROXY: '' }, async () =>
      // A client with a bound of its own makes its own transport, which reads the variables as it is made.
      createOpenAiLlmClient({ maxRetries: 0, maxResponseBytes: 1024 * 1024 }).complete({
        credentials: { model: 'gpt-4o', api_key: 'sk-test', base_url: base },
        messages: [{ role: 'user', content: 'Hi' }],
        tools: [],
        onDelta: (d) => {
          deltas.push(d);
          delta.seen();
        },
      }),
    );
    expect(proxy.seen).toEqual([`POST ${base}/chat/completions`]);
    expect(result._unsafeUnwrap()).toMatchObject({
      content: PIECES.join(''),
      usage: { prompt_tokens: 3, completion_tokens: 5 },
    });
    expect(deltas.map((d) => d.content)).toEqual(PIECES);
  });

  it(
    'streams over TLS trusted through NODE_EXTRA_CA_CERTS, through HTTPS_PROXY’s CONNECT',
    { timeout: 120_000 },
    async () => {
      const ca = fixtures.privateCa();
      const delta = firstDelta();
      const https = createHttpsServer({ key: ca.key, cert: ca.cert }, streamingModel(delta.gate));
      await fixtures.listen(https, cleanups);
      const proxy = await fixtures.forwardProxy(cleanups);
      const port = fixtures.portOf(https);
      const script = `
        import { createOpenAiLlmClient } from ${fixtures.SOURCE_ENTRY};
        const deltas = [];
        const r = await createOpenAiLlmClient({ maxRetries: 0 }).complete({
          credentials: { model: 'gpt-4o', api_key: 'sk-test', base_url: 'https://localhost:${port}/v1' },
          messages: [{ role: 'user', content: 'Hi' }], tools: [],
          onDelta: (d) => { deltas.push(d.content); console.log('delta ' + JSON.stringify(d.content)); },
        });
        console.log(JSON.stringify(r.isOk() ? { ok: true, content: r.value.content, deltas } : { ok: false, type: r.error.type, message: r.error.message }));
      `;
      const result = await fixtures.runChild(
        script,
        { NODE_EXTRA_CA_CERTS: ca.caFile, HTTPS_PROXY: proxy.url },
        (output) => {
          if (output.includes('delta ')) delta.seen();
        },
      );
      expect(result).toEqual({ ok: true, content: PIECES.join(''), deltas: PIECES });
      expect(proxy.seen).toEqual([`CONNECT localhost:${port}`]);
    },
  );
});
