import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  errorCode,
  items,
  KEY_A,
  KEY_B,
  obj,
  startAppConversation,
  startHarness,
  storeSettings,
  type CallResult,
  type Harness,
} from './harness.js';
import { expectOpenHandsShape } from './openhands-shapes.js';

/**
 * `/api/v1/secrets…` (the same secrets as V0's `/api/secrets` and provider tokens: one store,
 * two views) and what a sandbox reads with its key (`/api/v1/sandboxes/{id}/settings/secrets`).
 */

let h: Harness;

beforeEach(async () => {
  h = await startHarness();
});

afterEach(async () => {
  await h.close();
});

const DEPLOY = 'deploy-secret-value-0001';
const NPM = 'npm-secret-value-0002';
const GITHUB = 'ghp_secretGithubToken0003';

async function call(
  method: string,
  path: string,
  body?: unknown,
  key: string | null = KEY_A,
  headers?: Record<string, string>,
): Promise<CallResult> {
  return h.call(method, path, { key, ...(body !== undefined ? { body } : {}), ...(headers ? { headers } : {}) });
}

async function edit(method: string, path: string, body?: unknown, status = 200, key: string = KEY_A): Promise<string> {
  const r = await call(method, path, body, key);
  expect(r.status, `${method} ${path}: ${r.text}`).toBe(status);
  expectOpenHandsShape('EditResponse', r.body);
  return obj(r.body).message as string;
}

async function search(query = '', key: string = KEY_A): Promise<Record<string, unknown>> {
  const r = await call('GET', `/api/v1/secrets/search${query}`, undefined, key);
  expect(r.status, r.text).toBe(200);
  expectOpenHandsShape('CustomSecretPage', r.body);
  return obj(r.body);
}

function expectCode(r: CallResult, status: number, code: string): void {
  expect(r.status, r.text).toBe(status);
  expect(errorCode(r.body)).toBe(code);
}

