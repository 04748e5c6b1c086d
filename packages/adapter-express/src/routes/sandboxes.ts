import { SandboxServiceErrors, type AgentConversationService } from '@acs/core';
import { normalizeId } from '@acs/core/ports';
import { SandboxInfoSchema, StartSandboxRequestSchema, type SandboxInfo } from '@acs/core/schemas';
import { ResultAsync } from 'neverthrow';
import { z } from 'zod';
import { idList, pagingQuery } from '../query.js';
import { defineRoute, recordPathParams, type RouteDefinition } from '../route.js';
import type { RouteContext } from '../route-context.js';
import { exposedUrlOf } from '../sandbox-proxy.js';
import { loopbackAddressOf } from '../sandbox-loopback-ports.js';
import { pathSegment } from './params.js';
import { paged, pageOf, SuccessSchema } from './shared.js';

const sandboxIdParams = recordPathParams(z.object({ sandbox_id: pathSegment(128) }), 'SandboxNotFound', (p) => ({
  type: 'SandboxNotFound',
  sandboxId: p.sandbox_id ?? '',
}));

/** Where the client reached this server: the origin it sees and the local address of its connection. */
type Reached = { origin: string; localAddress: string | null };
type UrlContext = Pick<RouteContext, 'sandboxUrlHost' | 'loopbackSandboxPorts'>;

/**
 * A sandbox as its owner sees it over HTTP: each exposed URL is this server's proxy of it, never
 * the runtime's own address: a loopback port of its own for a client on loopback, when the
 * router has them (sandbox-loopback-ports.ts), else a host name of its own (sandbox-proxy.ts).
 */
async function publicSandbox(info: SandboxInfo, input: Reached, context: UrlContext): Promise<SandboxInfo> {
  if (!info.exposed_urls) return info;
  const ports = context.sandboxUrlHost === null ? context.loopbackSandboxPorts : null;
  const address = ports && loopbackAddressOf(input.origin, input.localAddress);
  const urlOf = async (name: string) =>
    (address && (await ports?.urlOf(info.id, name, address))) ||
    exposedUrlOf(info.id, name, input.origin, context.sandboxUrlHost);
  return {
    ...info,
    exposed_urls: await Promise.all(
      info.exposed_urls.map(async (u) => ({ name: u.name, url: await urlOf(u.name), port: u.port })),
    ),
  };
}

/** V1 sandboxes: start, search, read, pause, resume, delete. */
export function sandboxRoutes(
  service: AgentConversationService,
  context: UrlContext = { sandboxUrlHost: null, loopbackSandboxPorts: null },
): RouteDefinition[] {
  const { sandboxes } = service;
  const publicOf = (info: SandboxInfo, input: Reached) =>
    ResultAsync.fromSafePromise(publicSandbox(info, input, context));
  const publicOrNull = (info: SandboxInfo | null, input: Reached) =>
    info ? publicSandbox(info, input, context) : Promise.resolve(null);
  // A deleted sandbox's loopback ports close now (the periodic check finds those deleted elsewhere).
  const forget = (sandboxId: string) => context.loopbackSandboxPorts?.forget(normalizeId(sandboxId));
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
        paged(input.query, (page) => sandboxes.search(input.userId, page)).andThen((p) =>
          ResultAsync.fromSafePromise(Promise.all(p.items.map((i) => publicSandbox(i, input, context)))).map(
            (items) => ({ ...p, items }),
          ),
        ),
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
        sandboxes
          .getMany(input.userId, input.query.id)
          .andThen((list) => ResultAsync.fromSafePromise(Promise.all(list.map((i) => publicOrNull(i, input))))),
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
          .andThen((i) => publicOf(i, input)),
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
      handle: ({ userId, query }) =>
        sandboxes.delete(userId, query.sandbox_id).map(() => {
          forget(query.sandbox_id);
          return { success: true as const };
        }),
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
      handle: (input) => sandboxes.get(input.userId, input.params.sandbox_id).andThen((i) => publicOf(i, input)),
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
        sandboxes.delete(userId, params.sandbox_id).map(() => {
          forget(params.sandbox_id);
          return { success: true as const };
        }),
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
