/**
 * Sandboxes' exposed URLs on loopback ports (router option `loopbackSandboxPorts`): a client on
 * loopback is given `http://127.0.0.1:<port>`, which resolves with any resolver, served by the
 * same proxy as the host name (`agent-server-<id>.localhost`), authenticated the same way, with
 * every cookie dropped. Real HTTP and WebSockets against a small server standing in for the
 * agent-server; requests go to the URLs as given (nothing here resolves `*.localhost`, and
 * nothing needs to).
 */
import { once } from 'node:events';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { ok } from 'neverthrow';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { KEY_A, KEY_B, startHarness, type Harness, type HarnessOptions } from './harness.js';

let upstream: Server;
let upstreamUrl: string;
let upstreamSockets = 0;
/** Every harness a test started, closed after it however it went. */
const harnesses: Harness[] = [];

const COOKIES = ['acs_session=planted; Path=/; HttpOnly', 'theme=dark; Domain=127.0.0.1; Path=/'];

beforeAll(async () => {
  upstream = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      res.setHeader('Content-Type', 'application/json');
      if (req.url === '/set-cookies') res.setHeader('Set-Cookie', COOKIES);
      res.end(JSON.stringify(req.url === '/health' ? { status: 'ok' } : { url: req.url, headers: req.headers, body }));
    });
  });
  const sockets = new WebSocketServer({ server: upstream });
  sockets.on('headers', (headers, req) => {
    if (req.url?.startsWith('/sockets/set-cookies')) headers.push(`Set-Cookie: ${COOKIES[0]}`);
  });
  sockets.on('connection', (socket, req) => {
    upstreamSockets += 1;
    socket.send(JSON.stringify({ url: req.url, headers: req.headers }));
    socket.on('message', (data: Buffer) => socket.send(`echo:${data.toString()}`));
  });
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
});

afterAll(async () => {
  upstream.closeAllConnections();
  await new Promise((resolve) => upstream.close(resolve));
});

afterEach(async () => {
  for (const harness of harnesses.splice(0)) await harness.close();
});

async function start(router: HarnessOptions['router'] = { loopbackSandboxPorts: true }, realtime = true) {
  const harness = await startHarness({
    realtime,
    router,
    ports: {
      specs: [
        {
          id: 'openhands-agent-server',
          image: 'acs-openhands-agent-server:1.34.0',
          working_dir: '/workspace',
          exposed_ports: [{ name: 'AGENT_SERVER', port: 8000, health_path: '/health' }],
          session_api_key_variable: 'OH_SESSION_API_KEYS_0',
        },
      ],
      runtime: { portUrl: () => upstreamUrl },
    },
  });
  harnesses.push(harness);
  return harness;
}

/** Closes a harness before the test ends (it is not closed again). */
async function closeNow(harness: Harness): Promise<void> {
  harnesses.splice(harnesses.indexOf(harness), 1);
  await harness.close();
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

/** A plain HTTP request (node:http, so the Host header can be anything). */
function send(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? 'GET', headers: options.headers ?? {} }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
        }),
      );
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** Alice's new sandbox, RUNNING; its key and its URL as a client reaching the server with `host` is given it. */
async function runningSandbox(harness: Harness, host?: string): Promise<{ id: string; key: string; url: string }> {
  const started = await harness.call('POST', '/api/v1/sandboxes');
  expect(started.status).toBe(200);
  const { id } = started.body as { id: string };
  await harness.idle();
  return { id, ...(await sandboxUrl(harness, id, host)) };
}

async function sandboxUrl(harness: Harness, id: string, host?: string): Promise<{ key: string; url: string }> {
  const listed = await send(`${harness.baseUrl}/api/v1/sandboxes/${id}`, {
    headers: { 'X-Session-API-Key': KEY_A, ...(host ? { host } : {}) },
  });
  expect(listed.status).toBe(200);
  const info = listed.body as { session_api_key: string; exposed_urls: { name: string; url: string }[] };
  return { key: info.session_api_key, url: info.exposed_urls[0]?.url ?? '' };
}

/** Whether something listens at a URL's address and port (a TCP connection is taken or refused). */
function listening(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', (error: NodeJS.ErrnoException) =>
      error.code === 'ECONNREFUSED' ? resolve(false) : reject(error),
    );
  });
}