describe('/api/v1/secrets', () => {
  it('creates (201), overwrites, renames, describes and deletes, never showing a value', async () => {
    expect(
      await edit('POST', '/api/v1/secrets', { name: 'DEPLOY_TOKEN', value: DEPLOY, description: 'deploys' }, 201),
    ).toBe('Secret created successfully');
    await edit('POST', '/api/v1/secrets', { name: 'NPM_TOKEN', value: 'first' }, 201);
    // Create or overwrite (as 1.11): the value changes, the description stays unless given.
    await edit('POST', '/api/v1/secrets', { name: 'NPM_TOKEN', value: NPM, unknown: 'ignored' }, 201);
    await edit('POST', '/api/v1/secrets', { name: 'DEPLOY_TOKEN', value: DEPLOY }, 201);
    expect(await search()).toEqual({
      items: [
        { name: 'DEPLOY_TOKEN', description: 'deploys' },
        { name: 'NPM_TOKEN', description: null },
      ],
      next_page_id: null,
    });
    const secrets = async () =>
      (await h.service.settings.loadWithSecrets('alice'))._unsafeUnwrap()!.secrets_store.custom_secrets;
    expect(await secrets()).toEqual({
      DEPLOY_TOKEN: { secret: DEPLOY, description: 'deploys' },
      NPM_TOKEN: { secret: NPM, description: null },
    });

    expect(await edit('PUT', '/api/v1/secrets/NPM_TOKEN', { name: 'NPM_AUTH', description: 'registry' })).toBe(
      'Secret updated successfully',
    );
    expect(await edit('PUT', '/api/v1/secrets/NPM_AUTH', { name: 'NPM_AUTH' })).toBe('Secret updated successfully');
    expect((await secrets()).NPM_AUTH).toEqual({ secret: NPM, description: 'registry' });
    expectCode(await call('PUT', '/api/v1/secrets/NOPE', { name: 'X' }), 404, 'SECRET_NOT_FOUND');
    expectCode(await call('PUT', '/api/v1/secrets/NPM_AUTH', { name: 'DEPLOY_TOKEN' }), 409, 'SECRET_NAME_TAKEN');

    expect(await edit('DELETE', '/api/v1/secrets/NPM_AUTH')).toBe('Secret deleted successfully');
    expectCode(await call('DELETE', '/api/v1/secrets/NPM_AUTH'), 404, 'SECRET_NOT_FOUND');
    expect(items(await search()).map((s) => s.name)).toEqual(['DEPLOY_TOKEN']);
    for (const text of h.responses) for (const secret of [DEPLOY, NPM]) expect(text).not.toContain(secret);
  });

  it('searches by a case-insensitive part of the name, a page after the last name', async () => {
    for (const name of ['B_TOK', 'A_TOK', 'c_tok', 'EMPTY', 'OTHER'])
      await edit('POST', '/api/v1/secrets', { name, value: 'v' }, 201);
    const first = await search('?limit=2');
    expect(items(first).map((s) => s.name)).toEqual(['A_TOK', 'B_TOK']);
    expect(first.next_page_id).toBe('B_TOK');
    const second = await search('?limit=2&page_id=B_TOK');
    expect(items(second).map((s) => s.name)).toEqual(['EMPTY', 'OTHER']);
    const third = await search(`?limit=2&page_id=${second.next_page_id as string}`);
    expect(third).toEqual({ items: [{ name: 'c_tok', description: null }], next_page_id: null });
    expect(items(await search('?name__contains=TOK')).map((s) => s.name)).toEqual(['A_TOK', 'B_TOK', 'c_tok']);
    expect(items(await search('?name__contains=tok&limit=1&page_id=A_TOK')).map((s) => s.name)).toEqual(['B_TOK']);
    for (const bad of ['?limit=0', '?limit=101', '?limit=x'])
      expectCode(await call('GET', `/api/v1/secrets/search${bad}`), 422, 'VALIDATION_FAILED');
  });

  it('is the store V0 reads and writes', async () => {
    const v0 = await call('POST', '/api/secrets', { name: 'FROM_V0', value: 'v0-value', description: 'zero' });
    expect(v0.status, v0.text).toBe(200);
    await edit('POST', '/api/v1/secrets', { name: 'FROM_V1', value: 'v1-value' }, 201);
    expect(items(await search())).toEqual([
      { name: 'FROM_V0', description: 'zero' },
      { name: 'FROM_V1', description: null },
    ]);
    const listed = await call('GET', '/api/secrets');
    expect(obj(listed.body).custom_secrets).toEqual([
      { name: 'FROM_V0', description: 'zero' },
      { name: 'FROM_V1', description: null },
    ]);
    await edit('DELETE', '/api/v1/secrets/FROM_V0');
    expect((await call('DELETE', '/api/secrets/FROM_V1')).status).toBe(200);
    expect(await search()).toEqual({ items: [], next_page_id: null });
  });

  it('refuses bad input with 422', async () => {
    for (const body of [
      { name: '1bad', value: 'v' },
      { name: 'OK' },
      { name: 'OK', value: '' },
      { value: 'v' },
      { name: 'A-B', value: 'v' },
      [1],
    ]) {
      expectCode(await call('POST', '/api/v1/secrets', body), 422, 'VALIDATION_FAILED');
    }
    await edit('POST', '/api/v1/secrets', { name: 'OK', value: 'v' }, 201);
    expectCode(await call('PUT', '/api/v1/secrets/OK', { name: 'not ok' }), 422, 'VALIDATION_FAILED');
    expectCode(await call('PUT', '/api/v1/secrets/OK', {}), 422, 'VALIDATION_FAILED');
  });

  it('a refused change stores nothing: settings do not appear from a failed delete or rename', async () => {
    expectCode(await call('DELETE', '/api/v1/secrets/NOPE'), 404, 'SECRET_NOT_FOUND');
    expectCode(await call('PUT', '/api/v1/secrets/NOPE', { name: 'OTHER' }), 404, 'SECRET_NOT_FOUND');
    expectCode(await call('DELETE', '/api/secrets/NOPE'), 404, 'SECRET_NOT_FOUND');
    expectCode(await call('GET', '/api/v1/settings'), 404, 'SETTINGS_NOT_FOUND');
    expectCode(await call('GET', '/api/settings'), 404, 'SETTINGS_NOT_FOUND');
  });

  it('keeps users apart', async () => {
    await edit('POST', '/api/v1/secrets', { name: 'ALICE_ONLY', value: DEPLOY }, 201);
    expect(await search('', KEY_B)).toEqual({ items: [], next_page_id: null });
    expectCode(await call('PUT', '/api/v1/secrets/ALICE_ONLY', { name: 'MINE' }, KEY_B), 404, 'SECRET_NOT_FOUND');
    expectCode(await call('DELETE', '/api/v1/secrets/ALICE_ONLY', undefined, KEY_B), 404, 'SECRET_NOT_FOUND');
    await edit('POST', '/api/v1/secrets', { name: 'ALICE_ONLY', value: 'bobs' }, 201, KEY_B);
    const alice = await h.service.settings.loadWithSecrets('alice');
    expect(alice._unsafeUnwrap()!.secrets_store.custom_secrets.ALICE_ONLY?.secret).toBe(DEPLOY);
  });
});

