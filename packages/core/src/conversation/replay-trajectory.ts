import { err, ok, type Result } from 'neverthrow';
import { z } from 'zod';
import { ImageUrlSchema } from './schema.js';
import { validationFailed, type DomainErrorOf, type FieldIssue } from '../errors.js';

/**
 * `replay_json`: an OpenHands V0 trajectory (a JSON array of serialized V0 events, as
 * OpenHands saves them) replayed into a new conversation without a model.
 *
 * How a trajectory is read (OpenHands' own rules first, `openhands/controller/replay.py`):
 * - Events whose `source` is `environment` are dropped, and so are all observations: the real
 *   observations come from running the actions again.
 * - The first event kept must be a user `message`; it becomes the conversation's first user
 *   message (it wins over `initial_user_msg`/`image_urls` of the request, as in OpenHands,
 *   whose `_run_replay` returns it as the initial message).
 * - Agent actions become our CodeAct tool calls:
 *   - `run` → `execute_bash` {command, is_input, timeout} (`timeout` from `args.timeout` or the
 *     event's top-level `timeout`; `blocking` needs no mapping: our timeout is how long to wait);
 *   - `write` → `str_replace_editor` create with `overwrite: true`: OpenHands' write replaces a
 *     file that exists, so the editor's create is told to overwrite (an internal flag the
 *     editor accepts; the previous content stays available to undo_edit). Partial writes
 *     (`start`/`end` other than 0/-1) are refused;
 *   - `edit` with `command` (the ACI editor: view, create, str_replace, insert, undo_edit) →
 *     `str_replace_editor` with the same arguments; the old LLM-based edit (`content` without a
 *     `command`) needs a model to apply and is refused;
 *   - `read` → `str_replace_editor` view (`view_range`, or `start`/`end` as a line range);
 *   - `think` → `think`; `finish` → `finish` (message: `final_thought`, else `outputs.content`,
 *     else `thought`);
 *   - `message` from the agent → an agent message; later user `message`s → user messages.
 * - Bookkeeping actions that run nothing (`system` — we use our own system prompt —, `recall`,
 *   `change_agent_state`, `condensation`, `condensation_request`, `null`) are skipped.
 * - Any other action type (`browse`, `run_ipython`, `call_tool_mcp`, …) is refused with its index
 *   and type: our agent has no such tool, and skipping it would replay a different story.
 *
 * How the agent runs it (`@acs/agent`, `replay.ts`): each step in order, tool calls exactly as a
 * model's (action event, then its observation), with a synthetic response id and no llm_call
 * event, so nothing is counted as cost or as an iteration. Replayed events carry `replay_step`,
 * so a restarted service continues after the last step in the log (a call a crash or pause cut
 * short is closed as interrupted and not run again). After the last step: a trajectory that
 * ends with `finish` leaves the conversation `finished`; one that ends with an agent message
 * leaves it `finished` too (the agent waits for the user, as after a reply without tools);
 * otherwise the model takes over with the usual limits, or, with no model configured, the
 * conversation ends `finished` with a note in the status reason (not an error).
 *
 * A trajectory that does not fit is a `ValidationFailed` (422) whose issues name the place,
 * e.g. `replay_json[3].args.command`. Unknown extra fields (ids, timestamps, `security_risk`,
 * `tool_call_metadata`, `llm_metrics`, …) are accepted and ignored.
 */

/** At most this many events in a trajectory. */
export const MAX_REPLAY_EVENTS = 10_000;

export interface ReplayUserMessage {
  text: string;
  image_urls: string[];
}

export type ReplayStep =
  | { kind: 'message'; index: number; source: 'user' | 'agent'; text: string; image_urls: string[] }
  | { kind: 'tool'; index: number; tool_name: string; arguments: Record<string, unknown>; thought: string | null };

export interface ReplayPlan {
  /** The trajectory's first user message: the conversation's first message. */
  initial: ReplayUserMessage;
  /** What runs after it, in order. `index` is the event's position in the trajectory. */
  steps: ReplayStep[];
  /** The last step is a finish: the conversation ends with the replay. */
  endsWithFinish: boolean;
}

const SKIPPED_ACTIONS = new Set([
  'system',
  'recall',
  'change_agent_state',
  'condensation',
  'condensation_request',
  'null',
]);
const EDITOR_COMMANDS = ['view', 'create', 'str_replace', 'insert', 'undo_edit'] as const;

