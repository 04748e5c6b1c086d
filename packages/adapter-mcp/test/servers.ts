import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

/** 4 bytes: a PNG signature's start, enough to count. */
/** The `sleep` tool's calls so far, across the servers of this test file: how many began, and how many slept their full time. */
export const sleeps = { started: 0, finished: 0 };

const IMAGE_BASE64 = Buffer.from([0x89, 0x50, 0x4e, 0x47]).toString('base64');

/** The test tools, the same on every transport. */
function buildMcpServer(): McpServer {
  const server = new McpServer({ name: 'test-server', version: '1.0.0' });
  server.registerTool('echo', { description: 'Echoes the text', inputSchema: { text: z.string() } }, ({ text }) => ({
    content: [{ type: 'text', text }],
  }));
  server.registerTool(
    'add',
    { description: 'Adds two numbers', inputSchema: { a: z.number(), b: z.number() } },
    ({ a, b }) => ({
      content: [{ type: 'text', text: String(a + b) }],
    }),
  );
  server.registerTool('fail', { description: 'Always fails' }, () => ({
    content: [{ type: 'text', text: 'it failed on purpose' }],
    isError: true,
  }));
  server.registerTool('sleep', { description: 'Sleeps', inputSchema: { ms: z.number() } }, async ({ ms }, extra) => {
    sleeps.started++;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        sleeps.finished++;
        resolve();
      }, ms);
      timer.unref();
      extra.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve();
      });
    });
    return { content: [{ type: 'text', text: `slept ${ms} ms` }] };
  });
  server.registerTool(
    'lookup',
    {
      description: 'Reads only',
      inputSchema: { key: z.string() },
      annotations: { readOnlyHint: true, openWorldHint: false, title: 'Look up' },
    },
    ({ key }) => ({ content: [{ type: 'text', text: `value of ${key}` }] }),
  );
  server.registerTool('media', { description: 'Returns an image and resources' }, () => ({
    content: [
      { type: 'text', text: 'here it is' },
      { type: 'image', data: IMAGE_BASE64, mimeType: 'image/png' },
      { type: 'resource_link', uri: 'file:///tmp/report.txt', name: 'report' },
      { type: 'resource', resource: { uri: 'file:///tmp/notes.txt', text: 'the notes' } },
    ],
  }));
  server.registerTool('structured', { description: 'Returns structured content only' }, () => ({
    content: [],
    structuredContent: { answer: 42 },
  }));
  return server;
}

interface SeenRequest {
  method: string;
  path: string;
  authorization: string | undefined;
}

export interface TestHttpServer {
  url: string;
  port: number;
  requests: SeenRequest[];
  /** Stops the server and drops every open connection (like a crash). */
  stop(): Promise<void>;
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });
}

function stopper(server: Server, cleanup: () => Promise<void>): () => Promise<void> {
  let stopped: Promise<void> | null = null;
  return () => {
    stopped ??= (async () => {
      await cleanup().catch(() => undefined);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    })();
    return stopped;
  };
}

/** Refuses requests without the token, echoing what it got (so redaction can be tested). */
function authorized(req: IncomingMessage, res: ServerResponse, token: string | undefined): boolean {
  if (token === undefined || req.headers.authorization === `Bearer ${token}`) return true;
  res
    .writeHead(401, { 'content-type': 'text/plain' })
    .end(`unauthorized: you sent ${req.headers.authorization ?? 'nothing'}`);
  return false;
}

/** A Streamable HTTP MCP server (stateful sessions) at /mcp. */
export async function startShttpServer(options: { token?: string } = {}): Promise<TestHttpServer> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const requests: SeenRequest[] = [];
  const http = createServer((req, res) => {
    requests.push({ method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization });
    if (!authorized(req, res, options.token)) return;
    void (async () => {
      const sessionId = req.headers['mcp-session-id'];
      let transport = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
      if (transport === undefined) {
        if (typeof sessionId === 'string' || req.method !== 'POST') {
          res.writeHead(404).end('unknown session');
          return;
        }
        const created = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => {
            sessions.set(id, created);
          },
        });
        transport = created;
        await buildMcpServer().connect(created);
      }
      await transport.handleRequest(req, res);
    })().catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(error));
    });
  });
  const port = await listen(http);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    port,
    requests,
    stop: stopper(http, async () => {
      await Promise.all([...sessions.values()].map((t) => t.close()));
    }),
  };
}

/** A legacy SSE MCP server: GET /sse opens the stream, POST /messages?sessionId= carries requests. */
export async function startSseServer(options: { token?: string } = {}): Promise<TestHttpServer> {
  const sessions = new Map<string, SSEServerTransport>();
  const requests: SeenRequest[] = [];
  const http = createServer((req, res) => {
    requests.push({ method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization });
    if (!authorized(req, res, options.token)) return;
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    void (async () => {
      if (req.method === 'GET' && url.pathname === '/sse') {
        const transport = new SSEServerTransport('/messages', res);
        sessions.set(transport.sessionId, transport);
        transport.onclose = () => sessions.delete(transport.sessionId);
        await buildMcpServer().connect(transport);
        return;
      }
      if (req.method === 'POST' && url.pathname === '/messages') {
        const transport = sessions.get(url.searchParams.get('sessionId') ?? '');
        if (transport === undefined) {
          res.writeHead(404).end('unknown session');
          return;
        }
        await transport.handlePostMessage(req, res);
        return;
      }
      res.writeHead(404).end('not found');
    })().catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(error));
    });
  });
  const port = await listen(http);
  return {
    url: `http://127.0.0.1:${port}/sse`,
    port,
    requests,
    stop: stopper(http, async () => {
      await Promise.all([...sessions.values()].map((t) => t.close()));
    }),
  };
}

/** Accepts TCP connections and never answers. */
export async function startSilentServer(): Promise<{ url: string; stop: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  });
  const port = await new Promise<number>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    stop: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
