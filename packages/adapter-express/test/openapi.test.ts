import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Validator } from '@seriousme/openapi-schema-validator';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { answerClientErrors, buildOpenApiDocument, buildRoutes } from '@acs/adapter-express';
import {
  fetchOpenApi,
  isAuthenticated,
  operationsOf,
  startHarness,
  type Harness,
  type JsonSchema,
  type OpenApiDoc,
} from './harness.js';

/** Every operation the issue asks for. */
const REQUIRED_OPERATIONS = [
  'GET /alive',
  'GET /health',
  'POST /api/settings',
  'GET /api/settings',
  'POST /api/conversations',
  'GET /api/conversations',
  'GET /api/conversations/{conversation_id}',
  'DELETE /api/conversations/{conversation_id}',
  'POST /api/v1/app-conversations',
  'GET /api/v1/app-conversations',
  'GET /api/v1/app-conversations/search',
  'GET /api/v1/app-conversations/count',
  'GET /api/v1/app-conversations/start-tasks',
  'GET /api/v1/app-conversations/start-tasks/search',
  'GET /api/v1/sandboxes/search',
  'POST /api/v1/sandboxes',
  'GET /api/v1/sandboxes',
  'GET /api/v1/sandboxes/{sandbox_id}',
  'DELETE /api/v1/sandboxes/{sandbox_id}',
  'POST /api/v1/sandboxes/{sandbox_id}/pause',
  'POST /api/v1/sandboxes/{sandbox_id}/resume',
  'GET /api/v1/sandbox-specs/search',
  'GET /api/v1/sandbox-specs',
  'POST /api/conversations/{conversation_id}/message',
  'POST /api/v1/app-conversations/{conversation_id}/send-message',
  'GET /api/v1/app-conversations/{conversation_id}/events',
  'GET /api/v1/app-conversations/{conversation_id}/events/stream',
];

