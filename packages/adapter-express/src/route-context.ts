import type { EndBrowserSession } from './auth/caller.js';
import { ConversationKeys } from './auth/conversation-keys.js';

/** What route handlers need from the router besides the service. */
export interface RouteContext {
  /** Ends the caller's browser session (sign-out). */
  endBrowserSession: EndBrowserSession;
  /** Mints each conversation's own key (`session_api_key`). */
  conversationKeys: ConversationKeys;
  /** The model names the UI offers (`GET /api/options/models`). */
  models: () => readonly string[];
  /** The base host of sandboxes' exposed URLs (`<name>-<id>.<base host>`); null: the host the client reached. */
  sandboxUrlHost: string | null;
}

/** A context for building the routes outside a router (tests, the OpenAPI document). */
export function defaultRouteContext(overrides: Partial<RouteContext> = {}): RouteContext {
  return {
    endBrowserSession: async () => {},
    conversationKeys: new ConversationKeys(),
    models: () => [],
    sandboxUrlHost: null,
    ...overrides,
  };
}
