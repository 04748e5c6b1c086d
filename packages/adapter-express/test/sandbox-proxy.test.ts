/**
 * A sandbox's exposed URL (the OpenHands agent-server of the openhands-agent-server spec) served
 * through the router: its shape in the 1.11 sandbox routes, the key it is opened with, the
 * requests its server gets (its own key, never the caller's), WebSockets, pause, delete, and
 * another user kept out. A small HTTP and WebSocket server stands in for the agent-server.
 */
import { once } from 'node:events';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ok } from 'neverthrow';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { KEY_A, KEY_B, obj, startHarness, type Harness } from './harness.js';
import { expectOpenHandsShape } from './openhands-shapes.js';

/** What the stand-in agent-server saw of a request. */
interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** Cookies a sandbox's server sets with Domain attributes (two in one cookie: a browser takes the last). */
const TOSSED_COOKIES = [
  'acs_session=planted; Domain=localhost; Path=/; HttpOnly',
  'theme=dark; Domain=.example.com; Path=/; domain=localhost',
  'plain=1; Path=/',
];

let upstream: Server;
let upstreamUrl: string;
/** WebSockets the stand-in agent-server was opened with. */
let upstreamSockets = 0;
let h: Harness;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      res.setHeader('Content-Type', 'application/json');
      // A page in the sandbox that tries to set cookies for the service's domain (and every sandbox's).
      if (req.url === '/set-cookies') res.setHeader('Set-Cookie', TOSSED_COOKIES);
      res.end(
        JSON.stringify(
          req.url === '/health'
            ? { status: 'ok' }
            : ({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body } satisfies Seen),
        ),
      );
    });
  });
  const sockets = new WebSocketServer({ server: upstream });
  sockets.on('headers', (headers, req) => {
    if (req.url?.startsWith('/sockets/set-cookies')) headers.push(`Set-Cookie: ${TOSSED_COOKIES[0]}`);
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

beforeEach(async () => {
  h = await startHarness({
    realtime: true,
    ports: {
      specs: [
        { id: 'bookworm', image: 'acs-sandbox:bookworm', working_dir: '/workspace' },
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
    service: { standaloneSpecId: 'openhands-agent-server' },
  });
});

afterEach(async () => {
  await h.close();
});

/** A request to the router with the Host of a sandbox's URL (this machine resolves no `*.localhost`). */
function viaHost(
  url: string,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const { host } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      `${h.baseUrl}${path}`,
      { method: options.method ?? 'GET', headers: { ...options.headers, host } },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} }),
        );
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** Opens a WebSocket to a sandbox's URL; resolves with its first message, or the handshake's refusal. */
function socketVia(
  url: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ opened: true; first: Record<string, unknown>; socket: WebSocket } | { opened: false; status: number }> {
  const { host } = new URL(url);
  const socket = new WebSocket(`${h.baseUrl.replace('http://', 'ws://')}${path}`, { headers: { ...headers, host } });
  return new Promise((resolve, reject) => {
    socket.once('message', (data: Buffer) =>
      resolve({ opened: true, first: JSON.parse(data.toString()) as Record<string, unknown>, socket }),
    );
    socket.once('unexpected-response', (_req, res) => {
      resolve({ opened: false, status: res.statusCode ?? 0 });
      socket.terminate();
    });
    socket.once('error', reject);
  });
}

/** Opens a WebSocket to a sandbox's URL with no key at all; resolves once it is open. */
async function keylessVia(url: string, path: string): Promise<{ socket: WebSocket }> {
  const { host } = new URL(url);
  const socket = new WebSocket(`${h.baseUrl.replace('http://', 'ws://')}${path}`, { headers: { host } });
  socket.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('unexpected-response', (_req, res) => reject(new Error(`refused with ${res.statusCode}`)));
  });
  return { socket };
}

