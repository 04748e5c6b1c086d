import type { AgentConversationService } from '@acs/core';
import { okAsync, ResultAsync } from 'neverthrow';
import { z } from 'zod';
import { defineRoute, type RouteDefinition } from '../route.js';
import type { RouteContext } from '../route-context.js';
import { serverInfoReporter } from '../server-info.js';

const ok = okAsync;

const ServerInfoSchema = z
  .object({
    uptime: z.number().meta({ description: 'Seconds since the process started.' }),
    idle_time: z
      .number()
      .meta({ description: 'Seconds since the router last answered a request other than these status routes.' }),
    resources: z.object({
      cpu_percent: z
        .number()
        .meta({ description: 'This process’s CPU use since the previous report (or since it started).' }),
      memory: z.object({ rss: z.int(), vms: z.int(), percent: z.number() }),
      disk: z.object({ total: z.int(), used: z.int(), free: z.int(), percent: z.number() }),
      io: z.object({ read_bytes: z.int(), write_bytes: z.int() }),
    }),
    sandbox_pool: z.record(z.string(), z.object({ size: z.int(), ready: z.int(), filling: z.int() })).meta({
      description:
        'Warm sandboxes per spec id (not in 1.11): how many the pool keeps, how many are ready to be claimed, how many are starting. Empty when no pool is configured (or the store did not answer).',
    }),
  })
  .meta({ id: 'ServerInfo' });

/** Liveness, readiness and the server's resources, open to everyone (as in OpenHands 1.11). */
export function healthRoutes(service: AgentConversationService, context: RouteContext): RouteDefinition[] {
  const report = serverInfoReporter(context.lastRequestAt);
  return [
    defineRoute({
      method: 'get',
      path: '/alive',
      operationId: 'alive',
      summary: 'Liveness probe',
      tags: ['health'],
      authenticated: false,
      success: { status: 200, description: 'The process is up.', schema: z.object({ status: z.literal('ok') }) },
      errors: [],
      handle: () => ok({ status: 'ok' }),
    }),
    defineRoute({
      method: 'get',
      path: '/health',
      operationId: 'health',
      summary: 'Health probe',
      tags: ['health'],
      authenticated: false,
      success: { status: 200, description: 'The service answers.', schema: z.literal('OK') },
      errors: [],
      handle: () => ok('OK'),
    }),
    defineRoute({
      method: 'get',
      path: '/ready',
      operationId: 'ready',
      summary: 'Readiness probe',
      description:
        'The same as /health for now, as in OpenHands 1.11: the router answers once the service is composed.',
      tags: ['health'],
      authenticated: false,
      success: { status: 200, description: 'Ready.', schema: z.literal('OK') },
      errors: [],
      handle: () => ok('OK'),
    }),
    defineRoute({
      method: 'get',
      path: '/server_info',
      operationId: 'serverInfo',
      summary: 'The server’s uptime and resources',
      description:
        'Uptime, idle time, the warm sandbox pools (sandbox_pool), and this process’s CPU and memory, the root file system’s space and the process’s I/O (0 where the platform cannot tell).',
      tags: ['health'],
      authenticated: false,
      success: { status: 200, description: 'The figures.', schema: ServerInfoSchema },
      errors: [],
      handle: () =>
        ResultAsync.fromSafePromise(
          Promise.all([report(), service.sandboxes.poolStatus()]).then(([info, pool]) => ({
            ...info,
            sandbox_pool: pool.unwrapOr({}),
          })),
        ),
    }),
  ];
}
