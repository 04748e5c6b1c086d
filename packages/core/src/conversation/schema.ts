import { z } from 'zod';
import { McpConfigSchema, type McpConfig } from '../mcp/schema.js';
import { GitProviderSchema, type GitProvider } from '../settings/schema.js';
import type { ExecutionStatus } from '../events/schema.js';
import type { ConversationWorkspace } from './workspace.js';

export const CONVERSATION_STATUSES = ['STARTING', 'RUNNING', 'STOPPED'] as const;
export const ConversationStatusSchema = z.enum(CONVERSATION_STATUSES);
export type ConversationStatus = z.infer<typeof ConversationStatusSchema>;


export const CONVERSATION_TRIGGERS = [
  'resolver',
  'gui',
  'suggested_task',
  'openhands_api',
  'slack',
  'microagent_management',
  'jira',
  'jira_dc',
  'linear',
  'bitbucket',
] as const;
export const ConversationTriggerSchema = z.enum(CONVERSATION_TRIGGERS);
export type ConversationTrigger = z.infer<typeof ConversationTriggerSchema>;

/** `owner/name`; GitLab subgroups (`group/sub/name`) allowed. */
export const RepositoryNameSchema = z
  .string()
  .trim()
  .max(255)
  .regex(/^[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)+$/, 'must look like owner/name');

export const BranchNameSchema = z
  .string()
  .trim()
  .min(1)
  .max(255)
  .refine((b) => !/[\s~^:?*[\\]|\.\.|@\{|^-/.test(b), 'is not a valid git branch name');

/**
 * JavaScript's \\s spelled out: documents are read by other regex engines too (Python's \\s also
 * takes U+001C–U+001F and U+0085, and not U+FEFF), so the pattern names the characters.
 */
const WHITESPACE = '\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff';

/**
 * Images reach the model as URLs: http(s) or inline data URLs only. One pattern, so the
 * document states the whole rule (letters in either case, as URL schemes are; no U+0000, which
 * no store can hold).
 */
export const ImageUrlSchema = z
  .string()
  .max(20 * 1024 * 1024)
  .regex(
    new RegExp(
      `^(?:[Hh][Tt][Tt][Pp][Ss]?://[^${WHITESPACE}\\u0000]+|[Dd][Aa][Tt][Aa]:[Ii][Mm][Aa][Gg][Ee]/[A-Za-z0-9.+-]+;[Bb][Aa][Ss][Ee]64,[A-Za-z0-9+/=${WHITESPACE}]+)$`,
    ),
    'must be an http(s) URL or a data:image/...;base64 URL',
  );

const RESERVED_CONVERSATION_IDS = new Set(['search', 'count', 'start-tasks', 'stream-start']);

/** Client-chosen conversation ids (when the server allows them). */
export const ClientConversationIdSchema = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]*$/, 'may only contain letters, digits, _ and - and must start with a letter or digit')
  // These name routes under /api/v1/app-conversations/ (matched case-insensitively), so a conversation with them could not be read there.
  .refine((id) => !RESERVED_CONVERSATION_IDS.has(id.toLowerCase()), 'is reserved: it names a route (search, count, start-tasks, stream-start)');

export const SuggestedTaskSchema = z.object({
  repo: RepositoryNameSchema,
  issue_number: z.int().min(0),
  title: z.string().max(1024),
});
export type SuggestedTask = z.infer<typeof SuggestedTaskSchema>;

export const CreateMicroagentSchema = z.object({
  repo: RepositoryNameSchema,
  title: z.string().max(1024).nullable().optional(),
});
export type CreateMicroagent = z.infer<typeof CreateMicroagentSchema>;

/** V0 `POST /api/conversations` body. Unknown keys are rejected. */
export const NewConversationRequestSchema = z.strictObject({
  repository: RepositoryNameSchema.nullable().optional(),
  git_provider: GitProviderSchema.nullable().optional(),
  selected_branch: BranchNameSchema.nullable().optional(),
  initial_user_msg: z.string().max(1_000_000).nullable().optional(),
  image_urls: z.array(ImageUrlSchema).max(32).nullable().optional(),
  replay_json: z
    .string()
    .nullable()
    .optional()
    .meta({
      description:
        'An OpenHands V0 trajectory (a JSON array of events, as a string) to replay without a model: its first user message starts the conversation (it wins over initial_user_msg), its actions (run, write, edit, read, think, finish, messages) run in the sandbox in order. A trajectory that cannot be replayed is a 422 naming the event, e.g. replay_json[3].args.command.',
    }),
  suggested_task: SuggestedTaskSchema.optional(),
  create_microagent: CreateMicroagentSchema.optional(),
  conversation_instructions: z.string().max(100_000).nullable().optional(),
  mcp_config: McpConfigSchema.optional(),
  conversation_id: ClientConversationIdSchema.optional(),
}).superRefine((request, ctx) => {
  // The repository cloned and the one the first message talks about must be the same.
  const named = request.suggested_task?.repo ?? request.create_microagent?.repo;
  if (request.repository && named && named.toLowerCase() !== request.repository.toLowerCase()) {
    ctx.addIssue({
      code: 'custom',
      path: request.suggested_task ? ['suggested_task', 'repo'] : ['create_microagent', 'repo'],
      message: `names ${named}, but repository is ${request.repository}; give one repository (or the same in both)`,
    });
  }
});
export type NewConversationRequest = z.output<typeof NewConversationRequestSchema>;


