import { z } from 'zod';
import type { StoredEvent } from './store.js';

/**
 * What a conversation's event log holds, one schema per `kind`. Every event has a
 * per-conversation id (1, 2, 3, … without gaps), a timestamp and a source; the rest
 * depends on the kind. The log is the whole story: the prompt is rebuilt from it, a
 * restarted service resumes from it, and clients replay it.
 */

/** The agent's state, as the log records it (`agent_state_changed`) and a conversation shows it (`execution_status`). */
export const EXECUTION_STATUSES = [
  'idle',
  'running',
  'paused',
  'waiting_for_confirmation',
  'finished',
  'error',
  'stuck',
] as const;
export const ExecutionStatusSchema = z.enum(EXECUTION_STATUSES);
export type ExecutionStatus = z.infer<typeof ExecutionStatusSchema>;

/** How risky an action is; unknown when nothing could tell. */
export const SecurityRiskSchema = z.enum(['low', 'medium', 'high', 'unknown']);

const base = {
  id: z.int().min(1).meta({ description: 'Per conversation: 1, 2, 3, … in the order the events happened.' }),
  timestamp: z.iso.datetime(),
};

/** Set on the events a `replay_json` trajectory produced: which step of the replay (0-based) this was. */
const REPLAY_STEP = z.int().min(0).optional().meta({
  description:
    'Only on events replayed from a replay_json trajectory: the replay step (0-based) that produced it. Replayed actions had no model call.',
});

export const MessageEventSchema = z
  .object({
    ...base,
    kind: z.literal('message'),
    source: z.enum(['user', 'agent', 'environment']).meta({
      description: 'environment: a note from the service to the model (e.g. a nudge when it repeats itself).',
    }),
    text: z.string(),
    image_urls: z.array(z.string()),
    replay_step: REPLAY_STEP,
  })
  .meta({ id: 'MessageEvent', description: 'A message from the user to the agent, or the agent’s reply to the user.' });

export const ActionEventSchema = z
  .object({
    ...base,
    kind: z.literal('action'),
    source: z.literal('agent'),
    tool_call_id: z.string(),
    tool_name: z.string(),
    arguments: z
      .record(z.string(), z.unknown())
      .nullable()
      .meta({ description: 'The parsed arguments; null when the model sent arguments that are not a JSON object.' }),
    raw_arguments: z.string().meta({ description: 'The arguments exactly as the model wrote them.' }),
    thought: z
      .string()
      .nullable()
      .meta({ description: 'Text the model wrote next to the call (on the first call of a response).' }),
    response_id: z.string().meta({ description: 'Calls made in one model response share it.' }),
    replay_step: REPLAY_STEP,
    security_risk: SecurityRiskSchema.optional().meta({
      description:
        'Only when a security analyzer is configured: how risky the action is (the highest of what the analyzers said).',
    }),
    risk_reasons: z
      .array(z.string())
      .optional()
      .meta({ description: 'Why the analyzers rated it so: `<rule-id>: <words>`, or the model’s own rating.' }),
    requires_confirmation: z.boolean().optional().meta({
      description:
        'true when the action waits for the user to accept or reject it (confirmation mode); absent otherwise.',
    }),
  })
  .meta({ id: 'ActionEvent', description: 'A tool call the agent made; it is recorded before it runs.' });

export const ObservationEventSchema = z
  .object({
    ...base,
    kind: z.literal('observation'),
    source: z.literal('environment'),
    tool_call_id: z.string(),
    tool_name: z.string(),
    content: z.string().meta({ description: 'What the model is shown.' }),
    is_error: z.boolean().meta({ description: 'The call was invalid, failed, or was interrupted.' }),
    exit_code: z
      .int()
      .nullable()
      .meta({ description: 'execute_bash: the exit code; null while the command still runs or for other tools.' }),
    details: z
      .record(z.string(), z.unknown())
      .meta({ description: 'Tool-specific facts (working directory, path, where clipped output was saved…).' }),
  })
  .meta({ id: 'ObservationEvent', description: 'The result of one action, matched to it by tool_call_id.' });

