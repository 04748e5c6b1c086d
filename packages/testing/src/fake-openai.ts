import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { isStreamableCompletion, streamCompletion } from './fake-openai-stream.js';

/** The parts of a chat message the tests look at. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content?: string | { type: string; text?: string }[] | null;
  tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

/** A chat-completions request body, as far as the tests read it (everything else is kept too). */
export interface ChatRequestBody extends Record<string, unknown> {
  model?: string;
  messages?: ChatMessage[];
  tools?: { type: string; function: { name: string } }[];
}

/** One request the server received. */
export interface FakeOpenAiRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: ChatRequestBody;
  /** The body as it arrived. */
  text: string;
  /** The script name found in the first user message (`[script:<name>]`); null when there is none. */
  marker: string | null;
  /** Assistant messages already in the request: 0 for the first call of a conversation. */
  turn: number;
  /** Date.now() when it arrived. */
  at: number;
}

export type FakeOpenAiReply =
  | {
      status: number;
      /** JSON, or a string sent as text/html (a proxy's error page). */
      body: unknown;
      headers?: Record<string, string>;
      /** Answer only after this long (a slow model); nothing is sent if the client has gone meanwhile. */
      delayMs?: number;
      /** Streamed (the request asked `stream: true`): a wait before each chunk, instead of the server's `streamPieceDelayMs`. */
      streamPieceDelayMs?: number;
      /** Streamed: the connection drops after this many chunks (a stream that breaks mid-answer; no `[DONE]`). */
      streamDropAfterChunks?: number;
    }
  /** Never answer (the socket stays open until the client gives up or the server closes). */
  | 'hang'
  /** Send the headers and half a body, then drop the connection. */
  | 'drop';

/** Answers every request not claimed by a marker script; `index` counts the requests since the last `script`. */
export type FakeOpenAiHandler = (request: FakeOpenAiRequest, index: number) => FakeOpenAiReply;
/** Answers the requests of one conversation (by its marker), given the turn. */
export type FakeOpenAiScript = (turn: number, request: FakeOpenAiRequest) => FakeOpenAiReply;

export interface FakeOpenAi {
  /** `http://127.0.0.1:<port>/v1`, for `llm_base_url`. */
  baseUrl: string;
  /** `http://127.0.0.1:<port>` */
  root: string;
  /** Every request, in arrival order (empty when started with `keepRequests: false`). */
  readonly requests: FakeOpenAiRequest[];
  /** The requests of one marker script, in arrival order. */
  requestsFor(marker: string): FakeOpenAiRequest[];
  /** Every request (and forgets those seen so far): one handler, or replies used in order, the last one repeating. */
  script(handler: FakeOpenAiHandler | readonly FakeOpenAiReply[]): void;
  /** The conversations whose first user message holds `[script:<marker>]` are answered by this script. */
  script(marker: string, script: FakeOpenAiScript): void;
  close(): Promise<void>;
}

export interface FakeOpenAiOptions {
  /** Keep every request for inspection. Default true; a benchmark sending thousands turns it off. */
  keepRequests?: boolean;
  /** A request with `stream: true` gets its completion in chunks; this long a wait before each one after the first. Default 0. */
  streamPieceDelayMs?: number;
  /**
   * The address it listens on. Default 127.0.0.1; a test whose server runs in a cluster's pod
   * gives the node's address on the pods' bridge (its baseUrl then names that address).
   */
  host?: string;
}

/** The text of a message's content (string or text parts). */
export const textOf = (content: ChatMessage['content']): string =>
  typeof content === 'string' ? content : Array.isArray(content) ? content.map((p) => p.text ?? '').join('') : '';

/** What the marker of a conversation looks like in its first message. */
export const marker = (name: string) => `[script:${name}]`;

const MARKER = /\[script:([A-Za-z0-9_-]+)\]/;

export const toolCall = (id: string, name: string, args: Record<string, unknown>) => ({
  id,
  type: 'function',
  function: { name, arguments: JSON.stringify(args) },
});