/** Waits (60 s at most) until nothing listens at `url`. */
async function untilClosed(url: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (await listening(url)) {
    if (Date.now() > deadline) throw new Error(`${url} is still listening after 60 s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** An open WebSocket whose messages are kept from the start (the first may come with the handshake). */
interface Opened {
  socket: WebSocket;
  next(): Promise<string>;
}

/** Opens a WebSocket; resolves once open, or with the refusal's status. */
function openSocket(url: string, headers: Record<string, string> = {}): Promise<Opened | number> {
  const socket = new WebSocket(url, { headers });
  socket.on('error', () => {});
  const received: string[] = [];
  const waiting: ((text: string) => void)[] = [];
  socket.on('message', (data: Buffer) => {
    const text = data.toString();
    const taker = waiting.shift();
    if (taker) taker(text);
    else received.push(text);
  });
  const next = () => {
    const text = received.shift();
    return text !== undefined ? Promise.resolve(text) : new Promise<string>((resolve) => waiting.push(resolve));
  };
  return new Promise((resolve) => {
    socket.once('open', () => resolve({ socket, next }));
    socket.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      socket.terminate();
    });
  });
}

/** Opens a WebSocket that must open. */
async function mustOpen(url: string): Promise<Opened> {
  const opened = await openSocket(url);
  if (typeof opened === 'number') throw new Error(`refused with ${opened}`);
  return opened;
}

const wsOf = (url: string) => url.replace(/^http/, 'ws');
const PORT_URL = /^http:\/\/127\.0\.0\.1:(\d+)$/;

describe('the exposed URL a client is given', () => {
  it('is a loopback port of its own on a loopback origin, the same one each time and for Host localhost', async () => {
    const harness = await start();
    const { id, url } = await runningSandbox(harness);
    const port = PORT_URL.exec(url)?.[1];
    expect(port, url).toBeDefined();
    expect(port).not.toBe(new URL(harness.baseUrl).port);
    expect((await sandboxUrl(harness, id)).url).toBe(url);
    // The client reached 127.0.0.1 by the name localhost: its URL names the address (which resolves everywhere).
    expect((await sandboxUrl(harness, id, `localhost:${new URL(harness.baseUrl).port}`)).url).toBe(url);
    const listed = await harness.call('GET', '/api/v1/sandboxes/search');
    expect((listed.body as { items: { exposed_urls: { url: string }[] }[] }).items[0]?.exposed_urls[0]?.url).toBe(url);
  });

  it('is a host name for a client that reached another host, and with sandboxUrlHost', async () => {
    const harness = await start();
    const { id, url } = await runningSandbox(harness, 'acs.example.com');
    expect(url).toBe(`http://agent-server-${id}.acs.example.com`);

    const withBase = await start({ loopbackSandboxPorts: true, sandboxUrlHost: 'sandboxes.example.com' });
    const second = await runningSandbox(withBase);
    expect(second.url).toBe(`http://agent-server-${second.id}.sandboxes.example.com`);
  });

  it('is a host name without the option (the default)', async () => {
    const harness = await start({});
    const { id, url } = await runningSandbox(harness);
    expect(url).toBe(`http://agent-server-${id}.localhost:${new URL(harness.baseUrl).port}`);
  });
});

