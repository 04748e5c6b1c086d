import { okAsync } from 'neverthrow';
import { z } from 'zod';
import { booleanParam, limitParam } from '../query.js';
import { defineRoute, type RouteDefinition } from '../route.js';
import type { RouteContext } from '../route-context.js';
import { pageOf } from './shared.js';

/**
 * What the OpenHands 1.11 web client reads before anything else (`/api/v1/web-client/config`,
 * what V0's `/api/options/config` became), and the model and provider lists its settings form
 * offers (`/api/v1/config/*`), from the same list as V0's `/api/options/models`.
 */

/**
 * OSS mode, as V0's config says: no login page, billing, analytics, recaptcha, Slack, Jira or
 * email; no ACP agents and no automations (this service has neither); git providers are the
 * users' own tokens, none configured on the server.
 */
const WEB_CLIENT_CONFIG = {
  app_mode: 'oss',
  posthog_client_key: null,
  feature_flags: {
    enable_billing: false,
    hide_llm_settings: false,
    enable_jira: false,
    enable_jira_dc: false,
    enable_linear: false,
    hide_users_page: false,
    hide_billing_page: false,
    hide_integrations_page: false,
    hide_personal_workspaces: false,
    allow_user_llm_configuration: true,
    enable_acp: false,
    deployment_mode: null,
    enable_onboarding: false,
    enable_automations: false,
  },
  providers_configured: [],
  maintenance_start_time: null,
  auth_url: null,
  recaptcha_site_key: null,
  faulty_models: [],
  error_message: null,
  // When faulty_models and error_message last changed: never.
  updated_at: '2026-01-01T00:00:00Z',
  github_app_slug: null,
  gitlab_enabled: false,
  provider_default_hosts: { github: 'github.com', gitlab: 'gitlab.com', bitbucket: 'bitbucket.org' },
  slack_enabled: false,
  email_enabled: false,
  acp_providers: [],
  jira_dc_oauth_host: null,
  jira_dc_service_account_managed: false,
  jira_dc_service_account_email: null,
  jira_dc_service_account_config_error: null,
  kind: 'WebClientConfig',
} as const;

const WebClientConfigSchema = z
  .object({
    app_mode: z.enum(['oss', 'saas']),
    posthog_client_key: z.string().nullable(),
    feature_flags: z.record(z.string(), z.union([z.boolean(), z.string(), z.null()])),
    providers_configured: z.array(z.string()),
    maintenance_start_time: z.iso.datetime().nullable(),
    auth_url: z.string().nullable(),
    recaptcha_site_key: z.string().nullable(),
    faulty_models: z.array(z.string()),
    error_message: z.string().nullable(),
    updated_at: z.iso.datetime(),
    github_app_slug: z.string().nullable(),
    gitlab_enabled: z.boolean(),
    provider_default_hosts: z.record(z.string(), z.string()),
    slack_enabled: z.boolean(),
    email_enabled: z.boolean(),
    acp_providers: z.array(z.never()),
    jira_dc_oauth_host: z.string().nullable(),
    jira_dc_service_account_managed: z.boolean(),
    jira_dc_service_account_email: z.string().nullable(),
    jira_dc_service_account_config_error: z.string().nullable(),
    kind: z.literal('WebClientConfig'),
  })
  .meta({ id: 'WebClientConfig' });

/**
 * `page_id` of these lists: the last entry of the previous page, as canonical url-safe base64
 * (opaque to clients, as 1.11's are). Every value of that form is a place in the list: the page
 * starts after it.
 */
const BASE64URL = '^(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-]{4}|[A-Za-z0-9_-]{2}[AEIMQUYcgkosw048]|[A-Za-z0-9_-][AQgw])$';
const afterPageId = z
  .string()
  .max(1024)
  .regex(new RegExp(BASE64URL), 'is not a page id; use next_page_id from the previous page')
  .optional()
  .meta({ description: "Opaque: the previous page's next_page_id." });

/** The entries after `after` (by key, in key order), and the next page's id when more follow. */
function pageAfter<T>(all: readonly T[], keyOf: (item: T) => string, pageId: string | undefined, limit: number) {
  const after = pageId === undefined ? undefined : Buffer.from(pageId, 'base64url').toString('utf8');
  const rest = after === undefined ? all : all.filter((item) => keyOf(item) > after);
  const items = rest.slice(0, limit);
  const last = items[items.length - 1];
  return {
    items,
    next_page_id: rest.length > limit && last ? Buffer.from(keyOf(last), 'utf8').toString('base64url') : null,
  };
}

