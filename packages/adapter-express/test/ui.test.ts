import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentConversationService } from '@acs/core';
import { createMemoryPorts } from '@acs/testing';
import { createAcsRouter, serveUi } from '@acs/adapter-express';
import { KEY_A } from './harness.js';
import { createAgent } from '@acs/agent';

/** serveUi: a user's UI build served beside the API, over real HTTP. */

let dir: string;
let server: Server;
let base: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'acs-ui-'));
  writeFileSync(join(dir, 'index.html'), '<!doctype html><title>the ui</title>');
  writeFileSync(join(dir, 'favicon.ico'), 'icon');
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'assets', 'app-3f2a9c.js'), 'console.log("app")');
  const app = express();
  app.use(
    createAcsRouter(createAgentConversationService({ ...createMemoryPorts(), agent: createAgent() }), {
      apiKeys: { [KEY_A]: 'alice' },
    }),
  );
  app.use(serveUi(dir));
  server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

describe('serveUi', () => {
  it('serves index.html for / and for the UI’s own routes, never cached', async () => {
    for (const path of ['/', '/conversations/abc', '/settings/secrets']) {
      const r = await fetch(base + path);
      expect(r.status, path).toBe(200);
      expect(await r.text()).toContain('the ui');
      expect(r.headers.get('cache-control')).toBe('no-cache');
    }
  });

  it('serves hashed assets with a year-long immutable cache, other files uncached', async () => {
    const asset = await fetch(`${base}/assets/app-3f2a9c.js`);
    expect(asset.status).toBe(200);
    expect(await asset.text()).toBe('console.log("app")');
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    const icon = await fetch(`${base}/favicon.ico`);
    expect(icon.headers.get('cache-control')).toBe('no-cache');
  });

  it('leaves API paths to the API: unknown ones are JSON errors, not the page', async () => {
    const api = await fetch(`${base}/api/nothing-here`, { headers: { 'X-Session-API-Key': KEY_A } });
    expect(api.status).toBe(404);
    expect(api.headers.get('content-type')).toContain('application/json');
    const sockets = await fetch(`${base}/sockets/events/abc`);
    expect(await sockets.text()).not.toContain('the ui');
    const post = await fetch(`${base}/conversations/abc`, { method: 'POST' });
    expect(await post.text()).not.toContain('the ui');
  });

  it('never serves a file outside the build', async () => {
    const outside = `${basename(dir)}-outside.txt`;
    writeFileSync(join(dir, '..', outside), 'secret outside');
    try {
      for (const path of [`/../${outside}`, `/%2e%2e/${outside}`, `/assets/..%2f..%2f${outside}`]) {
        const r = await fetch(base + path);
        expect(await r.text(), path).not.toContain('secret outside');
      }
    } finally {
      rmSync(join(dir, '..', outside), { force: true });
    }
  });

  it('may be framed by its own origin only (another port of this host gets the same cookies), and is never sniffed', async () => {
    for (const path of ['/', '/assets/app-3f2a9c.js', '/conversations/abc']) {
      const r = await fetch(base + path);
      expect(r.headers.get('content-security-policy'), path).toBe("frame-ancestors 'self'");
      expect(r.headers.get('x-frame-options'), path).toBe('SAMEORIGIN');
      expect(r.headers.get('x-content-type-options'), path).toBe('nosniff');
    }
  });

  it('serves a symbolic link only when it leads to a file of the build', async () => {
    const outside = join(dir, '..', `${basename(dir)}-linked-secret.txt`);
    writeFileSync(outside, 'secret behind a link');
    symlinkSync(outside, join(dir, 'leak.txt'));
    symlinkSync(join(dir, 'favicon.ico'), join(dir, 'icon-link.ico'));
    try {
      const leak = await fetch(`${base}/leak.txt`);
      expect(leak.status).toBe(404);
      expect(await leak.text()).not.toContain('secret');
      const inside = await fetch(`${base}/icon-link.ico`);
      expect(inside.status).toBe(200);
      expect(await inside.text()).toBe('icon');
    } finally {
      rmSync(outside, { force: true });
      rmSync(join(dir, 'leak.txt'), { force: true });
      rmSync(join(dir, 'icon-link.ico'), { force: true });
    }
  });

  it('refuses at once a directory with no index.html, saying what it expects', () => {
    expect(() => serveUi(join(dir, 'assets'))).toThrow(/no index\.html.*built web UI/);
  });
});
