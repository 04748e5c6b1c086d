import type { LlmProfileInput, SettingsChange } from '@acs/core';
import { McpConfigSchema, PROFILE_NAME, SettingsInputSchema, type McpConfig } from '@acs/core/schemas';
import { z } from 'zod';

/**
 * What the V1 settings API takes, as OpenHands 1.11 sends it, turned into a change of the one
 * settings record. `agent_settings_diff` and `conversation_settings_diff` are merge patches
 * (RFC 7386): a key left out stays, a value replaces, null puts the field back to what it is
 * unset (for the model key: none), objects merge; `mcp_config` is replaced whole. Keys of
 * 1.11 this service has no behaviour for are taken and ignored (listed in the route's
 * description), unknown keys too, as 1.11 does.
 */

const field = SettingsInputSchema.shape;

/** The model fields of 1.11's `LLM`. Only model, base_url, api_key and stream do anything here; the others are accepted and ignored. */
const OPENHANDS_LLM_FIELDS = [
  'api_key',
  'api_version',
  'auth_type',
  'aws_access_key_id',
  'aws_bedrock_runtime_endpoint',
  'aws_profile_name',
  'aws_region_name',
  'aws_role_name',
  'aws_secret_access_key',
  'aws_session_name',
  'aws_session_token',
  'base_url',
  'caching_prompt',
  'custom_tokenizer',
  'disable_stop_word',
  'disable_vision',
  'drop_params',
  'enable_encrypted_reasoning',
  'extended_thinking_budget',
  'extra_headers',
  'fallback_strategy',
  'force_string_serializer',
  'inline_image_urls',
  'input_cost_per_token',
  'litellm_extra_body',
  'log_completions',
  'log_completions_folder',
  'max_input_tokens',
  'max_message_chars',
  'max_output_tokens',
  'model',
  'model_canonical_name',
  'modify_params',
  'native_tool_calling',
  'num_retries',
  'ollama_base_url',
  'openrouter_app_name',
  'openrouter_site_url',
  'output_cost_per_token',
  'prompt_cache_retention',
  'reasoning_effort',
  'reasoning_summary',
  'retry_max_wait',
  'retry_min_wait',
  'retry_multiplier',
  'seed',
  'stream',
  'subscription_vendor',
  'temperature',
  'timeout',
  'top_k',
  'top_p',
  'usage_id',
  // Computed by 1.11 and echoed back by clients that round-trip a read.
  'is_subscription',
] as const;

const ignored = z.unknown().optional().meta({ description: 'Accepted; this service has no such behaviour.' });
const ignoredLlmFields = Object.fromEntries(
  OPENHANDS_LLM_FIELDS.filter((k) => !['model', 'base_url', 'api_key', 'stream'].includes(k)).map((k) => [k, ignored]),
);

const llmFields = {
  model: field.llm_model,
  base_url: field.llm_base_url,
  api_key: field.llm_api_key.meta({ description: 'Write-only. null or "" removes the key (merge patch).' }),
  stream: z.boolean().nullable().optional().meta({
    description:
      'Model calls stream their answer (default true; null puts it back); false for a provider that breaks with streaming.',
  }),
};

/** `agent_settings_diff.llm`: unknown keys are ignored (1.11's `LLM` ignores them too). */
const LlmDiffSchema = z.object(llmFields).catchall(z.unknown());

/** A profile's `llm` (1.11's `StrictLLM`): a key 1.11 does not know is refused, as there. */
export const ProfileLlmSchema = z.strictObject({ ...ignoredLlmFields, ...llmFields }).meta({ id: 'ProfileLlm' });

/** `POST /api/v1/settings/profiles/{name}` (1.11's `SaveProfileRequest`); the body may be left out. */
export const SaveProfileBodySchema = z
  .object({
    include_secrets: z.boolean().default(true),
    llm: ProfileLlmSchema.nullable()
      .default(null)
      .meta({ description: 'Left out: the settings’ own model, base URL, key and streaming are saved.' }),
    preserve_existing_api_key: z.boolean().default(false),
  })
  .meta({ id: 'SaveProfileRequest' });

export const profileInputOf = (llm: z.output<typeof ProfileLlmSchema>): LlmProfileInput => ({
  model: llm.model ?? null,
  base_url: llm.base_url ?? null,
  api_key: llm.api_key,
  stream: llm.stream,
});

/** `{name}` of a profile, and `new_name` of a rename: 1.11's rule. */
export const profileName = z.string().regex(PROFILE_NAME, 'letters, digits, ".", "_" and "-", 1 to 64 of them');

