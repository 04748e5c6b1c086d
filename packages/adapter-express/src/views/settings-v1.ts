import type { LlmProfilesView, SettingsOverview } from '@acs/core';
import type { AgentSettingsDefaults } from '@acs/core/ports';
import { GitProviderSchema, type SettingsView } from '@acs/core/schemas';
import { z } from 'zod';

/**
 * The V1 settings as OpenHands 1.11 shows them (`GETSettingsModel`): the same record V0's
 * `/api/settings` reads, nested the 1.11 way. `agent_settings` holds the model, base URL,
 * agent, MCP servers and condenser; `conversation_settings` the limits and confirmation. Keys
 * are never shown (`llm_api_key_set` says whether one is stored). Fields of 1.11 the service
 * has no behaviour for show what it does (no sandbox grouping, no marketplaces, no skills to
 * disable, shallow clones as always); ACP agents do not exist here.
 */

/** An LLM as 1.11 shows one: only the fields this service acts on, the key withheld. */
const LlmViewSchema = z.object({
  model: z.string().nullable().meta({ description: 'null until a model is stored.' }),
  api_key: z.null().meta({ description: 'Always null: see llm_api_key_set (or api_key_set of a profile).' }),
  base_url: z.string().nullable(),
  stream: z
    .boolean()
    .meta({ description: 'Whether model calls stream (deltas shown as the model writes); default true.' }),
  is_subscription: z.literal(false),
});

const McpServerViewSchema = z.object({
  command: z.string().optional(),
  args: z.array(z.string()).optional(),
  env: z.record(z.string(), z.string()).optional(),
  url: z.string().optional(),
  transport: z.enum(['sse', 'http']).optional(),
  timeout: z.int().optional(),
});

const AgentSettingsViewSchema = z.object({
  schema_version: z.literal(4),
  agent_kind: z.literal('openhands'),
  agent: z.string(),
  llm: LlmViewSchema,
  mcp_config: z.record(z.string(), McpServerViewSchema).meta({
    description:
      'By name: stdio servers under their own, remote servers under their host. Remote servers’ keys are never shown.',
  }),
  condenser: z.object({ enabled: z.boolean(), max_size: z.int(), condenser_kind: z.literal('llm_summarizing') }),
});

const ConversationSettingsViewSchema = z.object({
  schema_version: z.literal(1),
  max_iterations: z.int(),
  confirmation_mode: z.boolean(),
  security_analyzer: z.enum(['llm', 'rules', 'ensemble', 'none']).meta({
    description: 'rules and ensemble are this service’s own analyzers (not in OpenHands 1.11); none for no analyzer.',
  }),
});

export const V1SettingsSchema = z
  .object({
    language: z.string().nullable(),
    user_version: z.int().nullable(),
    remote_runtime_resource_factor: z.int().nullable(),
    secrets_store: z
      .object({ provider_tokens: z.object({}) })
      .meta({ description: 'Always empty: see provider_tokens_set and /api/v1/secrets/search.' }),
    enable_sound_notifications: z.boolean(),
    enable_proactive_conversation_starters: z.boolean(),
    user_consents_to_analytics: z.boolean().nullable(),
    sandbox_base_container_image: z.string().nullable(),
    sandbox_runtime_container_image: z.string().nullable(),
    disabled_skills: z.null(),
    search_api_key: z.null(),
    sandbox_api_key: z.null(),
    max_budget_per_task: z.number().nullable(),
    email: z.string().nullable(),
    email_verified: z.boolean().nullable(),
    git_user_name: z.string().nullable(),
    git_user_email: z.string().nullable(),
    git_full_clone: z.literal(false),
    v1_enabled: z.literal(true),
    agent_settings: AgentSettingsViewSchema,
    conversation_settings: ConversationSettingsViewSchema,
    sandbox_grouping_strategy: z.literal('NO_GROUPING'),
    default_sandbox_spec_id: z.null(),
    llm_profiles: z.object({ profiles: z.record(z.string(), LlmViewSchema), active: z.string().nullable() }),
    active_agent_profile_id: z.null(),
    active_agent_profile_revision: z.null(),
    registered_marketplaces: z.array(z.never()),
    inherited_marketplaces: z.array(z.never()),
    provider_tokens_set: z.partialRecord(GitProviderSchema, z.string().nullable()),
    llm_api_key_set: z.boolean(),
    search_api_key_set: z.boolean(),
  })
  .meta({ id: 'V1Settings' });
