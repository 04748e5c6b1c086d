import { z } from 'zod';
import { McpConfigSchema, McpConfigViewSchema, type McpConfig } from '../mcp/schema.js';

/**
 * Which analyzer rates actions (the `security_analyzer` setting):
 * - `llm`: the model's own rating, the `security_risk` argument it adds to each call;
 * - `rules`: our rule-based analyzer (destructive commands, secrets leaving the sandbox,
 *   network to unknown hosts, writes to system files, what MCP servers say of their tools);
 * - `ensemble`: both, the higher rating wins (the model cannot talk a rule down).
 */
export const SECURITY_ANALYZERS = ['llm', 'rules', 'ensemble'] as const;
export type SecurityAnalyzerName = (typeof SECURITY_ANALYZERS)[number];

export const GIT_PROVIDERS = ['github', 'gitlab', 'bitbucket', 'enterprise_sso'] as const;
export const GitProviderSchema = z.enum(GIT_PROVIDERS);
export type GitProvider = z.infer<typeof GitProviderSchema>;

/** Names of custom secrets become environment variable names inside sandboxes. */
export const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const secretValue = z.string().max(16384).meta({ format: 'password' });
const shortText = (max: number) => z.string().max(max);

const httpUrlOrEmpty = z
  .string()
  .trim()
  .max(2048)
  .refine((value) => {
    if (value === '') return true;
    try {
      const url = new URL(value);
      // `new URL` invents a host for `http:///x` and `http:x`, so the text must have one too.
      return (
        (url.protocol === 'http:' || url.protocol === 'https:') &&
        url.hostname !== '' &&
        /^https?:\/\/[^/?#]/i.test(value)
      );
    } catch {
      return false;
    }
  }, 'must be an http(s) URL, or "" to clear it');

const providerTokenInput = z
  .object({
    token: secretValue.nullable().optional(),
    host: shortText(255).trim().nullable().optional(),
    user_id: shortText(255).nullable().optional(),
  })
  .nullable();

const customSecretInput = z
  .object({
    secret: secretValue.nullable().optional(),
    description: shortText(1024).nullable().optional(),
  })
  .nullable();

/**
 * `secrets_store` as sent to Store Settings. Both maps merge per entry: an entry
 * set to null is removed; within an entry, a secret value that is absent or null
 * keeps the stored one and "" clears it.
 */
export const UserSecretsInputSchema = z.object({
  provider_tokens: z.partialRecord(GitProviderSchema, providerTokenInput).optional(),
  custom_secrets: z
    .preprocess(
      (value, ctx) => {
        // zod's record drops a "__proto__" key without a word; refuse it instead of losing it silently.
        if (value !== null && typeof value === 'object' && Object.hasOwn(value, '__proto__')) {
          ctx.addIssue({ code: 'custom', path: ['__proto__'], message: 'this name is reserved', input: value });
        }
        return value;
      },
      z.record(
        z.string().regex(SECRET_NAME, 'secret names must be valid environment variable names').max(128),
        customSecretInput,
      ),
    )
    .optional(),
});

/** The Store Settings request body. Every field is optional; unknown keys are ignored. */
export const SettingsInputSchema = z.object({
  language: shortText(64).nullable().optional(),
  agent: shortText(128).nullable().optional(),
  max_iterations: z.int().min(1).max(100_000).nullable().optional(),
  security_analyzer: z
    .union([z.literal(''), z.enum(SECURITY_ANALYZERS)])
    .nullable()
    .transform((v) => (v === '' ? null : v))
    .optional()
    .meta({
      description:
        'llm (the model rates its own calls), rules (our rule-based analyzer) or ensemble (both; the higher rating wins); null or "" for none.',
    }),
  confirmation_mode: z.boolean().nullable().optional(),
  llm_model: shortText(512).trim().nullable().optional(),
  llm_api_key: secretValue.nullable().optional(),
  llm_base_url: httpUrlOrEmpty.nullable().optional(),
  llm_stream: z.boolean().optional().meta({
    description:
      'Ask the model for its answer as a stream, each piece shown to live clients as it is written (default true). Turn it off for a provider that breaks with streaming.',
  }),
  remote_runtime_resource_factor: z.int().min(1).max(64).nullable().optional(),
  secrets_store: UserSecretsInputSchema.optional(),
  enable_default_condenser: z.boolean().optional(),
  condenser_max_size: z
    .int()
    .min(20)
    .max(100_000)
    .nullable()
    .optional()
    .meta({ description: 'Events shown to the model before older ones are summarised (default 120).' }),
  enable_sound_notifications: z.boolean().optional(),
  enable_proactive_conversation_starters: z.boolean().optional(),
  enable_solvability_analysis: z.boolean().optional(),
  user_consents_to_analytics: z.boolean().nullable().optional(),
  sandbox_base_container_image: shortText(512).trim().nullable().optional(),
  sandbox_runtime_container_image: shortText(512).trim().nullable().optional(),
  mcp_config: McpConfigSchema.optional(),
  search_api_key: secretValue.nullable().optional(),
  sandbox_api_key: secretValue.nullable().optional(),
  max_budget_per_task: z.number().positive().max(1_000_000).nullable().optional(),
  email: shortText(320).nullable().optional(),
  email_verified: z.boolean().nullable().optional(),
  git_user_name: shortText(256).nullable().optional(),
  git_user_email: shortText(320).nullable().optional(),
});
export type SettingsInput = z.output<typeof SettingsInputSchema>;

export interface StoredProviderToken {
  token: string | null;
  host: string | null;
  user_id: string | null;
}

export interface StoredCustomSecret {
  secret: string;
  description: string | null;
}

export interface StoredUserSecrets {
  provider_tokens: Partial<Record<GitProvider, StoredProviderToken>>;
  custom_secrets: Record<string, StoredCustomSecret>;
}

/** The most LLM profiles a user may keep (as OpenHands allows). */
export const MAX_LLM_PROFILES = 10;

/** An LLM profile's name: letters, digits, `.`, `_` and `-`, 1 to 64 of them (OpenHands' rule). */
export const PROFILE_NAME = /^[A-Za-z0-9._-]{1,64}$/;

/** A saved model configuration the user can activate, or switch a running conversation to. */
export interface StoredLlmProfile {
  /** Stays the same when the profile is renamed: a conversation switched to the profile follows it by this id. */
  id: string;
  name: string;
  model: string | null;
  base_url: string | null;
  /** Sealed at rest like `llm_api_key`; never returned. */
  api_key: string | null;
  /** Whether calls with this profile stream (the settings' `llm_stream`); absent (saved before it existed): true. */
  stream?: boolean;
}

export interface StoredLlmProfiles {
  /** In the order they were first saved (a rename keeps the place). */
  profiles: StoredLlmProfile[];
  /** The profile whose model, key and base URL are the settings' own now; null once they differ. */
  active: string | null;
}

/** A user's settings as kept by a SettingsStore, secret values included. */
export interface StoredSettings {
  language: string | null;
  agent: string | null;
  max_iterations: number | null;
  security_analyzer: string | null;
  confirmation_mode: boolean | null;
  llm_model: string | null;
  llm_api_key: string | null;
  llm_base_url: string | null;
  /** Model calls stream their answer (and live clients see it as it is written); false for a provider that breaks with it. */
  llm_stream: boolean;
  remote_runtime_resource_factor: number | null;
  secrets_store: StoredUserSecrets;
  enable_default_condenser: boolean;
  condenser_max_size: number | null;
  enable_sound_notifications: boolean;
  enable_proactive_conversation_starters: boolean;
  enable_solvability_analysis: boolean;
  user_consents_to_analytics: boolean | null;
  sandbox_base_container_image: string | null;
  sandbox_runtime_container_image: string | null;
  mcp_config: McpConfig;
  search_api_key: string | null;
  sandbox_api_key: string | null;
  max_budget_per_task: number | null;
  email: string | null;
  email_verified: boolean | null;
  git_user_name: string | null;
  git_user_email: string | null;
  /** The user's LLM profiles (the V1 API's `llm_profiles`; V0 does not show them). */
  llm_profiles: StoredLlmProfiles;
  /** A number the OpenHands client keeps for itself (the V1 API's `user_version`); the service does nothing with it. */
  user_version: number | null;
}

/** The fields of Store Settings and Load Settings (V0), in the order Load Settings shows them. */
export const SETTINGS_FIELDS = [
  'language',
  'agent',
  'max_iterations',
  'security_analyzer',
  'confirmation_mode',
  'llm_model',
  'llm_api_key',
  'llm_base_url',
  'llm_stream',
  'remote_runtime_resource_factor',
  'secrets_store',
  'enable_default_condenser',
  'condenser_max_size',
  'enable_sound_notifications',
  'enable_proactive_conversation_starters',
  'enable_solvability_analysis',
  'user_consents_to_analytics',
  'sandbox_base_container_image',
  'sandbox_runtime_container_image',
  'mcp_config',
  'search_api_key',
  'sandbox_api_key',
  'max_budget_per_task',
  'email',
  'email_verified',
  'git_user_name',
  'git_user_email',
] as const satisfies readonly (keyof StoredSettings)[];

/** Secret fields: never returned, kept when null, cleared by "". */
export const SECRET_SETTINGS_FIELDS = ['llm_api_key', 'search_api_key', 'sandbox_api_key'] as const;

export function defaultSettings(): StoredSettings {
  return {
    language: null,
    agent: null,
    max_iterations: null,
    security_analyzer: null,
    confirmation_mode: null,
    llm_model: null,
    llm_api_key: null,
    llm_base_url: null,
    llm_stream: true,
    remote_runtime_resource_factor: null,
    secrets_store: { provider_tokens: {}, custom_secrets: {} },
    enable_default_condenser: true,
    condenser_max_size: null,
    enable_sound_notifications: false,
    enable_proactive_conversation_starters: true,
    enable_solvability_analysis: true,
    user_consents_to_analytics: null,
    sandbox_base_container_image: null,
    sandbox_runtime_container_image: null,
    mcp_config: { sse_servers: [], stdio_servers: [], shttp_servers: [] },
    search_api_key: null,
    sandbox_api_key: null,
    max_budget_per_task: null,
    email: null,
    email_verified: null,
    git_user_name: null,
    git_user_email: null,
    llm_profiles: { profiles: [], active: null },
    user_version: null,
  };
}

/** `secrets_store` as shown by Load Settings: names and hosts, never values. */
export const UserSecretsViewSchema = z.object({
  provider_tokens: z.partialRecord(
    GitProviderSchema,
    z.object({ host: z.string().nullable(), user_id: z.string().nullable() }),
  ),
  custom_secrets: z.record(z.string(), z.object({ description: z.string().nullable() })),
});

const nullableString = z.string().nullable();

/** The Load Settings response: every Settings field with defaults applied, secrets never included. */
export const SettingsViewSchema = z.object({
  language: nullableString,
  agent: nullableString,
  max_iterations: z.int().nullable(),
  security_analyzer: nullableString,
  confirmation_mode: z.boolean().nullable(),
  llm_model: nullableString,
  llm_api_key: z.null().meta({ description: 'Always null: the key is write-only. See llm_api_key_set.' }),
  llm_base_url: nullableString,
  llm_stream: z.boolean(),
  remote_runtime_resource_factor: z.int().nullable(),
  secrets_store: UserSecretsViewSchema,
  enable_default_condenser: z.boolean(),
  condenser_max_size: z.int().nullable(),
  enable_sound_notifications: z.boolean(),
  enable_proactive_conversation_starters: z.boolean(),
  enable_solvability_analysis: z.boolean(),
  user_consents_to_analytics: z.boolean().nullable(),
  sandbox_base_container_image: nullableString,
  sandbox_runtime_container_image: nullableString,
  mcp_config: McpConfigViewSchema.meta({ description: 'MCP servers; api_key values are never returned (null).' }),
  search_api_key: z.null().meta({ description: 'Always null: the key is write-only. See search_api_key_set.' }),
  sandbox_api_key: z.null().meta({ description: 'Always null: the key is write-only.' }),
  max_budget_per_task: z.number().nullable(),
  email: nullableString,
  email_verified: z.boolean().nullable(),
  git_user_name: nullableString,
  git_user_email: nullableString,
  llm_api_key_set: z.boolean(),
  provider_tokens_set: z
    .partialRecord(GitProviderSchema, z.string().nullable())
    .meta({ description: 'Each stored git provider mapped to its host (null = the provider default).' }),
  search_api_key_set: z.boolean(),
});
export type SettingsView = z.infer<typeof SettingsViewSchema>;

/** `POST /api/secrets`: a new custom secret (its value is write-only). */
export const CustomSecretCreateSchema = z
  .strictObject({
    name: z.string().min(1).max(128).regex(SECRET_NAME, 'secret names must be valid environment variable names'),
    value: secretValue.min(1, 'give the secret a value'),
    description: shortText(1024).nullable().optional(),
  })
  .meta({ id: 'CustomSecretCreate' });
export type CustomSecretCreate = z.output<typeof CustomSecretCreateSchema>;

/** `PUT /api/secrets/{name}`: a new name and/or description; the value stays (it cannot be read back, nor changed here). */
export const CustomSecretUpdateSchema = z
  .strictObject({
    name: z.string().min(1).max(128).regex(SECRET_NAME, 'secret names must be valid environment variable names'),
    description: shortText(1024).nullable().optional(),
  })
  .meta({ id: 'CustomSecretUpdate' });
export type CustomSecretUpdate = z.output<typeof CustomSecretUpdateSchema>;

/** A custom secret as listed: its name and description, never its value. */
export const CustomSecretInfoSchema = z
  .object({ name: z.string(), description: z.string().nullable() })
  .meta({ id: 'CustomSecretInfo' });
export type CustomSecretInfo = z.output<typeof CustomSecretInfoSchema>;

/** `POST /api/add-git-providers`: the provider tokens to keep (the whole set: providers left out are dropped). */
export const ProviderTokensInputSchema = z
  .object({
    provider_tokens: z.partialRecord(
      GitProviderSchema,
      z.object({
        token: secretValue.nullable().optional(),
        host: z.string().max(255).nullable().optional(),
        user_id: z.string().max(255).nullable().optional(),
      }),
    ),
  })
  .meta({ id: 'ProviderTokensInput' });
export type ProviderTokensInput = z.output<typeof ProviderTokensInputSchema>;
