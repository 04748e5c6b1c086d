import { ResultAsync } from 'neverthrow';
import { z } from 'zod';
import { defineRoute, type RouteDefinition } from '../route.js';
import type { RouteContext } from '../route-context.js';

/** Routes of the browser sign-in (`?key=` on any page starts a session; see the router). */
export function browserRoutes(context: RouteContext): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/sign-out',
      operationId: 'signOut',
      summary: 'End the browser session',
      description:
        'Ends the session of the session cookie this request came with and clears the cookie; the browser must sign in again (open the server URL with ?key=). With an API key (no session) it changes nothing.',
      tags: ['browser'],
      success: { status: 200, description: 'Signed out.', schema: z.object({ signed_out: z.literal(true) }) },
      errors: [],
      clearsBrowserSession: true,
      handle: ({ caller }) =>
        ResultAsync.fromSafePromise(context.endBrowserSession(caller)).map(() => ({ signed_out: true as const })),
    }),
  ];
}