/** V0 serializes `is_input` as a bool; CodeAct's tool schema asked models for "true"/"false". */
const looseBoolean = z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]);
const seconds = z.number().min(0);
const optionalString = z.string().nullable().optional();
const lineNumber = z.int();

const EnvelopeSchema = z.looseObject({
  source: z.enum(['user', 'agent', 'environment'], { message: 'must be "user", "agent" or "environment"' }),
  action: z.string().min(1).optional(),
  observation: z.string().optional(),
  args: z.record(z.string(), z.unknown()).optional(),
  timeout: seconds.nullable().optional(),
});

const MessageArgs = z.looseObject({
  content: z.string(),
  image_urls: z.array(ImageUrlSchema).max(32).nullable().optional(),
});
const RunArgs = z.looseObject({
  command: z.string(),
  is_input: looseBoolean.optional(),
  timeout: seconds.nullable().optional(),
  blocking: z.boolean().optional(),
  thought: optionalString,
});
const WriteArgs = z.looseObject({
  path: z.string().min(1),
  content: z.string(),
  start: z.int().optional(),
  end: z.int().optional(),
  thought: optionalString,
});
const ReadArgs = z.looseObject({
  path: z.string().min(1),
  start: z.int().min(0).optional(),
  end: z.int().min(-1).optional(),
  view_range: z.tuple([lineNumber, lineNumber]).nullable().optional(),
  thought: optionalString,
});
const EditArgs = z.looseObject({
  path: z.string().min(1),
  command: z.string().optional(),
  file_text: optionalString,
  old_str: optionalString,
  new_str: optionalString,
  insert_line: z.int().min(0).nullable().optional(),
  view_range: z.tuple([lineNumber, lineNumber]).nullable().optional(),
  content: optionalString,
  thought: optionalString,
});
const ThinkArgs = z.looseObject({ thought: z.string().optional().default('') });
const FinishArgs = z.looseObject({
  final_thought: optionalString,
  outputs: z.record(z.string(), z.unknown()).nullable().optional(),
  thought: optionalString,
});

const at = (index: number, ...path: (string | number)[]) =>
  `replay_json[${index}]${path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join('')}`;

const zodIssues = (index: number, prefix: string[], error: z.ZodError): FieldIssue[] =>
  error.issues.map((i) => ({
    path: at(index, ...prefix, ...i.path.map((p) => (typeof p === 'number' ? p : String(p)))),
    message: i.message,
  }));

const thoughtOf = (args: { thought?: string | null | undefined }): string | null =>
  args.thought?.trim() ? args.thought : null;

/** One kept event as a step (null for bookkeeping that runs nothing); an error lists what is wrong with it. */
function toStep(
  index: number,
  source: 'user' | 'agent',
  action: string,
  rawArgs: Record<string, unknown>,
  timeout: number | null | undefined,
): Result<ReplayStep | null, FieldIssue[]> {
  if (SKIPPED_ACTIONS.has(action)) return ok(null);
  if (action === 'message') return messageStep(index, source, rawArgs);
  if (source === 'user') {
    return err([
      {
        path: at(index, 'source'),
        message: `a "${action}" action from the user cannot be replayed; only messages come from the user`,
      },
    ]);
  }
  switch (action) {
    case 'run':
      return runStep(index, rawArgs, timeout);
    case 'write':
      return writeStep(index, rawArgs);
    case 'read':
      return readStep(index, rawArgs);
    case 'edit':
      return editStep(index, rawArgs);
    case 'think':
      return parseArgs(index, rawArgs, ThinkArgs).map((a) => toolStep(index, 'think', { thought: a.thought }, null));
    case 'finish':
      return finishStep(index, rawArgs);
    default:
      return err([
        {
          path: at(index, 'action'),
          message: `the action type ${JSON.stringify(action)} cannot be replayed (replayable: message, run, write, edit, read, think, finish)`,
        },
      ]);
  }
}

/** The `args` of event `index` read by `schema`; an error names each field that does not fit. */
function parseArgs<S extends z.ZodType>(
  index: number,
  rawArgs: Record<string, unknown>,
  schema: S,
): Result<z.output<S>, FieldIssue[]> {
  const parsed = schema.safeParse(rawArgs);
  return parsed.success ? ok(parsed.data) : err(zodIssues(index, ['args'], parsed.error));
}

