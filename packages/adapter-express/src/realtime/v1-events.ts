import { randomUUID } from 'node:crypto';
import type { StreamingDelta } from '@acs/core';
import type { ActionEvent, ConversationEvent, ExecutionStatus, ObservationEvent } from '@acs/core/schemas';

/** An event in the OpenHands agent-server form (a V1 WebSocket frame): string `id`, `kind`, `timestamp`, `source`. */
export type V1Event = Record<string, unknown> & {
  id: string;
  kind: string;
  timestamp: string;
  source: 'agent' | 'user' | 'environment';
};

const RISK = { low: 'LOW', medium: 'MEDIUM', high: 'HIGH', unknown: 'UNKNOWN' } as const;

const text = (value: unknown) => (typeof value === 'string' ? value : null);

/** The agent-server's state-update frame for an execution status. */
export function stateUpdate(
  id: string,
  timestamp: string,
  status: ExecutionStatus,
  key: 'execution_status' | 'full_state',
): V1Event {
  return {
    id,
    kind: 'ConversationStateUpdateEvent',
    timestamp,
    source: 'environment',
    key,
    value: key === 'full_state' ? { execution_status: status } : status,
  };
}

/** The agent-server's error frame: a failed tool call (with its name and id) or an error of the agent or channel. */
export function agentError(
  id: string,
  timestamp: string,
  error: string,
  tool: { tool_name: string; tool_call_id: string } = { tool_name: '', tool_call_id: '' },
): V1Event {
  return { id, kind: 'AgentErrorEvent', timestamp, source: 'agent', ...tool, error };
}

/**
 * A delta as the agent-server sends it on its event socket (the SDK's `StreamingDeltaEvent`:
 * exactly these fields, as its model forbids others). Its id is new each time, as there: a
 * delta is never stored, so no id of ours names it.
 */
export function streamingDeltaEvent(delta: StreamingDelta): V1Event {
  return {
    kind: 'StreamingDeltaEvent',
    id: randomUUID(),
    timestamp: delta.timestamp,
    source: 'agent',
    content: delta.content,
    reasoning_content: delta.reasoning_content,
  };
}

/**
 * Which agent-server's events: `ui`, those the OpenHands UI we serve (0.62) renders in V1 mode
 * (`ExecuteBashAction`, `StrReplaceEditorAction`…); `sdk`, those of the OpenHands SDK 1.34 that
 * the 1.11 app server's models hold (`TerminalAction`, `FileEditorAction`…, observations'
 * `content` as text parts, fatal errors as `ConversationErrorEvent`).
 */
export type V1Dialect = 'ui' | 'sdk';

/**
 * Turns our events into agent-server events: `MessageEvent`, `ActionEvent` / `ObservationEvent`
 * (with the action and observation kinds the dialect has for our tools),
 * `ConversationStateUpdateEvent` and `AgentErrorEvent` (or `ConversationErrorEvent`). Ids are
 * our event ids as strings. Model calls, setup steps, condensations and confirmation
 * decisions have no frame, nor has the finish observation (the action holds the message).
 * An action is kept only until its observation is translated, so a translator that reads a
 * whole log holds no more than the actions still waiting for their results.
 */
export class V1EventTranslator {
  readonly #actions = new Map<string, ActionEvent>();
  readonly #dialect: V1Dialect;

  constructor(dialect: V1Dialect = 'ui') {
    this.#dialect = dialect;
  }

  translate(event: ConversationEvent): V1Event[] {
    const base = { id: String(event.id), timestamp: event.timestamp };
    switch (event.kind) {
      case 'message': {
        if (event.source === 'environment') return [];
        const content = [
          ...(event.text !== '' ? [{ type: 'text', text: event.text }] : []),
          ...(event.image_urls.length > 0 ? [{ type: 'image', image_urls: event.image_urls }] : []),
        ];
        return [
          {
            ...base,
            kind: 'MessageEvent',
            source: event.source,
            llm_message: { role: event.source === 'user' ? 'user' : 'assistant', content },
            ...(this.#dialect === 'sdk' ? { activated_skills: [] } : { activated_microagents: [] }),
            extended_content: [],
          },
        ];
      }
      case 'action':
        this.#actions.set(event.tool_call_id, event);
        return [this.#action(event, base)];
      case 'observation': {
        const frame = this.#observation(event, base);
        this.#actions.delete(event.tool_call_id);
        // The finish action carries the message to the user. The UI puts an observation in place of
        // its action, so a finish observation would fold that message into a closed "FINISH" block.
        return event.tool_name === 'finish' ? [] : [frame];
      }
      case 'status':
        return [stateUpdate(base.id, base.timestamp, event.execution_status, 'execution_status')];
      case 'error':
        return this.#dialect === 'sdk' && event.fatal
          ? [
              {
                ...base,
                kind: 'ConversationErrorEvent',
                source: 'environment',
                code: event.code,
                detail: event.message,
              },
            ]
          : [agentError(base.id, base.timestamp, event.message)];
      case 'llm_call':
      case 'setup':
      case 'confirmation':
      case 'condensation':
        return [];
      default:
        // A new kind: say here which frame, if any, the agent-server clients get.
        return event satisfies never;
    }
  }

  #action(event: ActionEvent, base: { id: string; timestamp: string }): V1Event {
    const args = event.arguments ?? {};
    const sdk = this.#dialect === 'sdk';
    const action = (() => {
      switch (event.tool_name) {
        case 'execute_bash':
          return {
            kind: sdk ? 'TerminalAction' : 'ExecuteBashAction',
            command: text(args.command) ?? '',
            is_input: args.is_input === true,
            timeout: typeof args.timeout === 'number' && args.timeout >= 0 ? args.timeout : null,
            reset: false,
          };
        case 'str_replace_editor':
          return {
            kind: sdk ? 'FileEditorAction' : 'StrReplaceEditorAction',
            command: sdk ? editorCommand(args.command) : (text(args.command) ?? 'view'),
            path: text(args.path) ?? '',
            file_text: text(args.file_text),
            old_str: text(args.old_str),
            new_str: text(args.new_str),
            insert_line:
              Number.isInteger(args.insert_line) && (args.insert_line as number) >= 0 ? args.insert_line : null,
            view_range:
              Array.isArray(args.view_range) && args.view_range.every(Number.isInteger) ? args.view_range : null,
          };
        case 'think':
          return { kind: 'ThinkAction', thought: text(args.thought) ?? '' };
        case 'finish':
          return { kind: 'FinishAction', message: text(args.message) ?? '' };
        default:
          return { kind: 'MCPToolAction', data: args };
      }
    })();
    return {
      ...base,
      kind: 'ActionEvent',
      source: 'agent',
      thought: event.thought ? [{ type: 'text', text: event.thought }] : [],
      thinking_blocks: [],
      reasoning_content: null,
      action,
      tool_name: event.tool_name,
      tool_call_id: event.tool_call_id,
      tool_call: sdk
        ? { id: event.tool_call_id, name: event.tool_name, arguments: event.raw_arguments, origin: 'completion' }
        : {
            id: event.tool_call_id,
            type: 'function',
            function: { name: event.tool_name, arguments: event.raw_arguments },
          },
      llm_response_id: event.response_id,
      security_risk: RISK[event.security_risk ?? 'unknown'],
    };
  }

  #observation(event: ObservationEvent, base: { id: string; timestamp: string }): V1Event {
    const action = this.#actions.get(event.tool_call_id);
    const args = action?.arguments ?? {};
    const common = {
      ...base,
      source: 'environment' as const,
      tool_name: event.tool_name,
      tool_call_id: event.tool_call_id,
    };
    if (event.details.invalid_call === true)
      return agentError(base.id, base.timestamp, event.content, {
        tool_name: event.tool_name,
        tool_call_id: event.tool_call_id,
      });
    const observation = this.#dialect === 'sdk' ? sdkObservation(event, args) : uiObservation(event, args);
    return { ...common, kind: 'ObservationEvent', action_id: action ? String(action.id) : '', observation };
  }
}