describe('a loopback port', () => {
  it('serves its sandbox with the sandbox key or the owner’s key, /health without, and no one else', async () => {
    const harness = await start();
    const { key, url } = await runningSandbox(harness);
    expect(await send(`${url}/health`)).toMatchObject({ status: 200, body: { status: 'ok' } });
    expect((await send(`${url}/api/conversations/search`)).status).toBe(401);
    expect((await send(`${url}/api/conversations/search`, { headers: { 'X-Session-API-Key': KEY_B } })).status).toBe(
      404,
    );
    const keyed = await send(`${url}/api/conversations/search?limit=5`, { headers: { 'X-Session-API-Key': key } });
    expect(keyed.status).toBe(200);
    expect(keyed.body.url).toBe('/api/conversations/search?limit=5');
    expect((keyed.body.headers as IncomingHttpHeaders)['x-session-api-key']).toBe(key);

    const asOwner = await send(`${url}/api/conversations`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${KEY_A}`, Cookie: 'a=b', 'Content-Type': 'application/json' },
      body: '{"x":1}',
    });
    expect(asOwner.status).toBe(200);
    const sent = asOwner.body.headers as IncomingHttpHeaders;
    expect(sent['x-session-api-key']).toBe(key);
    expect(sent.authorization).toBeUndefined();
    expect(sent.cookie).toBeUndefined();
    expect(asOwner.body.body).toBe('{"x":1}');
  });

  it('takes the owner’s browser session (the console’s cookie reaches the port: same host), not from another site', async () => {
    const harness = await start();
    const { key, url } = await runningSandbox(harness);
    const signedIn = await send(`${harness.baseUrl}/?key=${KEY_A}`, {
      headers: { 'Sec-Fetch-Site': 'none', 'Sec-Fetch-Mode': 'navigate' },
    });
    const cookie = (signedIn.headers['set-cookie'] ?? [])[0]?.split(';')[0] ?? '';
    expect(cookie).toMatch(/^acs_session=/);
    const read = await send(`${url}/api/conversations/search`, { headers: { cookie } });
    expect(read.status).toBe(200);
    expect((read.body.headers as IncomingHttpHeaders)['x-session-api-key']).toBe(key);
    expect((read.body.headers as IncomingHttpHeaders).cookie).toBeUndefined();
    const forged = await send(`${url}/api/conversations`, {
      method: 'POST',
      headers: { cookie, Origin: 'http://evil.example', 'Content-Type': 'application/json' },
      body: '{}',
    });
    expect(forged.status).toBe(401);
  });

  it('serves only its own sandbox, whatever Host a request names', async () => {
    const harness = await start();
    const first = await runningSandbox(harness);
    const second = await runningSandbox(harness);
    const port = new URL(first.url).port;
    // The second sandbox's host name, sent to the first one's port: still the first sandbox, so its key is wrong.
    const crossed = await send(`${first.url}/api/conversations/search`, {
      headers: { host: `agent-server-${second.id}.localhost:${port}`, 'X-Session-API-Key': second.key },
    });
    expect(crossed.status).toBe(401);
    // The router's own routes are not there: every path is the sandbox's.
    const own = await send(`${first.url}/api/v1/sandboxes`, { headers: { 'X-Session-API-Key': KEY_A } });
    expect(own).toMatchObject({ status: 200, body: { url: '/api/v1/sandboxes' } });
  });

  it('takes a keyless WebSocket that authenticates with its first frame, and one with the key in its URL', async () => {
    const harness = await start();
    const { key, url } = await runningSandbox(harness);
    const before = upstreamSockets;
    const keyless = await mustOpen(`${wsOf(url)}/sockets/events/abc?resend_all=true`);
    keyless.socket.send(JSON.stringify({ type: 'auth', session_api_key: key }));
    const seen = JSON.parse(await keyless.next()) as { url: string; headers: IncomingHttpHeaders };
    expect(seen.url).toBe('/sockets/events/abc?resend_all=true');
    expect(seen.headers['x-session-api-key']).toBe(key);
    keyless.socket.send('hello');
    expect(await keyless.next()).toBe('echo:hello');
    keyless.socket.close();

    const wrong = await mustOpen(`${wsOf(url)}/sockets/events/abc`);
    const closed = once(wrong.socket, 'close');
    wrong.socket.send(JSON.stringify({ type: 'auth', session_api_key: 'not-the-key' }));
    expect((await closed)[0]).toBe(4001);
    expect(upstreamSockets).toBe(before + 1);

    const keyed = await mustOpen(`${wsOf(url)}/sockets/events/abc?session_api_key=${encodeURIComponent(key)}`);
    expect((JSON.parse(await keyed.next()) as { url: string }).url).toBe('/sockets/events/abc');
    keyed.socket.close();
  });

  it('holds keyless WebSockets to the per-address limit of unauthenticated connections', async () => {
    const harness = await start({ loopbackSandboxPorts: true, liveChannels: { maxUnauthenticatedPerAddress: 1 } });
    const { url } = await runningSandbox(harness);
    const waiting = await mustOpen(`${wsOf(url)}/sockets/events/abc`);
    expect(await openSocket(`${wsOf(url)}/sockets/events/abc`)).toBe(429);
    waiting.socket.terminate();
  });

  it('drops every cookie its sandbox sets, on requests and WebSocket upgrades', async () => {
    const harness = await start();
    const { key, url } = await runningSandbox(harness);
    const answer = await send(`${url}/set-cookies`, { headers: { 'X-Session-API-Key': key } });
    expect(answer.status).toBe(200);
    expect(answer.headers['set-cookie']).toBeUndefined();

    const socket = new WebSocket(`${wsOf(url)}/sockets/set-cookies?session_api_key=${encodeURIComponent(key)}`);
    socket.on('error', () => {});
    const [upgrade] = (await once(socket, 'upgrade')) as [{ headers: IncomingHttpHeaders }];
    expect(upgrade.headers['set-cookie']).toBeUndefined();
    socket.terminate();

    // The host name of the same sandbox keeps its cookies, host-only.
    const { id } = await runningSandbox(harness);
    const viaName = await send(`${harness.baseUrl}/set-cookies`, {
      headers: { host: `agent-server-${id}.localhost`, 'X-Session-API-Key': KEY_A },
    });
    expect(viaName.headers['set-cookie']).toEqual(['acs_session=planted; Path=/; HttpOnly', 'theme=dark; Path=/']);
  });

  it('closes when its sandbox is deleted, ending the WebSockets through it', async () => {
    const harness = await start();
    const { id, key, url } = await runningSandbox(harness);
    const opened = await mustOpen(`${wsOf(url)}/sockets/events/abc?session_api_key=${encodeURIComponent(key)}`);
    await opened.next();
    const ended = once(opened.socket, 'close');
    expect(await listening(url)).toBe(true);
    expect((await harness.call('DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
    expect(await listening(url)).toBe(false);
    await ended;
  });

  it('closes when its sandbox is found gone: deleted elsewhere (the periodic check) or by a request', async () => {
    const harness = await start({ loopbackSandboxPorts: { checkIntervalMs: 20 } });
    const { id, url } = await runningSandbox(harness);
    // Another replica deleted it: only the shared record says so.
    await harness.ports.sandboxes.update('alice', id, (r) => ok({ ...r, status: 'DELETED', exposed_urls: [] }));
    await untilClosed(url);

    const other = await start({ loopbackSandboxPorts: { checkIntervalMs: 3_600_000 } });
    const second = await runningSandbox(other);
    await other.ports.sandboxes.update('alice', second.id, (r) => ok({ ...r, status: 'DELETED', exposed_urls: [] }));
    expect((await send(`${second.url}/health`)).status).toBe(404);
    expect(await listening(second.url)).toBe(false);
  });

  it('closes with the router: attach’s close(), or shutdownSignal without attach', async () => {
    const harness = await start();
    const { url } = await runningSandbox(harness);
    expect(await listening(url)).toBe(true);
    await closeNow(harness);
    expect(await listening(url)).toBe(false);

    const shutdown = new AbortController();
    const detached = await start({ loopbackSandboxPorts: true, shutdownSignal: shutdown.signal }, false);
    const second = await runningSandbox(detached);
    expect(await listening(second.url)).toBe(true);
    shutdown.abort();
    expect(await listening(second.url)).toBe(false);
  });

  it('falls back to host names past maxPorts, warning once, and opens again once a port is free', async () => {
    const harness = await start({ loopbackSandboxPorts: { maxPorts: 1 } });
    const first = await runningSandbox(harness);
    expect(first.url).toMatch(PORT_URL);
    const second = await runningSandbox(harness);
    const named = `http://agent-server-${second.id}.localhost:${new URL(harness.baseUrl).port}`;
    expect(second.url).toBe(named);
    expect((await sandboxUrl(harness, second.id)).url).toBe(named);
    const warnings = harness.logger.lines.filter((line) => line.includes('every loopback port for sandbox URLs'));
    expect(warnings).toHaveLength(1);
    // The host name still serves it.
    expect((await send(`${harness.baseUrl}/health`, { headers: { host: new URL(named).host } })).body).toEqual({
      status: 'ok',
    });

    expect((await harness.call('DELETE', `/api/v1/sandboxes?sandbox_id=${first.id}`)).status).toBe(200);
    expect((await sandboxUrl(harness, second.id)).url).toMatch(PORT_URL);
  });
});
