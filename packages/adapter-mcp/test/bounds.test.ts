import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import type { McpConnection, McpFailure, McpServerTarget } from '@acs/core/ports';
import { afterEach, describe, expect, it } from 'vitest';
import { createMcpConnector, type McpConnectorOptions } from '../src/index.js';
import { createLazyMcpConnector } from '../src/lazy.js';
import { startShttpServer, startSseServer } from './servers.js';

/**
 * What an HTTP or SSE MCP server may make the connector do (issue 35): connect only to the hosts
 * allowed (refused before any connection), and hold one message of at most `maxMessageBytes`
 * (a JSON answer whole, one event of an event stream): a server that sends one endless event
 * loses its connection, and its tools, not the process its memory.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

const options = () => ({ signal: new AbortController().signal, timeoutMs: 60_000 });

async function connectWith(connectorOptions: McpConnectorOptions, target: McpServerTarget) {
  const result = await createMcpConnector(connectorOptions).connect(target, options());
  if (result.isOk()) cleanups.push(() => result.value.close());
  return result;
}

/** A TCP server that counts connections and never answers. */
async function countingServer(): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { port: (server.address() as AddressInfo).port, connections: () => connections };
}

describe('allowed hosts', () => {
  it.each(['shttp', 'sse'] as const)(
    'refuse a %s server on another host before connecting, naming its host and the list',
    async (transport) => {
      const server = await countingServer();
      const failed = await connectWith(
        { allowedHosts: ['mcp.example', '127.0.0.1:1'], allowedHostsName: 'ACS_MCP_ALLOWED_HOSTS' },
        { transport, url: `http://127.0.0.1:${server.port}/mcp`, api_key: 'sk-mcp-secret' },
      );
      const failure = failed._unsafeUnwrapErr();
      expect(failure.type).toBe('unreachable');
      expect(failure.message).toContain(`the host 127.0.0.1:${server.port} is not one this server may connect to`);
      expect(failure.message).toContain('mcp.example, 127.0.0.1:1 (ACS_MCP_ALLOWED_HOSTS)');
      expect(server.connections()).toBe(0);
    },
  );

  it.each([
    ['shttp', startShttpServer],
    ['sse', startSseServer],
  ] as const)('let a %s server on an allowed host connect and list its tools', async (transport, start) => {
    const server = await start();
    cleanups.push(() => server.stop());
    const connected = await connectWith(
      { allowedHosts: [`127.0.0.1:${server.port}`] },
      { transport, url: server.url, api_key: null },
    );
    expect(connected._unsafeUnwrap().tools.map((t) => t.name)).toContain('echo');
  });

  it('cannot be given an entry that is not a host, also to the lazy connector (found at start)', () => {
    expect(() => createMcpConnector({ allowedHosts: ['http://mcp.example/'] })).toThrow(/is not a host or host:port/);
    expect(() => createLazyMcpConnector({ allowedHosts: ['*.example.com'] })).toThrow(/is not a host or host:port/);
  });
});

/** How the scripted server answers each JSON-RPC request of the Streamable HTTP transport, by method. */
type Answer = (res: ServerResponse, id: unknown) => void;

interface ScriptedServer {
  url: string;
  /** Bytes the server wrote of answers it was stopped from finishing (the client closed them). */
  cut: () => number;
}

/** A Streamable HTTP MCP server written by hand, so that an answer can be anything; `answers` by method, the rest as an MCP server would. */
async function scriptedServer(answers: Record<string, Answer>): Promise<ScriptedServer> {
  let cut = 0;
  const json = (res: ServerResponse, id: unknown, result: unknown) =>
    res
      .writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'session-1' })
      .end(JSON.stringify({ jsonrpc: '2.0', id, result }));
  const standard: Record<string, Answer> = {
    initialize: (res, id) =>
      json(res, id, {
        protocolVersion: '2025-06-18',
        capabilities: { tools: {} },
        serverInfo: { name: 'scripted', version: '1' },
      }),
    'tools/list': (res, id) =>
      json(res, id, { tools: [{ name: 'flood', inputSchema: { type: 'object', properties: {} } }] }),
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'POST') return void res.writeHead(405).end();
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString()));
    req.on('end', () => {
      const message = JSON.parse(text) as { id?: unknown; method: string };
      if (message.id === undefined) return void res.writeHead(202).end();
      res.on('close', () => {
        if (!res.writableFinished) cut++;
      });
      (answers[message.method] ?? standard[message.method])?.(res, message.id);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, cut: () => cut };
}