const fiftyByDefault = limitParam.unwrap().default(50).meta({ description: 'Page size, 1 to 100 (default 50).' });

const LlmModelSchema = z.object({
  provider: z.string().nullable(),
  name: z.string(),
  verified: z.boolean().meta({ description: 'Always true: every model listed is one this server offers.' }),
  hidden: z.boolean(),
  canonical: z.string().nullable(),
});

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** `openai/gpt-4o` → provider `openai`, name `gpt-4o` (a name without a provider has none), sorted by the whole name. */
function modelsOf(names: readonly string[]): (z.infer<typeof LlmModelSchema> & { full: string })[] {
  return [...new Set(names)].sort(byText).map((full) => {
    const slash = full.indexOf('/');
    const parts =
      slash > 0 ? { provider: full.slice(0, slash), name: full.slice(slash + 1) } : { provider: null, name: full };
    return { full, ...parts, verified: true, hidden: false, canonical: null };
  });
}

export function configRoutesV1(context: RouteContext): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/web-client/config',
      operationId: 'getWebClientConfig',
      summary: 'Web client configuration',
      description:
        'What the OpenHands web client reads first (V0’s /api/options/config): OSS mode, no login page, billing, analytics, ACP agents or automations. Open: it holds nothing secret, and the client asks before it knows whether it is signed in.',
      tags: ['options'],
      authenticated: false,
      success: { status: 200, description: 'The configuration.', schema: WebClientConfigSchema },
      errors: [],
      handle: () => okAsync(WEB_CLIENT_CONFIG),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/config/models/search',
      operationId: 'searchModels',
      summary: 'Search the models offered',
      description:
        'The models of /api/options/models, split into provider and name, sorted by both. Any other model can still be stored in the settings.',
      tags: ['options'],
      query: z.object({
        page_id: afterPageId,
        limit: fiftyByDefault,
        query: z.string().max(200).optional().meta({ description: 'Case-insensitive substring of the name.' }),
        verified__eq: booleanParam,
        provider__eq: z.string().max(200).optional(),
      }),
      success: {
        status: 200,
        description: 'A page of models.',
        schema: pageOf(LlmModelSchema).meta({ id: 'LLMModelPage' }),
      },
      errors: [],
      handle: ({ query }) => {
        const needle = query.query?.toLowerCase();
        const models = modelsOf(context.models()).filter(
          (m) =>
            (needle === undefined || m.name.toLowerCase().includes(needle)) &&
            (query.verified__eq === undefined || m.verified === query.verified__eq) &&
            (query.provider__eq === undefined || m.provider === query.provider__eq),
        );
        const page = pageAfter(models, (m) => m.full, query.page_id, query.limit);
        return okAsync({ ...page, items: page.items.map(({ full: _full, ...model }) => model) });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/config/providers/search',
      operationId: 'searchProviders',
      summary: 'Search the providers of the models offered',
      description: 'The provider/ prefixes of the models offered, sorted by name.',
      tags: ['options'],
      query: z.object({
        page_id: afterPageId,
        limit: fiftyByDefault,
        query: z.string().max(200).optional().meta({ description: 'Case-insensitive substring of the name.' }),
        verified__eq: booleanParam,
      }),
      success: {
        status: 200,
        description: 'A page of providers.',
        schema: pageOf(z.object({ name: z.string(), verified: z.boolean() })).meta({ id: 'ProviderPage' }),
      },
      errors: [],
      handle: ({ query }) => {
        const needle = query.query?.toLowerCase();
        const providers = [...new Set(modelsOf(context.models()).flatMap((m) => (m.provider ? [m.provider] : [])))]
          .sort()
          .map((name) => ({ name, verified: true }))
          .filter(
            (p) =>
              (needle === undefined || p.name.toLowerCase().includes(needle)) &&
              (query.verified__eq === undefined || p.verified === query.verified__eq),
          );
        return okAsync(pageAfter(providers, (p) => p.name, query.page_id, query.limit));
      },
    }),
  ];
}
