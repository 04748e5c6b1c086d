/**
 * A scripted OpenAI-compatible chat-completions server for end-to-end tests of the agent.
 *
 * A chat-completions request carries no conversation id, so requests are routed by a marker,
 * `[script:<name>]`, written into the first user message of the conversation. The script of
 * that name answers; it is given the turn: how many assistant messages the request already
 * holds (each earlier model response is one), so answers are deterministic and a retried
 * request gets the same answer again.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The parts of a chat message these tests look at. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content?: string | { type: string; text?: string }[] | null;
  tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

interface ChatRequestBody {
  model?: string;
  messages?: ChatMessage[];
  tools?: { type: string; function: { name: string } }[];
}

/** One request the server received. */
interface ScriptedRequest {
  headers: IncomingHttpHeaders;
  body: ChatRequestBody;
  /** The script name found in the first user message; null when there was none. */
  marker: string | null;
  /** Assistant messages already in the request: 0 for the first call of a conversation. */
  turn: number;
  /** Date.now() when it arrived. */
  at: number;
}

interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  /** Answer only after this long (a slow model); nothing is sent if the client has gone meanwhile. */
  delayMs?: number;
}

type Script = (turn: number, request: ScriptedRequest) => Reply;

export interface FakeOpenAi {
  /** `http://127.0.0.1:<port>/v1`, for `llm_base_url`. */
  baseUrl: string;
  /** Every request, in arrival order. */
  readonly requests: ScriptedRequest[];
  /** The requests of one script, in arrival order. */
  requestsFor(marker: string): ScriptedRequest[];
  /** Registers the script that answers conversations whose first user message holds `[script:<marker>]`. */
  script(marker: string, script: Script): void;
  close(): Promise<void>;
}

/** The text of a message's content (string or text parts). */
export const textOf = (content: ChatMessage['content']): string =>
  typeof content === 'string' ? content : Array.isArray(content) ? content.map((p) => p.text ?? '').join('') : '';

/** What the marker of a conversation looks like in its first message. */
export const marker = (name: string) => `[script:${name}]`;

export const toolCall = (id: string, name: string, args: Record<string, unknown>) => ({
  id,
  type: 'function',
  function: { name, arguments: JSON.stringify(args) },
});

/** A chat completion with either text or tool calls; usage `prompt_tokens` = 100 + turn, `completion_tokens` = 10. */
export const completion = (turn: number, answer: { content?: string | null; tool_calls?: unknown[] }): unknown => ({
  id: `chatcmpl-scripted-${turn}-${Math.random().toString(36).slice(2, 10)}`,
  object: 'chat.completion',
  created: Math.floor(Date.now() / 1000),
  model: 'scripted-model',
  choices: [
    {
      index: 0,
      message: { role: 'assistant', content: answer.content ?? null, ...(answer.tool_calls ? { tool_calls: answer.tool_calls } : {}) },
      finish_reason: answer.tool_calls ? 'tool_calls' : 'stop',
    },
  ],
  usage: { prompt_tokens: 100 + turn, completion_tokens: 10, total_tokens: 110 + turn },
});

export const errorBody = (message: string, type: string, code: string | null = null) => ({ error: { message, type, param: null, code } });

const MARKER = /\[script:([A-Za-z0-9_-]+)\]/;

/** Starts the server on 127.0.0.1 (a free port). An unknown marker is answered with 400, so a test fails loudly. */
export async function startFakeOpenAi(): Promise<FakeOpenAi> {
  const requests: ScriptedRequest[] = [];
  const scripts = new Map<string, Script>();

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const send = (reply: Reply) => {
        const write = () => {
          if (res.destroyed || res.writableEnded) return;
          res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
          res.end(JSON.stringify(reply.body));
        };
        if (reply.delayMs) setTimeout(write, reply.delayMs).unref();
        else write();
      };
      if (req.method !== 'POST' || !req.url?.endsWith('/v1/chat/completions')) {
        send({ status: 404, body: errorBody(`no route ${req.method} ${req.url}`, 'invalid_request_error') });
        return;
      }
      let body: ChatRequestBody;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatRequestBody;
      } catch {
        send({ status: 400, body: errorBody('the body is not JSON', 'invalid_request_error') });
        return;
      }
      const messages = body.messages ?? [];
      const firstUser = messages.find((m) => m.role === 'user');
      const name = firstUser ? (MARKER.exec(textOf(firstUser.content))?.[1] ?? null) : null;
      const request: ScriptedRequest = {
        headers: req.headers,
        body,
        marker: name,
        turn: messages.filter((m) => m.role === 'assistant').length,
        at: Date.now(),
      };
      requests.push(request);
      const script = name === null ? undefined : scripts.get(name);
      if (!script) {
        send({ status: 400, body: errorBody(`the fake server has no script ${String(name)}`, 'invalid_request_error') });
        return;
      }
      try {
        send(script(request.turn, request));
      } catch (error) {
        send({ status: 400, body: errorBody(`script ${name} failed: ${String(error)}`, 'invalid_request_error') });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    requestsFor: (name) => requests.filter((r) => r.marker === name),
    script: (name, script) => void scripts.set(name, script),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