describe('/api/v1/secrets/git-providers', () => {
  it('stores the provider tokens V0 shows, replaces the set, keeps a token sent without one, and removes them all', async () => {
    expect(
      await edit('POST', '/api/v1/secrets/git-providers', {
        provider_tokens: { github: { token: GITHUB }, gitlab: { token: 'glpat-x', host: 'gitlab.example.com' } },
        mcp_config: null,
      }),
    ).toBe('Git providers stored');
    await storeSettings(h);
    const v1 = obj((await call('GET', '/api/v1/settings')).body);
    expect(v1.provider_tokens_set).toEqual({ github: null, gitlab: 'gitlab.example.com' });
    // The token left out stays; gitlab, left out of the set, goes.
    await edit('POST', '/api/v1/secrets/git-providers', {
      provider_tokens: { github: { token: '', host: 'github.example.com' } },
    });
    const v0 = obj((await call('GET', '/api/settings')).body);
    expect(v0.provider_tokens_set).toEqual({ github: 'github.example.com' });
    expect(
      (await h.service.settings.loadWithSecrets('alice'))._unsafeUnwrap()!.secrets_store.provider_tokens.github?.token,
    ).toBe(GITHUB);
    expect(await edit('DELETE', '/api/v1/secrets/git-providers')).toBe('Unset Git provider tokens');
    expect(obj((await call('GET', '/api/settings')).body).provider_tokens_set).toEqual({});
    expectCode(
      await call('POST', '/api/v1/secrets/git-providers', { provider_tokens: { nowhere: { token: 'x' } } }),
      422,
      'VALIDATION_FAILED',
    );
    for (const text of h.responses) expect(text).not.toContain(GITHUB);
  });
});

