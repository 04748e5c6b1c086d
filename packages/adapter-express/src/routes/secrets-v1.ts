import { SettingsServiceErrors, type AgentConversationService, type DomainErrorOf } from '@acs/core';
import {
  CustomSecretCreateSchema,
  CustomSecretInfoSchema,
  CustomSecretUpdateSchema,
  GIT_PROVIDERS,
  ProviderTokensInputSchema,
  type StoredSettings,
} from '@acs/core/schemas';
import { errAsync, okAsync } from 'neverthrow';
import { z } from 'zod';
import { limitParam } from '../query.js';
import { defineRoute, recordPathParams, type RouteDefinition } from '../route.js';
import { pathSegment } from './params.js';
import { MessageSchema, pageOf } from './shared.js';

const TAGS = ['secrets (V1)'];
const secretPath = recordPathParams(z.object({ secret_id: pathSegment(128) }), 'SecretNotFound', (p) => ({
  type: 'SecretNotFound',
  name: p.secret_id ?? '',
}));

/** 1.11 ignores keys it does not know in these bodies; so do we (V0's are strict). */
const SecretCreateV1Schema = z.object(CustomSecretCreateSchema.shape).meta({ id: 'CustomSecretCreateV1' });
const SecretUpdateV1Schema = z.object(CustomSecretUpdateSchema.shape).meta({ id: 'CustomSecretWithoutValue' });
const ProviderTokensV1Schema = z
  .object({
    provider_tokens: ProviderTokensInputSchema.shape.provider_tokens.default({}),
    mcp_config: z.unknown().optional().meta({
      description: 'Accepted and ignored, as in OpenHands 1.11: MCP servers are settings (agent_settings.mcp_config).',
    }),
  })
  .meta({ id: 'POSTProviderModel' });

/** A sandbox sees its owner's provider tokens under these names (as OpenHands 1.11 names them). */
const providerSecretName = (provider: string) => `${provider}_token`;

/** The secrets a sandbox can read: the custom ones, then the provider tokens. Values stay here. */
function sandboxSecrets(
  settings: StoredSettings | null,
): { name: string; description: string | null; value: string }[] {
  if (!settings) return [];
  const custom = Object.entries(settings.secrets_store.custom_secrets)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, s]) => ({ name, description: s.description, value: s.secret }));
  const tokens = GIT_PROVIDERS.flatMap((provider) => {
    const token = settings.secrets_store.provider_tokens[provider]?.token;
    const name = providerSecretName(provider);
    return token ? [{ name, description: `${name} provider token`, value: token }] : [];
  });
  return [...custom, ...tokens];
}

/**
 * The V1 secrets (OpenHands 1.11's `/api/v1/secrets`): the same custom secrets and git provider
 * tokens as V0's `/api/secrets` and `/api/add-git-providers`, one store, two views. Values are
 * write-only here; only a sandbox, with its key, reads them (`sandboxSecretRoutes`).
 */
