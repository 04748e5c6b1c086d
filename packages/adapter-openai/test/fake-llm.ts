import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the fake server received. */
interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
  at: number;
}

type Reply =
  | { status: number; body: unknown; headers?: Record<string, string> }
  /** Never answer (the socket stays open until the client gives up or the server closes). */
  | 'hang'
  /** Send the headers and half a body, then drop the connection. */
  | 'drop';

type Handler = (request: RecordedRequest, index: number) => Reply;

export interface FakeLlm {
  /** `http://127.0.0.1:<port>/v1` */
  baseUrl: string;
  /** `http://127.0.0.1:<port>` */
  root: string;
  requests: RecordedRequest[];
  /** Replaces the script (and forgets the requests seen): one handler for every request, or a list consumed in order (the last one repeats). */
  script(handler: Handler | Reply[]): void;
  close(): Promise<void>;
}

export const completion = (overrides: {
  content?: string | null;
  tool_calls?: unknown[];
  finish_reason?: string;
  usage?: unknown;
  model?: string;
  id?: string;
} = {}) => ({
  id: overrides.id ?? 'chatcmpl-123',
  object: 'chat.completion',
  created: 1_700_000_000,
  model: overrides.model ?? 'gpt-4o-2024-08-06',
  choices: [
    {
      index: 0,
      message: { role: 'assistant', content: overrides.content === undefined ? 'Hello!' : overrides.content, ...(overrides.tool_calls ? { tool_calls: overrides.tool_calls } : {}) },
      finish_reason: overrides.finish_reason ?? (overrides.tool_calls ? 'tool_calls' : 'stop'),
    },
  ],
  ...(overrides.usage === null ? {} : { usage: overrides.usage ?? { prompt_tokens: 1000, completion_tokens: 100, total_tokens: 1100 } }),
});

export const errorBody = (message: string, type: string | null, code: string | null = null) => ({ error: { message, type, param: null, code } });

/** A real HTTP server on 127.0.0.1 speaking `POST /v1/chat/completions`, scripted per test. */
export async function startFakeLlm(): Promise<FakeLlm> {
  const requests: RecordedRequest[] = [];
  let handler: Handler = () => ({ status: 200, body: completion() });

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body: Record<string, unknown>;
      try {
        body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
      } catch {
        body = { unparsable: text };
      }
      const recorded: RecordedRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, at: Date.now() };
      requests.push(recorded);
      if (req.method !== 'POST' || !req.url?.endsWith('/v1/chat/completions')) {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify(errorBody(`no route ${req.method} ${req.url}`, 'invalid_request_error')));
        return;
      }
      const reply = handler(recorded, requests.length - 1);
      if (reply === 'hang') return;
      if (reply === 'drop') {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
        res.write('{"id":"chatcmpl-1","choices":[');
        setTimeout(() => res.destroy(), 20);
        return;
      }
      const isText = typeof reply.body === 'string';
      res.writeHead(reply.status, { 'content-type': isText ? 'text/html' : 'application/json', ...reply.headers });
      res.end(isText ? (reply.body as string) : JSON.stringify(reply.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const root = `http://127.0.0.1:${port}`;

  return {
    baseUrl: `${root}/v1`,
    root,
    requests,
    script(next) {
      requests.length = 0;
      if (Array.isArray(next)) {
        const replies = next;
        handler = (_request, index) => replies[Math.min(index, replies.length - 1)]!;
      } else {
        handler = next;
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A port on 127.0.0.1 where nothing listens (bound, then closed). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