/** One MCP server as 1.11 configures it (`MCPServer`): a stdio `command`, or a remote `url`. */
const McpServerInputSchema = z
  .object({
    command: z.string().max(1024).optional(),
    args: z.array(z.string().max(4096)).max(256).nullable().optional(),
    env: z.record(z.string(), z.string().max(16384)).nullable().optional(),
    cwd: z.string().nullable().optional(),
    url: z.string().max(2048).optional(),
    transport: z.enum(['stdio', 'http', 'streamable-http', 'sse']).nullable().optional(),
    auth: z
      .string()
      .max(8192)
      .nullable()
      .optional()
      .meta({ description: 'The bearer token; null or left out keeps the stored one of the same URL, "" removes it.' }),
    headers: z.record(z.string(), z.string()).nullable().optional(),
    timeout: z.number().positive().max(3600).nullable().optional(),
  })
  .catchall(z.unknown());

type McpServerInput = z.output<typeof McpServerInputSchema>;
type Issue = { path: (string | number)[]; message: string };

/** 1.11's server map → our lists (stdio servers keep their name; remote ones are known by URL). */
function toMcpConfig(servers: Record<string, McpServerInput>): { config: McpConfig } | { issues: Issue[] } {
  const issues: Issue[] = [];
  const lists: { stdio_servers: unknown[]; sse_servers: unknown[]; shttp_servers: unknown[] } = {
    stdio_servers: [],
    sse_servers: [],
    shttp_servers: [],
  };
  for (const [name, s] of Object.entries(servers)) {
    const refuse = (key: string, message: string) => issues.push({ path: [name, key], message });
    if (s.cwd) refuse('cwd', 'is not supported: a stdio server runs in the sandbox’s working directory');
    if (s.headers && Object.keys(s.headers).length > 0)
      refuse('headers', 'are not supported: give the bearer token as auth');
    if (s.auth === 'oauth') refuse('auth', 'OAuth is not supported: give the bearer token');
    if (s.transport === 'stdio' || (s.command !== undefined && s.url === undefined)) {
      lists.stdio_servers.push({ name, command: s.command ?? '', args: s.args ?? [], env: s.env ?? {} });
    } else if (s.url !== undefined) {
      const sse = s.transport === 'sse' || (!s.transport && /\/sse\/?$/.test(s.url));
      const server = { url: s.url, api_key: s.auth ?? null };
      if (sse) lists.sse_servers.push(server);
      else lists.shttp_servers.push({ ...server, timeout: s.timeout ? Math.ceil(s.timeout) : null });
    } else {
      refuse('command', 'give a command (stdio) or a url (http, sse)');
    }
  }
  if (issues.length > 0) return { issues };
  const parsed = McpConfigSchema.safeParse(lists);
  if (!parsed.success)
    return {
      issues: parsed.error.issues.map((i) => ({
        path: i.path.map((p) => (typeof p === 'symbol' ? String(p) : p)),
        message: i.message,
      })),
    };
  return { config: parsed.data };
}

const McpConfigInputSchema = z
  .record(z.string().max(64), McpServerInputSchema)
  .transform((servers, ctx) => {
    const converted = toMcpConfig(servers);
    if ('config' in converted) return converted.config;
    for (const issue of converted.issues)
      ctx.addIssue({ code: 'custom', path: issue.path, message: issue.message, input: servers });
    return z.NEVER;
  })
  .meta({
    description:
      'Replaces every server. By name: {command, args, env} for stdio, {url, transport, auth, timeout} for http and sse.',
  });

const condenserDiff = z
  .object({
    enabled: z.boolean().nullable().optional(),
    max_size: field.condenser_max_size,
    condenser_kind: z
      .enum(['llm_summarizing', 'no_op'])
      .nullable()
      .optional()
      .meta({ description: 'no_op turns condensing off.' }),
  })
  .catchall(z.unknown());

const AgentSettingsDiffSchema = z
  .object({
    agent_kind: z
      .literal('openhands', { error: 'only the openhands agent runs here (no ACP agents)' })
      .nullable()
      .optional(),
    agent: field.agent,
    llm: LlmDiffSchema.nullable().optional(),
    condenser: condenserDiff.nullable().optional(),
    mcp_config: McpConfigInputSchema.nullable().optional(),
  })
  .catchall(z.unknown());

const ConversationSettingsDiffSchema = z
  .object({
    max_iterations: field.max_iterations,
    confirmation_mode: field.confirmation_mode,
    security_analyzer: z.enum(['llm', 'rules', 'ensemble', 'none']).nullable().optional(),
  })
  .catchall(z.unknown());