/** A chat completion as OpenAI sends it; by default the text "Hello!" with 1,000 prompt and 100 completion tokens. */
export const completion = (
  overrides: {
    content?: string | null;
    tool_calls?: unknown[];
    finish_reason?: string;
    usage?: unknown;
    model?: string;
    id?: string;
  } = {},
) => ({
  id: overrides.id ?? 'chatcmpl-123',
  object: 'chat.completion',
  created: 1_700_000_000,
  model: overrides.model ?? 'gpt-4o-2024-08-06',
  choices: [
    {
      index: 0,
      message: {
        role: 'assistant',
        content: overrides.content === undefined ? 'Hello!' : overrides.content,
        ...(overrides.tool_calls ? { tool_calls: overrides.tool_calls } : {}),
      },
      finish_reason: overrides.finish_reason ?? (overrides.tool_calls ? 'tool_calls' : 'stop'),
    },
  ],
  ...(overrides.usage === null
    ? {}
    : { usage: overrides.usage ?? { prompt_tokens: 1000, completion_tokens: 100, total_tokens: 1100 } }),
});

/** A scripted turn's completion: text or tool calls, a fresh id, usage `prompt_tokens` = 100 + turn and `completion_tokens` = 10. */
export const scriptedCompletion = (turn: number, answer: { content?: string | null; tool_calls?: unknown[] }) =>
  completion({
    id: `chatcmpl-scripted-${turn}-${Math.random().toString(36).slice(2, 10)}`,
    model: 'scripted-model',
    content: answer.content ?? null,
    ...(answer.tool_calls ? { tool_calls: answer.tool_calls } : {}),
    usage: { prompt_tokens: 100 + turn, completion_tokens: 10, total_tokens: 110 + turn },
  });

export const errorBody = (message: string, type: string | null, code: string | null = null) => ({
  error: { message, type, param: null, code },
});

/**
 * A real HTTP server on 127.0.0.1 (or `host`) speaking `POST /v1/chat/completions`, scripted per test: a
 * handler for every request, or a script per conversation (a chat-completions request carries
 * no conversation id, so a conversation is known by the marker in its first user message, and
 * a script is given the turn, so a retried request gets the same answer). A request that no
 * script claims and no handler answers gets 400 saying so, so a test fails loudly.
 *
 * A request with `stream: true` gets a successful chat completion as OpenAI streams one
 * (`chat.completion.chunk` events, text and tool-call arguments in token-like pieces, the usage
 * last with `stream_options.include_usage`, then `data: [DONE]`; see fake-openai-stream.ts);
 * errors, and any other body, are sent as they are. Without it, the completion is one JSON body.
 */
export async function startFakeOpenAi(options: FakeOpenAiOptions = {}): Promise<FakeOpenAi> {
  const state: FakeOpenAiState = {
    requests: [],
    scripts: new Map(),
    handler: null,
    handled: 0,
    keepRequests: options.keepRequests !== false,
    streamPieceDelayMs: options.streamPieceDelayMs ?? 0,
  };
  const server: Server = createServer((req, res) => receive(state, req, res));
  server.keepAliveTimeout = 30_000;
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  const root = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  return {
    baseUrl: `${root}/v1`,
    root,
    requests: state.requests,
    requestsFor: (name) => state.requests.filter((r) => r.marker === name),
    script: (first: ScriptTarget, named?: FakeOpenAiScript) => setScript(state, first, named),
    close: () => closeServer(server),
  };
}

/** What the server keeps between requests: what it saw, and who answers. */
interface FakeOpenAiState {
  /** Every request since the last `script(handler)`, unless `keepRequests` is off. */
  readonly requests: FakeOpenAiRequest[];
  /** The marker scripts, by marker. */
  readonly scripts: Map<string, FakeOpenAiScript>;
  /** Answers what no marker script claims; null: nothing does (400). */
  handler: FakeOpenAiHandler | null;
  /** The requests the handler answered since the last `script(handler)` (its `index`). */
  handled: number;
  readonly keepRequests: boolean;
  /** The wait before each streamed chunk unless a reply says otherwise. */
  readonly streamPieceDelayMs: number;
}

type ScriptTarget = string | FakeOpenAiHandler | readonly FakeOpenAiReply[];

