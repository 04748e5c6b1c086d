/**
 * A typed client for the service's REST API, generated from its OpenAPI document
 * (openapi-typescript types over openapi-fetch). Paths, parameters, bodies and responses are
 * checked by the compiler:
 *
 * ```ts
 * const acs = createAcsClient({ baseUrl: 'http://127.0.0.1:3000', apiKey: process.env.ACS_KEY });
 * const { data, error } = await acs.GET('/api/v1/app-conversations/search', { params: { query: { limit: 20 } } });
 * ```
 *
 * In a browser signed in with the session cookie, leave `apiKey` out.
 */
import createClient, { type Client } from 'openapi-fetch';
import type { components, paths } from './api-schema.js';

export type { components, paths };
/** A schema of the API by name, e.g. `Schema<'AppConversation'>`. */
export type Schema<Name extends keyof components['schemas']> = components['schemas'][Name];

export interface AcsClientOptions {
  /** Where the router is mounted: an absolute URL, or a path on the page's origin ('' for the root). */
  baseUrl: string;
  /** An API key, sent as X-Session-API-Key; leave out in a browser that signed in. */
  apiKey?: string;
  /** A fetch to use instead of the global one. */
  fetch?: typeof globalThis.fetch;
}

export type AcsClient = Client<paths>;

export function createAcsClient(options: AcsClientOptions): AcsClient {
  return createClient<paths>({
    baseUrl: options.baseUrl,
    headers: options.apiKey ? { 'X-Session-API-Key': options.apiKey } : {},
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
}