export const LlmCallEventSchema = z
  .object({
    ...base,
    kind: z.literal('llm_call'),
    source: z.literal('environment'),
    response_id: z.string(),
    model: z.string(),
    prompt_tokens: z.int(),
    completion_tokens: z.int(),
    cached_prompt_tokens: z.int(),
    cost_usd: z.number().nullable().meta({ description: 'null when the price of the model is unknown.' }),
    latency_ms: z.int(),
    attempts: z.int(),
    purpose: z.enum(['agent', 'condenser']).optional().meta({
      description: 'condenser: a call that summarised older events (it is not an agent step). Absent means agent.',
    }),
    accumulated: z
      .object({
        cost_usd: z
          .number()
          .nullable()
          .meta({ description: 'null when a call of the conversation had an unknown price.' }),
        prompt_tokens: z.int(),
        completion_tokens: z.int(),
      })
      .optional()
      .meta({ description: 'The conversation’s totals including this call.' }),
  })
  .meta({ id: 'LlmCallEvent', description: 'One successful call to the model: tokens, cost and time.' });

export const StatusEventSchema = z
  .object({
    ...base,
    kind: z.literal('status'),
    source: z.literal('environment'),
    execution_status: ExecutionStatusSchema,
    reason: z.string().nullable(),
  })
  .meta({ id: 'StatusEvent', description: 'The agent’s execution status changed.' });

export const CONVERSATION_ERROR_CODES = [
  'llm_auth_failed',
  'llm_rate_limited',
  'llm_unreachable',
  'llm_timeout',
  'llm_context_too_long',
  'llm_content_refused',
  'llm_model_not_found',
  'llm_bad_request',
  'llm_provider_error',
  'llm_not_configured',
  'max_iterations_reached',
  'budget_exceeded',
  'budget_unenforceable',
  'stuck',
  'sandbox_unavailable',
  'restart_interrupted',
  'repository_setup_failed',
  'mcp_server_failed',
  'internal_error',
] as const;
export const ConversationErrorCodeSchema = z.enum(CONVERSATION_ERROR_CODES);
export type ConversationErrorCode = z.infer<typeof ConversationErrorCodeSchema>;

export const ErrorEventSchema = z
  .object({
    ...base,
    kind: z.literal('error'),
    source: z.literal('environment'),
    code: ConversationErrorCodeSchema,
    message: z.string(),
    fatal: z.boolean().meta({ description: 'true when the agent stopped because of it; false for a warning.' }),
  })
  .meta({
    id: 'ErrorEvent',
    description: 'Why the agent stopped (limits, LLM failures, stuck) or something it could not do.',
  });

export const SetupEventSchema = z
  .object({
    ...base,
    kind: z.literal('setup'),
    source: z.literal('environment'),
    step: z
      .enum(['repository', 'setup_script'])
      .meta({ description: 'repository: the clone and checkout; setup_script: the repository’s .openhands/setup.sh.' }),
    summary: z.string().meta({ description: 'What was done, in words.' }),
    output: z.string().meta({ description: 'What the step printed (stdout and stderr), clipped; secrets are masked.' }),
    exit_code: z.int().nullable().meta({ description: 'null when the step was killed (timed out) or ran no command.' }),
    timed_out: z.boolean(),
    duration_ms: z.int(),
  })
  .meta({
    id: 'SetupEvent',
    description:
      'A step of preparing the sandbox for the conversation (cloning its repository, running its setup script).',
  });

export const ConfirmationEventSchema = z
  .object({
    ...base,
    kind: z.literal('confirmation'),
    source: z.literal('user'),
    accept: z.boolean(),
    reason: z
      .string()
      .nullable()
      .meta({ description: 'What the user said with the decision (shown to the model on a rejection).' }),
    tool_call_ids: z.array(z.string()).meta({ description: 'The actions decided on.' }),
  })
  .meta({
    id: 'ConfirmationEvent',
    description: 'The user accepted or rejected the actions that waited for confirmation.',
  });

export const CondensationEventSchema = z
  .object({
    ...base,
    kind: z.literal('condensation'),
    source: z.literal('environment'),
    summary: z.string().meta({ description: 'What the model is shown instead of the forgotten events.' }),
    kept_head_through: z.int().min(0).meta({
      description: 'Events up to this id (the start of the conversation) are still shown as they are; 0 for none.',
    }),
    forgotten_through: z
      .int()
      .min(0)
      .meta({ description: 'Events after kept_head_through up to this id are replaced by the summary.' }),
    forgotten_events: z
      .int()
      .min(0)
      .meta({ description: 'How many events the summary replaces (messages, actions and observations).' }),
    reason: z.string().meta({
      description:
        'Why the history was condensed (too many events, too long, or the model said the context was too long).',
    }),
  })
  .meta({
    id: 'CondensationEvent',
    description:
      'Older events were summarised to keep the prompt bounded. The log keeps every event; only what the model is shown changes.',
  });