/** Starts alice's sandbox with no spec named (the standalone spec), and waits until it is RUNNING. */
async function runningSandbox(): Promise<{ id: string; key: string; url: string; info: Record<string, unknown> }> {
  const started = await h.call('POST', '/api/v1/sandboxes', {
    key: null,
    headers: { Authorization: `Bearer ${KEY_A}` },
  });
  expect(started.status).toBe(200);
  expectOpenHandsShape('SandboxInfo', started.body);
  const { id } = obj(started.body) as { id: string };
  await h.idle();
  const listed = await h.call('GET', `/api/v1/sandboxes?id=${id}`);
  const [info] = listed.body as Record<string, unknown>[];
  if (!info) throw new Error('the sandbox is not listed');
  const { session_api_key: key, exposed_urls: urls } = info as {
    session_api_key: string;
    exposed_urls: { url: string }[];
  };
  return { id, key, url: urls[0]?.url ?? '', info };
}

describe('the openhands-agent-server spec through the 1.11 sandbox routes', () => {
  it('starts it when no spec is named, with a fresh key in the container and its AGENT_SERVER URL on this server', async () => {
    const { id, key, url, info } = await runningSandbox();
    expectOpenHandsShape('SandboxInfo', info);
    const port = new URL(h.baseUrl).port;
    expect(info).toMatchObject({ sandbox_spec_id: 'openhands-agent-server', status: 'RUNNING' });
    expect(key).toMatch(/^acss_[A-Za-z0-9_-]{43}$/);
    expect(info.exposed_urls).toEqual([
      { name: 'AGENT_SERVER', url: `http://agent-server-${id}.localhost:${port}`, port: 8000 },
    ]);
    expect(h.ports.runtime.peek(id)?.request.env).toEqual({ OH_SESSION_API_KEYS_0: key });
    expect(url).not.toContain(upstreamUrl);

    const page = await h.call('GET', '/api/v1/sandboxes/search');
    expectOpenHandsShape('SandboxPage', page.body);
    const second = await runningSandbox();
    expect(second.key).not.toBe(key);
  });

  it('keeps a sandbox key and URLs out of a sandbox that is not running', async () => {
    const { id } = await runningSandbox();
    expect((await h.call('POST', `/api/v1/sandboxes/${id}/pause`)).status).toBe(200);
    const [paused] = (await h.call('GET', `/api/v1/sandboxes?id=${id}`)).body as Record<string, unknown>[];
    expectOpenHandsShape('SandboxInfo', paused);
    expect(paused).toMatchObject({ status: 'PAUSED', session_api_key: null, exposed_urls: null });
  });

  it('deletes by the query parameter OpenHands clients send, for the owner only', async () => {
    const { id, url } = await runningSandbox();
    expect((await h.call('DELETE', `/api/v1/sandboxes?sandbox_id=${id}`, { key: KEY_B })).status).toBe(404);
    const deleted = await h.call('DELETE', `/api/v1/sandboxes?sandbox_id=${id}`, {
      key: null,
      headers: { Authorization: `Bearer ${KEY_A}` },
    });
    expect(deleted.status).toBe(200);
    expectOpenHandsShape('Success', deleted.body);
    expect((await h.call('GET', `/api/v1/sandboxes?id=${id}`)).body).toEqual([null]);
    expect((await viaHost(url, '/health')).status).toBe(404);
    expect((await h.call('DELETE', '/api/v1/sandboxes')).status).toBe(422);
  });
});

