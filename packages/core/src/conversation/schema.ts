import { z } from 'zod';
// What a suggested task asks for (OpenHands' task types, one list with git's suggestions); an issue when not said.
import { SUGGESTED_TASK_TYPES } from '../git/schema.js';
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
  'automation',
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
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_-]*$/,
    'may only contain letters, digits, _ and - and must start with a letter or digit',
  )
  // These name routes under /api/v1/app-conversations/ (matched case-insensitively), so a conversation with them could not be read there.
  .refine(
    (id) => !RESERVED_CONVERSATION_IDS.has(id.toLowerCase()),
    'is reserved: it names a route (search, count, start-tasks, stream-start)',
  );

export const SuggestedTaskSchema = z.object({
  repo: RepositoryNameSchema,
  issue_number: z.int().min(0),
  title: z.string().max(1024),
  task_type: z.enum(SUGGESTED_TASK_TYPES).optional(),
  git_provider: GitProviderSchema.optional(),
});
export type SuggestedTask = z.infer<typeof SuggestedTaskSchema>;

export const CreateMicroagentSchema = z.object({
  repo: RepositoryNameSchema,
  title: z.string().max(1024).nullable().optional(),
});
export type CreateMicroagent = z.infer<typeof CreateMicroagentSchema>;

/** V0 `POST /api/conversations` body. Unknown keys are rejected. */
export const NewConversationRequestSchema = z
  .strictObject({
    repository: RepositoryNameSchema.nullable().optional(),
    git_provider: GitProviderSchema.nullable().optional(),
    selected_branch: BranchNameSchema.nullable().optional(),
    initial_user_msg: z.string().max(1_000_000).nullable().optional(),
    image_urls: z.array(ImageUrlSchema).max(32).nullable().optional(),
    replay_json: z.string().nullable().optional().meta({
      description:
        'An OpenHands V0 trajectory (a JSON array of events, as a string) to replay without a model: its first user message starts the conversation (it wins over initial_user_msg), its actions (run, write, edit, read, think, finish, messages) run in the sandbox in order. A trajectory that cannot be replayed is a 422 naming the event, e.g. replay_json[3].args.command.',
    }),
    suggested_task: SuggestedTaskSchema.optional(),
    create_microagent: CreateMicroagentSchema.optional(),
    conversation_instructions: z.string().max(100_000).nullable().optional(),
    mcp_config: McpConfigSchema.optional(),
    conversation_id: ClientConversationIdSchema.optional(),
  })
  .superRefine((request, ctx) => {
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

const TextContentSchema = z.object({
  type: z.literal('text'),
  text: z.string().max(1_000_000),
  cache_prompt: z.boolean().optional(),
});
const ImageContentSchema = z.object({
  type: z.literal('image'),
  image_urls: z.array(ImageUrlSchema).min(1).max(32),
  cache_prompt: z.boolean().optional(),
});

/**
 * One part of a message: text or images. `type` may be left out, as OpenHands' models default
 * it: a part with `image_urls` is then images, any other text.
 */
const MessageContentSchema = z.preprocess(
  (part: unknown) =>
    part !== null && typeof part === 'object' && !Array.isArray(part) && !('type' in part)
      ? { ...part, type: 'image_urls' in part ? 'image' : 'text' }
      : part,
  z.discriminatedUnion('type', [TextContentSchema, ImageContentSchema]),
);

const MessageRoleSchema = z
  .literal('user', { error: 'only messages from the user can be sent' })
  .default('user')
  .meta({ description: 'Only "user": the other roles of the agent-server are the agent\'s own.' });

/** A message sent to the agent (V1 shape). */
export const SendMessageRequestSchema = z.object({
  role: MessageRoleSchema,
  content: z.array(MessageContentSchema).max(64),
  run: z.boolean().default(false),
});
export type SendMessageRequest = z.output<typeof SendMessageRequestSchema>;

/** A conversation's first message: as a sent message, but `content` may be left out (no message then). */
const InitialMessageSchema = SendMessageRequestSchema.extend({
  content: z.array(MessageContentSchema).max(64).default([]),
});

/** A UUID, dashed or as 32 hex digits (stored as 32 lowercase hex digits). */
export const UuidSchema = z
  .string()
  .regex(
    /^(?:[0-9a-fA-F]{32}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$/,
    'must be a UUID (32 hex digits, dashed or not)',
  );

/** Fields OpenHands accepts that this server cannot honour: refused unless empty, rather than silently ignored. */
const notSupported = (what: string) => (value: unknown) =>
  value === null ||
  value === undefined ||
  (Array.isArray(value) ? value.length === 0 : typeof value === 'object' && Object.keys(value).length === 0)
    ? true
    : what;

/** V1 `POST /api/v1/app-conversations` body (OpenHands 1.11's AppConversationStartRequest). Unknown keys are ignored (as OpenHands does). */
export const AppConversationStartRequestSchema = z
  .object({
    sandbox_id: z
      .string()
      .min(1)
      .max(128)
      .nullable()
      .optional()
      .meta({ description: 'Start in this sandbox of yours (it must exist and not be lost).' }),
    conversation_id: UuidSchema.nullable()
      .optional()
      .meta({ description: 'The id the conversation gets (409 when you already have one with it).' }),
    initial_message: InitialMessageSchema.nullable().optional(),
    system_message_suffix: z
      .string()
      .max(100_000)
      .nullable()
      .optional()
      .meta({ description: "Added to the agent's system prompt." }),
    processors: z
      .array(z.unknown())
      .max(100)
      .nullable()
      .optional()
      .meta({ description: 'Accepted for compatibility; ignored.' }),
    llm_model: z.string().trim().min(1).max(512).nullable().optional(),
    agent_profile_id: z
      .unknown()
      .refine(
        (v) => v === null || v === undefined,
        'agent profiles are not supported by this server; leave agent_profile_id out',
      )
      .optional()
      .meta({ description: 'Not supported: only null.' }),
    selected_repository: RepositoryNameSchema.nullable().optional(),
    selected_branch: BranchNameSchema.nullable().optional(),
    git_provider: GitProviderSchema.nullable().optional(),
    suggested_task: SuggestedTaskSchema.nullable().optional().meta({
      description:
        'Its wording becomes the first message (give it or initial_message, not both); its repo is cloned unless selected_repository says otherwise.',
    }),
    title: z.string().trim().min(1).max(200).nullable().optional(),
    trigger: ConversationTriggerSchema.nullable().optional(),
    pr_number: z.array(z.int().min(0)).max(100).optional(),
    parent_conversation_id: z.string().min(1).max(100).nullable().optional(),
    agent_type: z.enum(['default', 'plan']).optional(),
    public: z.boolean().nullable().optional(),
    plugins: z
      .array(z.unknown())
      .max(100)
      .nullable()
      .optional()
      .refine(
        (v) => notSupported('plugins are not supported by this server; send none')(v) === true,
        'plugins are not supported by this server; send none',
      )
      .meta({ description: 'Not supported: only null or [].' }),
    secrets: z
      .record(z.string().max(256), z.string().max(100_000))
      .nullable()
      .optional()
      .refine(
        (v) => notSupported('')(v) === true,
        'conversation secrets are not supported by this server; store them as your secrets (/api/v1/secrets) instead',
      )
      .meta({ description: 'Not supported: only null or {}.' }),
  })
  .superRefine((request, ctx) => {
    if (request.suggested_task && request.initial_message && request.initial_message.content.length > 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['suggested_task'],
        message: 'give suggested_task or initial_message, not both',
      });
    }
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
  /** Whether the owner shares it (OpenHands' `public`); absent on records from before it was kept. */
  public?: boolean | null;
  /** The repository prepared in the sandbox (clone, branch, guidance); absent without a repository or before it is ready. */
  workspace?: ConversationWorkspace | null;
  /**
   * The generation of the conversation's own key (`session_api_key`): the edge signs it into the
   * key with the sandbox's id, so `rotateKey` (which adds one) ends every key given out before.
   * Absent on records from before it was kept: 0.
   */
  key_generation?: number;
  created_at: string;
  updated_at: string;
}

/** A conversation's model use so far, as its record keeps it (the agent writes it after each call). */
export interface ConversationMetrics {
  /** USD so far; null when the price of a model used is unknown. */
  accumulated_cost: number | null;
  max_budget_per_task: number | null;
  prompt_tokens: number;
  completion_tokens: number;
  /** Prompt tokens the provider served from its cache, summed. Absent on records from before it was kept. */
  cache_read_tokens?: number;
  /** USD of the calls whose price is known (accumulated_cost when every price is). Absent on older records. */
  priced_cost?: number;
  /** The model of the last call. Absent on older records. */
  model?: string;
  /** Prompt and completion tokens of the last call. Absent on older records. */
  last_call_tokens?: number;
}

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
  request: z
    .record(z.string(), z.unknown())
    .meta({ description: 'The start request, every field of it with its default where it was left out.' }),
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
    request: echoStartRequest(record.request),
    created_at: record.created_at,
    updated_at: record.updated_at,
  };
}