export function secretRoutesV1(service: AgentConversationService): RouteDefinition[] {
  const { settings } = service;
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/secrets/search',
      operationId: 'searchSecrets',
      summary: 'Search custom secrets',
      description:
        'Names and descriptions, never values, sorted by name. page_id is the last name of the previous page.',
      tags: TAGS,
      query: z.object({
        name__contains: z.string().max(128).optional().meta({ description: 'Case-insensitive substring of the name.' }),
        page_id: z
          .string()
          .max(128)
          .optional()
          .meta({ description: 'The previous page’s next_page_id: the names after it.' }),
        limit: limitParam,
      }),
      success: {
        status: 200,
        description: 'A page of secrets.',
        schema: pageOf(CustomSecretInfoSchema).meta({ id: 'CustomSecretPage' }),
      },
      errors: SettingsServiceErrors.listSecrets,
      handle: ({ userId, query }) =>
        settings.listSecrets(userId).map((all) => {
          const needle = query.name__contains?.toLowerCase();
          const after = query.page_id;
          const matching = all.filter(
            (s) =>
              (needle === undefined || s.name.toLowerCase().includes(needle)) &&
              (after === undefined || s.name > after),
          );
          const items = matching.slice(0, query.limit);
          const more = matching.length > items.length;
          return { items, next_page_id: more ? (items[items.length - 1]?.name ?? null) : null };
        }),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/secrets',
      operationId: 'putSecret',
      summary: 'Create or replace a custom secret',
      description:
        'A secret of that name gets the new value (and keeps its description unless one is given). The name becomes an environment variable name in sandboxes.',
      tags: TAGS,
      body: SecretCreateV1Schema,
      success: { status: 201, description: 'Stored.', schema: MessageSchema },
      errors: SettingsServiceErrors.putSecret,
      handle: ({ userId, body }) =>
        settings.putSecret(userId, body).map(() => ({ message: 'Secret created successfully' })),
    }),
    defineRoute({
      method: 'put',
      path: '/api/v1/secrets/{secret_id}',
      operationId: 'updateSecretV1',
      summary: 'Rename a custom secret or change its description',
      description:
        'secret_id is its name. The value stays; a description left out stays too. 409 SECRET_NAME_TAKEN when the new name is in use.',
      tags: TAGS,
      params: secretPath,
      body: SecretUpdateV1Schema,
      success: { status: 200, description: 'Updated.', schema: MessageSchema },
      errors: SettingsServiceErrors.updateSecret,
      handle: ({ userId, params, body }) =>
        settings.updateSecret(userId, params.secret_id, body).map(() => ({ message: 'Secret updated successfully' })),
    }),
    defineRoute({
      method: 'delete',
      path: '/api/v1/secrets/{secret_id}',
      operationId: 'deleteSecretV1',
      summary: 'Delete a custom secret',
      tags: TAGS,
      params: secretPath,
      success: { status: 200, description: 'Deleted.', schema: MessageSchema },
      errors: SettingsServiceErrors.deleteSecret,
      handle: ({ userId, params }) =>
        settings.deleteSecret(userId, params.secret_id).map(() => ({ message: 'Secret deleted successfully' })),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/secrets/git-providers',
      operationId: 'setGitProviderTokensV1',
      summary: 'Store git provider tokens',
      description:
        'Replaces the set of provider tokens (a provider left out is dropped); a provider sent without a token keeps its stored one, with the host given. Not checked against the provider (this server reaches no provider to check).',
      tags: TAGS,
      body: ProviderTokensV1Schema,
      success: { status: 200, description: 'Stored.', schema: MessageSchema },
      errors: SettingsServiceErrors.setProviderTokens,
      handle: ({ userId, body }) =>
        settings
          .setProviderTokens(userId, { provider_tokens: body.provider_tokens })
          .map(() => ({ message: 'Git providers stored' })),
    }),
    defineRoute({
      method: 'delete',
      path: '/api/v1/secrets/git-providers',
      operationId: 'unsetGitProviderTokensV1',
      summary: 'Remove every git provider token',
      tags: TAGS,
      success: { status: 200, description: 'Removed.', schema: MessageSchema },
      errors: SettingsServiceErrors.unsetProviderTokens,
      handle: ({ userId }) =>
        settings.unsetProviderTokens(userId).map(() => ({ message: 'Unset Git provider tokens' })),
    }),
    ...sandboxSecretRoutes(service),
  ];
}

/** What a sandbox reads of its owner's secrets, with its key (auth/sandbox-keys.ts). */
function sandboxSecretRoutes(service: AgentConversationService): RouteDefinition[] {
  const { settings } = service;
  const sandboxParams = recordPathParams(z.object({ sandbox_id: pathSegment(128) }), 'SandboxNotFound', (p) => ({
    type: 'SandboxNotFound',
    sandboxId: p.sandbox_id ?? '',
  }));
  const secretParams = recordPathParams(
    z.object({ sandbox_id: pathSegment(128), secret_name: pathSegment(128) }),
    'SandboxNotFound',
    (p) => ({
      type: 'SandboxNotFound',
      sandboxId: p.sandbox_id ?? '',
    }),
  );
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/sandboxes/{sandbox_id}/settings/secrets',
      operationId: 'listSandboxSecrets',
      summary: 'The secrets a sandbox can read',
      description:
        "Names and descriptions of its owner's custom secrets, then the git provider tokens (github_token, …). Opened only by the sandbox's key, while it runs.",
      tags: TAGS,
      params: sandboxParams,
      sandboxKeyOnly: true,
      success: {
        status: 200,
        description: 'The names.',
        schema: z
          .object({ secrets: z.array(z.object({ name: z.string(), description: z.string().nullable() })) })
          .meta({ id: 'SecretNamesResponse' }),
      },
      errors: ['StoreUnavailable'],
      handle: ({ userId }) =>
        settings.loadWithSecrets(userId).map((stored) => ({
          secrets: sandboxSecrets(stored).map(({ name, description }) => ({ name, description })),
        })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/sandboxes/{sandbox_id}/settings/secrets/{secret_name}',
      operationId: 'getSandboxSecret',
      summary: 'A secret’s value, for a sandbox',
      description:
        "The value as text/plain: a custom secret, else a provider token by its secret name (github_token, …). Opened only by the sandbox's key, while it runs.",
      tags: TAGS,
      params: secretParams,
      sandboxKeyOnly: true,
      success: { status: 200, description: 'The value.', schema: z.string(), text: true },
      errors: ['SecretNotFound', 'StoreUnavailable'],
      handle: ({ userId, params }) =>
        settings.loadWithSecrets(userId).andThen((stored) => {
          const found = sandboxSecrets(stored).find((s) => s.name === params.secret_name);
          return found
            ? okAsync(found.value)
            : errAsync<string, DomainErrorOf<'SecretNotFound'>>({ type: 'SecretNotFound', name: params.secret_name });
        }),
    }),
  ];
}
