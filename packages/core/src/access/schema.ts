import { z } from 'zod';

/**
 * Named API keys a user makes for themselves (the console, `POST /api/keys`) or that a device
 * sign-in makes for them (the OpenHands CLI's `login`). The secret is shown once, when the key
 * is made; only its SHA-256 is kept.
 */
export const ApiKeyInfoSchema = z
  .object({
    id: z.string().meta({ description: 'The key’s id (32 hex): what revoking names.' }),
    name: z
      .string()
      .meta({ description: 'What the user called it, e.g. "laptop" or "OpenHands CLI (2026-01-31 09:12 UTC)".' }),
    created_at: z.string().meta({ format: 'date-time' }),
    last_used_at: z
      .string()
      .nullable()
      .meta({ format: 'date-time', description: 'When a request last came with it (to the minute); null when never.' }),
    expires_at: z.string().nullable().meta({
      format: 'date-time',
      description:
        'After this the key opens nothing (keys of device sign-ins expire; others when made with expires_in_days); null: it never expires.',
    }),
  })
  .meta({ id: 'ApiKey' });
export type ApiKeyInfo = z.infer<typeof ApiKeyInfoSchema>;

export const MAX_API_KEY_NAME_LENGTH = 100;
/** The longest lifetime a key can be made with (ten years). */
const MAX_API_KEY_LIFETIME_DAYS = 3650;

export const ApiKeyCreateSchema = z
  .strictObject({
    name: z
      .string()
      .trim()
      .min(1, 'give the key a name')
      .max(MAX_API_KEY_NAME_LENGTH)
      .meta({ description: 'A name to tell the key from the others (where it is used).' }),
    expires_in_days: z
      .int()
      .min(1)
      .max(MAX_API_KEY_LIFETIME_DAYS)
      .nullable()
      .optional()
      .meta({ description: 'Days until the key expires; absent or null: it never expires (revoke it when done).' }),
  })
  .meta({ id: 'ApiKeyCreate' });
export type ApiKeyCreate = z.output<typeof ApiKeyCreateSchema>;

export const CreatedApiKeySchema = ApiKeyInfoSchema.extend({
  key: z.string().meta({
    description:
      'The secret (acsk_…): shown this once, never again. Send it as X-Session-API-Key or Authorization: Bearer.',
  }),
}).meta({ id: 'CreatedApiKey' });
export type CreatedApiKey = z.infer<typeof CreatedApiKeySchema>;

/** The alphabet of user codes (RFC 8628 §6.1): 20 consonants, no vowels (no words), none that look alike. */
export const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
export const USER_CODE_LENGTH = 8;

const CODE_LETTER = `[${USER_CODE_ALPHABET}${USER_CODE_ALPHABET.toLowerCase()}]`;
/** A user code as typed: 8 letters of the alphabet in either case, with a dash or a space in the middle or not (`wdjb-mjht`, `WDJB MJHT`). */
const USER_CODE_PATTERN = new RegExp(`^${CODE_LETTER}{4}[- ]?${CODE_LETTER}{4}$`);

/** How a user code is shown: `XXXX-XXXX`. */
export const displayUserCode = (code: string) => `${code.slice(0, 4)}-${code.slice(4)}`;

/** A user code in a path, normalised; anything that cannot be one is a 422. */
export const UserCodeSchema = z
  .string()
  .regex(USER_CODE_PATTERN, `a user code is ${USER_CODE_LENGTH} letters of ${USER_CODE_ALPHABET}, shown as XXXX-XXXX`)
  .transform((text) => text.toUpperCase().replace(/[- ]/, ''))
  .meta({
    description: 'The code the device shows, e.g. WDJB-MJHT (either case; the dash may be a space or left out).',
  });

export const DEVICE_AUTHORIZATION_STATUSES = ['pending', 'approved', 'denied'] as const;

/** A device sign-in as the person who answers it sees it (the approval page). */
export const DeviceAuthorizationViewSchema = z
  .object({
    user_code: z.string().meta({ description: 'As shown: XXXX-XXXX.' }),
    client_name: z.string().meta({
      description: 'Who is asking, as the device named itself (the OpenHands CLI names none: "OpenHands CLI").',
    }),
    status: z
      .enum(DEVICE_AUTHORIZATION_STATUSES)
      .meta({ description: 'pending until answered; approved or denied by you.' }),
    created_at: z.string().meta({ format: 'date-time' }),
    expires_at: z.string().meta({ format: 'date-time', description: 'After this the device must start again.' }),
  })
  .meta({ id: 'DeviceAuthorization' });
export type DeviceAuthorizationView = z.infer<typeof DeviceAuthorizationViewSchema>;

/** `POST /oauth/device/authorize` (RFC 8628 §3.1): the CLI sends `{}`; `client_id` may name the device. Other fields are ignored. */
export const DeviceAuthorizationRequestSchema = z
  .object({
    client_id: z
      .string()
      .regex(/^[A-Za-z0-9 ._-]{1,64}$/, 'letters, digits, spaces, dots, dashes and underscores, up to 64')
      .optional()
      .meta({ description: 'Names the device on the approval page; default "OpenHands CLI".' }),
    scope: z.string().max(1024).optional().meta({ description: 'Ignored: a key opens everything its user may do.' }),
  })
  .meta({ id: 'DeviceAuthorizationRequest' });
export type DeviceAuthorizationRequest = z.output<typeof DeviceAuthorizationRequestSchema>;

/** The answer of `POST /oauth/device/authorize` (RFC 8628 §3.2). */
export const DeviceAuthorizationResponseSchema = z
  .object({
    device_code: z.string().meta({ description: 'The device’s secret for polling the token endpoint.' }),
    user_code: z.string().meta({ description: 'What the person confirms in the console: XXXX-XXXX.' }),
    verification_uri: z.string().meta({ description: 'The approval page of the console.' }),
    verification_uri_complete: z.string().meta({ description: 'The approval page with the user code filled in.' }),
    expires_in: z.int().meta({ description: 'Seconds until the codes expire.' }),
    interval: z.int().meta({ description: 'Seconds to wait between polls of the token endpoint.' }),
  })
  .meta({ id: 'DeviceAuthorizationResponse' });
export type DeviceAuthorizationResponse = z.infer<typeof DeviceAuthorizationResponseSchema>;

/** `POST /oauth/device/token` (RFC 8628 §3.4), form-encoded as the CLI sends it (JSON is taken too). */
export const DeviceTokenRequestSchema = z
  .object({
    device_code: z.string().min(1).max(256),
    grant_type: z.string().max(256).optional().meta({
      description: 'urn:ietf:params:oauth:grant-type:device_code (the OpenHands CLI sends none; any is taken).',
    }),
    client_id: z.string().max(256).optional(),
  })
  .meta({ id: 'DeviceTokenRequest' });

/** The token: a new API key of the user who approved (it expires after the server's device key lifetime; revoke it in the console sooner). */
export const DeviceTokenResponseSchema = z
  .object({
    access_token: z.string().meta({
      description: 'A new API key (acsk_…) named "OpenHands CLI (<date>)", listed and revoked like any other.',
    }),
    token_type: z.literal('Bearer'),
    expires_in: z.int().min(1).nullable().meta({
      description:
        'Seconds until the key expires (RFC 6749 §5.1; the server’s device key lifetime, 90 days by default); null when this server makes device keys that do not expire.',
    }),
  })
  .meta({ id: 'DeviceTokenResponse' });
export type DeviceTokenResponse = z.infer<typeof DeviceTokenResponseSchema>;