/** Writes one event that never ends, in small pieces, as long as the client reads. */
function endlessEvent(res: ServerResponse, contentType: string, start: string): void {
  res.writeHead(200, { 'content-type': contentType, 'mcp-session-id': 'session-1' });
  res.write(start);
  const piece = 'x'.repeat(512);
  const more = () => {
    while (!res.destroyed && res.write(piece));
    if (!res.destroyed) res.once('drain', more);
  };
  more();
}

const LIMIT = 64 * 1024;

describe('one message of a server', () => {
  it('past the bound in a JSON answer fails the connection', async () => {
    const server = await scriptedServer({
      'tools/list': (res) => endlessEvent(res, 'application/json', '{"jsonrpc":"2.0","id":1,"result":{"tools":["'),
    });
    const failure: McpFailure = (
      await connectWith({ maxMessageBytes: LIMIT }, { transport: 'shttp', url: server.url, api_key: null })
    )._unsafeUnwrapErr();
    expect(failure.message).toContain(`larger than ${LIMIT} bytes`);
    await expect.poll(() => server.cut(), { timeout: 60_000 }).toBe(1);
  });

  it('past the bound in one endless event ends the connection, and the server loses its tools', async () => {
    const server = await scriptedServer({
      'tools/call': (res) => endlessEvent(res, 'text/event-stream', 'event: message\ndata: '),
    });
    const connection: McpConnection = (
      await connectWith({ maxMessageBytes: LIMIT }, { transport: 'shttp', url: server.url, api_key: null })
    )._unsafeUnwrap();
    const lost = new Promise<string>((resolve) => connection.onLost(resolve));
    const call = await connection.call('flood', {}, options());
    expect(call._unsafeUnwrapErr().type).toBe('closed');
    expect(await lost).toContain(`larger than ${LIMIT} bytes`);
    await expect.poll(() => server.cut(), { timeout: 60_000 }).toBe(1);
  });

  it('within the bound, in events split anywhere, is read as sent', async () => {
    const text = 'y'.repeat(LIMIT / 2);
    const server = await scriptedServer({
      'tools/call': (res, id) => {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': 'session-1' });
        const event = `event: message\r\ndata: ${JSON.stringify({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }] } })}\r\n\r\n`;
        // A byte at a time at first, then the rest at once.
        for (const byte of event.slice(0, 40)) res.write(byte);
        res.end(event.slice(40));
      },
    });
    const connection = (
      await connectWith({ maxMessageBytes: LIMIT }, { transport: 'shttp', url: server.url, api_key: null })
    )._unsafeUnwrap();
    expect((await connection.call('flood', {}, options()))._unsafeUnwrap().content).toBe(text);
  });
});

describe('the SSE transport', () => {
  it('fails to connect to a server whose stream sends one endless event', async () => {
    let streams = 0;
    const server = createServer((req, res) => {
      streams++;
      endlessEvent(res, 'text/event-stream', 'event: endpoint\ndata: /messages');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/sse`;
    const failure = (
      await connectWith({ maxMessageBytes: LIMIT }, { transport: 'sse', url, api_key: null })
    )._unsafeUnwrapErr();
    expect(failure.message).toContain(`larger than ${LIMIT} bytes`);
    expect(streams).toBeGreaterThanOrEqual(1);
  });
});

describe('a tool list', () => {
  const tool = (name: string, description = '') => ({
    name,
    description,
    inputSchema: { type: 'object', properties: {} },
  });
  const listing = (tools: ReturnType<typeof tool>[]) => ({
    'tools/list': (res: ServerResponse, id: unknown) =>
      res
        .writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'session-1' })
        .end(JSON.stringify({ jsonrpc: '2.0', id, result: { tools } })),
  });

  it('of more tools, or larger definitions, than one server may offer fails the connection, saying which', async () => {
    const many = await scriptedServer(listing(Array.from({ length: 11 }, (_, i) => tool(`t${i}`))));
    const tooMany = (
      await connectWith({ maxToolList: { count: 10 } }, { transport: 'shttp', url: many.url, api_key: null })
    )._unsafeUnwrapErr();
    expect(tooMany.message).toContain('lists more than 10 tools');

    const wordy = await scriptedServer(listing([tool('a', 'x'.repeat(3000)), tool('b', 'y'.repeat(3000))]));
    const tooLarge = (
      await connectWith({ maxToolList: { bytes: 4096 } }, { transport: 'shttp', url: wordy.url, api_key: null })
    )._unsafeUnwrapErr();
    expect(tooLarge.message).toContain('more than 4096 bytes');

    const fits = await scriptedServer(listing([tool('a', 'x'.repeat(1000))]));
    const connection = (
      await connectWith(
        { maxToolList: { count: 10, bytes: 4096 } },
        { transport: 'shttp', url: fits.url, api_key: null },
      )
    )._unsafeUnwrap();
    expect(connection.tools.map((t) => t.name)).toEqual(['a']);
  });
});
