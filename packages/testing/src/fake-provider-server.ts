import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One request a fake git provider received. */
export interface FakeProviderRequest {
  method: string;
  /** The path with the API prefix taken off (`/user`, `/projects/group%2Fapp`), still percent-encoded. */
  path: string;
  /** The path as it arrived. */
  rawPath: string;
  query: URLSearchParams;
  /** The token of `Authorization: Bearer …` (or `token …`, or GitLab's PRIVATE-TOKEN); null without one. */
  token: string | null;
  /** The parsed JSON body of a POST (GraphQL), else null. */
  body: unknown;
}

export type FakeProviderReply =
  | {
      status: number;
      /** Sent as JSON unless it is a string (sent as text/plain). */
      body?: unknown;
      headers?: Record<string, string>;
      /** Answer only after this long. */
      delayMs?: number;
    }
  /** Never answer (the socket stays open until the client gives up or the server closes). */
  | 'hang';

/** A reply that takes the place of the fake's own answer for the requests it matches. */
export interface FakeProviderInterception {
  match(request: FakeProviderRequest): boolean;
  reply: FakeProviderReply | ((request: FakeProviderRequest) => FakeProviderReply);
  /** How many matching requests it answers (default: all of them). */
  times?: number;
}

export interface FakeProviderServer {
  /** `http://127.0.0.1:<port>` */
  readonly root: string;
  /** `127.0.0.1:<port>`, as a stored token's host names it. */
  readonly host: string;
  /** Every request, in arrival order. */
  readonly requests: FakeProviderRequest[];
  /** Answers the matching requests with `reply` instead (until cleared, or `times` of them). */
  intercept(interception: FakeProviderInterception): void;
  /** Drops the interceptions and the recorded requests. */
  reset(): void;
  close(): Promise<void>;
}

/** Serves a fake's routes: `handle` answers each request after the API prefix is taken off. */
export async function startFakeProviderServer(
  prefixes: readonly string[],
  handle: (request: FakeProviderRequest, root: string) => FakeProviderReply,
): Promise<FakeProviderServer> {
  const requests: FakeProviderRequest[] = [];
  let interceptions: (FakeProviderInterception & { left: number })[] = [];
  const sockets = new Set<Socket>();
  let root = '';

  const server: Server = createServer((req, res) => {
    void readBody(req).then((text) => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const prefix = prefixes.find((p) => url.pathname === p || url.pathname.startsWith(`${p}/`)) ?? '';
      const request: FakeProviderRequest = {
        method: req.method ?? 'GET',
        path: url.pathname.slice(prefix.length) || '/',
        rawPath: url.pathname,
        query: url.searchParams,
        token: tokenOf(req),
        body: parseJson(text),
      };
      requests.push(request);
      const interception = interceptions.find((i) => i.left > 0 && i.match(request));
      if (interception) interception.left -= 1;
      const reply = interception
        ? typeof interception.reply === 'function'
          ? interception.reply(request)
          : interception.reply
        : handle(request, root);
      send(res, reply);
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  root = `http://127.0.0.1:${port}`;

  return {
    root,
    host: `127.0.0.1:${port}`,
    requests,
    intercept: (interception) =>
      interceptions.push({ ...interception, left: interception.times ?? Number.POSITIVE_INFINITY }),
    reset: () => {
      interceptions = [];
      requests.length = 0;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function tokenOf(req: IncomingMessage): string | null {
  const auth = req.headers.authorization ?? '';
  const match = /^(?:Bearer|token)\s+(.+)$/i.exec(auth);
  if (match) return match[1]!.trim();
  const privateToken = req.headers['private-token'];
  return typeof privateToken === 'string' ? privateToken : null;
}

function send(res: ServerResponse, reply: FakeProviderReply): void {
  if (reply === 'hang') return;
  const write = () => {
    if (res.destroyed) return;
    const text =
      typeof reply.body === 'string' ? reply.body : reply.body === undefined ? '' : JSON.stringify(reply.body);
    const type = typeof reply.body === 'string' ? 'text/plain' : 'application/json; charset=utf-8';
    res.writeHead(reply.status, { 'Content-Type': type, ...reply.headers });
    res.end(text);
  };
  if (reply.delayMs) setTimeout(write, reply.delayMs);
  else write();
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function parseJson(text: string): unknown {
  if (text === '') return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}

/** `page`/`per_page` as GitHub and GitLab read them: page from 1, per_page 1–100 (default `perPageDefault`). */
function pageParams(query: URLSearchParams, perPageDefault: number): { page: number; perPage: number } {
  const page = Math.max(1, Number.parseInt(query.get('page') ?? '1', 10) || 1);
  const perPage = Math.min(
    100,
    Math.max(1, Number.parseInt(query.get('per_page') ?? String(perPageDefault), 10) || perPageDefault),
  );
  return { page, perPage };
}

/** A page of `items` and the Link header (next/prev/first/last) pointing back at `url` with other pages. */
export function pageOf<T>(
  items: readonly T[],
  query: URLSearchParams,
  url: string,
  perPageDefault: number,
): { items: T[]; link: string; page: number; perPage: number; pages: number } {
  const { page, perPage } = pageParams(query, perPageDefault);
  const pages = Math.max(1, Math.ceil(items.length / perPage));
  const at = (n: number) => {
    const params = new URLSearchParams(query);
    params.set('page', String(n));
    params.set('per_page', String(perPage));
    return `<${url}?${params.toString()}>`;
  };
  const links = [
    ...(page < pages ? [`${at(page + 1)}; rel="next"`, `${at(pages)}; rel="last"`] : []),
    ...(page > 1 ? [`${at(1)}; rel="first"`, `${at(page - 1)}; rel="prev"`] : []),
  ];
  return { items: items.slice((page - 1) * perPage, page * perPage), link: links.join(', '), page, perPage, pages };
}
