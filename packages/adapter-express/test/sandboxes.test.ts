import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_MEMORY_SPEC } from '@acs/adapter-memory';
import { arr, errorCode, HEX32, items, obj, startHarness, type Harness } from './harness.js';

const ALPINE = { id: 'alpine', image: 'acs-sandbox:alpine', working_dir: '/work', description: 'Alpine' };

let h: Harness;

beforeEach(async () => {
  h = await startHarness({ ports: { specs: [DEFAULT_MEMORY_SPEC, ALPINE] } });
});

afterEach(async () => {
  await h.close();
});

async function start(options: { body?: unknown; query?: string } = {}): Promise<Record<string, unknown>> {
  const r = await h.call(
    'POST',
    `/api/v1/sandboxes${options.query ?? ''}`,
    options.body !== undefined ? { body: options.body } : {},
  );
  expect(r.status, r.text).toBe(200);
  return obj(r.body);
}

async function running(): Promise<string> {
  const box = await start();
  await h.idle();
  return box.id as string;
}

async function status(id: string): Promise<string> {
  const r = await h.call('GET', `/api/v1/sandboxes/${id}`);
  expect(r.status, r.text).toBe(200);
  return obj(r.body).status as string;
}

async function action(id: string, verb: 'pause' | 'resume') {
  return h.call('POST', `/api/v1/sandboxes/${id}/${verb}`);
}

describe('POST /api/v1/sandboxes', () => {
  it('with no body uses the default spec; STARTING or RUNNING at once, RUNNING after start-up', async () => {
    const box = await start();
    expect(box).toMatchObject({
      id: expect.stringMatching(HEX32) as string,
      created_by_user_id: 'alice',
      sandbox_spec_id: 'bookworm',
      session_api_key: null,
    });
    expect(['STARTING', 'RUNNING']).toContain(box.status);
    await h.idle();
    const r = await h.call('GET', `/api/v1/sandboxes/${box.id as string}`);
    expect(obj(r.body)).toMatchObject({ id: box.id, status: 'RUNNING', sandbox_spec_id: 'bookworm', exposed_urls: [] });
    expect(h.ports.runtime.peek(box.id as string)?.request.spec.image).toBe('acs-sandbox:bookworm');
  });

  it('takes the spec from the body, or from the query; the body wins', async () => {
    expect((await start({ body: { sandbox_spec_id: 'alpine' } })).sandbox_spec_id).toBe('alpine');
    expect((await start({ query: '?sandbox_spec_id=alpine' })).sandbox_spec_id).toBe('alpine');
    expect(
      (await start({ body: { sandbox_spec_id: 'bookworm' }, query: '?sandbox_spec_id=alpine' })).sandbox_spec_id,
    ).toBe('bookworm');
    expect((await start({ body: { sandbox_spec_id: null }, query: '?sandbox_spec_id=alpine' })).sandbox_spec_id).toBe(
      'alpine',
    );
    expect((await start({ body: {} })).sandbox_spec_id).toBe('bookworm');
    await h.idle();
    const specs = items((await h.call('GET', '/api/v1/sandboxes/search')).body).map((b) => b.sandbox_spec_id as string);
    expect(specs.sort()).toEqual(['alpine', 'alpine', 'alpine', 'bookworm', 'bookworm']);
  });

  it('an unknown spec → 404 SANDBOX_SPEC_NOT_FOUND, in body or query, and nothing is created', async () => {
    for (const options of [{ body: { sandbox_spec_id: 'nope' } }, { query: '?sandbox_spec_id=nope' }]) {
      const r = await h.call(
        'POST',
        `/api/v1/sandboxes${options.query ?? ''}`,
        'body' in options ? { body: options.body } : {},
      );
      expect(r.status).toBe(404);
      expect(errorCode(r.body)).toBe('SANDBOX_SPEC_NOT_FOUND');
    }
    await h.idle();
    expect((await h.call('GET', '/api/v1/sandboxes/search')).body).toEqual({ items: [], next_page_id: null });
    expect(h.ports.runtime.calls).toEqual([]);
  });

  it('an invalid spec id → 422', async () => {
    for (const body of [{ sandbox_spec_id: 7 }, { sandbox_spec_id: '' }, []]) {
      const r = await h.call('POST', '/api/v1/sandboxes', { body });
      expect(r.status, JSON.stringify(body)).toBe(422);
    }
    expect((await h.call('POST', '/api/v1/sandboxes?sandbox_spec_id=')).status).toBe(422);
  });

  it('a runtime that fails to create: 200 STARTING, then ERROR with the runtime message', async () => {
    h.ports.runtime.failNext('create', { message: 'image pull failed' });
    const box = await start();
    await h.idle();
    const r = obj((await h.call('GET', `/api/v1/sandboxes/${box.id as string}`)).body);
    expect(r.status).toBe('ERROR');
    expect(r.status_detail).toContain('image pull failed');
    expect(r.exposed_urls).toBeNull();
  });

  it('a runtime that is unavailable: 503 SANDBOXES_UNAVAILABLE with the reason, and nothing stored', async () => {
    h.ports.runtime.setUnavailable('no Docker engine answers at /var/run/docker.sock');
    const r = await h.call('POST', '/api/v1/sandboxes');
    expect(r.status, r.text).toBe(503);
    expect(errorCode(r.body)).toBe('SANDBOXES_UNAVAILABLE');
    expect(obj(r.body).message).toContain('no Docker engine answers at /var/run/docker.sock');
    expect(obj((await h.call('GET', '/api/v1/sandboxes/search')).body).items).toEqual([]);
    expect(h.ports.runtime.calls.filter((c) => c.operation === 'create')).toEqual([]);
  });

  it('a runtime that fails to create the sandbox: it ends in ERROR with the reason, never a 500', async () => {
    h.ports.runtime.failNext('create', { message: 'image acs-sandbox:bookworm is not on this Docker engine' });
    const r = await h.call('POST', '/api/v1/sandboxes');
    expect(r.status).toBe(200);
    const id = obj(r.body).id as string;
    await h.idle();
    const box = obj((await h.call('GET', `/api/v1/sandboxes/${id}`)).body);
    expect(box.status).toBe('ERROR');
    expect(box.status_detail).toContain('is not on this Docker engine');
  });
});

