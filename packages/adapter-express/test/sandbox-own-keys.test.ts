/**
 * What an agent-server sandbox's own key (`acss_…`) opens besides its URL, as the OpenHands SDK
 * 1.58's `OpenHandsCloudWorkspace` uses it: the sandbox secret routes (`get_secrets()`, with
 * `?agent_profile_id=`), and the secret values of `GET /api/v1/users/me?expose_secrets=true`
 * (`get_llm()`), which it sends with the user's API key and the sandbox's key together.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { KEY_A, KEY_B, obj, startHarness, storeSettings, type CallResult, type Harness } from './harness.js';
import { expectOpenHandsShape } from './openhands-shapes.js';

const MODEL_KEY = 'sk-alice-model-key-0000000001';
const SEARCH_KEY = 'tvly-alice-search-key-000002';
const PROFILE_KEY = 'sk-alice-profile-key-0000003';
const DEPLOY = 'deploy-secret-value-0000004';

let upstream: Server;
let upstreamUrl: string;
let h: Harness;

beforeAll(async () => {
  // Stands in for the agent-server: its health check is all the runtime asks of it here.
  upstream = createServer((_req, res) => res.end('{"status":"ok"}'));
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
    ports: {
      specs: [
        { id: 'bookworm', image: 'acs-sandbox:bookworm', working_dir: '/workspace' },
        {
          id: 'openhands-agent-server',
          image: 'acs-openhands-agent-server:1.58.2',
          working_dir: '/workspace',
          exposed_ports: [{ name: 'AGENT_SERVER', port: 8000, health_path: '/health' }],
          session_api_key_variable: 'OH_SESSION_API_KEYS_0',
        },
      ],
      runtime: { portUrl: () => upstreamUrl },
    },
  });
  for (const key of [KEY_A, KEY_B])
    await storeSettings(h, { llm_model: 'openai/gpt-4o', llm_api_key: MODEL_KEY, search_api_key: SEARCH_KEY }, key);
  const profile = await h.call('POST', '/api/v1/settings/profiles/fast', {
    body: { llm: { model: 'openai/gpt-4o-mini', api_key: PROFILE_KEY } },
  });
  expect(profile.status, profile.text).toBeLessThan(300);
  const secret = await h.call('POST', '/api/v1/secrets', { body: { name: 'DEPLOY_TOKEN', value: DEPLOY } });
  expect(secret.status, secret.text).toBeLessThan(300);
});

afterEach(async () => {
  await h.close();
});

/** A RUNNING agent-server sandbox of the key's user, and its own key. */
async function agentServerSandbox(key = KEY_A): Promise<{ id: string; key: string }> {
  const started = await h.call('POST', '/api/v1/sandboxes?sandbox_spec_id=openhands-agent-server', { key });
  expect(started.status, started.text).toBe(200);
  const { id } = obj(started.body) as { id: string };
  await h.idle();
  const [info] = (await h.call('GET', `/api/v1/sandboxes?id=${id}`, { key })).body as Record<string, unknown>[];
  expect(info).toMatchObject({ status: 'RUNNING' });
  return { id, key: String(info?.session_api_key) };
}

/** `GET /api/v1/users/me` as the SDK sends it: the user's key as Bearer, the sandbox's as X-Session-API-Key. */
const me = (query: string, sandboxKey: string | null, userKey = KEY_A): Promise<CallResult> =>
  h.call('GET', `/api/v1/users/me${query}`, {
    key: sandboxKey,
    headers: { Authorization: `Bearer ${userKey}` },
  });

const expectCode = (r: CallResult, status: number, code: string) => {
  expect(r.status, r.text).toBe(status);
  expect(obj(r.body).code).toBe(code);
};

describe("an agent-server sandbox's own key", () => {
  it('opens the sandbox secret routes while it runs, with or without agent_profile_id', async () => {
    const sandbox = await agentServerSandbox();
    expect(sandbox.key).toMatch(/^acss_/);
    for (const query of ['', '?agent_profile_id=some-profile']) {
      const list = await h.call('GET', `/api/v1/sandboxes/${sandbox.id}/settings/secrets${query}`, {
        key: sandbox.key,
      });
      expect(list.status, list.text).toBe(200);
      expectOpenHandsShape('SecretNamesResponse', list.body);
      expect(obj(list.body).secrets).toEqual([{ name: 'DEPLOY_TOKEN', description: null }]);
    }
    const value = await h.call('GET', `/api/v1/sandboxes/${sandbox.id}/settings/secrets/DEPLOY_TOKEN`, {
      key: sandbox.key,
    });
    expect(value.text).toBe(DEPLOY);
    // Another sandbox's own key, or a made-up one, opens nothing here.
    const bobs = await agentServerSandbox(KEY_B);
    const path = `/api/v1/sandboxes/${sandbox.id}/settings/secrets/DEPLOY_TOKEN`;
    expectCode(await h.call('GET', path, { key: bobs.key }), 401, 'UNAUTHENTICATED');
    expectCode(await h.call('GET', path, { key: `acss_${'x'.repeat(43)}` }), 401, 'UNAUTHENTICATED');
    // Paused: its key opens nothing until it runs again.
    expect((await h.call('POST', `/api/v1/sandboxes/${sandbox.id}/pause`)).status).toBe(200);
    expectCode(await h.call('GET', path, { key: sandbox.key }), 401, 'SANDBOX_NOT_RUNNING');
  });
});

