import { SandboxSpecServiceErrors, type AgentConversationService } from '@acs/core';
import { SandboxSpecSchema } from '@acs/core/schemas';
import { z } from 'zod';
import { idList, pagingQuery } from '../query.js';
import { defineRoute, type RouteDefinition } from '../route.js';
import { paged, pageOf } from './shared.js';

/** V1 sandbox specs: the catalog of images a sandbox can be started from. */
export function sandboxSpecRoutes(service: AgentConversationService): RouteDefinition[] {
  const { sandboxSpecs } = service;
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/sandbox-specs/search',
      operationId: 'searchSandboxSpecs',
      summary: 'Search sandbox specs',
      description: 'In configured order; the first is the default.',
      tags: ['sandbox specs (V1)'],
      query: pagingQuery,
      success: { status: 200, description: 'A page of specs.', schema: pageOf(SandboxSpecSchema) },
      errors: SandboxSpecServiceErrors.search,
      handle: ({ query }) => paged(query, (page) => sandboxSpecs.search(page)),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/sandbox-specs',
      operationId: 'getSandboxSpecs',
      summary: 'Get sandbox specs by id',
      tags: ['sandbox specs (V1)'],
      query: z.object({ id: idList }),
      success: {
        status: 200,
        description: 'In the order asked; null where there is no such spec.',
        schema: z.array(SandboxSpecSchema.nullable()),
      },
      errors: SandboxSpecServiceErrors.getMany,
      handle: ({ query }) => sandboxSpecs.getMany(query.id),
    }),
  ];
}
