/**
 * The example server calls its users' models through the operator's forward proxy (issue 36):
 * with HTTP_PROXY in its environment, a conversation's model calls go through a real proxy
 * (`proxy`, the one undici is tested against), and with the model's host in NO_PROXY they go
 * straight to it. (The adapter's own tests cover HTTPS_PROXY's CONNECT and NODE_EXTRA_CA_CERTS.)
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createProxy } from 'proxy';
import { marker, scriptedCompletion, startFakeOpenAi, toolCall, type FakeOpenAi } from '@acs/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allEvents, body, call, startServer, waitFor, type Running } from './process.js';

const KEY = 'model-proxy-key-0123456789abcdef';

let llm: FakeOpenAi;
let proxy: Server;
const sockets = new Set<Socket>();
/** What the proxy was asked to carry: "POST http://…". */
const seen: string[] = [];

beforeAll(async () => {
  llm = await startFakeOpenAi();
  llm.script('finish', (turn) => ({
    status: 200,
    body: scriptedCompletion(turn, {
      content: null,
      tool_calls: [toolCall('call_finish', 'finish', { message: 'done' })],
    }),
  }));
  const server = createProxy(createServer());
  server.authenticate = (req: IncomingMessage) => {
    seen.push(`${req.method} ${req.url}`);
    return true;
  };
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  proxy = server;
});

afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise<void>((resolve) => proxy.close(() => resolve()));
  await llm.close();
});

/** Starts a conversation and waits until its agent has finished. */
async function converse(server: Running): Promise<void> {
  await body(
    call(server.url, '/api/settings', KEY, {
      llm_model: 'openai/gpt-4o',
      llm_api_key: 'sk-test',
      llm_base_url: llm.baseUrl,
    }),
  );
  const { conversation_id: id } = await body<{ conversation_id: string }>(
    call(server.url, '/api/conversations', KEY, { initial_user_msg: `${marker('finish')} finish at once` }),
  );
  await waitFor(
    `the agent of ${id} to finish`,
    async () => {
      const [c] = await body<({ execution_status: string | null } | null)[]>(
        call(server.url, `/api/v1/app-conversations?ids=${id}`, KEY),
      );
      if (c?.execution_status === 'error') {
        const errors = (await allEvents(server.url, KEY, id)).filter((e) => e.kind === 'error');
        throw new Error(`the agent failed: ${JSON.stringify(errors)}\n${server.stdout().slice(-3000)}`);
      }
      return c?.execution_status === 'finished' ? c : undefined;
    },
    120_000,
  );
}

describe('the operator’s proxy, on the example server', () => {
  it('carries the model calls when HTTP_PROXY names it, and not when NO_PROXY names the model’s host', async () => {
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    const proxied = await startServer({
      SESSION_API_KEY: KEY,
      ACS_STORAGE: 'memory',
      HTTP_PROXY: proxyUrl,
      NO_PROXY: '',
    });
    await converse(proxied);
    expect(seen).toContain(`POST ${llm.baseUrl}/chat/completions`);

    const before = seen.length;
    const direct = await startServer({
      SESSION_API_KEY: KEY,
      ACS_STORAGE: 'memory',
      HTTP_PROXY: proxyUrl,
      NO_PROXY: new URL(llm.baseUrl).hostname,
    });
    await converse(direct);
    expect(seen.length).toBe(before);
  });
});