/**
 * The one list of event kinds: a kind is added here, by its schema, and nowhere else.
 * `ConversationEventSchema`, `CONVERSATION_EVENT_KINDS` (and so the `kind` query filter and the
 * console's generated `CONVERSATION_EVENT_KINDS`) follow from it; every `switch` over a kind
 * ends in `event satisfies never`, so the compiler names each place a new kind must be handled.
 */
const EVENT_SCHEMAS = [
  MessageEventSchema,
  ActionEventSchema,
  ObservationEventSchema,
  LlmCallEventSchema,
  StatusEventSchema,
  ErrorEventSchema,
  SetupEventSchema,
  ConfirmationEventSchema,
  CondensationEventSchema,
] as const;

export const ConversationEventSchema = z.discriminatedUnion('kind', EVENT_SCHEMAS).meta({ id: 'ConversationEvent' });
export type ConversationEvent = z.infer<typeof ConversationEventSchema>;
export type ConversationEventKind = ConversationEvent['kind'];
/** Every kind, in the order of the schemas above (a tuple type, so `z.enum` takes it). */
export const CONVERSATION_EVENT_KINDS = kindsOf(EVENT_SCHEMAS);
export const ConversationEventKindSchema = z.enum(CONVERSATION_EVENT_KINDS);

/** The `kind` literal of each schema, as a tuple of the same length and order. */
function kindsOf<const T extends readonly { shape: { kind: z.ZodLiteral<string> } }[]>(
  schemas: T,
): { readonly [I in keyof T]: T[I]['shape']['kind']['value'] } {
  return schemas.map((schema) => schema.shape.kind.value) as {
    readonly [I in keyof T]: T[I]['shape']['kind']['value'];
  };
}

export type MessageEvent = z.infer<typeof MessageEventSchema>;
export type ActionEvent = z.infer<typeof ActionEventSchema>;
export type ObservationEvent = z.infer<typeof ObservationEventSchema>;
export type LlmCallEvent = z.infer<typeof LlmCallEventSchema>;
export type StatusEvent = z.infer<typeof StatusEventSchema>;
export type ErrorEvent = z.infer<typeof ErrorEventSchema>;
export type SetupEvent = z.infer<typeof SetupEventSchema>;
export type ConfirmationEvent = z.infer<typeof ConfirmationEventSchema>;
export type CondensationEvent = z.infer<typeof CondensationEventSchema>;
export type SecurityRiskLevel = z.infer<typeof SecurityRiskSchema>;

/** An event about to be appended: everything but the id, which the log assigns. */
export type ConversationEventDraft = ConversationEvent extends infer E
  ? E extends ConversationEvent
    ? Omit<E, 'id'>
    : never
  : never;

/** Splits a draft into the store's generic envelope. */
export function toNewEvent(draft: ConversationEventDraft): {
  kind: string;
  source: 'agent' | 'user' | 'environment';
  timestamp: string;
  payload: Record<string, unknown>;
} {
  const { kind, source, timestamp, ...payload } = draft;
  return { kind, source, timestamp, payload };
}

/**
 * The typed event of a stored envelope. Stored events are ours, so this only fails for
 * a log written by something else; those are returned as null and skipped by readers.
 */
export function fromStoredEvent(stored: StoredEvent): ConversationEvent | null {
  const parsed = ConversationEventSchema.safeParse({
    ...stored.payload,
    id: stored.id,
    kind: stored.kind,
    source: stored.source,
    timestamp: stored.timestamp,
  });
  return parsed.success ? parsed.data : null;
}

/**
 * The typed event of an envelope this process has just appended from a typed draft: the same
 * object `fromStoredEvent` would give, without parsing again what the type system already
 * checked (a parse per append was a tenth of an agent step's CPU, issue 27).
 */
export function fromOwnAppend(stored: StoredEvent): ConversationEvent {
  return {
    ...stored.payload,
    id: stored.id,
    kind: stored.kind,
    source: stored.source,
    timestamp: stored.timestamp,
  } as ConversationEvent;
}

/** Which events to read: after an id, optionally only some kinds. */
export interface EventQuery {
  after: number;
  kinds: readonly ConversationEventKind[] | null;
  limit: number;
}

export const EventPageSchema = z
  .object({
    items: z.array(ConversationEventSchema),
    next_after: z.int().nullable().meta({
      description: 'Pass as `after` for the next page; null when this page reached the end of the log so far.',
    }),
  })
  .meta({ id: 'EventPage' });
export type EventPage = z.infer<typeof EventPageSchema>;
