/* eslint-disable @typescript-eslint/no-unsafe-assignment -- vitest's asymmetric matchers are typed any */
import { errAsync, okAsync, type ResultAsync } from 'neverthrow';
import { describe, expect, it } from 'vitest';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import {
  NewConversationRequestSchema,
  SettingsInputSchema,
  type ConversationEvent,
  type SettingsInput,
} from '@acs/core/schemas';
import {
  sequentialIdGenerator,
  type McpCallResult,
  type McpConnection,
  type McpConnector,
  type McpFailure,
  type McpServerTarget,
  type McpToolInfo,
} from '@acs/core/ports';
import { createAgent } from '../src/index.js';
import { mergeMcpConfigs, namespacedToolName } from '../src/mcp-session.js';
import { expectOk } from '@acs/core/testing';
import { createMemoryPorts, type ScriptedTurn } from '@acs/testing';
import { conversationOf } from './conversation-reads.js';

const LLM: SettingsInput = { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test-key' };

interface FakeServer {
  tools: McpToolInfo[];
  /** Fails the connection instead. */
  refuse?: McpFailure;
  call?: (tool: string, args: Record<string, unknown>) => McpCallResult | McpFailure;
}

const tool = (name: string, extra: Partial<McpToolInfo> = {}): McpToolInfo => ({
  name,
  description: `The ${name} tool.`,
  input_schema: {
    type: 'object',
    properties: { text: { type: 'string' } },
    required: ['text'],
    additionalProperties: false,
  },
  annotations: {},
  ...extra,
});

/** An McpConnector over in-process fakes, keyed by URL or stdio server name; it records what it was asked. */
class FakeConnector implements McpConnector {
  readonly targets: McpServerTarget[] = [];
  readonly calls: { server: string; tool: string; args: Record<string, unknown> }[] = [];
  readonly #lost = new Map<string, (reason: string) => void>();
  closed = 0;

  constructor(readonly servers: Record<string, FakeServer>) {}

  lose(key: string, reason: string) {
    this.#lost.get(key)?.(reason);
  }

  connect(target: McpServerTarget): ResultAsync<McpConnection, McpFailure> {
    this.targets.push(target);
    const key = target.transport === 'stdio' ? target.name : target.url;
    const server = this.servers[key];
    if (!server) return errAsync({ type: 'unreachable', message: 'nothing listens there' });
    if (server.refuse) return errAsync(server.refuse);
    const connection: McpConnection = {
      tools: server.tools,
      call: (name, args) => {
        this.calls.push({ server: key, tool: name, args });
        const answer = server.call?.(name, args) ?? {
          content: `${name} says ${JSON.stringify(args)}`,
          is_error: false,
        };
        return 'type' in answer ? errAsync(answer) : okAsync(answer);
      },
      onLost: (listener) => void this.#lost.set(key, listener),
      close: () => {
        this.closed++;
        return Promise.resolve();
      },
    };
    return okAsync(connection);
  }
}

async function setup(
  connector: FakeConnector | null,
  settings: Record<string, unknown>,
  responder: (tools: string[], n: number) => ScriptedTurn,
) {
  const ports = createMemoryPorts();
  let n = 0;
  ports.llm.respondWith((request) =>
    responder(
      request.tools.map((t) => t.name),
      n++,
    ),
  );
  const service = createAgentConversationService(
    { agent: createAgent(), ...ports, ids: sequentialIdGenerator(), ...(connector ? { mcp: connector } : {}) },
    { pollIntervalMs: 1 },
  );
  await expectOk(service.settings.store('alice', SettingsInputSchema.parse({ ...LLM, ...settings })));
  return { service, llm: ports.llm, ports };
}

async function converse(service: AgentConversationService, extra: Record<string, unknown> = {}) {
  const created = await expectOk(
    service.conversations.create(
      'alice',
      NewConversationRequestSchema.parse({ initial_user_msg: 'use the tools', ...extra }),
    ),
  );
  await service.idle();
  return created.conversation_id;
}

async function allEvents(service: AgentConversationService, id: string): Promise<ConversationEvent[]> {
  return (await expectOk(service.conversations.searchEvents('alice', id, { after: 0, kinds: null, limit: 1000 })))
    .items;
}

const callTool = (name: string, args: Record<string, unknown>): ScriptedTurn => ({
  tool_calls: [{ name, arguments: args }],
});
const finish: ScriptedTurn = { tool_calls: [{ name: 'finish', arguments: { message: 'done' } }] };
const SEARCH_URL = 'http://127.0.0.1:8931/mcp';
const DOCS_URL = 'https://docs.example.com/sse';

describe('MCP tools in conversations', () => {
  it('offers each server’s tools under its own prefix with their schemas as given, and runs calls on the right server', async () => {
    const connector = new FakeConnector({
      [SEARCH_URL]: { tools: [tool('search'), tool('echo')] },
      files: { tools: [tool('echo', { input_schema: { type: 'object', properties: { path: { type: 'string' } } } })] },
    });
    const { service, llm } = await setup(
      connector,
      {
        mcp_config: {
          shttp_servers: [{ url: SEARCH_URL, api_key: 'mcp-key' }],
          stdio_servers: [{ name: 'files', command: 'mcp-files', args: ['--root', '.'], env: { MODE: 'ro' } }],
        },
      },
      (_, n) =>
        n === 0
          ? callTool('127_0_0_1_8931__echo', { text: 'hi' })
          : n === 1
            ? callTool('files__echo', { path: 'a.txt' })
            : finish,
    );
    const id = await converse(service);

    const offered = llm.requests[0]!.tools;
    expect(offered.map((t) => t.name)).toEqual([
      'execute_bash',
      'str_replace_editor',
      'think',
      'finish',
      'files__echo',
      '127_0_0_1_8931__search',
      '127_0_0_1_8931__echo',
    ]);
    expect(offered.find((t) => t.name === 'files__echo')!.parameters).toEqual({
      type: 'object',
      properties: { path: { type: 'string' } },
    });
    expect(offered.find((t) => t.name === '127_0_0_1_8931__search')!.parameters).toEqual(tool('search').input_schema);
    expect(connector.calls).toEqual([
      { server: SEARCH_URL, tool: 'echo', args: { text: 'hi' } },
      { server: 'files', tool: 'echo', args: { path: 'a.txt' } },
    ]);
    expect(connector.targets).toContainEqual({ transport: 'shttp', url: SEARCH_URL, api_key: 'mcp-key' });
    const events = await allEvents(service, id);
    expect(events.filter((e) => e.kind === 'observation')).toEqual([
      expect.objectContaining({
        tool_name: '127_0_0_1_8931__echo',
        content: 'echo says {"text":"hi"}',
        is_error: false,
        details: { mcp_server: '127_0_0_1_8931', mcp_tool: 'echo' },
      }),
      expect.objectContaining({ tool_name: 'files__echo', is_error: false }),
      expect.objectContaining({ tool_name: 'finish' }),
    ]);
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
  });

  it('a server that cannot be reached degrades only its own tools, with an event that names it and says why', async () => {
    const connector = new FakeConnector({
      [SEARCH_URL]: { tools: [tool('search')] },
      [DOCS_URL]: { tools: [tool('docs')], refuse: { type: 'timeout', message: 'no answer within 30 s' } },
    });
    const { service, llm } = await setup(
      connector,
      { mcp_config: { shttp_servers: [SEARCH_URL], sse_servers: [DOCS_URL] } },
      (_, n) => (n === 0 ? callTool('127_0_0_1_8931__search', { text: 'q' }) : finish),
    );
    const id = await converse(service);
    const events = await allEvents(service, id);
    expect(events.filter((e) => e.kind === 'error')).toEqual([
      expect.objectContaining({
        code: 'mcp_server_failed',
        fatal: false,
        message: expect.stringMatching(
          /docs_example_com \(https:\/\/docs\.example\.com\/sse\).*timeout: no answer within 30 s/,
        ),
      }),
    ]);
    expect(llm.requests[0]!.tools.map((t) => t.name)).toContain('127_0_0_1_8931__search');
    expect(llm.requests[0]!.tools.map((t) => t.name).some((n) => n.startsWith('docs_'))).toBe(false);
    expect(connector.calls).toHaveLength(1);
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
  });

  it('a server lost mid-conversation: its tools are withdrawn with an event, a failing call becomes an error observation, the rest goes on', async () => {
    const connector = new FakeConnector({
      [SEARCH_URL]: {
        tools: [tool('search')],
        call: () => ({ type: 'closed', message: 'the server closed the connection' }),
      },
      files: { tools: [tool('read')] },
    });
    const { service, llm } = await setup(
      connector,
      { mcp_config: { shttp_servers: [SEARCH_URL], stdio_servers: [{ name: 'files', command: 'mcp-files' }] } },
      (_, n) => {
        if (n === 0) return callTool('127_0_0_1_8931__search', { text: 'q' });
        if (n === 1) {
          connector.lose(SEARCH_URL, 'the server process exited (code 1)');
          return callTool('files__read', { text: 'x' });
        }
        return finish;
      },
    );
    const id = await converse(service);
    const events = await allEvents(service, id);
    expect(events.find((e) => e.kind === 'observation')).toMatchObject({
      is_error: true,
      content: expect.stringContaining('closed the connection'),
    });
    expect(events.filter((e) => e.kind === 'error')).toEqual([
      expect.objectContaining({
        code: 'mcp_server_failed',
        message: expect.stringContaining('stopped: the server process exited (code 1)'),
      }),
    ]);
    expect(llm.requests[2]!.tools.map((t) => t.name)).toEqual([
      'execute_bash',
      'str_replace_editor',
      'think',
      'finish',
      'files__read',
    ]);
    expect((await conversationOf(service, id)).record.execution_status).toBe('finished');
  });

  it('the request’s mcp_config extends the user’s; a server with the same URL is replaced', async () => {
    const connector = new FakeConnector({
      [SEARCH_URL]: { tools: [tool('search')] },
      [DOCS_URL]: { tools: [tool('docs')] },
    });
    const { service, llm } = await setup(
      connector,
      { mcp_config: { shttp_servers: [{ url: SEARCH_URL, api_key: 'user-key' }] } },
      () => finish,
    );
    await converse(service, {
      mcp_config: { shttp_servers: [{ url: SEARCH_URL, api_key: 'conversation-key' }], sse_servers: [DOCS_URL] },
    });
    expect(connector.targets).toEqual([
      { transport: 'shttp', url: SEARCH_URL, api_key: 'conversation-key' },
      { transport: 'sse', url: DOCS_URL, api_key: null },
    ]);
    expect(llm.requests[0]!.tools.map((t) => t.name)).toEqual(
      expect.arrayContaining(['127_0_0_1_8931__search', 'docs_example_com__docs']),
    );
  });

  it('without a connector, configured servers give one warning and the conversation runs with the built-in tools', async () => {
    const { service, llm } = await setup(null, { mcp_config: { shttp_servers: [SEARCH_URL] } }, () => finish);
    const id = await converse(service);
    expect((await allEvents(service, id)).filter((e) => e.kind === 'error')).toEqual([
      expect.objectContaining({
        code: 'mcp_server_failed',
        fatal: false,
        message: expect.stringContaining('without an MCP connector'),
      }),
    ]);
    expect(llm.requests[0]!.tools).toHaveLength(4);
  });

  it('closes the connections when the conversation is stopped, and connects again when it starts', async () => {
    const connector = new FakeConnector({ [SEARCH_URL]: { tools: [tool('search')] } });
    const { service } = await setup(connector, { mcp_config: { shttp_servers: [SEARCH_URL] } }, () => finish);
    const id = await converse(service);
    await expectOk(service.conversations.stop('alice', id));
    await service.idle();
    expect(connector.closed).toBe(1);
    await expectOk(
      service.conversations.sendMessage('alice', id, {
        role: 'user',
        content: [{ type: 'text', text: 'again' }],
        run: true,
      }),
    );
    await expectOk(service.conversations.start('alice', id));
    await service.idle();
    expect(connector.targets).toHaveLength(2);
  });
});

describe('MCP connections over the life of a conversation', () => {
  it('follows the settings: servers removed are closed and their tools withdrawn; a lost server is connected again on the next run', async () => {
    const connector = new FakeConnector({ [SEARCH_URL]: { tools: [tool('search')] } });
    const { service, llm } = await setup(connector, { mcp_config: { shttp_servers: [SEARCH_URL] } }, () => ({
      content: 'ok',
    }));
    const id = await converse(service);
    const say = async (text: string) => {
      await expectOk(
        service.conversations.sendMessage('alice', id, { role: 'user', content: [{ type: 'text', text }], run: true }),
      );
      await service.idle();
    };
    connector.lose(SEARCH_URL, 'the server restarted');
    await say('again');
    expect(connector.targets).toHaveLength(2);
    expect(connector.closed).toBe(1);
    expect(llm.requests.at(-1)!.tools.map((t) => t.name)).toContain('127_0_0_1_8931__search');

    await expectOk(service.settings.store('alice', SettingsInputSchema.parse({ mcp_config: { shttp_servers: [] } })));
    await say('without MCP now');
    expect(connector.closed).toBe(2);
    expect(llm.requests.at(-1)!.tools).toHaveLength(4);
  });

  it('never shows a URL’s query, credentials or a stdio server’s arguments in events', async () => {
    const connector = new FakeConnector({});
    const { service } = await setup(
      connector,
      {
        mcp_config: {
          sse_servers: ['https://user:pw-in-url@docs.example.com/sse?token=query-token-123'],
          stdio_servers: [{ name: 'cli', command: 'mcp-cli', args: ['--api-key', 'arg-secret-456'] }],
        },
      },
      () => finish,
    );
    const id = await converse(service);
    const text = JSON.stringify(await allEvents(service, id));
    expect(text).toContain('https://docs.example.com/sse');
    expect(text).toContain('stdio: mcp-cli');
    for (const secret of ['pw-in-url', 'query-token-123', 'arg-secret-456']) expect(text).not.toContain(secret);
  });
});

describe('MCP naming and merging', () => {
  it('names tools <server>__<tool>, within 64 characters and unique', () => {
    expect(namespacedToolName('github', 'create_issue')).toBe('github__create_issue');
    expect(namespacedToolName('my server', 'do.thing/now')).toBe('my_server__do_thing_now');
    const long = 'x'.repeat(80);
    const a = namespacedToolName('srv', `${long}a`);
    const b = namespacedToolName('srv', `${long}b`);
    expect(a.length).toBeLessThanOrEqual(64);
    expect(a).not.toBe(b);
    expect(a).toMatch(/^[A-Za-z0-9_-]+$/);
  });

  it('merges configs: the request adds servers and replaces those with the same URL or stdio name', () => {
    const merged = mergeMcpConfigs(
      {
        sse_servers: [{ url: 'http://a', api_key: null }],
        shttp_servers: [],
        stdio_servers: [{ name: 'fs', command: 'old', args: [], env: {} }],
      },
      {
        sse_servers: [{ url: 'http://b', api_key: null }],
        shttp_servers: [],
        stdio_servers: [{ name: 'fs', command: 'new', args: [], env: {} }],
      },
    );
    expect(merged.sse_servers.map((s) => s.url)).toEqual(['http://a', 'http://b']);
    expect(merged.stdio_servers).toEqual([{ name: 'fs', command: 'new', args: [], env: {} }]);
  });
});