/** `POST /api/v1/settings`. */
export const V1SettingsUpdateSchema = z
  .object({
    agent_settings_diff: AgentSettingsDiffSchema.nullable().optional(),
    conversation_settings_diff: ConversationSettingsDiffSchema.nullable().optional(),
    agent_settings: z.never({ error: 'send the changes as agent_settings_diff' }).optional(),
    conversation_settings: z.never({ error: 'send the changes as conversation_settings_diff' }).optional(),
    language: field.language,
    user_version: z.int().min(0).max(1_000_000).nullable().optional(),
    remote_runtime_resource_factor: field.remote_runtime_resource_factor,
    enable_sound_notifications: field.enable_sound_notifications,
    enable_proactive_conversation_starters: field.enable_proactive_conversation_starters,
    user_consents_to_analytics: field.user_consents_to_analytics.meta({ description: 'null keeps the stored answer.' }),
    sandbox_base_container_image: field.sandbox_base_container_image,
    sandbox_runtime_container_image: field.sandbox_runtime_container_image,
    search_api_key: field.search_api_key.meta({ description: 'Write-only; null or "" removes it.' }),
    sandbox_api_key: field.sandbox_api_key.meta({ description: 'Write-only; null or "" removes it.' }),
    max_budget_per_task: field.max_budget_per_task,
    email: field.email,
    email_verified: field.email_verified,
    git_user_name: field.git_user_name,
    git_user_email: field.git_user_email,
  })
  .meta({ id: 'V1SettingsUpdate' });
export type V1SettingsUpdate = z.output<typeof V1SettingsUpdateSchema>;

const blankToNull = (value: string | null | undefined) => (value === '' || value === undefined ? null : value);

function llmChange(llm: z.output<typeof LlmDiffSchema> | null): SettingsChange {
  if (llm === null) return { llm_model: null, llm_base_url: null, llm_api_key: null, llm_stream: true };
  return {
    ...(llm.model !== undefined ? { llm_model: blankToNull(llm.model) } : {}),
    ...(llm.stream !== undefined ? { llm_stream: llm.stream ?? true } : {}),
    ...(llm.base_url !== undefined ? { llm_base_url: blankToNull(llm.base_url) } : {}),
    ...(llm.api_key !== undefined ? { llm_api_key: blankToNull(llm.api_key) } : {}),
  };
}

function condenserChange(condenser: z.output<typeof condenserDiff> | null): SettingsChange {
  if (condenser === null) return { enable_default_condenser: true, condenser_max_size: null };
  const kind = condenser.condenser_kind;
  const enabled =
    kind === 'no_op'
      ? false
      : (condenser.enabled ?? (kind !== undefined || condenser.enabled === null ? true : undefined));
  return {
    ...(enabled !== undefined ? { enable_default_condenser: enabled } : {}),
    ...(condenser.max_size !== undefined ? { condenser_max_size: condenser.max_size } : {}),
  };
}

function agentChange(diff: z.output<typeof AgentSettingsDiffSchema> | null): SettingsChange {
  if (diff === null) {
    return {
      agent: null,
      ...llmChange(null),
      ...condenserChange(null),
      mcp_config: { sse_servers: [], stdio_servers: [], shttp_servers: [] },
    };
  }
  return {
    ...(diff.agent !== undefined ? { agent: diff.agent } : {}),
    ...(diff.llm !== undefined ? llmChange(diff.llm) : {}),
    ...(diff.condenser !== undefined ? condenserChange(diff.condenser) : {}),
    ...(diff.mcp_config !== undefined
      ? { mcp_config: diff.mcp_config ?? { sse_servers: [], stdio_servers: [], shttp_servers: [] } }
      : {}),
  };
}

function conversationChange(diff: z.output<typeof ConversationSettingsDiffSchema> | null): SettingsChange {
  if (diff === null) return { max_iterations: null, confirmation_mode: null, security_analyzer: null };
  return {
    ...(diff.max_iterations !== undefined ? { max_iterations: diff.max_iterations } : {}),
    ...(diff.confirmation_mode !== undefined ? { confirmation_mode: diff.confirmation_mode } : {}),
    ...(diff.security_analyzer !== undefined
      ? { security_analyzer: diff.security_analyzer === 'none' ? null : diff.security_analyzer }
      : {}),
  };
}

const TOP_LEVEL = [
  'language',
  'user_version',
  'remote_runtime_resource_factor',
  'enable_sound_notifications',
  'enable_proactive_conversation_starters',
  'sandbox_base_container_image',
  'sandbox_runtime_container_image',
  'max_budget_per_task',
  'email',
  'email_verified',
  'git_user_name',
  'git_user_email',
] as const;

/** The change a V1 body makes to the settings record. */
export function toSettingsChange(body: V1SettingsUpdate): SettingsChange {
  const change: SettingsChange = {};
  for (const key of TOP_LEVEL) {
    if (body[key] !== undefined) Object.assign(change, { [key]: body[key] });
  }
  // 1.11 keeps the stored answer when null is sent.
  if (body.user_consents_to_analytics !== undefined && body.user_consents_to_analytics !== null)
    change.user_consents_to_analytics = body.user_consents_to_analytics;
  if (body.search_api_key !== undefined) change.search_api_key = blankToNull(body.search_api_key);
  if (body.sandbox_api_key !== undefined) change.sandbox_api_key = blankToNull(body.sandbox_api_key);
  if (body.agent_settings_diff !== undefined) Object.assign(change, agentChange(body.agent_settings_diff));
  if (body.conversation_settings_diff !== undefined)
    Object.assign(change, conversationChange(body.conversation_settings_diff));
  return change;
}