describe('OpenAPI document', () => {
  let h: Harness;
  let doc: OpenApiDoc;

  beforeAll(async () => {
    h = await startHarness();
    doc = await fetchOpenApi(h);
  });
  afterAll(async () => {
    await h.close();
  });

  it('is valid against the OpenAPI 3.1 schema', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc) as unknown as Record<string, unknown>);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    // The validator does catch a broken document (so the check above means something).
    const broken = structuredClone(doc) as unknown as Record<string, unknown>;
    delete broken.info;
    expect((await new Validator().validate(broken)).valid).toBe(false);
  });

  it('declares OpenAPI 3.1.x', () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
  });

  it('declares the X-Session-API-Key header and Bearer schemes and requires one of them by default', () => {
    expect(doc.components?.securitySchemes?.SessionApiKey).toEqual({
      type: 'apiKey',
      in: 'header',
      name: 'X-Session-API-Key',
    });
    expect(doc.components?.securitySchemes?.Bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.security).toEqual([{ SessionApiKey: [] }, { Bearer: [] }]);
  });

  it('covers every route the issue lists', () => {
    const documented = operationsOf(doc).map(({ method, path }) => `${method.toUpperCase()} ${path}`);
    for (const required of REQUIRED_OPERATIONS) expect(documented, required).toContain(required);
  });

  it('is what buildOpenApiDocument makes of buildRoutes', () => {
    expect(doc).toEqual(JSON.parse(JSON.stringify(buildOpenApiDocument(buildRoutes(h.service)))));
  });

  it('documents a 200 response for every operation (201 for the creations OpenHands answers so, and the one that queues), 401 for every authenticated one, and the common error body for every error', () => {
    const created = ['POST /api/v1/secrets', 'POST /api/v1/settings/profiles/{name}'];
    for (const { path, method, operation } of operationsOf(doc)) {
      const label = `${method.toUpperCase()} ${path}`;
      expect(
        operation.responses[created.includes(label) || path.endsWith('/pending-messages') ? '201' : '200'],
        label,
      ).toBeDefined();
      if (isAuthenticated(doc, operation)) expect(operation.responses['401'], label).toBeDefined();
      for (const [status, response] of Object.entries(operation.responses)) {
        if (Number(status) < 400) continue;
        expect(response.content?.['application/json']?.schema.$ref, `${label} ${status}`).toBe(
          '#/components/schemas/ErrorBody',
        );
      }
    }
    const errorBody = doc.components?.schemas?.ErrorBody as JsonSchema;
    // error, error_description and interval: the OAuth fields of the device token endpoint's refusals.
    expect(Object.keys(errorBody.properties ?? {}).sort()).toEqual([
      'code',
      'detail',
      'error',
      'error_description',
      'interval',
      'issues',
      'message',
    ]);
    expect((errorBody.required as string[]).sort()).toEqual(['code', 'detail', 'message']);
  });

  it('documents a JSON request body for the routes that take one', () => {
    const withBody = operationsOf(doc)
      .filter(({ operation }) => operation.requestBody)
      .map(({ method, path }) => `${method.toUpperCase()} ${path}`)
      .sort();
    expect(withBody).toEqual(
      [
        'POST /api/settings',
        'POST /api/conversations',
        'POST /api/conversations/{conversation_id}/start',
        'POST /api/conversations/{conversation_id}/message',
        'POST /api/conversations/{conversation_id}/events/respond_to_confirmation',
        'POST /api/v1/app-conversations',
        'POST /api/v1/app-conversations/stream-start',
        'PATCH /api/v1/app-conversations/{conversation_id}',
        'POST /api/v1/conversations/{conversation_id}/pending-messages',
        'POST /api/v1/app-conversations/{conversation_id}/send-message',
        'POST /api/v1/app-conversations/{conversation_id}/respond-to-confirmation',
        'POST /api/v1/sandboxes',
        'POST /api/secrets',
        'PUT /api/secrets/{secret_id}',
        'POST /api/add-git-providers',
        'PATCH /api/conversations/{conversation_id}',
        'POST /api/v1/settings',
        'POST /api/v1/settings/profiles/{name}',
        'POST /api/v1/settings/profiles/{name}/rename',
        'POST /api/v1/app-conversations/{conversation_id}/switch_profile',
        'POST /api/v1/secrets',
        'PUT /api/v1/secrets/{secret_id}',
        'POST /api/v1/secrets/git-providers',
        'POST /api/keys',
        'POST /api/sign-out',
        'POST /oauth/device/authorize',
        'POST /oauth/device/token',
      ].sort(),
    );
    // The OAuth endpoints take forms too, as OAuth clients send them (the OpenHands CLI polls with one).
    const formRoutes = ['/oauth/device/authorize', '/oauth/device/token'];
    for (const { path, operation } of operationsOf(doc)) {
      if (!operation.requestBody) continue;
      expect(Object.keys(operation.requestBody.content), path).toEqual(
        formRoutes.includes(path) ? ['application/json', 'application/x-www-form-urlencoded'] : ['application/json'],
      );
    }
  });

  it('marks the secret settings fields as passwords and lists all 27 settings fields', () => {
    const schema = doc.paths['/api/settings']?.post?.requestBody?.content['application/json']?.schema as JsonSchema;
    const properties = schema.properties ?? {};
    expect(Object.keys(properties)).toHaveLength(27);
    for (const field of ['llm_api_key', 'search_api_key', 'sandbox_api_key']) {
      expect(JSON.stringify(properties[field]), field).toContain('"format":"password"');
    }
    const view = doc.paths['/api/settings']?.get?.responses['200']?.content?.['application/json']?.schema as JsonSchema;
    expect(Object.keys(view.properties ?? {}).sort()).toEqual(
      [...Object.keys(properties), 'llm_api_key_set', 'provider_tokens_set', 'search_api_key_set'].sort(),
    );
  });

  it('documents the paging and filter query parameters of the list routes', () => {
    const params = (path: string) => (doc.paths[path]?.get?.parameters ?? []).map((p) => p.name).sort();
    expect(params('/api/v1/sandboxes/search')).toEqual(['limit', 'page_id']);
    expect(params('/api/v1/app-conversations/search')).toEqual(
      [
        'created_at__gte',
        'created_at__lt',
        'include_sub_conversations',
        'limit',
        'page_id',
        'sandbox_id__eq',
        'title__contains',
        'updated_at__gte',
        'updated_at__lt',
      ].sort(),
    );
    expect(params('/api/v1/app-conversations/start-tasks/search')).toEqual([
      'conversation_id__eq',
      'created_at__gte',
      'limit',
      'page_id',
      'sort_order',
    ]);
    expect(params('/api/v1/sandboxes')).toEqual(['id']);
    expect(params('/api/v1/app-conversations/start-tasks')).toEqual(['ids']);
  });

  it('documents 431 on every operation, and answerClientErrors makes it the common JSON body (Node alone sends none)', async () => {
    for (const { path, method, operation } of operationsOf(doc))
      expect(operation.responses['431'], `${method.toUpperCase()} ${path}`).toBeDefined();
    const longPath = `/api/v1/sandboxes?${Array.from({ length: 200 }, (_, i) => `id=${'x'.repeat(100)}${i}`).join('&')}`;
    const answer = async (withHandler: boolean) => {
      const server: Server = createServer(express().use((_req, res) => res.json({})));
      if (withHandler) answerClientErrors(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const r = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}${longPath}`);
        return { status: r.status, type: r.headers.get('content-type'), text: await r.text() };
      } finally {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    };
    const bare = await answer(false);
    expect(bare.status).toBe(431);
    expect(bare.text).toBe('');
    const handled = await answer(true);
    expect(handled.status).toBe(431);
    expect(handled.type).toMatch(/^application\/json/);
    const body = JSON.parse(handled.text) as Record<string, unknown>;
    expect(body.code).toBe('REQUEST_HEADERS_TOO_LARGE');
    expect(body.detail).toBe(body.message);
  });
});