describe('GET /api/v1/users/me?expose_secrets=true', () => {
  it('shows the secret values to the user holding the key of one of their running sandboxes', async () => {
    const sandbox = await agentServerSandbox();
    const exposed = await me('?expose_secrets=true', sandbox.key);
    expect(exposed.status, exposed.text).toBe(200);
    expectOpenHandsShape('UserInfo', exposed.body);
    // What OpenHandsCloudWorkspace.get_llm() reads: the flat fields, and a profile by name.
    expect(exposed.body).toMatchObject({
      id: 'alice',
      llm_model: 'openai/gpt-4o',
      llm_api_key: MODEL_KEY,
      search_api_key: SEARCH_KEY,
      agent_settings: { llm: { model: 'openai/gpt-4o', api_key: MODEL_KEY } },
      llm_profiles: { profiles: { fast: { model: 'openai/gpt-4o-mini', api_key: PROFILE_KEY } } },
    });
  });

  it('masks them without expose_secrets, whatever keys come with it', async () => {
    const sandbox = await agentServerSandbox();
    for (const query of ['', '?expose_secrets=false']) {
      const masked = await me(query, sandbox.key);
      expect(masked.status, masked.text).toBe(200);
      expect(masked.body).toMatchObject({ llm_model: 'openai/gpt-4o', llm_api_key: '**********' });
      expect(masked.text).not.toContain(MODEL_KEY);
      expect(masked.text).not.toContain(PROFILE_KEY);
    }
  });

  it('refuses with 403 and says why: no sandbox key, not such a key, another user’s, a paused sandbox’s', async () => {
    const sandbox = await agentServerSandbox();
    const bobs = await agentServerSandbox(KEY_B);
    expectCode(await me('?expose_secrets=true', null), 403, 'SESSION_API_KEY_REQUIRED');
    // The user's own API key is not a sandbox's key.
    expectCode(await me('?expose_secrets=true', KEY_A), 403, 'SESSION_API_KEY_INVALID');
    // Bob's sandbox key with Alice's API key, and Alice's sandbox key with Bob's.
    expectCode(await me('?expose_secrets=true', bobs.key), 403, 'SESSION_API_KEY_INVALID');
    expectCode(await me('?expose_secrets=true', sandbox.key, KEY_B), 403, 'SESSION_API_KEY_INVALID');
    expect((await h.call('POST', `/api/v1/sandboxes/${sandbox.id}/pause`)).status).toBe(200);
    expectCode(await me('?expose_secrets=true', sandbox.key), 403, 'SESSION_API_KEY_INVALID');
    // A value that is not a flag.
    expect((await me('?expose_secrets=maybe', sandbox.key)).status).toBe(422);
    for (const text of h.responses)
      for (const secret of [MODEL_KEY, SEARCH_KEY, PROFILE_KEY]) expect(text).not.toContain(secret);
  });

  it("takes a conversation's key as its sandbox's, and refuses another user's conversation key as theirs", async () => {
    const started = await h.call('POST', '/api/conversations', { body: {} });
    expect(started.status, started.text).toBe(200);
    const id = obj(started.body).conversation_id as string;
    await h.idle();
    const conversation = await h.call('GET', `/api/conversations/${id}`);
    const conversationKey = obj(conversation.body).session_api_key as string;
    expect(conversationKey).toMatch(/^acsc_/);
    const exposed = await me('?expose_secrets=true', conversationKey);
    expect(exposed.status, exposed.text).toBe(200);
    expect(obj(exposed.body).llm_api_key).toBe(MODEL_KEY);
    expectCode(await me('?expose_secrets=true', conversationKey, KEY_B), 403, 'SESSION_API_KEY_MISMATCH');
  });
});
