import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  concretePath,
  createConversation,
  errorCode,
  fetchOpenApi,
  KEY_A,
  obj,
  operationsOf,
  startHarness,
  storeSettings,
  type CallResult,
  type Harness,
  type OpenApiDoc,
} from './harness.js';

const JSON_HEADERS = { 'Content-Type': 'application/json' };

describe('malformed requests', () => {
  let h: Harness;
  let doc: OpenApiDoc;
  let conversationId: string;
  /** Every response of this file, to check the error body shape at the end. */
  const results: { label: string; r: CallResult }[] = [];

  const send = async (label: string, method: string, path: string, options: Parameters<Harness['call']>[2] = {}) => {
    const r = await h.call(method, path, options);
    results.push({ label, r });
    return r;
  };

  beforeAll(async () => {
    h = await startHarness();
    doc = await fetchOpenApi(h);
    await storeSettings(h);
    conversationId = await createConversation(h);
    await h.idle();
  });

  afterAll(async () => {
    await h.close();
  });

  /** The POST routes that take a JSON body, as concrete paths. */
  const bodyRoutes = () =>
    operationsOf(doc)
      .filter(({ method, operation }) => method === 'post' && operation.requestBody)
      .map(({ path }) =>
        path.includes('{conversation_id}') ? path.replace('{conversation_id}', conversationId) : concretePath(path),
      );

  it('malformed JSON → 400 MALFORMED_JSON on every route that takes a body', async () => {
    const routes = bodyRoutes();
    expect(routes).toHaveLength(23);
    for (const path of routes) {
      for (const raw of ['{"a":', '{a:1}', "{'a':1}", '{"a":1,}', '{"a":1}}', 'nul', '{"a":"\\x"}']) {
        const r = await send(`${path} ${raw}`, 'POST', path, { rawBody: raw, headers: JSON_HEADERS });
        expect(r.status, `${path} ${raw}: ${r.text}`).toBe(400);
        expect(errorCode(r.body)).toBe('MALFORMED_JSON');
      }
    }
  });

  it('a body that is not JSON → 415 UNSUPPORTED_MEDIA_TYPE on every route that takes a body (but for a form on the OAuth endpoints, which take forms)', async () => {
    const formRoutes = ['/oauth/device/authorize', '/oauth/device/token'];
    for (const path of formRoutes) {
      const r = await send(`${path} form`, 'POST', path, {
        rawBody: 'device_code=x',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      });
      expect(r.status, `${path}: ${r.text}`).not.toBe(415);
      expect(r.status, `${path}: ${r.text}`).toBeLessThan(500);
    }
    for (const path of bodyRoutes()) {
      for (const [type, raw] of [
        ['text/plain', '{"language":"en"}'],
        ...(formRoutes.includes(path) ? [] : [['application/x-www-form-urlencoded', 'language=en']]),
        ['multipart/form-data; boundary=x', '--x\r\n\r\n--x--'],
        ['application/xml', '<a/>'],
      ]) {
        const r = await send(`${path} ${type}`, 'POST', path, {
          rawBody: raw,
          headers: { 'Content-Type': type as string },
        });
        expect(r.status, `${path} ${type}: ${r.text}`).toBe(415);
        expect(errorCode(r.body)).toBe('UNSUPPORTED_MEDIA_TYPE');
      }
      const untyped = await send(`${path} no content type`, 'POST', path, {
        rawBody: '{}',
        headers: { 'Content-Type': '' },
      });
      expect(untyped.status, `${path} without a content type: ${untyped.text}`).toBe(415);
    }
  });

  it('a charset other than UTF-8, or an unknown content encoding → 415', async () => {
    const latin1 = await send('latin1', 'POST', '/api/settings', {
      rawBody: '{}',
      headers: { 'Content-Type': 'application/json; charset=latin1' },
    });
    expect(latin1.status).toBe(415);
    expect(errorCode(latin1.body)).toBe('UNSUPPORTED_MEDIA_TYPE');
    const compress = await send('compress', 'POST', '/api/settings', {
      rawBody: '{}',
      headers: { ...JSON_HEADERS, 'Content-Encoding': 'compress' },
    });
    expect(compress.status).toBe(415);
  });

  it('a gzip body is accepted, and a body that claims gzip but is not → 400 (not 500)', async () => {
    const good = await send('gzip', 'POST', '/api/settings', {
      rawBody: gzipSync('{"language":"de"}'),
      headers: { ...JSON_HEADERS, 'Content-Encoding': 'gzip' },
    });
    expect(good.status, good.text).toBe(200);
    expect(obj((await h.call('GET', '/api/settings')).body).language).toBe('de');
    const bad = await send('bad gzip', 'POST', '/api/settings', {
      rawBody: '{"language":"fr"}',
      headers: { ...JSON_HEADERS, 'Content-Encoding': 'gzip' },
    });
    expect(bad.status, bad.text).toBe(400);
    expect(obj((await h.call('GET', '/api/settings')).body).language).toBe('de');
  });

  it('no body where one is required → 415; an empty JSON body → 400', async () => {
    for (const path of ['/api/settings', '/api/conversations', '/api/v1/app-conversations']) {
      const none = await send(`${path} no body`, 'POST', path);
      expect(none.status, `${path}: ${none.text}`).toBe(415);
      expect(errorCode(none.body)).toBe('UNSUPPORTED_MEDIA_TYPE');
      const empty = await send(`${path} empty`, 'POST', path, { rawBody: '', headers: JSON_HEADERS });
      expect(empty.status, `${path}: ${empty.text}`).toBe(400);
      expect(errorCode(empty.body)).toBe('MALFORMED_JSON');
    }
  });

  it('no body where it is optional is fine', async () => {
    expect((await send('sandbox no body', 'POST', '/api/v1/sandboxes')).status).toBe(200);
    expect((await send('start no body', 'POST', `/api/conversations/${conversationId}/start`)).status).toBe(200);
    expect((await send('stop no body', 'POST', `/api/conversations/${conversationId}/stop`)).status).toBe(200);
    await h.idle();
  });

  it('a body over 1 MiB → 413 PAYLOAD_TOO_LARGE, with or without a content length', async () => {
    const big = JSON.stringify({ language: 'x'.repeat(1024 * 1024) });
    for (const path of bodyRoutes()) {
      const r = await send(`${path} big`, 'POST', path, { rawBody: big, headers: JSON_HEADERS });
      expect(r.status, path).toBe(413);
      expect(errorCode(r.body)).toBe('PAYLOAD_TOO_LARGE');
    }
    const chunks = new TextEncoder().encode(big);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < chunks.length; i += 64 * 1024) controller.enqueue(chunks.slice(i, i + 64 * 1024));
        controller.close();
      },
    });
    const response = await fetch(`${h.baseUrl}/api/settings`, {
      method: 'POST',
      headers: { 'X-Session-API-Key': KEY_A, ...JSON_HEADERS },
      body: stream,
      duplex: 'half',
    });
    expect(response.status).toBe(413);
    expect(errorCode(await response.json())).toBe('PAYLOAD_TOO_LARGE');
    // Just under the limit is fine.
    const justUnder = JSON.stringify({ language: 'x', pad: 'y'.repeat(1024 * 1024 - 100) });
    expect(
      (await send('just under', 'POST', '/api/settings', { rawBody: justUnder, headers: JSON_HEADERS })).status,
    ).toBe(200);
  });

  it('JSON that is not an object (array, string, number, null, true) → 400 or 422, never 500', async () => {
    for (const path of bodyRoutes()) {
      for (const raw of ['[]', '[{"language":"en"}]', '"text"', '42', 'null', 'true']) {
        const r = await send(`${path} ${raw}`, 'POST', path, { rawBody: raw, headers: JSON_HEADERS });
        expect([400, 422], `${path} ${raw}: ${r.status} ${r.text}`).toContain(r.status);
      }
    }
  });

  it('path parameters that are not valid percent-encoding → 400, not 500', async () => {
    for (const [method, path] of [
      ['GET', '/api/conversations/%zz'],
      ['DELETE', '/api/conversations/%E0%A4%A'],
      ['GET', '/api/v1/sandboxes/%zz'],
      ['POST', '/api/v1/sandboxes/%zz/pause'],
      ['GET', '/api/v1/app-conversations/%'],
    ] as const) {
      const r = await send(`${method} ${path}`, method, path);
      expect(r.status, `${method} ${path}: ${r.text}`).toBe(400);
    }
  });

  it('odd query strings are 422 or ignored, never 500', async () => {
    for (const query of [
      '/api/v1/sandboxes/search?page_id=a&page_id=b',
      '/api/v1/sandboxes/search?page_id[x]=1',
      '/api/v1/app-conversations/search?title__contains=a&title__contains=b',
      '/api/v1/app-conversations/search?title__contains=' + 'a'.repeat(300),
      '/api/v1/app-conversations/search?include_sub_conversations=maybe',
      '/api/v1/sandboxes?id=' + 'x'.repeat(200),
      '/api/conversations?conversation_trigger=nope',
      '/api/v1/sandboxes/search?limit=%00',
      '/api/v1/app-conversations?ids=%E0%A4%A',
    ]) {
      const r = await send(query, 'GET', query);
      expect([200, 400, 422], `${query}: ${r.status} ${r.text}`).toContain(r.status);
    }
  });

  it('for every POST route of the document, bad bodies never cause a 5xx', async () => {
    const deep = (n: number): unknown => (n === 0 ? 'x' : { a: [deep(n - 1)] });
    const badValues: unknown[] = [
      null,
      '',
      'x'.repeat(20_000),
      0,
      -1,
      1.5,
      1e308,
      -1e308,
      Number.MAX_SAFE_INTEGER + 2,
      true,
      [],
      [null],
      [[['x']]],
      {},
      { nested: { garbage: [1, { x: null }] } },
      deep(200),
      '../../etc/passwd',
      '\u0000\u202e',
    ];
    const ops = operationsOf(doc).filter(({ method }) => method === 'post');
    expect(ops.length).toBeGreaterThanOrEqual(8);
    let sent = 0;
    for (const { path, operation } of ops) {
      const concrete = path.includes('{conversation_id}')
        ? path.replace('{conversation_id}', conversationId)
        : concretePath(path);
      const schema = operation.requestBody?.content['application/json']?.schema;
      const fields = Object.keys(schema?.properties ?? {});
      const bodies: unknown[] = [
        ...badValues.map((v) => ({ unknown_field: v })),
        { ...Object.fromEntries(fields.map((f) => [f, null])) },
        { ...Object.fromEntries(fields.map((f) => [f, { deeply: [[[{}]]] }])) },
      ];
      for (const field of fields) for (const value of badValues) bodies.push({ [field]: value });
      for (const body of bodies) {
        const r = await send(`${path} ${JSON.stringify(body).slice(0, 80)}`, 'POST', concrete, { body });
        expect(r.status, `POST ${path} ${JSON.stringify(body).slice(0, 200)} → ${r.text}`).toBeLessThan(500);
        sent++;
      }
      // Numbers JSON can carry but JavaScript cannot, and prototype-pollution keys.
      const rawBodies = [
        ...fields.map((f) => `{"${f}": 1e400}`),
        ...fields.map((f) => `{"${f}": {"__proto__": {"polluted": true}}}`),
        '{"x": -1e400}',
        `{"x": ${'9'.repeat(400)}}`,
        '{"__proto__": {"polluted": true}}',
        '{"constructor": {"prototype": {"polluted": true}}}',
        '{"secrets_store": {"custom_secrets": {"__proto__": {"secret": "x"}}, "provider_tokens": {"__proto__": {"token": "x"}}}}',
      ];
      for (const raw of rawBodies) {
        const r = await send(`${path} ${raw}`, 'POST', concrete, { rawBody: raw, headers: JSON_HEADERS });
        expect(r.status, `POST ${path} ${raw} → ${r.text}`).toBeLessThan(500);
        sent++;
      }
      await h.idle();
    }
    expect(sent).toBeGreaterThan(500);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // Nothing ended in an unhandled error, in a request or in the background.
    expect(h.logger.lines.filter((l) => l.includes('"level":"error"'))).toEqual([]);
  });

  it('every error answer of this file has the common body: string code and message, detail the same as message, and issues only as a list', () => {
    const errors = results.filter(({ r }) => r.status >= 400);
    expect(errors.length).toBeGreaterThan(100);
    for (const { label, r } of errors) {
      expect(r.headers.get('content-type'), label).toMatch(/^application\/json/);
      const body = obj(r.body);
      expect(typeof body.code, label).toBe('string');
      expect(body.code, label).toMatch(/^[A-Z][A-Z_]+$/);
      expect(typeof body.message, label).toBe('string');
      expect((body.message as string).length, label).toBeGreaterThan(0);
      expect(body.detail, label).toBe(body.message);
      // The device token endpoint adds the OAuth fields (error, error_description = message, interval with slow_down).
      for (const key of Object.keys(body))
        expect(['code', 'message', 'detail', 'issues', 'error', 'error_description', 'interval'], label).toContain(key);
      if (body.error !== undefined) expect(body.error_description, label).toBe(body.message);
      if (body.issues !== undefined) {
        expect(Array.isArray(body.issues), label).toBe(true);
        for (const issue of body.issues as unknown[]) {
          expect(typeof obj(issue).path, label).toBe('string');
          expect(typeof obj(issue).message, label).toBe('string');
        }
      }
    }
  });
});