describe('pause, resume, delete', () => {
  it('pause → {"success":true} and PAUSED; again → 200; resume → RUNNING; again → 200', async () => {
    const id = await running();
    const pause = await action(id, 'pause');
    expect(pause.status).toBe(200);
    expect(pause.body).toEqual({ success: true });
    expect(await status(id)).toBe('PAUSED');
    expect(obj((await h.call('GET', `/api/v1/sandboxes/${id}`)).body).exposed_urls).toBeNull();

    const pauseAgain = await action(id, 'pause');
    expect(pauseAgain.status).toBe(200);
    expect(pauseAgain.body).toEqual({ success: true });
    expect(await status(id)).toBe('PAUSED');

    const resume = await action(id, 'resume');
    expect(resume.status).toBe(200);
    expect(resume.body).toEqual({ success: true });
    await h.idle();
    expect(await status(id)).toBe('RUNNING');

    const resumeAgain = await action(id, 'resume');
    expect(resumeAgain.status).toBe(200);
    expect(resumeAgain.body).toEqual({ success: true });
    expect(await status(id)).toBe('RUNNING');

    // The idempotent repeats did not call the runtime again.
    const ops = h.ports.runtime.calls
      .filter((c) => c.operation === 'pause' || c.operation === 'resume')
      .map((c) => c.operation);
    expect(ops).toEqual(['pause', 'resume']);
  });

  it('an unknown id → 404 SANDBOX_NOT_FOUND for get, pause, resume and delete', async () => {
    for (const [method, path] of [
      ['GET', '/api/v1/sandboxes/no-such-box'],
      ['POST', '/api/v1/sandboxes/no-such-box/pause'],
      ['POST', '/api/v1/sandboxes/no-such-box/resume'],
      ['DELETE', '/api/v1/sandboxes/no-such-box'],
    ] as const) {
      const r = await h.call(method, path);
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(errorCode(r.body)).toBe('SANDBOX_NOT_FOUND');
    }
  });

  it('DELETE → {"success":true}; then GET 404, resume and pause 409, DELETE again 404, and it is gone from lists', async () => {
    const id = await running();
    const del = await h.call('DELETE', `/api/v1/sandboxes/${id}`);
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ success: true });
    expect(h.ports.runtime.peek(id)).toBeUndefined();

    const get = await h.call('GET', `/api/v1/sandboxes/${id}`);
    expect(get.status).toBe(404);
    expect(errorCode(get.body)).toBe('SANDBOX_NOT_FOUND');
    for (const verb of ['resume', 'pause'] as const) {
      const r = await action(id, verb);
      expect(r.status, verb).toBe(409);
      expect(errorCode(r.body)).toBe('ILLEGAL_SANDBOX_TRANSITION');
    }
    const again = await h.call('DELETE', `/api/v1/sandboxes/${id}`);
    expect(again.status).toBe(404);
    expect(errorCode(again.body)).toBe('SANDBOX_NOT_FOUND');
    expect((await h.call('GET', '/api/v1/sandboxes/search')).body).toEqual({ items: [], next_page_id: null });
    expect((await h.call('GET', `/api/v1/sandboxes?id=${id}`)).body).toEqual([null]);
  });

  it('DELETE accepts the ?sandbox_id= query OpenHands clients send', async () => {
    const id = await running();
    const r = await h.call('DELETE', `/api/v1/sandboxes/${id}?sandbox_id=${id}`);
    expect(r.status).toBe(200);
    expect((await h.call('GET', `/api/v1/sandboxes/${id}`)).status).toBe(404);
  });

  it('pausing a sandbox that is still STARTING → 409 ILLEGAL_SANDBOX_TRANSITION; resuming it is a no-op', async () => {
    h.ports.runtime.hold();
    const box = await start();
    const id = box.id as string;
    expect(box.status).toBe('STARTING');
    const pause = await action(id, 'pause');
    expect(pause.status).toBe(409);
    expect(errorCode(pause.body)).toBe('ILLEGAL_SANDBOX_TRANSITION');
    expect((await action(id, 'resume')).status).toBe(200);
    expect(await status(id)).toBe('STARTING');
    h.ports.runtime.release();
    await h.idle();
    expect(await status(id)).toBe('RUNNING');
  });

  it('a sandbox in ERROR cannot be paused or resumed (409) but can be deleted', async () => {
    const id = await running();
    h.ports.runtime.crash(id);
    expect(await status(id)).toBe('ERROR');
    for (const verb of ['pause', 'resume'] as const) {
      const r = await action(id, verb);
      expect(r.status, verb).toBe(409);
      expect(errorCode(r.body)).toBe('ILLEGAL_SANDBOX_TRANSITION');
    }
    expect((await h.call('DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
  });

  it('a runtime failure on pause → 502 SANDBOX_RUNTIME_FAILED and the sandbox stays RUNNING', async () => {
    const id = await running();
    h.ports.runtime.failNext('pause', { message: 'cgroup freeze failed' });
    const r = await action(id, 'pause');
    expect(r.status).toBe(502);
    expect(errorCode(r.body)).toBe('SANDBOX_RUNTIME_FAILED');
    expect(obj(r.body).message).toContain('cgroup freeze failed');
    expect(await status(id)).toBe('RUNNING');
    // And it works on the next try.
    expect((await action(id, 'pause')).status).toBe(200);
    expect(await status(id)).toBe('PAUSED');
  });

  it('a runtime failure on resume → 502, state unchanged; on delete the delete still wins and the removal is retried', async () => {
    const id = await running();
    expect((await action(id, 'pause')).status).toBe(200);
    h.ports.runtime.failNext('resume', { message: 'thaw failed' });
    const resume = await action(id, 'resume');
    expect(resume.status).toBe(502);
    expect(errorCode(resume.body)).toBe('SANDBOX_RUNTIME_FAILED');
    expect(await status(id)).toBe('PAUSED');
    h.ports.runtime.failNext('delete', { message: 'busy' });
    const del = await h.call('DELETE', `/api/v1/sandboxes/${id}`);
    expect(del.status).toBe(200);
    expect((await h.call('GET', `/api/v1/sandboxes/${id}`)).status).toBe(404);
    await h.service.idle();
    expect(h.ports.runtime.peek(id)).toBeUndefined();
  });

  it('the runtime unavailable → pause, resume and delete answer 503 SANDBOXES_UNAVAILABLE; GET still answers', async () => {
    const id = await running();
    const pausedId = await running();
    expect((await action(pausedId, 'pause')).status).toBe(200);
    h.ports.runtime.setUnavailable('engine down');
    const pause = await action(id, 'pause');
    expect(pause.status).toBe(503);
    expect(errorCode(pause.body)).toBe('SANDBOXES_UNAVAILABLE');
    expect(obj(pause.body).message).toContain('engine down');
    const resume = await action(pausedId, 'resume');
    expect(resume.status).toBe(503);
    expect(errorCode(resume.body)).toBe('SANDBOXES_UNAVAILABLE');
    const del = await h.call('DELETE', `/api/v1/sandboxes/${id}`);
    expect(del.status).toBe(503);
    expect(await status(id)).toBe('RUNNING');
    expect(await status(pausedId)).toBe('PAUSED');
    h.ports.runtime.setUnavailable(null);
    expect((await action(id, 'pause')).status).toBe(200);
  });
});

describe('batch get and search', () => {
  it('GET /api/v1/sandboxes?id=a&id=b keeps the order with null holes', async () => {
    const a = await running();
    const b = await running();
    const r = await h.call('GET', `/api/v1/sandboxes?id=${b}&id=unknown&id=${a}`);
    expect(r.status).toBe(200);
    expect(arr(r.body).map((x) => (x === null ? null : obj(x).id))).toEqual([b, null, a]);
    const commas = arr((await h.call('GET', `/api/v1/sandboxes?id=${a},${b}`)).body);
    expect(commas.map((x) => obj(x).id)).toEqual([a, b]);
    expect((await h.call('GET', '/api/v1/sandboxes')).status).toBe(422);
    const many = Array.from({ length: 101 }, (_, i) => `id=s${i}`).join('&');
    expect((await h.call('GET', `/api/v1/sandboxes?${many}`)).status).toBe(422);
  });

  it('batch get and GET refresh the status from the runtime', async () => {
    const a = await running();
    h.ports.runtime.crash(a, 'killed');
    const [box] = arr((await h.call('GET', `/api/v1/sandboxes?id=${a}`)).body);
    expect(obj(box)).toMatchObject({ status: 'ERROR', status_detail: 'killed' });
  });

  it('search lists newest first', async () => {
    const a = await running();
    const b = await running();
    const page = (await h.call('GET', '/api/v1/sandboxes/search')).body;
    const listed = items(page);
    expect(listed.map((x) => x.id).sort()).toEqual([a, b].sort());
    // Newest first by (created_at, id): the system clock may give both the same millisecond.
    const key = (x: Record<string, unknown>) => `${x.created_at as string} ${x.id as string}`;
    expect(key(listed[0] as Record<string, unknown>) > key(listed[1] as Record<string, unknown>)).toBe(true);
    expect((listed[0]?.created_at as string) >= (listed[1]?.created_at as string)).toBe(true);
    expect(obj(page).next_page_id).toBeNull();
  });
});

describe('sandbox specs', () => {
  it('search lists the configured specs, default first', async () => {
    const r = await h.call('GET', '/api/v1/sandbox-specs/search');
    expect(r.status).toBe(200);
    const specs = items(r.body);
    expect(specs.map((s) => s.id)).toEqual(['bookworm', 'alpine']);
    expect(specs[1]).toMatchObject({
      id: 'alpine',
      image: 'acs-sandbox:alpine',
      working_dir: '/work',
      description: 'Alpine',
      command: null,
      initial_env: {},
    });
    expect(obj(r.body).next_page_id).toBeNull();

    const first = await h.call('GET', '/api/v1/sandbox-specs/search?limit=1');
    expect(items(first.body).map((s) => s.id)).toEqual(['bookworm']);
    const next = obj(first.body).next_page_id as string;
    expect(typeof next).toBe('string');
    const second = await h.call('GET', `/api/v1/sandbox-specs/search?limit=1&page_id=${encodeURIComponent(next)}`);
    expect(items(second.body).map((s) => s.id)).toEqual(['alpine']);
    expect(obj(second.body).next_page_id).toBeNull();
  });

  it('GET /api/v1/sandbox-specs?id= batch keeps order with null holes; id is required', async () => {
    const r = await h.call('GET', '/api/v1/sandbox-specs?id=alpine&id=nope&id=bookworm');
    expect(r.status).toBe(200);
    expect(arr(r.body).map((x) => (x === null ? null : obj(x).id))).toEqual(['alpine', null, 'bookworm']);
    const missing = await h.call('GET', '/api/v1/sandbox-specs');
    expect(missing.status).toBe(422);
    expect(errorCode(missing.body)).toBe('VALIDATION_FAILED');
  });
});
