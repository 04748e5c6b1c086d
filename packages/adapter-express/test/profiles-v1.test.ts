import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { settlesWithin } from '@acs/core/testing';
import {
  arr,
  errorCode,
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

/** `/api/v1/settings/profiles…` and `POST /api/v1/app-conversations/{id}/switch_profile`. */

let h: Harness;
const gates: (() => void)[] = [];

beforeEach(async () => {
  h = await startHarness();
});

afterEach(async () => {
  for (const open of gates) open();
  gates.length = 0;
  await h.close();
});

const SETTINGS_KEY = 'sk-settings-key-0000000000000001';
const FAST_KEY = 'sk-profile-fast-key-000000000002';
const LOCAL_KEY = 'sk-profile-local-key-00000000003';

async function call(method: string, path: string, body?: unknown, key: string = KEY_A): Promise<CallResult> {
  return h.call(method, path, { key, ...(body !== undefined ? { body } : {}) });
}

async function ok(
  method: string,
  path: string,
  body?: unknown,
  key: string = KEY_A,
  status = 200,
): Promise<Record<string, unknown>> {
  const r = await call(method, path, body, key);
  expect(r.status, `${method} ${path}: ${r.text}`).toBe(status);
  return obj(r.body);
}

async function list(key: string = KEY_A): Promise<Record<string, unknown>> {
  const body = await ok('GET', '/api/v1/settings/profiles', undefined, key);
  expectOpenHandsShape('ProfileListResponse', body);
  return body;
}

async function save(name: string, body?: unknown, key: string = KEY_A): Promise<void> {
  const r = await ok('POST', `/api/v1/settings/profiles/${name}`, body, key, 201);
  expectOpenHandsShape('ProfileMutationResponse', r);
  expect(r).toEqual({ name, message: `Profile '${name}' saved` });
}

const activeModel = async (key: string = KEY_A) =>
  obj(obj(obj((await call('GET', '/api/v1/settings', undefined, key)).body).agent_settings).llm).model;

function expectCode(r: CallResult, status: number, code: string): void {
  expect(r.status, r.text).toBe(status);
  expect(errorCode(r.body)).toBe(code);
}

async function storeV1Settings(key: string = KEY_A): Promise<void> {
  const r = await call(
    'POST',
    '/api/v1/settings',
    { agent_settings_diff: { llm: { model: 'anthropic/claude-sonnet-4', api_key: SETTINGS_KEY } } },
    key,
  );
  expect(r.status, r.text).toBe(200);
}

describe('LLM profiles', () => {
  it('without settings: an empty list, and nothing can be saved (404 SETTINGS_NOT_FOUND) or activated (404 PROFILE_NOT_FOUND)', async () => {
    expect(await list()).toEqual({ profiles: [], active_profile: null });
    expectCode(await call('POST', '/api/v1/settings/profiles/fast'), 404, 'SETTINGS_NOT_FOUND');
    expectCode(await call('POST', '/api/v1/settings/profiles/fast/activate'), 404, 'PROFILE_NOT_FOUND');
    expectCode(
      await call('POST', '/api/v1/settings/profiles/fast/rename', { new_name: 'quick' }),
      404,
      'SETTINGS_NOT_FOUND',
    );
    // Deleting nothing is fine, and creates no settings.
    expect(await ok('DELETE', '/api/v1/settings/profiles/fast')).toEqual({
      name: 'fast',
      message: "Profile 'fast' deleted",
    });
    expect((await call('GET', '/api/v1/settings')).status).toBe(404);
  });

  it('lifecycle: save, list and get without the key, activate, rename, delete', async () => {
    await storeV1Settings();
    await save('current'); // the settings' own model and key
    await save('fast', { llm: { model: 'openai/gpt-4o-mini', api_key: FAST_KEY } });
    await save('local', {
      llm: { model: 'ollama/qwen', base_url: 'http://127.0.0.1:11434/v1', api_key: LOCAL_KEY },
      include_secrets: false,
    });
    expect(await list()).toEqual({
      profiles: [
        { name: 'current', model: 'anthropic/claude-sonnet-4', base_url: null, api_key_set: true, stream: true },
        { name: 'fast', model: 'openai/gpt-4o-mini', base_url: null, api_key_set: true, stream: true },
        {
          name: 'local',
          model: 'ollama/qwen',
          base_url: 'http://127.0.0.1:11434/v1',
          api_key_set: false,
          stream: true,
        },
      ],
      active_profile: null,
    });

    const detail = await ok('GET', '/api/v1/settings/profiles/fast');
    expectOpenHandsShape('ProfileDetailResponse', detail);
    expectOpenHandsShape('LLM', detail.config);
    expect(detail).toEqual({
      name: 'fast',
      config: { model: 'openai/gpt-4o-mini', api_key: null, base_url: null, stream: true, is_subscription: false },
      api_key_set: true,
    });
    expectCode(await call('GET', '/api/v1/settings/profiles/nope'), 404, 'PROFILE_NOT_FOUND');

    // Activating makes the profile's model the settings' own, and shows it active.
    const activated = await ok('POST', '/api/v1/settings/profiles/fast/activate');
    expectOpenHandsShape('ActivateProfileResponse', activated);
    expect(activated).toEqual({ name: 'fast', message: "Switched to profile 'fast'", model: 'openai/gpt-4o-mini' });
    expect(await activeModel()).toBe('openai/gpt-4o-mini');
    expect((await h.service.settings.loadWithSecrets('alice'))._unsafeUnwrap()?.llm_api_key).toBe(FAST_KEY);
    expect((await list()).active_profile).toBe('fast');
    expect(obj(obj((await call('GET', '/api/v1/settings')).body).llm_profiles)).toMatchObject({
      active: 'fast',
      profiles: { fast: { model: 'openai/gpt-4o-mini', api_key: null } },
    });
    expectCode(await call('POST', '/api/v1/settings/profiles/nope/activate'), 404, 'PROFILE_NOT_FOUND');

    // Renaming keeps the place, the key and the active flag; a taken name is 409.
    expectCode(
      await call('POST', '/api/v1/settings/profiles/fast/rename', { new_name: 'local' }),
      409,
      'PROFILE_NAME_TAKEN',
    );
    expectCode(
      await call('POST', '/api/v1/settings/profiles/nope/rename', { new_name: 'x' }),
      404,
      'PROFILE_NOT_FOUND',
    );
    const renamed = await ok('POST', '/api/v1/settings/profiles/fast/rename', { new_name: 'quick' });
    expectOpenHandsShape('ProfileMutationResponse', renamed);
    expect(renamed).toEqual({ name: 'quick', message: "Profile 'fast' renamed to 'quick'" });
    expect(await list()).toMatchObject({
      profiles: [{ name: 'current' }, { name: 'quick', api_key_set: true }, { name: 'local' }],
      active_profile: 'quick',
    });

    // Deleting the active one activates the first left.
    await ok('DELETE', '/api/v1/settings/profiles/quick');
    expect(await list()).toMatchObject({
      profiles: [{ name: 'current' }, { name: 'local' }],
      active_profile: 'current',
    });
    expect(await activeModel()).toBe('anthropic/claude-sonnet-4');
    expect((await h.service.settings.loadWithSecrets('alice'))._unsafeUnwrap()?.llm_api_key).toBe(SETTINGS_KEY);

    for (const text of h.responses)
      for (const secret of [SETTINGS_KEY, FAST_KEY, LOCAL_KEY]) expect(text).not.toContain(secret);
  });

  it('changing the settings’ model (V0 or V1) ends the active profile; overwriting keeps the stored key unless told otherwise', async () => {
    await storeV1Settings();
    await save('fast', { llm: { model: 'openai/gpt-4o-mini', api_key: FAST_KEY } });
    await ok('POST', '/api/v1/settings/profiles/fast/activate');
    await storeSettings(h, { llm_model: 'openai/gpt-4o' });
    expect((await list()).active_profile).toBeNull();
    await ok('POST', '/api/v1/settings/profiles/fast/activate');
    await ok('POST', '/api/v1/settings', { conversation_settings_diff: { max_iterations: 5 } });
    expect((await list()).active_profile).toBe('fast');
    await ok('POST', '/api/v1/settings', {
      agent_settings_diff: { llm: { base_url: 'https://other.example.com/v1' } },
    });
    expect((await list()).active_profile).toBeNull();

    // Overwrite without a key: the stored one stays (the GET → edit → POST round trip).
    await save('fast', { llm: { model: 'openai/gpt-4.1-mini' } });
    const stored = async () => {
      const settings = (await h.service.settings.loadWithSecrets('alice'))._unsafeUnwrap();
      return settings?.llm_profiles.profiles.find((p) => p.name === 'fast') ?? null;
    };
    expect(await stored()).toMatchObject({ model: 'openai/gpt-4.1-mini', api_key: FAST_KEY });
    await save('fast', {
      llm: { model: 'openai/gpt-4.1-mini', api_key: 'sk-new-fast' },
      preserve_existing_api_key: true,
    });
    expect((await stored())?.api_key).toBe(FAST_KEY);
    await save('fast', { llm: { model: 'openai/gpt-4.1-mini', api_key: '' } });
    expect((await stored())?.api_key).toBeNull();
  });

  it('a profile carries llm.stream: saved with it (or the settings’ own), activated into llm_stream, and ending the active profile when changed', async () => {
    await storeV1Settings();
    await save('plain', { llm: { model: 'openai/qwen-local', stream: false } });
    await save('default', { llm: { model: 'openai/gpt-4o-mini' } });
    await ok('POST', '/api/v1/settings', { agent_settings_diff: { llm: { stream: false } } });
    await save('current');
    expect(arr((await list()).profiles).map((p) => [obj(p).name, obj(p).stream])).toEqual([
      ['plain', false],
      ['default', true],
      ['current', false],
    ]);
    expect(obj((await ok('GET', '/api/v1/settings/profiles/plain')).config).stream).toBe(false);

    await ok('POST', '/api/v1/settings/profiles/default/activate');
    const llm = async () => obj(obj(obj((await call('GET', '/api/v1/settings')).body).agent_settings).llm);
    expect(await llm()).toMatchObject({ model: 'openai/gpt-4o-mini', stream: true });
    await ok('POST', '/api/v1/settings/profiles/plain/activate');
    expect(await llm()).toMatchObject({ model: 'openai/qwen-local', stream: false });
    expect(obj((await call('GET', '/api/settings')).body).llm_stream).toBe(false);
    expect((await list()).active_profile).toBe('plain');
    // Streaming turned on is no longer the profile's configuration.
    await storeSettings(h, { llm_stream: true });
    expect((await list()).active_profile).toBeNull();
  });

  it('keeps at most 10 profiles (409 PROFILE_LIMIT_REACHED), and takes overwrites at the limit', async () => {
    await storeV1Settings();
    for (let i = 0; i < 10; i++) await save(`p${i}`, { llm: { model: `openai/m${i}` } });
    expectCode(
      await call('POST', '/api/v1/settings/profiles/p10', { llm: { model: 'openai/m10' } }),
      409,
      'PROFILE_LIMIT_REACHED',
    );
    await save('p3', { llm: { model: 'openai/other' } });
    expect(arr((await list()).profiles)).toHaveLength(10);
  });

  it('refuses bad names and bodies with 422', async () => {
    await storeV1Settings();
    for (const name of ['bad%20name', 'a'.repeat(65), 'x%2Fy', 'caf%C3%A9']) {
      const r = await call('POST', `/api/v1/settings/profiles/${name}`, {});
      expect(r.status, `${name}: ${r.text}`).toBe(422);
    }
    expectCode(
      await call('POST', '/api/v1/settings/profiles/ok', { llm: { model: 'x', custom_header: 'y' } }),
      422,
      'VALIDATION_FAILED',
    );
    expectCode(
      await call('POST', '/api/v1/settings/profiles/ok', { llm: { base_url: 'not a url' } }),
      422,
      'VALIDATION_FAILED',
    );
    expectCode(
      await call('POST', '/api/v1/settings/profiles/ok', { include_secrets: 'yes' }),
      422,
      'VALIDATION_FAILED',
    );
    expectCode(
      await call('POST', '/api/v1/settings/profiles/ok/rename', { new_name: 'has space' }),
      422,
      'VALIDATION_FAILED',
    );
    expectCode(await call('POST', '/api/v1/settings/profiles/ok/rename', {}), 422, 'VALIDATION_FAILED');
    // 1.11's computed field and the LLM fields this service ignores are taken.
    await save('ok', { llm: { model: 'openai/gpt-4o', is_subscription: false, temperature: 0.1, usage_id: 'agent' } });
    expect(arr((await list()).profiles)).toHaveLength(1);
  });

  it('keeps users apart', async () => {
    await storeV1Settings();
    await storeV1Settings(KEY_B);
    await save('fast', { llm: { model: 'openai/gpt-4o-mini', api_key: FAST_KEY } });
    expect(await list(KEY_B)).toEqual({ profiles: [], active_profile: null });
    expectCode(await call('GET', '/api/v1/settings/profiles/fast', undefined, KEY_B), 404, 'PROFILE_NOT_FOUND');
    expectCode(
      await call('POST', '/api/v1/settings/profiles/fast/activate', undefined, KEY_B),
      404,
      'PROFILE_NOT_FOUND',
    );
    expectCode(
      await call('POST', '/api/v1/settings/profiles/fast/rename', { new_name: 'mine' }, KEY_B),
      404,
      'PROFILE_NOT_FOUND',
    );
    await ok('DELETE', '/api/v1/settings/profiles/fast', undefined, KEY_B);
    expect(arr((await list()).profiles)).toHaveLength(1);
    expect(await activeModel(KEY_B)).toBe('anthropic/claude-sonnet-4');
  });
});

describe('POST /api/v1/app-conversations/{id}/switch_profile', () => {
  /** The model's first answer waits for `release`; the test learns when that call was made. */
  function holdFirstCall(): { called: Promise<void>; release: () => void } {
    let release!: () => void;
    let called!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const calledPromise = new Promise<void>((resolve) => (called = resolve));
    gates.push(release);
    h.ports.llm.respondWith(async (_request, index) => {
      if (index === 0) {
        called();
        await released;
        return { tool_calls: [{ name: 'think', arguments: { thought: 'first step' } }] };
      }
      return { content: 'Done.' };
    });
    return { called: calledPromise, release };
  }

  it('the next model calls of a running conversation use the profile’s model, base URL, key and streaming', async () => {
    await storeV1Settings();
    await save('local', {
      llm: { model: 'openai/qwen-local', base_url: 'http://127.0.0.1:11434/v1', api_key: LOCAL_KEY, stream: false },
    });
    const first = holdFirstCall();
    const task = await startAppConversation(h, {
      initial_message: { role: 'user', content: [{ type: 'text', text: 'work' }], run: true },
    });
    const id = task.app_conversation_id as string;
    await settlesWithin(first.called, 'the first model call');

    const switched = await ok('POST', `/api/v1/app-conversations/${id}/switch_profile`, { profile_name: 'local' });
    expectOpenHandsShape('Success', switched);
    expect(switched).toEqual({ success: true });
    first.release();
    await h.idle();
    await settlesWithin(
      (async () => {
        while (h.ports.llm.requests.length < 2) await new Promise((resolve) => setTimeout(resolve, 10));
      })(),
      'the second model call',
    );
    const [before, after] = h.ports.llm.requests;
    expect(before?.credentials).toEqual({ model: 'anthropic/claude-sonnet-4', api_key: SETTINGS_KEY, base_url: null });
    expect(after?.credentials).toEqual({
      model: 'openai/qwen-local',
      api_key: LOCAL_KEY,
      base_url: 'http://127.0.0.1:11434/v1',
    });
    // The settings stream; the profile does not.
    expect(before?.onDelta).toBeTypeOf('function');
    expect(after?.onDelta).toBeUndefined();
    expect(obj((await call('GET', `/api/v1/app-conversations/${id}`)).body).llm_model).toBe('openai/qwen-local');
    // The settings themselves are unchanged.
    expect(await activeModel()).toBe('anthropic/claude-sonnet-4');
  });

  it('a profile without a key uses the settings’ key; a rename keeps the switch; a deleted profile leaves the conversation on its model with the settings’ key', async () => {
    await storeV1Settings();
    await save('keyless', {
      llm: { model: 'openai/gpt-4o-mini', base_url: 'https://proxy.example.com/v1' },
      include_secrets: false,
    });
    h.ports.llm.respondWith(() => ({ content: 'Done.' }));
    const task = await startAppConversation(h, {});
    const id = task.app_conversation_id as string;
    await h.idle();
    const sendAndGetCredentials = async () => {
      const before = h.ports.llm.requests.length;
      const r = await call('POST', `/api/v1/app-conversations/${id}/send-message`, {
        role: 'user',
        content: [{ type: 'text', text: 'again' }],
        run: true,
      });
      expect(r.status, r.text).toBe(200);
      await settlesWithin(
        (async () => {
          while (h.ports.llm.requests.length <= before) await new Promise((resolve) => setTimeout(resolve, 10));
        })(),
        'a model call',
      );
      return h.ports.llm.requests[before]?.credentials;
    };

    await ok('POST', `/api/v1/app-conversations/${id}/switch_profile`, { profile_name: 'keyless' });
    expect(await sendAndGetCredentials()).toEqual({
      model: 'openai/gpt-4o-mini',
      api_key: SETTINGS_KEY,
      base_url: 'https://proxy.example.com/v1',
    });
    await h.idle();

    await ok('POST', '/api/v1/settings/profiles/keyless/rename', { new_name: 'renamed' });
    expect(await sendAndGetCredentials()).toEqual({
      model: 'openai/gpt-4o-mini',
      api_key: SETTINGS_KEY,
      base_url: 'https://proxy.example.com/v1',
    });
    await h.idle();

    await ok('DELETE', '/api/v1/settings/profiles/renamed');
    expect(await sendAndGetCredentials()).toEqual({
      model: 'openai/gpt-4o-mini',
      api_key: SETTINGS_KEY,
      base_url: null,
    });
    await h.idle();
  });

  it('404 for an unknown profile, settings or conversation, and for another user’s conversation; 422 for a bad body', async () => {
    h.ports.llm.respondWith(() => ({ content: 'Done.' }));
    await storeSettings(h);
    const id = (await startAppConversation(h, {})).app_conversation_id as string;
    await h.idle();
    expectCode(
      await call('POST', `/api/v1/app-conversations/${id}/switch_profile`, { profile_name: 'nope' }),
      404,
      'PROFILE_NOT_FOUND',
    );
    expectCode(
      await call('POST', `/api/v1/app-conversations/${'f'.repeat(32)}/switch_profile`, { profile_name: 'nope' }),
      404,
      'CONVERSATION_NOT_FOUND',
    );
    await save('fast', { llm: { model: 'openai/gpt-4o-mini', api_key: FAST_KEY } });
    expectCode(
      await call('POST', `/api/v1/app-conversations/${id}/switch_profile`, { profile_name: 'fast' }, KEY_B),
      404,
      'CONVERSATION_NOT_FOUND',
    );
    expectCode(
      await call('POST', `/api/v1/app-conversations/${id}/switch_profile`, { profile_name: '' }),
      422,
      'VALIDATION_FAILED',
    );
    expectCode(await call('POST', `/api/v1/app-conversations/${id}/switch_profile`, {}), 422, 'VALIDATION_FAILED');
    // Bob's own conversation cannot be switched to Alice's profile.
    await storeSettings(h, undefined, KEY_B);
    const bobs = (await startAppConversation(h, {}, KEY_B)).app_conversation_id as string;
    await h.idle();
    expectCode(
      await call('POST', `/api/v1/app-conversations/${bobs}/switch_profile`, { profile_name: 'fast' }, KEY_B),
      404,
      'PROFILE_NOT_FOUND',
    );
    expect(obj((await call('GET', `/api/v1/app-conversations/${id}`)).body).llm_model).toBe(
      'anthropic/claude-sonnet-4',
    );
  });
});
