/**
 * @acs/core/schemas: the zod schemas of everything that crosses the service's edge (settings,
 * conversations and their requests, events, sandboxes, MCP configuration) and their types. For
 * a client validating what it sends or receives, or an adapter rendering OpenAPI.
 *
 * ```ts
 * import { SettingsInputSchema } from '@acs/core/schemas';
 * ```
 */
export * from './settings/schema.js';
export * from './conversation/schema.js';
export * from './events/schema.js';
export * from './sandbox/schema.js';
export * from './mcp/schema.js';
export * from './access/schema.js';
export * from './git/schema.js';
