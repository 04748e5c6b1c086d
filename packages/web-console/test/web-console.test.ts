/**
 * The console package over real HTTP: the pages with the mount path and API base put in, its
 * security headers, deep links, assets; the generated API types being current; and the typed
 * client (`@acs/web-console/client`) against a real router.
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import express from 'express';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { createAcsRouter } from '@acs/adapter-express';
import { createAgent } from '@acs/agent';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import { ConversationEventSchema } from '@acs/core/schemas';
import { createMemoryPorts } from '@acs/testing';
import { generateApiSchema } from '../scripts/api-schema.js';
import { CONVERSATION_EVENT_KINDS } from '../src/api-schema.js';
import { ensureConsoleApp } from '../scripts/ensure-app.mjs';
import { createAcsClient, type components } from '../src/client.js';
import { createWebConsole, WEB_CONSOLE_APP_DIR } from '../src/index.js';

const KEY = 'web-console-test-key-0123456789';
let server: Server;
let base: string;
let service: AgentConversationService;

beforeAll(async () => {
  await ensureConsoleApp();
  service = createAgentConversationService({ ...createMemoryPorts(), agent: createAgent() });
  const app = express();
  app.use('/agents', createAcsRouter(service, { apiKeys: { [KEY]: 'alice' } }));
  app.use('/agents/console', createWebConsole({ apiBase: '/agents', title: 'Acme agents' }));
  // A host's UI after the console answers every other GET with its page (as serveUi does).
  app.get(/.*/, (_req, res) => res.type('html').send('<title>the host UI</title>'));
  server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no port');
  base = `http://127.0.0.1:${address.port}`;
}, 120_000);

afterAll(async () => {
  await new Promise<void>((resolve) => server?.close(() => resolve()));
  await service?.close();
});

const get = (path: string) => fetch(base + path, { redirect: 'manual' });

describe('createWebConsole', () => {
  it('serves the page with its mount path, the API base and the title, and a policy that loads nothing from elsewhere', async () => {
    const response = await get('/agents/console/');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    expect(response.headers.get('cache-control')).toBe('no-cache');
    const csp = response.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    const html = await response.text();
    expect(html).toContain('<base href="/agents/console/">');
    expect(html).toContain('<meta name="acs-api-base" content="/agents">');
    expect(html).toContain('<title>Acme agents</title>');
    // Every script and stylesheet is ours, relative to the base.
    for (const [, url] of html.matchAll(/(?:src|href)="([^"]+)"/g))
      expect(url).toMatch(/^(\.\/assets\/|\/agents\/console\/$|data:)/);
  });

  it('answers every route of the app with the page (a reload works), but a missing asset with 404', async () => {
    for (const path of ['/agents/console/conversations/abc', '/agents/console/settings', '/agents/console']) {
      const response = await get(path);
      expect(response.status, path).toBe(200);
      expect(await response.text()).toContain('<div id="app"></div>');
    }
    // Answered by the console itself, not by what the host serves after it.
    const missing = await get('/agents/console/assets/no-such-file.js');
    expect(missing.status).toBe(404);
    expect(await missing.text()).not.toContain('the host UI');
  });

  it('may be framed by its own origin only, and its files are never sniffed', async () => {
    const response = await get('/agents/console/');
    expect(response.headers.get('content-security-policy')).toContain("frame-ancestors 'self'");
    expect(response.headers.get('x-frame-options')).toBe('SAMEORIGIN');
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('serves hashed assets as immutable', async () => {
    const html = await (await get('/agents/console/')).text();
    const script = /src="\.\/(assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    const response = await get(`/agents/console/${script}`);
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(response.headers.get('content-type')).toMatch(/javascript/);
  });

  it('serves the API reference page from its own folder, with the same API base', async () => {
    const redirect = await get('/agents/console/api-reference');
    expect(redirect.status).toBe(301);
    expect(redirect.headers.get('location')).toBe('/agents/console/api-reference/');
    const html = await (await get('/agents/console/api-reference/')).text();
    expect(html).toContain('<base href="/agents/console/api-reference/">');
    expect(html).toContain('<meta name="acs-api-base" content="/agents">');
  });

  it('refuses an API base on another origin, and an unbuilt app, saying what to do', () => {
    expect(() => createWebConsole({ apiBase: 'https://elsewhere.example' })).toThrow(/must be a path on this origin/);
    expect(() => createWebConsole({ appDir: '/nonexistent' })).toThrow(/npm run build --workspace @acs\/web-console/);
    expect(WEB_CONSOLE_APP_DIR).toMatch(/app-dist\/$/);
  });
});

describe('the typed client', () => {
  it('is generated from the current routes (run npm run generate:client when this fails)', async () => {
    expect(readFileSync(new URL('../src/api-schema.ts', import.meta.url), 'utf8')).toBe(await generateApiSchema());
  });

  it('lists every kind of the event union, which the console listens for on a conversation’s stream', () => {
    const kindsOfTheUnion = ConversationEventSchema.options.map((schema) => schema.shape.kind.value);
    expect([...CONVERSATION_EVENT_KINDS]).toEqual(kindsOfTheUnion);
    expectTypeOf<(typeof CONVERSATION_EVENT_KINDS)[number]>().toEqualTypeOf<
      components['schemas']['ConversationEvent']['kind']
    >();
  });

  it('calls the API with an API key: typed bodies, data on success, the error body on a 4xx', async () => {
    const acs = createAcsClient({ baseUrl: `${base}/agents`, apiKey: KEY });
    const stored = await acs.POST('/api/settings', {
      body: { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-typed-client' },
    });
    expect(stored.response.status).toBe(200);
    const loaded = await acs.GET('/api/settings');
    expect(loaded.data).toMatchObject({ llm_model: 'openai/gpt-4o', llm_api_key: null, llm_api_key_set: true });
    const count = await acs.GET('/api/v1/app-conversations/count');
    expect(count.data).toBe(0);
    const missing = await acs.GET('/api/v1/app-conversations/{conversation_id}', {
      params: { path: { conversation_id: 'f'.repeat(32) } },
    });
    expect(missing.response.status).toBe(404);
    expect(missing.error).toMatchObject({ code: 'CONVERSATION_NOT_FOUND' });
    const anonymous = await createAcsClient({ baseUrl: `${base}/agents` }).GET('/api/v1/app-conversations/count');
    expect(anonymous.response.status).toBe(401);
  });
});