/** A content part as OpenHands echoes it: with its type and `cache_prompt`. */
const echoContent = (part: SendMessageRequest['content'][number]) =>
  part.type === 'text'
    ? { type: 'text', text: part.text, cache_prompt: part.cache_prompt ?? false }
    : { type: 'image', image_urls: part.image_urls, cache_prompt: part.cache_prompt ?? false };

/**
 * The request a start task echoes: every field of OpenHands' AppConversationStartRequest, with
 * its default where the request left it out (the conversation id dashed, as OpenHands writes a
 * plain UUID; secrets, which are refused unless empty, never echoed with values).
 */
function echoStartRequest(request: AppConversationStartRequest): Record<string, unknown> {
  const dashed = (id: string) =>
    id
      .replaceAll('-', '')
      .toLowerCase()
      .replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');
  return {
    sandbox_id: request.sandbox_id ?? null,
    conversation_id: request.conversation_id ? dashed(request.conversation_id) : null,
    initial_message: request.initial_message
      ? {
          role: request.initial_message.role,
          content: request.initial_message.content.map(echoContent),
          run: request.initial_message.run,
        }
      : null,
    system_message_suffix: request.system_message_suffix ?? null,
    processors: request.processors ?? null,
    llm_model: request.llm_model ?? null,
    agent_profile_id: null,
    selected_repository: request.selected_repository ?? null,
    selected_branch: request.selected_branch ?? null,
    git_provider: request.git_provider ?? null,
    suggested_task: request.suggested_task ?? null,
    title: request.title ?? null,
    trigger: request.trigger ?? null,
    pr_number: request.pr_number ?? [],
    parent_conversation_id: request.parent_conversation_id ?? null,
    agent_type: request.agent_type ?? 'default',
    public: request.public ?? null,
    plugins: request.plugins ?? null,
    secrets: request.secrets ? {} : null,
  };
}
