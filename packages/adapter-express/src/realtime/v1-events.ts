import type { ActionEvent, ConversationEvent, ExecutionStatus, ObservationEvent } from '@acs/core/schemas';

/** An event in the OpenHands agent-server form (a V1 WebSocket frame): string `id`, `kind`, `timestamp`, `source`. */
export type V1Event = Record<string, unknown> & { id: string; kind: string; timestamp: string; source: 'agent' | 'user' | 'environment' };

const RISK = { low: 'LOW', medium: 'MEDIUM', high: 'HIGH', unknown: 'UNKNOWN' } as const;

const text = (value: unknown) => (typeof value === 'string' ? value : null);

/** The agent-server's state-update frame for an execution status. */
export function stateUpdate(id: string, timestamp: string, status: ExecutionStatus, key: 'execution_status' | 'full_state'): V1Event {
  return { id, kind: 'ConversationStateUpdateEvent', timestamp, source: 'environment', key, value: key === 'full_state' ? { execution_status: status } : status };
}

/** The agent-server's error frame: a failed tool call (with its name and id) or an error of the agent or channel. */
export function agentError(id: string, timestamp: string, error: string, tool: { tool_name: string; tool_call_id: string } = { tool_name: '', tool_call_id: '' }): V1Event {
  return { id, kind: 'AgentErrorEvent', timestamp, source: 'agent', ...tool, error };
}

/**
 * Turns our events into the agent-server events the OpenHands UI renders in V1 mode:
 * `MessageEvent`, `ActionEvent` / `ObservationEvent` (with the action and observation kinds
 * the UI knows for our tools), `ConversationStateUpdateEvent` and `AgentErrorEvent`. Ids are
 * our event ids as strings. Model calls, setup steps, condensations and confirmation
 * decisions have no frame, nor has the finish observation (the action holds the message).
 */
export class V1EventTranslator {
  readonly #actions = new Map<string, ActionEvent>();

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
            activated_microagents: [],
            extended_content: [],
          },
        ];
      }
      case 'action':
        this.#actions.set(event.tool_call_id, event);
        return [this.#action(event, base)];
      case 'observation':
        // The finish action carries the message to the user. The UI puts an observation in place of
        // its action, so a finish observation would fold that message into a closed "FINISH" block.
        return event.tool_name === 'finish' ? [] : [this.#observation(event, base)];
      case 'status':
        return [stateUpdate(base.id, base.timestamp, event.execution_status, 'execution_status')];
      case 'error':
        return [agentError(base.id, base.timestamp, event.message)];
      default:
        return [];
    }
  }

  #action(event: ActionEvent, base: { id: string; timestamp: string }): V1Event {
    const args = event.arguments ?? {};
    const action = (() => {
      switch (event.tool_name) {
        case 'execute_bash':
          return { kind: 'ExecuteBashAction', command: text(args.command) ?? '', is_input: args.is_input === true, timeout: typeof args.timeout === 'number' ? args.timeout : null, reset: false };
        case 'str_replace_editor':
          return {
            kind: 'StrReplaceEditorAction',
            command: text(args.command) ?? 'view',
            path: text(args.path) ?? '',
            file_text: text(args.file_text),
            old_str: text(args.old_str),
            new_str: text(args.new_str),
            insert_line: typeof args.insert_line === 'number' ? args.insert_line : null,
            view_range: Array.isArray(args.view_range) ? args.view_range : null,
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
      tool_call: { id: event.tool_call_id, type: 'function', function: { name: event.tool_name, arguments: event.raw_arguments } },
      llm_response_id: event.response_id,
      security_risk: RISK[event.security_risk ?? 'unknown'],
    };
  }

  #observation(event: ObservationEvent, base: { id: string; timestamp: string }): V1Event {
    const action = this.#actions.get(event.tool_call_id);
    const args = action?.arguments ?? {};
    const common = { ...base, source: 'environment' as const, tool_name: event.tool_name, tool_call_id: event.tool_call_id };
    if (event.details.invalid_call === true) return agentError(base.id, base.timestamp, event.content, { tool_name: event.tool_name, tool_call_id: event.tool_call_id });
    const observation = (() => {
      switch (event.tool_name) {
        case 'execute_bash':
          return {
            kind: 'ExecuteBashObservation',
            output: event.content,
            command: text(args.command),
            exit_code: event.exit_code,
            error: event.is_error,
            timeout: event.exit_code === null && event.details.still_running !== true,
            metadata: { exit_code: event.exit_code ?? -1, pid: -1, username: null, hostname: null, working_dir: text(event.details.cwd), py_interpreter_path: null, prefix: '', suffix: '' },
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
          return { kind: 'MCPToolObservation', content: [{ type: 'text', text: event.content }], is_error: event.is_error, tool_name: event.tool_name };
      }
    })();
    return { ...common, kind: 'ObservationEvent', action_id: action ? String(action.id) : '', observation };
  }
}

/** How many frames a log's history gives (what `GET /api/v1/events/count` answers, so the UI knows when the replay is done). */
export function countV1Frames(events: readonly ConversationEvent[]): number {
  const translator = new V1EventTranslator();
  return events.reduce((n, event) => n + translator.translate(event).length, 0);
}
