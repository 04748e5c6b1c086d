import { randomBytes } from 'node:crypto';
import { PGlite } from '@electric-sql/pglite';
import { errAsync } from 'neverthrow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAesGcmCipher, type AgentConversationServicePorts } from '@acs/core';
import { storeUnavailable, type StoreFailure } from '@acs/core/ports';
import { createPostgresStorage } from '@acs/adapter-postgres';
import { startHarness, type CallResult, type Harness } from './harness.js';

const UNSTORABLE = /contains U\+0000 \(NUL\) or an unpaired surrogate/;

const issuesOf = (r: CallResult) => (r.body as { issues?: { path: string; message: string }[] }).issues ?? [];
const codeOf = (r: CallResult) => (r.body as { code?: string }).code;

/** `depth` nested arrays around a number: [[[…1…]]]. */
const nested = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;

async function pgliteStorage(): Promise<{ ports: Partial<AgentConversationServicePorts>; close: () => Promise<void> }> {
  const db = await PGlite.create();
  const key = randomBytes(32);
  const storage = await createPostgresStorage({
    db,
    cipher: createAesGcmCipher({ keys: { k: key }, currentKeyId: 'k' }),
    migrations: 'auto',
  });
  return { ports: storage, close: () => db.close() };
}

describe.each(['memory', 'pglite'] as const)(
  'input storage cannot hold is refused at the edge (%s storage)',
  (storageKind) => {
    let h: Harness;
    let closeStorage = async () => {};
    beforeAll(async () => {
      const storage = storageKind === 'pglite' ? await pgliteStorage() : null;
      if (storage) closeStorage = storage.close;
      h = await startHarness({ ...(storage ? { storage: storage.ports } : {}) });
      expect(
        (await h.call('POST', '/api/settings', { body: { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-edge' } }))
          .status,
      ).toBe(200);
    }, 60_000);
    afterAll(async () => {
      await h.close();
      await closeStorage();
    });

    /** Conversations and sandboxes the user has: refused requests must add none. */
    const counts = async () => {
      await h.idle();
      const conversations = (await h.call('GET', '/api/v1/app-conversations/count')).body;
      const sandboxes = ((await h.call('GET', '/api/v1/sandboxes/search')).body as { items: unknown[] }).items.length;
      return { conversations, sandboxes };
    };

    it.each([
      ['a NUL in a settings field', 'POST', '/api/settings', { llm_model: 'openai/gpt\u00004o' }, 'llm_model'],
      [
        'a lone high surrogate in a settings field',
        'POST',
        '/api/settings',
        { git_user_name: 'x\ud800y' },
        'git_user_name',
      ],
      [
        'a NUL in an MCP server argument',
        'POST',
        '/api/settings',
        { mcp_config: { stdio_servers: [{ name: 'srv', command: 'x', args: ['--a\u0000'] }] } },
        'mcp_config.stdio_servers.0.args.0',
      ],
      ['a NUL in a V1 title', 'POST', '/api/v1/app-conversations', { title: 'hello\u0000' }, 'title'],
      [
        'a lone low surrogate in a V1 message',
        'POST',
        '/api/v1/app-conversations',
        { initial_message: { content: [{ type: 'text', text: '\udc00' }] } },
        'initial_message.content.0.text',
      ],
      [
        'a NUL in an ignored-but-kept field (processors)',
        'POST',
        '/api/v1/app-conversations',
        { processors: [{ 'k\u0000': 1 }] },
        'processors.0.k\u0000',
      ],
      [
        'a NUL in a V0 first message',
        'POST',
        '/api/conversations',
        { initial_user_msg: 'run\u0000this' },
        'initial_user_msg',
      ],
      [
        'a NUL in a V0 replay',
        'POST',
        '/api/conversations',
        { replay_json: '[{"source":"user","action":"message","args":{"content":"a\u0000"}}]' },
        'replay_json',
      ],
    ] as const)('%s → 422 naming the field; nothing is stored', async (_what, method, path, body, field) => {
      const before = await counts();
      const r = await h.call(method, path, { body });
      expect(r.status, r.text).toBe(422);
      expect(codeOf(r)).toBe('VALIDATION_FAILED');
      expect(issuesOf(r)).toContainEqual({ path: field, message: expect.stringMatching(UNSTORABLE) as unknown });
      expect(await counts()).toEqual(before);
    });

    it('a NUL or lone surrogate in a query parameter → 422 naming it', async () => {
      for (const [path, field] of [
        ['/api/v1/app-conversations/search?title__contains=%00', 'query.title__contains'],
        ['/api/conversations?selected_repository=a%00b', 'query.selected_repository'],
        [`/api/v1/app-conversations?ids=${'a'.repeat(31)}%00`, 'query.ids.0'],
        ['/api/v1/app-conversations/start-tasks/search?conversation_id__eq=%00', 'query.conversation_id__eq'],
      ] as const) {
        const r = await h.call('GET', path);
        expect(r.status, `${path}: ${r.text}`).toBe(422);
        expect(issuesOf(r).map((i) => i.path)).toContain(field);
      }
    });

    it('a path id no record can have → 404 of that record, for every method', async () => {
      for (const [method, path, code] of [
        ['GET', '/api/conversations/%00abc', 'CONVERSATION_NOT_FOUND'],
        ['DELETE', '/api/conversations/abc%00', 'CONVERSATION_NOT_FOUND'],
        ['POST', '/api/conversations/%00/stop', 'CONVERSATION_NOT_FOUND'],
        ['GET', '/api/v1/app-conversations/%00', 'CONVERSATION_NOT_FOUND'],
        ['GET', '/api/v1/app-conversations/%00/events', 'CONVERSATION_NOT_FOUND'],
        ['GET', '/api/v1/sandboxes/a%00', 'SANDBOX_NOT_FOUND'],
        ['DELETE', '/api/v1/sandboxes/a%00', 'SANDBOX_NOT_FOUND'],
        ['POST', '/api/v1/sandboxes/a%00/pause', 'SANDBOX_NOT_FOUND'],
      ] as const) {
        const r = await h.call(method, path);
        expect(r.status, `${method} ${path}: ${r.text}`).toBe(404);
        expect(codeOf(r)).toBe(code);
      }
    });

    it('JSON nested beyond the limit is refused while parsing (400 JSON_TOO_DEEP); within it, it is accepted', async () => {
      const before = await counts();
      for (const depth of [5_000, 4_000, 65]) {
        const r = await h.call('POST', '/api/v1/app-conversations', {
          rawBody: `{"processors":${nested(depth - 1)}}`,
          headers: { 'Content-Type': 'application/json' },
        });
        expect(r.status, `${depth} deep: ${r.text.slice(0, 200)}`).toBe(400);
        expect(codeOf(r)).toBe('JSON_TOO_DEEP');
      }
      expect(await counts()).toEqual(before);
      // Brackets inside strings do not count.
      const inString = await h.call('POST', '/api/settings', { body: { git_user_name: '['.repeat(200) } });
      expect(inString.status, inString.text).toBe(200);
      const atLimit = await h.call('POST', '/api/v1/app-conversations', {
        rawBody: `{"processors":${nested(63)}}`,
        headers: { 'Content-Type': 'application/json' },
      });
      expect(atLimit.status, atLimit.text.slice(0, 300)).toBe(200);
    });
  },
);

describe('a storage failure', () => {
  it('is a 503 for the client and a log line for the operator with the operation and error class, never the values', async () => {
    const secret = 'sk-value-that-must-not-be-logged';
    const h = await startHarness();
    try {
      const failingSettings = new Proxy(h.ports.settings, {
        get(store, property) {
          if (property === 'update') {
            const cause = Object.assign(new (class DatabaseError extends Error {})(`invalid input: "${secret}"`), {
              code: '22P05',
            });
            return () => errAsync<never, StoreFailure>(storeUnavailable('store settings', cause) as StoreFailure);
          }
          const value: unknown = Reflect.get(store, property, store);
          return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(store) : value;
        },
      });
      const failing = await startHarness({ storage: { settings: failingSettings } });
      try {
        const r = await failing.call('POST', '/api/settings', { body: { llm_api_key: secret } });
        expect(r.status).toBe(503);
        expect(codeOf(r)).toBe('STORE_UNAVAILABLE');
        expect(r.text).not.toContain(secret);
        const logged = failing.logger.lines
          .map((l) => JSON.parse(l) as Record<string, unknown>)
          .find((l) => l.msg === 'storage failed');
        expect(logged).toMatchObject({
          level: 'error',
          method: 'POST',
          path: '/api/settings',
          route: 'storeSettings',
          operation: 'store settings',
          errorClass: 'DatabaseError 22P05',
        });
        expect(failing.logger.lines.join('\n')).not.toContain(secret);
      } finally {
        await failing.close();
      }
    } finally {
      await h.close();
    }
  });
});

describe('methods and literal paths', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h.close());

  it('DELETE /api/v1/sandboxes/search is 405 (search is a route, not a sandbox id), and deletes nothing', async () => {
    const created = await h.call('POST', '/api/v1/sandboxes');
    expect(created.status).toBe(200);
    const r = await h.call('DELETE', '/api/v1/sandboxes/search');
    expect(r.status).toBe(405);
    expect(codeOf(r)).toBe('METHOD_NOT_ALLOWED');
    expect(r.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
    expect((await h.call('POST', '/api/v1/sandboxes/search/pause')).status).toBe(404);
    await h.idle();
    expect(((await h.call('GET', '/api/v1/sandboxes/search')).body as { items: unknown[] }).items).toHaveLength(1);
  });

  it('other methods on /alive and /health get a JSON 405 with Allow', async () => {
    for (const path of ['/alive', '/health']) {
      for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
        const r = await h.call(method, path, { key: null });
        expect(r.status, `${method} ${path}`).toBe(405);
        expect(codeOf(r)).toBe('METHOD_NOT_ALLOWED');
        expect(r.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
      }
    }
  });

  it('OPTIONS answers 204 with the methods of the path, without a key', async () => {
    for (const [path, allow] of [
      ['/alive', 'GET, HEAD, OPTIONS'],
      ['/api/v1/sandboxes', 'GET, POST, DELETE, HEAD, OPTIONS'],
      ['/api/v1/sandboxes/search', 'GET, HEAD, OPTIONS'],
      ['/api/v1/sandboxes/0123', 'GET, DELETE, HEAD, OPTIONS'],
      ['/api/v1/sandboxes/0123/pause', 'POST, OPTIONS'],
      ['/api/settings', 'POST, GET, HEAD, OPTIONS'],
      ['/api/openapi.json', 'GET, HEAD, OPTIONS'],
    ] as const) {
      const r = await h.call('OPTIONS', path, { key: null });
      expect(r.status, path).toBe(204);
      expect(r.headers.get('allow'), path).toBe(allow);
    }
    expect((await h.call('OPTIONS', '/api/nothing-here', { key: null })).status).toBe(401);
  });
});
