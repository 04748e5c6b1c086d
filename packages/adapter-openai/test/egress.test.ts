import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { LlmRequest } from '@acs/core/ports';
import { afterEach, describe, expect, it } from 'vitest';
import { chatCompletionsUrl, createOpenAiLlmClient } from '../src/index.js';
import { completion } from '@acs/testing';

/**
 * Where the client sends (issue 35): the chat-completions URL is composed as a URL (a base's
 * query stays a query), and a client given `allowedHosts` refuses a URL outside them before
 * any connection, also when the URL comes from a model name's provider rather than a base URL.
 */

interface RawModelServer {
  port: number;
  /** Connections accepted. */
  connections: number;
  /** Every request line, in arrival order. */
  requestLines: string[];
}

const servers: Server[] = [];
const sockets = new Set<Socket>();
afterEach(async () => {
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  for (const server of servers.splice(0)) await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** A loopback server that answers each request with a completion and records its request line. */
async function modelServer(): Promise<RawModelServer> {
  const state: RawModelServer = { port: 0, connections: 0, requestLines: [] };
  const answer = JSON.stringify(completion({ content: 'hello' }));
  const server = createServer((socket) => {
    state.connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let received = '';
    socket.on('data', (data: Buffer) => {
      received += data.toString('latin1');
      const end = received.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = received.slice(0, end);
      const length = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (received.length < end + 4 + length) return;
      received = received.slice(end + 4 + length);
      state.requestLines.push(head.split('\r\n')[0]!);
      socket.write(
        `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(answer)}\r\n\r\n${answer}`,
      );
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.address() as AddressInfo).port;
  return state;
}

const request = (model: string, baseUrl: string | null): LlmRequest => ({
  credentials: { model, api_key: 'sk-test', base_url: baseUrl },
  messages: [{ role: 'user', content: 'Hi' }],
  tools: [],
});

describe('the chat-completions URL', () => {
  it.each([
    ['a path', 'https://h.example/v1', 'https://h.example/v1/chat/completions'],
    ['a trailing slash', 'https://h.example/v1/', 'https://h.example/v1/chat/completions'],
    ['a root', 'http://h.example:8080', 'http://h.example:8080/chat/completions'],
    [
      "Azure's query",
      'https://r.openai.azure.com/openai/deployments/gpt4o?api-version=2024-06-01',
      'https://r.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-06-01',
    ],
    ['a query that looks like a path', 'http://h.example/v1?x=/admin', 'http://h.example/v1/chat/completions?x=/admin'],
    ['a fragment', 'http://h.example/v1#/admin', 'http://h.example/v1/chat/completions'],
  ])('keeps the base URL’s parts in their places: %s', (_, base, url) => {
    expect(chatCompletionsUrl(base)?.href).toBe(url);
  });

  it.each([
    ['the default client (undici)', {}],
    ['a fetch the host gives', { fetch: (input: string | URL | Request, init?: RequestInit) => fetch(input, init) }],
  ])('is what goes on the wire, over %s', async (_, options) => {
    const server = await modelServer();
    const client = createOpenAiLlmClient({ ...options, maxRetries: 0 });
    const root = `http://127.0.0.1:${server.port}`;
    for (const base of [`${root}/v1?x=/admin`, `${root}/v1/`, `${root}/deployments/d?api-version=1`]) {
      (await client.complete(request('gpt-4o', base)))._unsafeUnwrap();
    }
    expect(server.requestLines).toEqual([
      'POST /v1/chat/completions?x=/admin HTTP/1.1',
      'POST /v1/chat/completions HTTP/1.1',
      'POST /deployments/d/chat/completions?api-version=1 HTTP/1.1',
    ]);
  });
});

describe('allowed hosts', () => {
  it('refuses a base URL on another host before connecting, naming the host and the list', async () => {
    const server = await modelServer();
    const client = createOpenAiLlmClient({
      allowedHosts: ['models.example', '127.0.0.1:1'],
      allowedHostsName: 'ACS_LLM_ALLOWED_HOSTS',
    });
    const refused = (await client.complete(request('gpt-4o', `http://127.0.0.1:${server.port}/v1`)))._unsafeUnwrapErr();
    expect(refused).toMatchObject({ type: 'bad_request', attempts: 0, retryable: false, status: null });
    expect(refused.message).toContain(`llm_base_url names the host 127.0.0.1:${server.port}`);
    expect(refused.message).toContain('models.example, 127.0.0.1:1 (ACS_LLM_ALLOWED_HOSTS)');
    expect(refused.message).toMatch(/^The LLM call was not made/);
    expect(server.connections).toBe(0);
  });

  it('sends to a host on the list: by host and port, or by host at any port, in any case', async () => {
    const server = await modelServer();
    for (const entry of [`127.0.0.1:${server.port}`, '127.0.0.1', ` 127.0.0.1:${server.port} `]) {
      const client = createOpenAiLlmClient({ allowedHosts: [entry], maxRetries: 0 });
      (await client.complete(request('gpt-4o', `http://127.0.0.1:${server.port}/v1`)))._unsafeUnwrap();
    }
    const byName = createOpenAiLlmClient({ allowedHosts: ['LOCALHOST'], maxRetries: 0 });
    (await byName.complete(request('gpt-4o', `http://localhost:${server.port}/v1`)))._unsafeUnwrap();
    expect(server.requestLines).toHaveLength(4);
  });

  it('applies to the endpoint a model name is routed to when there is no base URL', async () => {
    const client = createOpenAiLlmClient({ allowedHosts: ['127.0.0.1'], allowedHostsName: 'ACS_LLM_ALLOWED_HOSTS' });
    const refused = (await client.complete(request('openai/gpt-4o', null)))._unsafeUnwrapErr();
    expect(refused).toMatchObject({ type: 'bad_request', attempts: 0 });
    expect(refused.message).toContain('the model openai/gpt-4o is served at api.openai.com (no llm_base_url is set)');
    const anthropic = (await client.complete(request('anthropic/claude-sonnet-4', null)))._unsafeUnwrapErr();
    expect(anthropic.message).toContain('served at api.anthropic.com');
  });

  it('cannot be made with an entry that is not a host or host:port', () => {
    expect(() => createOpenAiLlmClient({ allowedHosts: ['https://api.openai.com'], allowedHostsName: 'X' })).toThrow(
      'X: "https://api.openai.com" is not a host or host:port',
    );
  });
});