/** `script(marker, script)` adds a marker script; `script(handler)` or `script(replies)` answers every other request and forgets the requests seen so far. */
function setScript(state: FakeOpenAiState, first: ScriptTarget, named?: FakeOpenAiScript): void {
  if (typeof first === 'string') {
    if (!named) throw new Error('script(marker, script) needs the script');
    state.scripts.set(first, named);
    return;
  }
  state.requests.length = 0;
  state.handled = 0;
  if (typeof first === 'function') state.handler = first;
  else {
    const replies = first;
    state.handler = (_request, index) => replies[Math.min(index, replies.length - 1)]!;
  }
}

/** Reads a request's body, then records and answers it. */
function receive(state: FakeOpenAiState, req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const request = toRequest(req, Buffer.concat(chunks).toString('utf8'));
    if (state.keepRequests) state.requests.push(request);
    answer(state, request, (reply) => sendReply(state, res, reply, request.body['stream'] === true ? request : null));
  });
}

/** The request as the tests see it: its body parsed (`{ unparsable }` when it is not JSON), its marker and turn. */
function toRequest(req: IncomingMessage, text: string): FakeOpenAiRequest {
  let body: ChatRequestBody;
  try {
    body = text ? (JSON.parse(text) as ChatRequestBody) : {};
  } catch {
    body = { unparsable: text };
  }
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const firstUser = messages.find((m) => m.role === 'user');
  return {
    method: req.method ?? '',
    path: req.url ?? '',
    headers: req.headers,
    body,
    text,
    marker: firstUser ? (MARKER.exec(textOf(firstUser.content))?.[1] ?? null) : null,
    turn: messages.filter((m) => m.role === 'assistant').length,
    at: Date.now(),
  };
}

/** 404 off the chat-completions route, 400 for a body that is not JSON; else the marker's script, or the handler, or 400 saying there is none (or that the script threw). */
function answer(state: FakeOpenAiState, request: FakeOpenAiRequest, send: (reply: FakeOpenAiReply) => void): void {
  if (request.method !== 'POST' || !request.path.endsWith('/v1/chat/completions')) {
    send({ status: 404, body: errorBody(`no route ${request.method} ${request.path}`, 'invalid_request_error') });
    return;
  }
  if ('unparsable' in request.body) {
    send({ status: 400, body: errorBody('the body is not JSON', 'invalid_request_error') });
    return;
  }
  const name = request.marker;
  const script = name === null ? undefined : state.scripts.get(name);
  try {
    if (script) send(script(request.turn, request));
    else if (state.handler) send(state.handler(request, state.handled++));
    else
      send({
        status: 400,
        body: errorBody(`the fake server has no script ${String(name)}`, 'invalid_request_error'),
      });
  } catch (error) {
    send({
      status: 400,
      body: errorBody(`script ${String(name)} failed: ${String(error)}`, 'invalid_request_error'),
    });
  }
}

/**
 * Sends a reply: nothing for 'hang', half a body and a dropped connection for 'drop', else the
 * status and body after its delay (unless the client has gone): a chat completion streamed when
 * `streamed` (the request that asked for a stream) is given, else as one JSON body.
 */
function sendReply(
  state: FakeOpenAiState,
  res: ServerResponse,
  reply: FakeOpenAiReply,
  streamed: FakeOpenAiRequest | null,
): void {
  if (reply === 'hang') return;
  if (reply === 'drop') {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
    res.write('{"id":"chatcmpl-1","choices":[');
    setTimeout(() => res.destroy(), 20);
    return;
  }
  const write = () => {
    if (res.destroyed || res.writableEnded) return;
    if (streamed && reply.status === 200 && isStreamableCompletion(reply.body)) {
      const streamOptions = streamed.body['stream_options'] as { include_usage?: unknown } | undefined;
      void streamCompletion(res, reply.status, reply.headers, reply.body, {
        includeUsage: streamOptions?.include_usage === true,
        pieceDelayMs: reply.streamPieceDelayMs ?? state.streamPieceDelayMs,
        dropAfterChunks: reply.streamDropAfterChunks,
      });
      return;
    }
    const isText = typeof reply.body === 'string';
    res.writeHead(reply.status, { 'content-type': isText ? 'text/html' : 'application/json', ...reply.headers });
    res.end(isText ? (reply.body as string) : JSON.stringify(reply.body));
  };
  if (reply.delayMs) setTimeout(write, reply.delayMs).unref();
  else write();
}

/** Closes the server and every connection it holds (a hanging request's too). */
function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}
