import type { AgentSettingsDefaults } from '@acs/core/ports';
import { z } from 'zod';

/**
 * The settings forms of `GET /api/v1/settings/agent-schema` and `/conversation-schema`, in the
 * format OpenHands 1.11 answers with (`SettingsSchema`: sections of fields, each with its key in
 * the settings, label, type, default, choices and what it depends on), describing what THIS
 * service takes and acts on: a client that draws its form from them offers only settings that
 * do something here. Defaults are the agent's own values.
 */

const ChoiceSchema = z.object({ label: z.string(), value: z.union([z.string(), z.number(), z.boolean()]) });

const FieldSchema = z.object({
  key: z.string().meta({
    description: 'Dotted path in agent_settings (or conversation_settings), as agent_settings_diff takes it.',
  }),
  label: z.string(),
  description: z.string().nullable(),
  section: z.string(),
  section_label: z.string(),
  value_type: z.enum(['string', 'integer', 'number', 'boolean', 'array', 'object']),
  default: z.unknown(),
  choices: z.array(ChoiceSchema),
  depends_on: z.array(z.string()),
  prominence: z.enum(['critical', 'major', 'minor']),
  secret: z.boolean(),
  variant: z.string().nullable(),
});

export const SettingsSchemaSchema = z
  .object({
    model_name: z.string(),
    sections: z.array(
      z.object({ key: z.string(), label: z.string(), variant: z.string().nullable(), fields: z.array(FieldSchema) }),
    ),
  })
  .meta({ id: 'SettingsSchema' });
export type SettingsSchema = z.infer<typeof SettingsSchemaSchema>;

type Field = z.infer<typeof FieldSchema>;
type FieldSpec = Pick<Field, 'key' | 'label' | 'value_type' | 'default' | 'prominence'> &
  Partial<Pick<Field, 'description' | 'choices' | 'depends_on' | 'secret'>>;

function section(key: string, label: string, variant: string | null, fields: FieldSpec[]) {
  return {
    key,
    label,
    variant,
    fields: fields.map((f) => ({
      choices: [],
      depends_on: [],
      description: null,
      secret: false,
      ...f,
      section: key,
      section_label: label,
      variant,
    })),
  };
}

const choices = (...values: string[]) => values.map((value) => ({ label: value, value }));

/** The agent's settings: which agent, the model (and its key and base URL), MCP servers, the condenser. */
export function agentSettingsSchema(defaults: AgentSettingsDefaults): SettingsSchema {
  return {
    model_name: 'AgentSettings',
    sections: [
      section('general', 'General', null, [
        {
          key: 'agent',
          label: 'Agent',
          value_type: 'string',
          default: 'CodeActAgent',
          choices: choices('CodeActAgent'),
          prominence: 'major',
          description: 'The agent that runs conversations.',
        },
        {
          key: 'mcp_config',
          label: 'MCP servers',
          value_type: 'object',
          default: {},
          prominence: 'minor',
          description:
            'By name: {command, args, env} for a server started in the sandbox (stdio), {url, transport: "http" | "sse", auth, timeout} for a remote one. Replaced whole.',
        },
      ]),
      section('llm', 'LLM', 'openhands', [
        {
          key: 'llm.model',
          label: 'Model',
          value_type: 'string',
          default: null,
          prominence: 'critical',
          description: 'provider/model, e.g. openai/gpt-4o (see /api/v1/config/models/search).',
        },
        {
          key: 'llm.api_key',
          label: 'API Key',
          value_type: 'string',
          default: null,
          prominence: 'critical',
          secret: true,
          description: 'Write-only: never shown again (llm_api_key_set says whether one is stored).',
        },
        {
          key: 'llm.base_url',
          label: 'Base URL',
          value_type: 'string',
          default: null,
          prominence: 'major',
          description: 'An OpenAI-compatible endpoint; empty for the provider’s own.',
        },
        {
          key: 'llm.stream',
          label: 'Stream responses',
          value_type: 'boolean',
          default: true,
          prominence: 'minor',
          description:
            'Show the model’s answer as it is written. Turn it off for a provider that breaks with streaming.',
        },
      ]),
      section('condenser', 'Condenser', 'openhands', [
        {
          key: 'condenser.enabled',
          label: 'Enable memory condensation',
          value_type: 'boolean',
          default: true,
          prominence: 'critical',
          description: 'Summarise older events once the conversation grows past the maximum size.',
        },
        {
          key: 'condenser.max_size',
          label: 'Max size',
          value_type: 'integer',
          default: defaults.condenser_max_size,
          prominence: 'minor',
          depends_on: ['condenser.enabled'],
          description: 'Events shown to the model (at least 20) before older ones are summarised.',
        },
      ]),
    ],
  };
}

/** A conversation's settings: its step limit, confirmation, the security analyzer. */
export function conversationSettingsSchema(defaults: AgentSettingsDefaults): SettingsSchema {
  return {
    model_name: 'ConversationSettings',
    sections: [
      section('general', 'General', null, [
        {
          key: 'max_iterations',
          label: 'Max iterations',
          value_type: 'integer',
          default: defaults.max_iterations,
          prominence: 'major',
          description: 'Model calls the agent may make for one message; a new message allows as many again.',
        },
      ]),
      section('verification', 'Verification', null, [
        {
          key: 'confirmation_mode',
          label: 'Confirmation mode',
          value_type: 'boolean',
          default: false,
          prominence: 'critical',
          description: 'Wait for the user to accept actions before they run.',
        },
        {
          key: 'security_analyzer',
          label: 'Security analyzer',
          value_type: 'string',
          default: 'none',
          choices: choices('llm', 'rules', 'ensemble', 'none'),
          prominence: 'major',
          description:
            'Rates every action: llm (the model rates its own calls), rules (rule-based: destructive commands, secrets leaving the sandbox, unknown hosts), ensemble (both, the higher wins), none. In confirmation mode only high or unknown risk then waits.',
        },
      ]),
    ],
  };
}
