import { SECURITY_ANALYZERS } from '@acs/core/schemas';
import { okAsync } from 'neverthrow';
import { z } from 'zod';
import { defineRoute, type RouteDefinition } from '../route.js';
import type { RouteContext } from '../route-context.js';

/** The agents a conversation can run (the settings' `agent`; the UI's default). */
const AGENTS = ['CodeActAgent'] as const;

/**
 * What the OpenHands web UI asks before anything else. OSS mode: no login screen, no billing,
 * no analytics key, no git provider configured on the server (users add their own tokens).
 */
const UI_CONFIG = {
  APP_MODE: 'oss',
  GITHUB_CLIENT_ID: '',
  POSTHOG_CLIENT_KEY: '',
  PROVIDERS_CONFIGURED: [],
  FEATURE_FLAGS: {
    ENABLE_BILLING: false,
    HIDE_LLM_SETTINGS: false,
    ENABLE_JIRA: false,
    ENABLE_JIRA_DC: false,
    ENABLE_LINEAR: false,
  },
} as const;

const UiConfigSchema = z
  .object({
    APP_MODE: z.enum(['oss', 'saas']),
    GITHUB_CLIENT_ID: z.string(),
    POSTHOG_CLIENT_KEY: z.string(),
    PROVIDERS_CONFIGURED: z.array(z.string()),
    FEATURE_FLAGS: z.record(z.string(), z.boolean()),
  })
  .meta({ id: 'UiConfig' });

/** `/api/options/*`: what a web UI needs to draw its forms. */
export function optionRoutes(context: RouteContext): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/options/config',
      operationId: 'getUiConfig',
      summary: 'Web UI configuration',
      description:
        'The OpenHands UI reads this first: OSS mode (no login page, no billing, no analytics). Open: it holds nothing secret, and the UI asks before it knows whether the browser is signed in.',
      tags: ['options'],
      authenticated: false,
      success: { status: 200, description: 'The UI configuration.', schema: UiConfigSchema },
      errors: [],
      handle: () => okAsync(UI_CONFIG),
    }),
    defineRoute({
      method: 'get',
      path: '/api/options/models',
      operationId: 'listModels',
      summary: 'Models the UI offers',
      description:
        'Model names as `provider/model` (e.g. `openai/gpt-4o`): the ones whose price the server knows, plus any the operator added. Any other name can be stored in settings (e.g. with `llm_base_url` for a local server).',
      tags: ['options'],
      success: { status: 200, description: 'Model names.', schema: z.array(z.string()) },
      errors: [],
      handle: () => okAsync([...new Set(context.models())].sort()),
    }),
    defineRoute({
      method: 'get',
      path: '/api/options/agents',
      operationId: 'listAgents',
      summary: 'Agents a conversation can run',
      tags: ['options'],
      success: { status: 200, description: 'Agent names.', schema: z.array(z.string()) },
      errors: [],
      handle: () => okAsync([...AGENTS]),
    }),
    defineRoute({
      method: 'get',
      path: '/api/options/security-analyzers',
      operationId: 'listSecurityAnalyzers',
      summary: 'Security analyzers a user can choose',
      description: 'The values of the `security_analyzer` setting: llm, rules, ensemble.',
      tags: ['options'],
      success: { status: 200, description: 'Analyzer names.', schema: z.array(z.string()) },
      errors: [],
      handle: () => okAsync([...SECURITY_ANALYZERS]),
    }),
  ];
}
