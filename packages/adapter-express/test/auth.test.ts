import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRoutes, createAcsRouter } from '@acs/adapter-express';
import {
  concretePath,
  errorCode,
  fetchOpenApi,
  HTTP_METHODS,
  isAuthenticated,
  KEY_A,
  KEY_B,
  obj,
  operationsOf,
  startHarness,
  takesApiKey,
  WRONG_KEY,
  type Harness,
  type OpenApiDoc,
} from './harness.js';

/** Keys that must all be refused: none, a wrong one, an empty one, a prefix of a real one, one differing only in case. */
const BAD_KEYS: (string | null)[] = [null, WRONG_KEY, '', KEY_A.slice(0, -1), KEY_A.toUpperCase(), `${KEY_A}x`];

describe('authentication', () => {
  let h: Harness;
  let doc: OpenApiDoc;

  beforeAll(async () => {
    h = await startHarness();
    doc = await fetchOpenApi(h);
  });
  afterAll(async () => {
    await h.close();
  });

  it('takes the key as Authorization: Bearer, as OpenHands 1.x clients send it, and refuses a bad one the same way', async () => {
    const bearer = (value: string) => ({ key: null, headers: { Authorization: value } });
    expect((await h.call('GET', '/api/settings', bearer(`Bearer ${KEY_A}`))).status).not.toBe(401);
    expect((await h.call('GET', '/api/settings', bearer(`bearer  ${KEY_B}`))).status).not.toBe(401);
    for (const value of [
      `Bearer ${WRONG_KEY}`,
      'Bearer',
      `Bearer ${KEY_A} extra`,
      `Basic ${KEY_A}`,
      KEY_A,
      `Bearer ${KEY_A.slice(0, -1)}`,
    ]) {
      const r = await h.call('GET', '/api/settings', bearer(value));
      expect(r.status, value).toBe(401);
      expect(errorCode(r.body)).toBe('UNAUTHENTICATED');
    }
    // X-Session-API-Key wins when both are sent.
    expect(
      (await h.call('GET', '/api/settings', { key: WRONG_KEY, headers: { Authorization: `Bearer ${KEY_A}` } })).status,
    ).toBe(401);
    // The document says so.
    expect(doc.components?.securitySchemes?.Bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.security).toContainEqual({ Bearer: [] });
  });

  it('the OpenAPI document itself needs a key', async () => {
    for (const key of BAD_KEYS) {
      const r = await h.call('GET', '/api/openapi.json', { key });
      expect(r.status, `key ${JSON.stringify(key)}`).toBe(401);
      expect(errorCode(r.body)).toBe('UNAUTHENTICATED');
    }
  });

  it('every authenticated operation of the document answers 401 UNAUTHENTICATED without a valid key, and changes nothing', async () => {
    const operations = operationsOf(doc).filter(({ operation }) => isAuthenticated(doc, operation));
    const authenticatedRoutes = buildRoutes(h.service).filter((r) => r.authenticated);
    // The document is the route list: every authenticated route is checked below.
    expect(operations.length).toBe(authenticatedRoutes.length);
    expect(operations.length).toBeGreaterThanOrEqual(24);

    for (const { path, method } of operations) {
      for (const key of BAD_KEYS) {
        const r = await h.call(method.toUpperCase(), concretePath(path), {
          key,
          ...(method === 'post' ? { body: {} } : {}),
        });
        expect(r.status, `${method.toUpperCase()} ${path} with key ${JSON.stringify(key)}`).toBe(401);
        const body = obj(r.body);
        expect(body, `${method.toUpperCase()} ${path}`).toEqual({
          code: 'UNAUTHENTICATED',
          message: expect.any(String) as string,
          detail: body.message,
        });
      }
    }
    // Nothing reached the service.
    expect(h.ports.runtime.calls).toEqual([]);
    expect((await h.service.settings.loadWithSecrets('alice'))._unsafeUnwrap()).toBeNull();
    expect((await h.call('GET', '/api/v1/sandboxes/search')).body).toEqual({ items: [], next_page_id: null });
    expect((await h.call('GET', '/api/conversations')).body).toEqual({ results: [], next_page_id: null });
  });

  it('the same operations pass authentication with a valid key of either user, except those the document opens only to a conversation key', async () => {
    const operations = operationsOf(doc).filter(({ operation }) => isAuthenticated(doc, operation));
    const conversationKeyOnly = operations
      .filter(({ operation }) => !takesApiKey(doc, operation))
      .map(({ method, path }) => `${method.toUpperCase()} ${path}`);
    // A conversation's key opens the first two; a sandbox's key (auth/sandbox-keys.ts) the others.
    expect(conversationKeyOnly.sort()).toEqual([
      'GET /api/git/changes/{path}',
      'GET /api/git/diff/{path}',
      'GET /api/v1/sandboxes/{sandbox_id}/settings/secrets',
      'GET /api/v1/sandboxes/{sandbox_id}/settings/secrets/{secret_name}',
    ]);
    for (const { path, method, operation } of operations) {
      for (const key of [KEY_A, KEY_B]) {
        const r = await h.call(method.toUpperCase(), concretePath(path), {
          key,
          ...(method === 'post' ? { body: {} } : {}),
        });
        if (takesApiKey(doc, operation)) expect(r.status, `${method.toUpperCase()} ${path}: ${r.text}`).not.toBe(401);
        else expect(r.status, `${method.toUpperCase()} ${path}: ${r.text}`).toBe(401);
        expect(r.status, `${method.toUpperCase()} ${path}: ${r.text}`).toBeLessThan(500);
      }
    }
  });

  it('only the health routes, the UI configuration and the device sign-in’s OAuth endpoints are open, and they answer without a key', async () => {
    const open = operationsOf(doc)
      .filter(({ operation }) => !isAuthenticated(doc, operation))
      .map(({ method, path }) => `${method.toUpperCase()} ${path}`)
      .sort();
    // A device signing in has no key yet: it gets one from the /oauth routes (tests in device-authorization.test.ts).
    expect(open).toEqual([
      'GET /alive',
      'GET /api/options/config',
      'GET /api/v1/web-client/config',
      'GET /health',
      'GET /ready',
      'GET /server_info',
      'POST /oauth/device/authorize',
      'POST /oauth/device/token',
    ]);
    // The UI's configuration is asked for before the browser is known to be signed in; it holds nothing secret.
    expect((await h.call('GET', '/api/options/config', { key: null })).status).toBe(200);
    expect((await h.call('GET', '/api/v1/web-client/config', { key: null })).status).toBe(200);
    for (const key of [null, WRONG_KEY]) {
      expect((await h.call('GET', '/ready', { key })).body).toBe('OK');
      expect((await h.call('GET', '/server_info', { key })).status).toBe(200);
    }

    for (const key of [null, WRONG_KEY, KEY_A]) {
      const alive = await h.call('GET', '/alive', { key });
      expect(alive.status).toBe(200);
      expect(alive.body).toEqual({ status: 'ok' });
      const health = await h.call('GET', '/health', { key });
      expect(health.status).toBe(200);
      expect(health.body).toBe('OK');
    }
  });

  it('an unknown /api route is 401 without a key and 404 ROUTE_NOT_FOUND with one', async () => {
    for (const path of [
      '/api/nope',
      '/api/v1/nope',
      '/api/v1/sandboxes/x/y/z',
      '/api/conversations/abc/unknown-action',
      '/api',
    ]) {
      for (const key of [null, WRONG_KEY]) {
        const r = await h.call('GET', path, { key });
        expect(r.status, `${path} key ${key}`).toBe(401);
        expect(errorCode(r.body)).toBe('UNAUTHENTICATED');
      }
      const r = await h.call('GET', path);
      expect(r.status, path).toBe(404);
      expect(errorCode(r.body)).toBe('ROUTE_NOT_FOUND');
    }
  });

  it('a wrong method on a known path is 405 with an Allow header listing the methods that path accepts', async () => {
    const templates = Object.keys(doc.paths).filter((p) => p.startsWith('/api/'));
    const matches = (template: string, concrete: string) =>
      new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(concrete);
    let checked = 0;
    for (const template of templates) {
      const concrete = concretePath(template);
      // A literal path (…/search) takes only its own methods, never those of a {param} route it also matches.
      const literal = templates.includes(concrete);
      const allowed = new Set(
        templates
          .filter((t) => matches(t, concrete) && (!literal || t === concrete))
          .flatMap((t) => Object.keys(doc.paths[t] ?? {}).map((m) => m.toUpperCase())),
      );
      if (allowed.has('GET')) allowed.add('HEAD');
      allowed.add('OPTIONS');
      for (const method of HTTP_METHODS.map((m) => m.toUpperCase()).filter((m) => !allowed.has(m))) {
        const withoutKey = await h.call(method, concrete, { key: null });
        expect(withoutKey.status, `${method} ${concrete} without key`).toBe(401);
        const r = await h.call(method, concrete, method === 'GET' ? {} : { body: {} });
        expect(r.status, `${method} ${concrete}`).toBe(405);
        expect(errorCode(r.body)).toBe('METHOD_NOT_ALLOWED');
        const allow = (r.headers.get('allow') ?? '')
          .split(',')
          .map((m) => m.trim())
          .filter(Boolean);
        expect(new Set(allow), `${method} ${concrete}`).toEqual(allowed);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(templates.length);
  });

  it('a wrong method on /api/openapi.json is 405 too', async () => {
    const r = await h.call('POST', '/api/openapi.json', { body: {} });
    expect(r.status).toBe(405);
    expect(errorCode(r.body)).toBe('METHOD_NOT_ALLOWED');
    expect(r.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
  });

  it('every route of buildRoutes is in the OpenAPI document, and the document has nothing else', () => {
    const fromRoutes = buildRoutes(h.service)
      .map((r) => `${r.method.toUpperCase()} ${r.path}`)
      .sort();
    const fromDoc = operationsOf(doc)
      .map(({ method, path }) => `${method.toUpperCase()} ${path}`)
      .sort();
    expect(fromDoc).toEqual(fromRoutes);
    const operationIds = operationsOf(doc).map(({ operation }) => operation.operationId);
    expect(new Set(operationIds).size).toBe(operationIds.length);
  });

  it('every route the Express router registers is documented (except the document itself)', () => {
    const router = createAcsRouter(h.service, { apiKeys: { [KEY_A]: 'alice' } });
    const registered = router.stack
      .filter((layer) => layer.route)
      .flatMap((layer) => {
        const route = layer.route as unknown as { path: string; methods: Record<string, boolean> };
        return Object.keys(route.methods)
          .filter((m) => m !== '_all')
          .map((m) => `${m.toUpperCase()} ${route.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}')}`);
      })
      .sort();
    const documented = operationsOf(doc).map(({ method, path }) => `${method.toUpperCase()} ${path}`);
    expect(registered.length).toBeGreaterThanOrEqual(documented.length);
    expect(registered.filter((r) => !documented.includes(r))).toEqual(['GET /api/openapi.json']);
    expect(documented.filter((d) => !registered.includes(d))).toEqual([]);
  });

  it('a failing custom authenticate hook is a 500 with the common body, never a pass', async () => {
    const express = (await import('express')).default;
    const app = express();
    app.use(
      createAcsRouter(h.service, {
        authenticate: (req) => {
          if (req.get('x-boom')) throw new Error('auth backend down');
          return req.get('x-user') ?? null;
        },
      }),
    );
    const server = app.listen(0, '127.0.0.1');
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    try {
      const { port } = server.address() as { port: number };
      const base = `http://127.0.0.1:${port}`;
      const none = await fetch(`${base}/api/settings`);
      expect(none.status).toBe(401);
      const boom = await fetch(`${base}/api/settings`, { headers: { 'x-boom': '1' } });
      expect(boom.status).toBe(500);
      const body = obj(await boom.json());
      expect(body).toEqual({ code: 'INTERNAL_ERROR', message: expect.any(String) as string, detail: body.message });
      const carol = await fetch(`${base}/api/settings`, { headers: { 'x-user': 'carol' } });
      expect(carol.status).toBe(404);
      expect(errorCode(await carol.json())).toBe('SETTINGS_NOT_FOUND');
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('mounted under a prefix, the same rules hold below it', async () => {
    const express = (await import('express')).default;
    const app = express();
    app.use('/acs', createAcsRouter(h.service, { apiKeys: { [KEY_B]: 'carol' } }));
    const server = app.listen(0, '127.0.0.1');
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    try {
      const { port } = server.address() as { port: number };
      const at = (path: string, init: RequestInit = {}) => fetch(`http://127.0.0.1:${port}${path}`, init);
      const withKey = { headers: { 'X-Session-API-Key': KEY_B } };
      expect(await (await at('/acs/alive')).json()).toEqual({ status: 'ok' });
      expect((await at('/acs/api/settings')).status).toBe(401);
      const settings = await at('/acs/api/settings', withKey);
      expect(settings.status).toBe(404);
      expect(errorCode(await settings.json())).toBe('SETTINGS_NOT_FOUND');
      const unknown = await at('/acs/api/nope', withKey);
      expect(unknown.status).toBe(404);
      expect(errorCode(await unknown.json())).toBe('ROUTE_NOT_FOUND');
      const wrongMethod = await at('/acs/api/v1/sandboxes/abc/pause', { ...withKey, method: 'GET' });
      expect(wrongMethod.status).toBe(405);
      expect(wrongMethod.headers.get('allow')).toBe('POST, OPTIONS');
      // Nothing of the service leaks outside the prefix.
      expect((await at('/api/settings', withKey)).status).toBe(404);
      expect((await at('/alive')).status).toBe(404);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('createAcsRouter refuses short API keys and a missing authenticator', () => {
    expect(() => createAcsRouter(h.service, { apiKeys: { short: 'x' } })).toThrow(/16/);
    expect(() => createAcsRouter(h.service, {})).toThrow();
  });
});
