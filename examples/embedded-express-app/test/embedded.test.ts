import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHostApp } from '../src/app.js';

let server: Server;
let base: string;
const host = createHostApp();

beforeAll(async () => {
  server = host.app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.close();
  await host.service.close();
});

const as =
  (token: string | null) =>
  (path: string, init: RequestInit = {}) =>
    fetch(base + path, {
      ...init,
      headers: {
        ...(token ? { Authorization: `Bearer ${token}` } : {}),
        'Content-Type': 'application/json',
        ...init.headers,
      },
    });

describe('embedding the router in an existing Express app', () => {
  it('leaves the host routes alone', async () => {
    const res = await fetch(`${base}/`);
    expect(await res.json()).toEqual({ app: 'host', agents: '/agents/api/openapi.json' });
  });

  it('uses the host authenticate hook under the mount prefix', async () => {
    expect((await as(null)('/agents/api/settings')).status).toBe(401);
    expect((await as('forged')('/agents/api/settings')).status).toBe(401);
    const res = await as('alice-session-token')('/agents/api/settings');
    expect(res.status).toBe(404);
    expect(((await res.json()) as { code: string }).code).toBe('SETTINGS_NOT_FOUND');
    expect((await fetch(`${base}/agents/alive`)).status).toBe(200);
  });

  it('scopes data to the user the host authenticated', async () => {
    const alice = as('alice-session-token');
    const bob = as('bob-session-token');
    const stored = await alice('/agents/api/settings', { method: 'POST', body: JSON.stringify({ language: 'fr' }) });
    expect(stored.status).toBe(200);
    expect(((await (await alice('/agents/api/settings')).json()) as { language: string }).language).toBe('fr');
    expect((await bob('/agents/api/settings')).status).toBe(404);
  });

  it('answers unknown routes under the prefix with the JSON error body', async () => {
    const res = await as('alice-session-token')('/agents/api/nope');
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ code: 'ROUTE_NOT_FOUND' });
  });
});
