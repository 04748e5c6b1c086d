import { SandboxServiceErrors, type AgentConversationService } from '@acs/core';
import { SandboxInfoSchema, StartSandboxRequestSchema, type SandboxInfo } from '@acs/core/schemas';
import { z } from 'zod';
import { idList, pagingQuery } from '../query.js';
import { defineRoute, recordPathParams, type RouteDefinition } from '../route.js';
import { exposedUrlOf } from '../sandbox-proxy.js';
import { pathSegment } from './params.js';
import { paged, pageOf, SuccessSchema } from './shared.js';

const sandboxIdParams = recordPathParams(z.object({ sandbox_id: pathSegment(128) }), 'SandboxNotFound', (p) => ({
  type: 'SandboxNotFound',
  sandboxId: p.sandbox_id ?? '',
}));

/**
 * A sandbox as its owner sees it over HTTP: each exposed URL is this server's proxy of it (on
 * a host name of its own, see sandbox-proxy.ts), never the runtime's own address.
 */
function publicSandbox(info: SandboxInfo, input: { origin: string }, baseHost: string | null): SandboxInfo {
  if (!info.exposed_urls) return info;
  return {
    ...info,
    exposed_urls: info.exposed_urls.map((u) => ({
      name: u.name,
      url: exposedUrlOf(info.id, u.name, input.origin, baseHost),
      port: u.port,
    })),
  };
}

/** V1 sandboxes: start, search, read, pause, resume, delete. */
export function sandboxRoutes(service: AgentConversationService, baseHost: string | null = null): RouteDefinition[] {
  const { sandboxes } = service;
  const publicOf = (info: SandboxInfo, input: { origin: string }) => publicSandbox(info, input, baseHost);
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/sandboxes/search',
      operationId: 'searchSandboxes',
      summary: 'Search sandboxes',
      tags: ['sandboxes (V1)'],
      query: pagingQuery,
      success: { status: 200, description: 'A page of sandboxes, newest first.', schema: pageOf(SandboxInfoSchema) },
      errors: SandboxServiceErrors.search,
      handle: (input) =>
        paged(input.query, (page) => sandboxes.search(input.userId, page)).map((p) => ({
          ...p,
          items: p.items.map((i) => publicOf(i, input)),
        })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/sandboxes',
      operationId: 'getSandboxes',
      summary: 'Get sandboxes by id',
      tags: ['sandboxes (V1)'],
      query: z.object({ id: idList }),
      success: {
        status: 200,
        description: 'In the order asked; null where there is no such sandbox.',
        schema: z.array(SandboxInfoSchema.nullable()),
      },
      errors: SandboxServiceErrors.getMany,
      handle: (input) =>
        sandboxes.getMany(input.userId, input.query.id).map((list) => list.map((i) => (i ? publicOf(i, input) : null))),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/sandboxes',
      operationId: 'startSandbox',
      summary: 'Start a sandbox',
      description:
        'From the spec given in the body or the query (sandbox_spec_id), else the default spec. Returns at once: STARTING, or RUNNING when a warm sandbox of the spec was ready (the server keeps a pool of them, `sandbox_pool` of /server_info) and is now yours.',
      tags: ['sandboxes (V1)'],
      query: z.object({ sandbox_spec_id: z.string().min(1).max(512).optional() }),
      body: StartSandboxRequestSchema.optional(),
      bodyRequired: false,
      success: { status: 200, description: 'The new sandbox.', schema: SandboxInfoSchema },
      errors: SandboxServiceErrors.start,
      handle: (input) =>
        sandboxes
          .start(input.userId, input.body?.sandbox_spec_id ?? input.query.sandbox_spec_id ?? null)
          .map((i) => publicOf(i, input)),
    }),
    defineRoute({
      method: 'delete',
      path: '/api/v1/sandboxes',
      operationId: 'deleteSandboxByQuery',
      summary: 'Delete a sandbox (id in the query)',
      description:
        'The form OpenHands clients send (`OpenHandsCloudWorkspace.cleanup()`: `DELETE /api/v1/sandboxes?sandbox_id=<id>`); the same as `DELETE /api/v1/sandboxes/{sandbox_id}`.',
      tags: ['sandboxes (V1)'],
      query: z.object({ sandbox_id: pathSegment(128) }),
      success: { status: 200, description: 'Deleted.', schema: SuccessSchema },
      errors: SandboxServiceErrors.delete,
      handle: ({ userId, query }) => sandboxes.delete(userId, query.sandbox_id).map(() => ({ success: true as const })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/sandboxes/{sandbox_id}',
      operationId: 'getSandbox',
      summary: 'Get a sandbox',
      tags: ['sandboxes (V1)'],
      params: sandboxIdParams,
      success: {
        status: 200,
        description: 'The sandbox, with its status as the runtime reports it now.',
        schema: SandboxInfoSchema,
      },
      errors: SandboxServiceErrors.get,
      handle: (input) => sandboxes.get(input.userId, input.params.sandbox_id).map((i) => publicOf(i, input)),
    }),
    defineRoute({
      method: 'delete',
      path: '/api/v1/sandboxes/{sandbox_id}',
      operationId: 'deleteSandbox',
      summary: 'Delete a sandbox',
      description: 'Removes it from the runtime; conversations in it become STOPPED.',
      tags: ['sandboxes (V1)'],
      params: sandboxIdParams,
      query: z.object({
        sandbox_id: z.string().optional().meta({ description: 'Accepted for compatibility; the path decides.' }),
      }),
      success: { status: 200, description: 'Deleted.', schema: SuccessSchema },
      errors: SandboxServiceErrors.delete,
      handle: ({ userId, params }) =>
        sandboxes.delete(userId, params.sandbox_id).map(() => ({ success: true as const })),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/sandboxes/{sandbox_id}/pause',
      operationId: 'pauseSandbox',
      summary: 'Pause a sandbox',
      description:
        'Idempotent: pausing a paused sandbox succeeds. 409 when its state forbids it (starting, in error, missing, deleted).',
      tags: ['sandboxes (V1)'],
      params: sandboxIdParams,
      success: { status: 200, description: 'Paused.', schema: SuccessSchema },
      errors: SandboxServiceErrors.pause,
      handle: ({ userId, params }) =>
        sandboxes.pause(userId, params.sandbox_id).map(() => ({ success: true as const })),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/sandboxes/{sandbox_id}/resume',
      operationId: 'resumeSandbox',
      summary: 'Resume a sandbox',
      description:
        'Idempotent: resuming a running sandbox succeeds. 409 when its state forbids it (in error, missing, deleted).',
      tags: ['sandboxes (V1)'],
      params: sandboxIdParams,
      success: { status: 200, description: 'Resumed (it may show STARTING briefly).', schema: SuccessSchema },
      errors: SandboxServiceErrors.resume,
      handle: ({ userId, params }) =>
        sandboxes.resume(userId, params.sandbox_id).map(() => ({ success: true as const })),
    }),
  ];
}
