import { ResultAsync } from 'neverthrow';
import { z } from 'zod';
import { defineRoute, type RouteDefinition } from '../route.js';
import type { RouteContext } from '../route-context.js';

const SignOutRequestSchema = z
  .strictObject({
    everywhere: z.boolean().optional().meta({
      description:
        'Also end every other browser session of yours (every browser signed in as you, in this server process) and close their live channels.',
    }),
  })
  .meta({ id: 'SignOutRequest' });

const SignedOutSchema = z
  .object({
    signed_out: z.literal(true),
    sessions_ended: z.int().min(0).meta({ description: 'How many browser sessions ended (yours included).' }),
  })
  .meta({ id: 'SignedOut' });

/** Routes of the browser sign-in (`?key=` on any page starts a session; see the router). */
export function browserRoutes(context: RouteContext): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/sign-out',
      operationId: 'signOut',
      summary: 'End the browser session (or every one of yours)',
      description:
        'Ends the session of the session cookie this request came with and clears the cookie; the browser must sign in again (open the server URL with ?key=). With an API key (no session) it changes nothing. With `{"everywhere": true}` it also ends every other browser session of the caller’s user (also when called with an API key: e.g. after a laptop was lost), and their live channels close at once. Sessions live in each server process’s memory: with several processes, each ends its own.',
      tags: ['browser'],
      body: SignOutRequestSchema.optional(),
      bodyRequired: false,
      success: { status: 200, description: 'Signed out.', schema: SignedOutSchema },
      errors: [],
      clearsBrowserSession: true,
      handle: ({ caller, body }) =>
        ResultAsync.fromSafePromise(context.endBrowserSession(caller, { everywhere: body?.everywhere === true })).map(
          (ended) => ({ signed_out: true as const, sessions_ended: ended }),
        ),
    }),
  ];
}
