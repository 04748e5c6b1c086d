import { DeviceAuthorizationErrors, type AgentConversationService } from '@acs/core';
import {
  DeviceAuthorizationRequestSchema,
  DeviceAuthorizationResponseSchema,
  DeviceAuthorizationViewSchema,
  DeviceTokenRequestSchema,
  DeviceTokenResponseSchema,
  UserCodeSchema,
} from '@acs/core/schemas';
import { z } from 'zod';
import { defineRoute, type RouteDefinition } from '../route.js';
import type { RouteContext } from '../route-context.js';

const userCodePath = z.object({ user_code: UserCodeSchema });

/**
 * Device sign-in (OAuth 2.0 Device Authorization Grant, RFC 8628), as `openhands login` uses
 * it: the device asks for codes (no key), the person opens the console's page with the user
 * code and approves it while signed in, and the device's next poll gets a new API key of that
 * person. The two OAuth endpoints are at `/oauth/device/*` (where the CLI looks); the page's
 * own routes are under `/api` with the caller's session.
 */
export function deviceAuthorizationRoutes(service: AgentConversationService, context: RouteContext): RouteDefinition[] {
  const { deviceAuthorization } = service;
  return [
    defineRoute({
      method: 'post',
      path: '/oauth/device/authorize',
      operationId: 'startDeviceAuthorization',
      summary: 'Start a device sign-in (RFC 8628 §3.1)',
      description:
        'No key: the device has none yet. Answers the codes and where the person approves (the console’s page, `verification_uri_complete` with the user code in it). The codes expire after `expires_in` seconds. At most a few sign-ins from one client address wait at once (an IPv6 address counts by its /64; behind a trusted proxy, the address the proxy appended to X-Forwarded-For): 429 DEVICE_AUTHORIZATIONS_FROM_CLIENT_FULL past it; and at most a bounded number from everyone together (503 DEVICE_AUTHORIZATIONS_FULL).',
      tags: ['device sign-in'],
      authenticated: false,
      formBody: true,
      body: DeviceAuthorizationRequestSchema.optional(),
      bodyRequired: false,
      success: { status: 200, description: 'The codes.', schema: DeviceAuthorizationResponseSchema },
      errors: DeviceAuthorizationErrors.start,
      handle: ({ body, origin, client }) =>
        deviceAuthorization.start(body ?? {}, client).map((started) => {
          const verificationUri = `${origin}${context.deviceVerificationPath}`;
          return {
            device_code: started.device_code,
            user_code: started.user_code,
            verification_uri: verificationUri,
            verification_uri_complete: `${verificationUri}?user_code=${encodeURIComponent(started.user_code)}`,
            expires_in: started.expires_in,
            interval: started.interval,
          };
        }),
    }),
    defineRoute({
      method: 'post',
      path: '/oauth/device/token',
      operationId: 'pollDeviceToken',
      summary: 'Poll for the key of a device sign-in (RFC 8628 §3.4)',
      description:
        'Form-encoded `device_code=…` (JSON is taken too), no key. Until the person answers: 400 with `error: authorization_pending` (or `slow_down` and a longer `interval` when polled faster than the interval). Then once: 200 with a new API key of the approving user (named "OpenHands CLI (<date>)") that expires after `expires_in` seconds (the server’s device key lifetime, 90 days by default), or 400 `access_denied`; afterwards, or for a code never issued, 400 `invalid_grant`; after expiry 400 `expired_token`.',
      tags: ['device sign-in'],
      authenticated: false,
      formBody: true,
      body: DeviceTokenRequestSchema,
      success: { status: 200, description: 'The key.', schema: DeviceTokenResponseSchema },
      errors: DeviceAuthorizationErrors.poll,
      handle: ({ body }) =>
        deviceAuthorization
          .poll(body.device_code)
          .map(({ access_token, expires_in }) => ({ access_token, token_type: 'Bearer' as const, expires_in })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/device-authorizations/{user_code}',
      operationId: 'getDeviceAuthorization',
      summary: 'A device sign-in waiting for your answer',
      description:
        'What the approval page shows. 404 USER_CODE_NOT_FOUND for a code that matches no waiting sign-in (each counts against a small limit per user: 429 USER_CODE_ATTEMPTS_EXCEEDED past it, so codes cannot be guessed); 409 when someone else answered it.',
      tags: ['device sign-in'],
      params: userCodePath,
      success: { status: 200, description: 'The sign-in.', schema: DeviceAuthorizationViewSchema },
      errors: DeviceAuthorizationErrors.describe,
      handle: ({ userId, params }) => deviceAuthorization.describe(userId, params.user_code),
    }),
    defineRoute({
      method: 'post',
      path: '/api/device-authorizations/{user_code}/approve',
      operationId: 'approveDeviceAuthorization',
      summary: 'Approve a device sign-in as yourself',
      description:
        'The device’s next poll gets a new API key of yours (listed with your keys; revoke it there). Approving again is the same answer. 409 API_KEY_LIMIT_REACHED when you hold the most keys allowed.',
      tags: ['device sign-in'],
      params: userCodePath,
      success: { status: 200, description: 'Approved.', schema: DeviceAuthorizationViewSchema },
      errors: DeviceAuthorizationErrors.approve,
      handle: ({ userId, params }) => deviceAuthorization.approve(userId, params.user_code),
    }),
    defineRoute({
      method: 'post',
      path: '/api/device-authorizations/{user_code}/deny',
      operationId: 'denyDeviceAuthorization',
      summary: 'Refuse a device sign-in',
      description: 'The device’s next poll gets access_denied and no key.',
      tags: ['device sign-in'],
      params: userCodePath,
      success: { status: 200, description: 'Denied.', schema: DeviceAuthorizationViewSchema },
      errors: DeviceAuthorizationErrors.deny,
      handle: ({ userId, params }) => deviceAuthorization.deny(userId, params.user_code),
    }),
  ];
}