/** A tool call step; null means "not given" for every parameter of ours, so null arguments are left out. */
function toolStep(index: number, tool_name: string, args: Record<string, unknown>, thought: string | null): ReplayStep {
  return {
    kind: 'tool',
    index,
    tool_name,
    arguments: Object.fromEntries(Object.entries(args).filter(([, v]) => v !== null && v !== undefined)),
    thought,
  };
}

/** `message`: a user or agent message. */
function messageStep(
  index: number,
  source: 'user' | 'agent',
  rawArgs: Record<string, unknown>,
): Result<ReplayStep, FieldIssue[]> {
  return parseArgs(index, rawArgs, MessageArgs).map((a) => ({
    kind: 'message',
    index,
    source,
    text: a.content,
    image_urls: a.image_urls ?? [],
  }));
}

/** `run` → `execute_bash`; the timeout from the args, else the event's own. */
function runStep(
  index: number,
  rawArgs: Record<string, unknown>,
  timeout: number | null | undefined,
): Result<ReplayStep, FieldIssue[]> {
  return parseArgs(index, rawArgs, RunArgs).map((a) =>
    toolStep(
      index,
      'execute_bash',
      { command: a.command, is_input: a.is_input ?? false, timeout: a.timeout ?? timeout ?? null },
      thoughtOf(a),
    ),
  );
}

/** `write` → the editor's create told to overwrite; partial writes are refused. */
function writeStep(index: number, rawArgs: Record<string, unknown>): Result<ReplayStep, FieldIssue[]> {
  const parsed = parseArgs(index, rawArgs, WriteArgs);
  if (parsed.isErr()) return err(parsed.error);
  const a = parsed.value;
  if ((a.start ?? 0) !== 0 || (a.end ?? -1) !== -1) {
    return err([
      {
        path: at(index, 'args', a.start !== undefined && a.start !== 0 ? 'start' : 'end'),
        message: 'partial writes (start/end other than 0/-1) cannot be replayed; only whole-file writes',
      },
    ]);
  }
  return ok(
    toolStep(
      index,
      'str_replace_editor',
      { command: 'create', path: a.path, file_text: a.content, overwrite: true },
      thoughtOf(a),
    ),
  );
}

/** `read` → the editor's view; `start`/`end` (0-based, end -1 for the last line) as a line range. */
function readStep(index: number, rawArgs: Record<string, unknown>): Result<ReplayStep, FieldIssue[]> {
  return parseArgs(index, rawArgs, ReadArgs).map((a) => {
    const range: [number, number] | null =
      a.view_range ?? ((a.start ?? 0) !== 0 || (a.end ?? -1) !== -1 ? [(a.start ?? 0) + 1, a.end ?? -1] : null);
    return toolStep(index, 'str_replace_editor', { command: 'view', path: a.path, view_range: range }, thoughtOf(a));
  });
}

/** `edit` with an ACI editor command → `str_replace_editor`; the LLM-based edit is refused. */
function editStep(index: number, rawArgs: Record<string, unknown>): Result<ReplayStep, FieldIssue[]> {
  const parsed = parseArgs(index, rawArgs, EditArgs);
  if (parsed.isErr()) return err(parsed.error);
  const a = parsed.value;
  const command = a.command ?? '';
  if (command === '') {
    return err([
      a.content
        ? {
            path: at(index, 'args', 'content'),
            message: 'an LLM-based edit (content without a command) needs a model to apply and cannot be replayed',
          }
        : { path: at(index, 'args', 'command'), message: `is required: one of ${EDITOR_COMMANDS.join(', ')}` },
    ]);
  }
  if (!(EDITOR_COMMANDS as readonly string[]).includes(command)) {
    return err([
      {
        path: at(index, 'args', 'command'),
        message: `must be one of ${EDITOR_COMMANDS.join(', ')}; got ${JSON.stringify(command)}`,
      },
    ]);
  }
  return editorCommandStep(index, command, a);
}