/** An observation as the UI we serve renders it. */
function uiObservation(event: ObservationEvent, args: Record<string, unknown>): Record<string, unknown> {
  switch (event.tool_name) {
    case 'execute_bash':
      return {
        kind: 'ExecuteBashObservation',
        output: event.content,
        command: text(args.command),
        exit_code: event.exit_code,
        error: event.is_error,
        timeout: event.exit_code === null && event.details.still_running !== true,
        metadata: terminalMetadata(event),
      };
    case 'str_replace_editor':
      return {
        kind: 'StrReplaceEditorObservation',
        command: text(args.command) ?? 'view',
        output: event.content,
        path: text(event.details.path) ?? text(args.path),
        prev_exist: args.command !== 'create' || event.details.overwritten === true,
        old_content: text(args.old_str),
        new_content: text(args.new_str) ?? text(args.file_text),
        error: event.is_error ? event.content : null,
      };
    case 'think':
      return { kind: 'ThinkObservation', content: event.content };
    default:
      return {
        kind: 'MCPToolObservation',
        content: [{ type: 'text', text: event.content }],
        is_error: event.is_error,
        tool_name: event.tool_name,
      };
  }
}

/** An observation as the OpenHands SDK 1.34 writes it: what the model saw as text parts in `content`. */
function sdkObservation(event: ObservationEvent, args: Record<string, unknown>): Record<string, unknown> {
  const content = [{ type: 'text', text: event.content, cache_prompt: false }];
  switch (event.tool_name) {
    case 'execute_bash':
      return {
        kind: 'TerminalObservation',
        content,
        is_error: event.is_error,
        command: text(args.command),
        exit_code: event.exit_code,
        timeout: event.exit_code === null && event.details.still_running !== true,
        metadata: terminalMetadata(event),
        full_output_save_dir: null,
      };
    case 'str_replace_editor':
      return {
        kind: 'FileEditorObservation',
        content,
        is_error: event.is_error,
        command: editorCommand(args.command),
        path: text(event.details.path) ?? text(args.path),
        prev_exist: args.command !== 'create' || event.details.overwritten === true,
        old_content: text(args.old_str),
        new_content: text(args.new_str) ?? text(args.file_text),
      };
    case 'think':
      return { kind: 'ThinkObservation', content, is_error: event.is_error };
    default:
      return { kind: 'MCPToolObservation', content, is_error: event.is_error, tool_name: event.tool_name };
  }
}

const EDITOR_COMMANDS = ['view', 'create', 'str_replace', 'insert', 'undo_edit'] as const;

/** The editor command of an action, as the SDK's editor names them (`view` for one it does not know). */
function editorCommand(command: unknown): (typeof EDITOR_COMMANDS)[number] {
  return EDITOR_COMMANDS.find((c) => c === command) ?? 'view';
}

function terminalMetadata(event: ObservationEvent): Record<string, unknown> {
  return {
    exit_code: event.exit_code ?? -1,
    pid: -1,
    username: null,
    hostname: null,
    working_dir: text(event.details.cwd),
    py_interpreter_path: null,
    prefix: '',
    suffix: '',
  };
}

/** How many frames a log's history gives (what `GET /api/v1/events/count` answers, so the UI knows when the replay is done). */
export function countV1Frames(events: readonly ConversationEvent[]): number {
  const translator = new V1EventTranslator();
  return events.reduce((n, event) => n + translator.translate(event).length, 0);
}