export type V1Settings = z.infer<typeof V1SettingsSchema>;

type LlmView = z.infer<typeof LlmViewSchema>;
type McpServerView = z.infer<typeof McpServerViewSchema>;

const llmView = (model: string | null, baseUrl: string | null, stream: boolean): LlmView => ({
  model,
  api_key: null,
  base_url: baseUrl,
  stream,
  is_subscription: false,
});

/** One LLM profile's configuration as 1.11 shows it (`ProfileDetailResponse.config`). */
export const profileConfigView = (profile: {
  model: string | null;
  base_url: string | null;
  stream: boolean;
}): LlmView => llmView(profile.model, profile.base_url, profile.stream);

/** Remote servers have no name here; 1.11 keys them by one, so they get their host (made unique). */
function mcpView(config: SettingsView['mcp_config']): Record<string, McpServerView> {
  const view: Record<string, McpServerView> = {};
  for (const s of config.stdio_servers) view[s.name] = { command: s.command, args: [...s.args], env: { ...s.env } };
  const uniqueName = (url: string) => {
    let host: string;
    try {
      host = new URL(url).host || 'mcp';
    } catch {
      host = 'mcp';
    }
    let name = host;
    for (let n = 2; Object.hasOwn(view, name); n++) name = `${host}-${n}`;
    return name;
  };
  for (const s of config.sse_servers) view[uniqueName(s.url)] = { url: s.url, transport: 'sse' };
  for (const s of config.shttp_servers) view[uniqueName(s.url)] = { url: s.url, transport: 'http', timeout: s.timeout };
  return view;
}

const profilesView = (profiles: LlmProfilesView) => ({
  profiles: Object.fromEntries(profiles.profiles.map((p) => [p.name, llmView(p.model, p.base_url, p.stream)])),
  active: profiles.active,
});

/** The settings in force, nested as 1.11 nests them; unset limits show the agent's own. */
export function toV1Settings(s: SettingsOverview, defaults: AgentSettingsDefaults): V1Settings {
  return {
    language: s.language,
    user_version: s.user_version,
    remote_runtime_resource_factor: s.remote_runtime_resource_factor,
    secrets_store: { provider_tokens: {} },
    enable_sound_notifications: s.enable_sound_notifications,
    enable_proactive_conversation_starters: s.enable_proactive_conversation_starters,
    user_consents_to_analytics: s.user_consents_to_analytics,
    sandbox_base_container_image: s.sandbox_base_container_image,
    sandbox_runtime_container_image: s.sandbox_runtime_container_image,
    disabled_skills: null,
    search_api_key: null,
    sandbox_api_key: null,
    max_budget_per_task: s.max_budget_per_task,
    email: s.email,
    email_verified: s.email_verified,
    git_user_name: s.git_user_name,
    git_user_email: s.git_user_email,
    git_full_clone: false,
    v1_enabled: true,
    agent_settings: {
      schema_version: 4,
      agent_kind: 'openhands',
      agent: s.agent ?? 'CodeActAgent',
      llm: llmView(s.llm_model, s.llm_base_url, s.llm_stream),
      mcp_config: mcpView(s.mcp_config),
      condenser: {
        enabled: s.enable_default_condenser,
        max_size: s.condenser_max_size ?? defaults.condenser_max_size,
        condenser_kind: 'llm_summarizing',
      },
    },
    conversation_settings: {
      schema_version: 1,
      max_iterations: s.max_iterations ?? defaults.max_iterations,
      confirmation_mode: s.confirmation_mode ?? false,
      security_analyzer: (s.security_analyzer as 'llm' | 'rules' | 'ensemble' | null) ?? 'none',
    },
    sandbox_grouping_strategy: 'NO_GROUPING',
    default_sandbox_spec_id: null,
    llm_profiles: profilesView(s.llm_profiles),
    active_agent_profile_id: null,
    active_agent_profile_revision: null,
    registered_marketplaces: [],
    inherited_marketplaces: [],
    provider_tokens_set: s.provider_tokens_set,
    llm_api_key_set: s.llm_api_key_set,
    search_api_key_set: s.search_api_key_set,
  };
}