describe('the proxy of a sandbox exposed URL', () => {
  it('answers /health with no key, and anything else only with the sandbox key or the owner', async () => {
    const { key, url } = await runningSandbox();
    expect(await viaHost(url, '/health')).toEqual({ status: 200, body: { status: 'ok' } });
    expect((await viaHost(url, '/api/conversations/search')).status).toBe(401);
    expect(
      (
        await viaHost(url, '/api/conversations/search', {
          headers: { 'X-Session-API-Key': 'acss_not-this-sandbox-key-0000000000000000000000' },
        })
      ).status,
    ).toBe(401);

    const withKey = await viaHost(url, '/api/conversations/search?limit=5', { headers: { 'X-Session-API-Key': key } });
    expect(withKey.status).toBe(200);
    expect(withKey.body).toMatchObject({ method: 'GET', url: '/api/conversations/search?limit=5' });
    expect((withKey.body.headers as IncomingHttpHeaders)['x-session-api-key']).toBe(key);

    // The owner's API key opens it too; the agent-server gets the sandbox key, never the API key or a cookie.
    const asOwner = await viaHost(url, '/api/conversations', {
      method: 'POST',
      headers: { Authorization: `Bearer ${KEY_A}`, Cookie: 'a=b', 'Content-Type': 'application/json' },
      body: '{"x":1}',
    });
    expect(asOwner.status).toBe(200);
    expect(asOwner.body).toMatchObject({ method: 'POST', url: '/api/conversations', body: '{"x":1}' });
    const sent = asOwner.body.headers as IncomingHttpHeaders;
    expect(sent['x-session-api-key']).toBe(key);
    expect(sent.authorization).toBeUndefined();
    expect(sent.cookie).toBeUndefined();
  });

  it('keeps bob out of alice’s sandbox, with his API key or a key in the socket URL', async () => {
    const { id, url } = await runningSandbox();
    expect(
      (await viaHost(url, '/api/conversations/search', { headers: { Authorization: `Bearer ${KEY_B}` } })).status,
    ).toBe(404);
    expect((await viaHost(url, '/api/conversations/search', { headers: { 'X-Session-API-Key': KEY_B } })).status).toBe(
      404,
    );
    expect(await socketVia(url, `/sockets/events/${id}?session_api_key=${KEY_B}`)).toEqual({
      opened: false,
      status: 401,
    });
    expect(await socketVia(url, `/sockets/events/${id}`, { 'X-Session-API-Key': KEY_B })).toEqual({
      opened: false,
      status: 404,
    });
  });

  it('proxies WebSockets opened with the sandbox key in the query, giving the agent-server its key in a header', async () => {
    const { key, url } = await runningSandbox();
    const opened = await socketVia(
      url,
      `/sockets/events/abc?resend_all=true&session_api_key=${encodeURIComponent(key)}`,
    );
    if (!opened.opened) throw new Error(`refused with ${opened.status}`);
    expect(opened.first.url).toBe('/sockets/events/abc?resend_all=true');
    expect((opened.first.headers as IncomingHttpHeaders)['x-session-api-key']).toBe(key);
    const echoed = once(opened.socket, 'message');
    opened.socket.send('hello');
    expect(String((await echoed)[0])).toBe('echo:hello');
    opened.socket.close();
  });

  it('takes a WebSocket opened with no key (SDK 1.58) only once its first frame holds the sandbox key, then relays it with the key in a header', async () => {
    const { key, url } = await runningSandbox();
    const before = upstreamSockets;
    const keyless = await keylessVia(url, '/sockets/events/abc?resend_all=true');
    keyless.socket.send(JSON.stringify({ type: 'auth', session_api_key: key }));
    const first = JSON.parse(String((await once(keyless.socket, 'message'))[0])) as Record<string, unknown>;
    expect(first.url).toBe('/sockets/events/abc?resend_all=true');
    expect((first.headers as IncomingHttpHeaders)['x-session-api-key']).toBe(key);
    // The authentication frame was this side's: the agent-server gets the frames after it, text and binary as sent.
    const echoed = once(keyless.socket, 'message');
    keyless.socket.send('hello');
    expect(String((await echoed)[0])).toBe('echo:hello');
    expect(upstreamSockets).toBe(before + 1);
    const closed = once(keyless.socket, 'close');
    keyless.socket.close(4000, 'bye');
    await closed;
  });

  it('passes a sandbox’s cookies on only as host-only cookies of its own host name, on requests and WebSocket upgrades', async () => {
    const { key, url } = await runningSandbox();
    const { host } = new URL(url);
    const answer = await new Promise<IncomingHttpHeaders>((resolve, reject) => {
      const req = request(`${h.baseUrl}/set-cookies`, { headers: { host, 'X-Session-API-Key': key } }, (res) => {
        res.resume();
        resolve(res.headers);
      });
      req.on('error', reject);
      req.end();
    });
    expect(answer['set-cookie']).toEqual([
      'acs_session=planted; Path=/; HttpOnly',
      'theme=dark; Path=/',
      'plain=1; Path=/',
    ]);

    const socket = new WebSocket(
      `${h.baseUrl.replace('http://', 'ws://')}/sockets/set-cookies?session_api_key=${key}`,
      {
        headers: { host },
      },
    );
    socket.on('error', () => {});
    const [upgrade] = (await once(socket, 'upgrade')) as [{ headers: IncomingHttpHeaders }];
    expect(upgrade.headers['set-cookie']).toEqual(['acs_session=planted; Path=/; HttpOnly']);
    socket.terminate();
  });

  it('closes a keyless WebSocket whose first frame does not authenticate, and the sandbox never hears of it', async () => {
    const { url } = await runningSandbox();
    const before = upstreamSockets;
    const wrongKey = await keylessVia(url, '/sockets/events/abc');
    wrongKey.socket.send(JSON.stringify({ type: 'auth', session_api_key: 'not-the-key' }));
    expect((await once(wrongKey.socket, 'close'))[0]).toBe(4001);
    const talker = await keylessVia(url, '/sockets/events/abc');
    talker.socket.send(JSON.stringify({ role: 'user', content: [{ type: 'text', text: 'hi' }] }));
    expect((await once(talker.socket, 'close'))[0]).toBe(4001);
    expect(upstreamSockets).toBe(before);
  });

  it('answers 503 at once while the sandbox is paused, and goes through again once it is resumed', async () => {
    const { id, key, url } = await runningSandbox();
    await h.call('POST', `/api/v1/sandboxes/${id}/pause`);
    const paused = await viaHost(url, '/health');
    expect(paused.status).toBe(503);
    expect(paused.body).toMatchObject({ code: 'SANDBOX_PAUSED' });
    expect(await socketVia(url, `/sockets/events/abc?session_api_key=${encodeURIComponent(key)}`)).toEqual({
      opened: false,
      status: 503,
    });
    await h.call('POST', `/api/v1/sandboxes/${id}/resume`);
    await h.idle();
    expect((await viaHost(url, '/health')).status).toBe(200);
  });

  it('counts requests through it as use of the sandbox, so idle pausing leaves a sandbox in use alone', async () => {
    await h.close();
    h = await startHarness({
      clock: 'manual',
      ports: {
        specs: [
          {
            id: 'agent',
            image: 'x',
            working_dir: '/workspace',
            exposed_ports: [{ name: 'AGENT_SERVER', port: 8000 }],
            session_api_key_variable: 'OH_SESSION_API_KEYS_0',
          },
        ],
        runtime: { portUrl: () => upstreamUrl },
      },
      service: { idlePauseAfterMs: 60_000, maintenanceIntervalMs: 3_600_000, reconcileIntervalMs: 0 },
    });
    const clock = h.clock as typeof h.clock & { advance(ms: number): void };
    const { id, key, url } = await runningSandbox();
    clock.advance(50_000);
    expect((await viaHost(url, '/api/conversations/search', { headers: { 'X-Session-API-Key': key } })).status).toBe(
      200,
    );
    clock.advance(50_000);
    expect(await h.service.sandboxes.pauseIdle()).toBe(0);
    clock.advance(20_000);
    expect(await h.service.sandboxes.pauseIdle()).toBe(1);
    expect(((await h.call('GET', `/api/v1/sandboxes?id=${id}`)).body as { status: string }[])[0]?.status).toBe(
      'PAUSED',
    );
  });

  it('says which sandbox did not answer when its server is down', async () => {
    const { id, key, url } = await runningSandbox();
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const deadUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));
    await h.ports.sandboxes.update('alice', id, (r) =>
      ok({ ...r, exposed_urls: [{ name: 'AGENT_SERVER', url: deadUrl, port: 8000 }] }),
    );
    const answer = await viaHost(url, '/api/conversations/search', { headers: { 'X-Session-API-Key': key } });
    expect(answer.status).toBe(502);
    expect(answer.body).toMatchObject({ code: 'SANDBOX_UNREACHABLE' });
  });
});