/** One editor command's arguments, checked for the fields that command needs. */
function editorCommandStep(
  index: number,
  command: string,
  a: z.output<typeof EditArgs>,
): Result<ReplayStep, FieldIssue[]> {
  const missing = (field: string, message = 'is required') =>
    err<ReplayStep, FieldIssue[]>([{ path: at(index, 'args', field), message: `${message} for command ${command}` }]);
  const thought = thoughtOf(a);
  switch (command) {
    case 'view':
      return ok(
        toolStep(index, 'str_replace_editor', { command, path: a.path, view_range: a.view_range ?? null }, thought),
      );
    case 'create':
      if (typeof a.file_text !== 'string') return missing('file_text');
      return ok(toolStep(index, 'str_replace_editor', { command, path: a.path, file_text: a.file_text }, thought));
    case 'str_replace':
      if (!a.old_str) return missing('old_str', 'is required (and not empty)');
      return ok(
        toolStep(
          index,
          'str_replace_editor',
          { command, path: a.path, old_str: a.old_str, new_str: a.new_str ?? '' },
          thought,
        ),
      );
    case 'insert':
      if (a.insert_line === null || a.insert_line === undefined) return missing('insert_line');
      if (typeof a.new_str !== 'string') return missing('new_str');
      return ok(
        toolStep(
          index,
          'str_replace_editor',
          { command, path: a.path, insert_line: a.insert_line, new_str: a.new_str },
          thought,
        ),
      );
    default:
      return ok(toolStep(index, 'str_replace_editor', { command, path: a.path }, thought));
  }
}

/** `finish` → `finish`, its message the final thought, else `outputs.content`, else the thought. */
function finishStep(index: number, rawArgs: Record<string, unknown>): Result<ReplayStep, FieldIssue[]> {
  return parseArgs(index, rawArgs, FinishArgs).map((a) => {
    const fromOutputs = typeof a.outputs?.content === 'string' ? a.outputs.content : null;
    const message = a.final_thought?.trim() ? a.final_thought : fromOutputs?.trim() ? fromOutputs : (a.thought ?? '');
    return toolStep(index, 'finish', { message }, null);
  });
}

/** Reads a trajectory; a `ValidationFailed` says what is wrong and where. */
export function parseReplayTrajectory(json: string): Result<ReplayPlan, DomainErrorOf<'ValidationFailed'>> {
  const fail = (issues: FieldIssue[]) =>
    err(
      validationFailed(
        issues,
        `replay_json is not a trajectory that can be replayed: ${issues
          .slice(0, 5)
          .map((i) => `${i.path}: ${i.message}`)
          .join('; ')}${issues.length > 5 ? ` (and ${issues.length - 5} more)` : ''}`,
      ),
    );
  let data: unknown;
  try {
    data = JSON.parse(json);
  } catch (error) {
    return fail([{ path: 'replay_json', message: `is not valid JSON (${(error as Error).message})` }]);
  }
  if (!Array.isArray(data))
    return fail([
      {
        path: 'replay_json',
        message: `must be a JSON array of OpenHands events; got ${data === null ? 'null' : typeof data}`,
      },
    ]);
  if (data.length > MAX_REPLAY_EVENTS)
    return fail([{ path: 'replay_json', message: `has ${data.length} events, more than ${MAX_REPLAY_EVENTS}` }]);

  const issues: FieldIssue[] = [];
  const kept: ReplayStep[] = [];
  for (const [index, item] of (data as unknown[]).entries()) {
    if (item === null || typeof item !== 'object' || Array.isArray(item)) {
      issues.push({ path: at(index), message: 'must be an event object' });
      continue;
    }
    const envelope = EnvelopeSchema.safeParse(item);
    if (!envelope.success) {
      issues.push(...zodIssues(index, [], envelope.error));
      continue;
    }
    const e = envelope.data;
    const isAction = e.action !== undefined;
    if (isAction === (e.observation !== undefined)) {
      issues.push({ path: at(index), message: 'must have either "action" or "observation"' });
      continue;
    }
    // Observations and the environment's events are not replayed (OpenHands drops them too).
    if (!isAction || e.source === 'environment') continue;
    const step = toStep(index, e.source, e.action!, e.args ?? {}, e.timeout);
    if (step.isErr()) issues.push(...step.error);
    else if (step.value) kept.push(step.value);
  }
  if (issues.length > 0) return fail(issues);

  const [first, ...steps] = kept;
  if (!first || first.kind !== 'message' || first.source !== 'user') {
    return fail([
      {
        path: first ? at(first.index) : 'replay_json',
        message: first
          ? 'the first replayed event must be a message action from the user (it becomes the first message of the conversation)'
          : 'holds no user message or action to replay; the first must be a message action from the user',
      },
    ]);
  }
  if (first.text.trim() === '' && first.image_urls.length === 0) {
    return fail([
      { path: at(first.index, 'args', 'content'), message: 'the first user message has no text and no images' },
    ]);
  }
  const last = steps.at(-1);
  return ok({
    initial: { text: first.text, image_urls: first.image_urls },
    steps,
    endsWithFinish: last?.kind === 'tool' && last.tool_name === 'finish',
  });
}