const TextContentSchema = z.object({ type: z.literal('text'), text: z.string().max(1_000_000), cache_prompt: z.boolean().optional() });
const ImageContentSchema = z.object({ type: z.literal('image'), image_urls: z.array(ImageUrlSchema).min(1).max(32) });

/** A message sent to the agent (V1 shape). */
export const SendMessageRequestSchema = z.object({
  role: z
    .literal('user', { error: 'only messages from the user can be sent' })
    .default('user')
    .meta({ description: 'Only "user": the other roles of the agent-server are the agent\'s own.' }),
  content: z.array(z.discriminatedUnion('type', [TextContentSchema, ImageContentSchema])).max(64),
  run: z.boolean().default(false),
});
export type SendMessageRequest = z.output<typeof SendMessageRequestSchema>;

/** V1 `POST /api/v1/app-conversations` body. Unknown keys are ignored (as OpenHands does). */
export const AppConversationStartRequestSchema = z.object({
  sandbox_id: z.string().min(1).max(128).nullable().optional(),
  initial_message: SendMessageRequestSchema.nullable().optional(),
  processors: z.array(z.unknown()).nullable().optional().meta({ description: 'Accepted for compatibility; ignored.' }),
  llm_model: z.string().trim().min(1).max(512).nullable().optional(),
  selected_repository: RepositoryNameSchema.nullable().optional(),
  selected_branch: BranchNameSchema.nullable().optional(),
  git_provider: GitProviderSchema.nullable().optional(),
  title: z.string().trim().min(1).max(200).nullable().optional(),
  trigger: ConversationTriggerSchema.nullable().optional(),
  pr_number: z.array(z.int().min(0)).max(100).optional(),
  parent_conversation_id: z.string().min(1).max(100).nullable().optional(),
  agent_type: z.enum(['default', 'plan']).optional(),
});
export type AppConversationStartRequest = z.output<typeof AppConversationStartRequestSchema>;

/** What the conversation was started with; the agent engine reads it. */
export interface ConversationLaunch {
  initial_message: SendMessageRequest | null;
  conversation_instructions: string | null;
  mcp_config: McpConfig | null;
  suggested_task: SuggestedTask | null;
  create_microagent: CreateMicroagent | null;
  replay_json: string | null;
  agent_type: 'default' | 'plan';
}

/** A conversation as kept by a ConversationStore. V0 and V1 see the same record. */
export interface ConversationRecord {
  id: string;
  user_id: string;
  title: string;
  status: ConversationStatus;
  status_detail: string | null;
  execution_status: ExecutionStatus | null;
  sandbox_id: string | null;
  selected_repository: string | null;
  selected_branch: string | null;
  git_provider: GitProvider | null;
  trigger: ConversationTrigger | null;
  pr_number: number[];
  llm_model: string | null;
  /**
   * The LLM profile the conversation was switched to (its id, which a rename keeps): its model,
   * key and base URL are used for the next model calls. Absent or null: the settings' own (and
   * `llm_model`); also when the profile has been deleted since.
   */
  llm_profile_id?: string | null;
  parent_conversation_id: string | null;
  launch: ConversationLaunch;
  /** Which API created it; informational. */
  conversation_version: 'V0' | 'V1';
  /** Tokens and cost so far; absent until the first model call (and on records from before the engine). */
  metrics?: ConversationMetrics | null;
  /** The repository prepared in the sandbox (clone, branch, guidance); absent without a repository or before it is ready. */
  workspace?: ConversationWorkspace | null;
  created_at: string;
  updated_at: string;
}

export const MetricsSnapshotSchema = z.object({
  accumulated_cost: z.number().nullable().meta({ description: 'USD so far; null when the price of a model used is unknown.' }),
  max_budget_per_task: z.number().nullable(),
  prompt_tokens: z.int(),
  completion_tokens: z.int(),
});
export type ConversationMetrics = z.infer<typeof MetricsSnapshotSchema>;


export const START_TASK_STATUSES = [
  'WORKING',
  'WAITING_FOR_SANDBOX',
  'PREPARING_REPOSITORY',
  'RUNNING_SETUP_SCRIPT',
  'SETTING_UP_GIT_HOOKS',
  'STARTING_CONVERSATION',
  'READY',
  'ERROR',
] as const;
export const StartTaskStatusSchema = z.enum(START_TASK_STATUSES);
export type StartTaskStatus = z.infer<typeof StartTaskStatusSchema>;

/** The progress of starting one conversation. */
export interface StartTaskRecord {
  id: string;
  user_id: string;
  status: StartTaskStatus;
  detail: string | null;
  app_conversation_id: string;
  sandbox_id: string | null;
  request: AppConversationStartRequest;
  created_at: string;
  updated_at: string;
}

export const StartTaskSchema = z.object({
  id: z.string(),
  created_by_user_id: z.string().nullable(),
  status: StartTaskStatusSchema,
  detail: z.string().nullable(),
  app_conversation_id: z
    .string()
    .nullable()
    .meta({ description: 'Known from the first response on (the id is reserved when the task is created).' }),
  sandbox_id: z.string().nullable(),
  agent_server_url: z.string().nullable(),
  request: z.record(z.string(), z.unknown()),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});
export type StartTask = z.infer<typeof StartTaskSchema>;

export function toStartTask(record: StartTaskRecord): StartTask {
  return {
    id: record.id,
    created_by_user_id: record.user_id,
    status: record.status,
    detail: record.detail,
    app_conversation_id: record.app_conversation_id,
    sandbox_id: record.sandbox_id,
    agent_server_url: null,
    request: record.request,
    created_at: record.created_at,
    updated_at: record.updated_at,
  };
}
