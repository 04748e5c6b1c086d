/**
 * The example server's outbound allow-lists (issue 35): with ACS_LLM_ALLOWED_HOSTS and
 * ACS_MCP_ALLOWED_HOSTS set, a model or MCP URL naming another host is refused when it is stored
 * (400 and a code of its own), an allowed model still answers, and what was stored before the
 * lists were set (or a model name routed to its provider's own host) is refused before any
 * connection: the conversation ends in error, or the MCP server loses its tools, saying why.
 */
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { ConversationEvent } from '@acs/core/schemas';
import { marker, scriptedCompletion, startFakeOpenAi, toolCall, type FakeOpenAi } from '@acs/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { allEvents, body, call, freshDataDir, startServer, waitFor, type Running } from './process.js';

const KEY = 'egress-allow-lists-key-0123456789';

let llm: FakeOpenAi;
beforeAll(async () => {
  llm = await startFakeOpenAi();
  llm.script('finish', (turn) => ({
    status: 200,
    body: scriptedCompletion(turn, {
      content: null,
      tool_calls: [toolCall('call_finish', 'finish', { message: 'done' })],
    }),
  }));
});
afterAll(() => llm.close());

/** A loopback TCP server that counts the connections it is sent and answers none: the place a refused URL points at. */
interface Bystander {
  port: number;
  connections: () => number;
}
const bystanders: { server: Server; sockets: Set<Socket> }[] = [];
afterEach(async () => {
  for (const { server, sockets } of bystanders.splice(0)) {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

async function bystander(): Promise<Bystander> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  });
  bystanders.push({ server, sockets });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, connections: () => connections };
}

const llmHost = () => new URL(llm.baseUrl).host;

interface AppConversation {
  execution_status: string | null;
}

/** Starts a conversation and waits for its agent to end (`finished` or `error`); its events. */
async function converse(server: Running, text: string): Promise<{ status: string; events: ConversationEvent[] }> {
  const { conversation_id: id } = await body<{ conversation_id: string }>(
    call(server.url, '/api/conversations', KEY, { initial_user_msg: text }),
  );
  const ended = await waitFor(
    `the agent of ${id} to end`,
    async () => {
      const [c] = await body<(AppConversation | null)[]>(call(server.url, `/api/v1/app-conversations?ids=${id}`, KEY));
      return c?.execution_status === 'finished' || c?.execution_status === 'error' ? c : undefined;
    },
    120_000,
  ).catch((error: unknown) => {
    throw new Error(
      `${String(error)}\n--- stderr ---\n${server.stderr()}\n--- stdout (tail) ---\n${server.stdout().slice(-4000)}`,
    );
  });
  return { status: ended.execution_status!, events: await allEvents(server.url, KEY, id) };
}

const errorsOf = (events: ConversationEvent[]) =>
  events.filter((e): e is Extract<ConversationEvent, { kind: 'error' }> => e.kind === 'error');

describe('outbound allow-lists of the example server', () => {
  it('refuse a model or MCP URL on another host when it is stored; an allowed model answers', async () => {
    const other = await bystander();
    const server = await startServer({
      SESSION_API_KEY: KEY,
      ACS_STORAGE: 'memory',
      ACS_LLM_ALLOWED_HOSTS: `models.example, ${llmHost()}`,
      ACS_MCP_ALLOWED_HOSTS: 'mcp.example',
    });
    const refused = await call(server.url, '/api/settings', KEY, {
      llm_model: 'openai/gpt-4o',
      llm_api_key: 'sk-egress',
      llm_base_url: `http://127.0.0.1:${other.port}/v1`,
    });
    const answer = (await refused.json()) as { code: string; message: string };
    expect([refused.status, answer.code]).toEqual([400, 'LLM_HOST_NOT_ALLOWED']);
    expect(answer.message).toContain(`127.0.0.1:${other.port}`);
    expect(answer.message).toContain('ACS_LLM_ALLOWED_HOSTS');

    const mcp = await call(server.url, '/api/settings', KEY, {
      mcp_config: { shttp_servers: [`http://127.0.0.1:${other.port}/mcp`] },
    });
    expect([mcp.status, ((await mcp.json()) as { code: string }).code]).toEqual([400, 'MCP_HOST_NOT_ALLOWED']);

    await body(
      call(server.url, '/api/settings', KEY, {
        llm_model: 'openai/scripted',
        llm_api_key: 'sk-egress',
        llm_base_url: llm.baseUrl,
      }),
    );
    expect((await converse(server, `${marker('finish')} go`)).status).toBe('finished');
    expect(other.connections()).toBe(0);
  });

  it('refuse before connecting what was stored before the lists were set, and a provider not listed', async () => {
    const model = await bystander();
    const mcp = await bystander();
    const dataDir = freshDataDir();
    const before = await startServer({ SESSION_API_KEY: KEY, DATA_DIR: dataDir });
    await body(
      call(before.url, '/api/settings', KEY, {
        llm_model: 'openai/gpt-4o',
        llm_api_key: 'sk-egress',
        llm_base_url: `http://127.0.0.1:${model.port}/v1`,
        mcp_config: { shttp_servers: [`http://127.0.0.1:${mcp.port}/mcp`] },
      }),
    );
    before.child.kill('SIGTERM');
    await before.exited;

    const server = await startServer({
      SESSION_API_KEY: KEY,
      DATA_DIR: dataDir,
      ACS_LLM_ALLOWED_HOSTS: 'models.example',
      ACS_MCP_ALLOWED_HOSTS: 'mcp.example',
    });
    const stored = await converse(server, 'hello');
    expect(stored.status).toBe('error');
    const messages = errorsOf(stored.events).map((e) => `${e.code}: ${e.message}`);
    expect(messages.find((m) => m.startsWith('mcp_server_failed'))).toMatch(
      new RegExp(`127\\.0\\.0\\.1:${mcp.port} is not one this server may connect to.*ACS_MCP_ALLOWED_HOSTS`),
    );
    expect(messages.find((m) => m.startsWith('llm_bad_request'))).toMatch(
      new RegExp(`llm_base_url names the host 127\\.0\\.0\\.1:${model.port}.*ACS_LLM_ALLOWED_HOSTS`),
    );
    expect([model.connections(), mcp.connections()]).toEqual([0, 0]);

    // No base URL: the model name's provider is where the call would go, and it is not listed.
    await body(call(server.url, '/api/settings', KEY, { llm_base_url: '', mcp_config: {} }));
    const provider = await converse(server, 'hello again');
    expect(provider.status).toBe('error');
    expect(errorsOf(provider.events).map((e) => e.message)).toContainEqual(
      expect.stringContaining('the model openai/gpt-4o is served at api.openai.com'),
    );
  });

  it('refuse to start with an entry that is not a host', async () => {
    const server = await startServer(
      { SESSION_API_KEY: KEY, ACS_STORAGE: 'memory', ACS_LLM_ALLOWED_HOSTS: 'https://api.openai.com/v1' },
      { expectExit: true },
    );
    expect(await server.exited).not.toBe(0);
    expect(server.stderr()).toContain('ACS_LLM_ALLOWED_HOSTS: "https://api.openai.com/v1" is not a host or host:port');
  });
});