describe('a sandbox reads its owner’s secrets with its key', () => {
  /** A running V1 conversation of the user of `key`: its sandbox and its own key. */
  async function runningConversation(
    key: string = KEY_A,
  ): Promise<{ id: string; sandboxId: string; sandboxKey: string }> {
    h.ports.llm.respondWith(() => ({ content: 'Done.' }));
    const task = await startAppConversation(h, {}, key);
    await h.idle();
    const c = obj(
      (await call('GET', `/api/v1/app-conversations/${task.app_conversation_id as string}`, undefined, key)).body,
    );
    expect(c.sandbox_status).toBe('RUNNING');
    return { id: c.id as string, sandboxId: c.sandbox_id as string, sandboxKey: c.session_api_key as string };
  }

  beforeEach(async () => {
    await storeSettings(h);
    await edit('POST', '/api/v1/secrets', { name: 'DEPLOY_TOKEN', value: DEPLOY, description: 'deploys' }, 201);
    await edit('POST', '/api/v1/secrets/git-providers', { provider_tokens: { github: { token: GITHUB } } });
  });

  it('lists the names (custom secrets, then provider tokens) and gives each value as text', async () => {
    const { sandboxId, sandboxKey } = await runningConversation();
    const list = await call('GET', `/api/v1/sandboxes/${sandboxId}/settings/secrets`, undefined, sandboxKey);
    expect(list.status, list.text).toBe(200);
    expectOpenHandsShape('SecretNamesResponse', list.body);
    expect(list.body).toEqual({
      secrets: [
        { name: 'DEPLOY_TOKEN', description: 'deploys' },
        { name: 'github_token', description: 'github_token provider token' },
      ],
    });
    const value = await call(
      'GET',
      `/api/v1/sandboxes/${sandboxId}/settings/secrets/DEPLOY_TOKEN`,
      undefined,
      sandboxKey,
    );
    expect(value.status).toBe(200);
    expect(value.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(value.text).toBe(DEPLOY);
    // The key may also come as Authorization: Bearer, as with every other key.
    const token = await call('GET', `/api/v1/sandboxes/${sandboxId}/settings/secrets/github_token`, undefined, null, {
      Authorization: `Bearer ${sandboxKey}`,
    });
    expect(token.text).toBe(GITHUB);
    expectCode(
      await call('GET', `/api/v1/sandboxes/${sandboxId}/settings/secrets/NOPE`, undefined, sandboxKey),
      404,
      'SECRET_NOT_FOUND',
    );
  });

  it('opens only with the key of a conversation in that sandbox, while it runs', async () => {
    const { id, sandboxId, sandboxKey } = await runningConversation();
    const path = `/api/v1/sandboxes/${sandboxId}/settings/secrets/DEPLOY_TOKEN`;
    // The user's own API key is not a sandbox's key: values stay write-only to it.
    expectCode(await call('GET', path, undefined, KEY_A), 401, 'UNAUTHENTICATED');
    expectCode(await call('GET', path, undefined, null), 401, 'UNAUTHENTICATED');
    expectCode(await call('GET', path, undefined, 'acsc_forged.key.value'), 401, 'UNAUTHENTICATED');
    // Another sandbox's key (here Bob's): 403.
    await storeSettings(h, undefined, KEY_B);
    const bob = await runningConversation(KEY_B);
    expectCode(await call('GET', path, undefined, bob.sandboxKey), 403, 'SANDBOX_KEY_MISMATCH');
    expectCode(
      await call('GET', `/api/v1/sandboxes/${bob.sandboxId}/settings/secrets`, undefined, sandboxKey),
      403,
      'SANDBOX_KEY_MISMATCH',
    );
    // Bob's sandbox key reads Bob's secrets, never Alice's.
    expect(
      obj((await call('GET', `/api/v1/sandboxes/${bob.sandboxId}/settings/secrets`, undefined, bob.sandboxKey)).body)
        .secrets,
    ).toEqual([]);
    // A stopped sandbox: 401.
    expect((await call('POST', `/api/v1/sandboxes/${sandboxId}/pause`)).status).toBe(200);
    expectCode(await call('GET', path, undefined, sandboxKey), 401, 'SANDBOX_NOT_RUNNING');
    // A deleted conversation's key opens nothing.
    expect((await call('DELETE', `/api/conversations/${id}`)).status).toBe(200);
    expectCode(await call('GET', path, undefined, sandboxKey), 401, 'UNAUTHENTICATED');
    for (const text of h.responses.filter((t) => t !== DEPLOY && t !== GITHUB))
      for (const secret of [DEPLOY, GITHUB]) expect(text).not.toContain(secret);
  });
});
