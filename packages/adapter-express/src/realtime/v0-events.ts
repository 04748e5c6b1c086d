import type { ActionEvent, ConversationEvent, ExecutionStatus, ObservationEvent } from '@acs/core/schemas';

/** An event in the OpenHands V0 form the web UI renders (socket.io `oh_event`): an action or an observation. */
export type V0Event = Record<string, unknown> & {
  id: number;
  timestamp: string;
  source: 'agent' | 'user' | 'environment';
  message: string;
};

/** The OpenHands agent states, as `agent_state_changed` observations carry them. */
export type V0AgentState =
  'running' | 'awaiting_user_input' | 'paused' | 'finished' | 'error' | 'awaiting_user_confirmation' | 'stopped';

/** Our execution status in the words of the OpenHands agent state. */
export function agentStateOf(status: ExecutionStatus | null): V0AgentState {
  switch (status) {
    case 'running':
      return 'running';
    case 'paused':
      return 'paused';
    case 'waiting_for_confirmation':
      return 'awaiting_user_confirmation';
    case 'finished':
      return 'finished';
    case 'error':
    case 'stuck':
      return 'error';
    case 'idle':
    case null:
      return 'awaiting_user_input';
  }
}

/** The `agent_state_changed` observation by which the UI learns the agent's state. */
export function agentStateChanged(id: number, timestamp: string, state: V0AgentState, reason: string): V0Event {
  return {
    id,
    timestamp,
    source: 'agent',
    message: '',
    observation: 'agent_state_changed',
    content: '',
    cause: null,
    extras: { agent_state: state, reason },
  };
}

/** OpenHands V0 rates risk as a number: unknown -1, low 0, medium 1, high 2. */
const RISK = { unknown: -1, low: 0, medium: 1, high: 2 } as const;

/** `/workspace/a.py` edits as a diff the UI shows in a diff block. */
function editDiff(args: Record<string, unknown>): string {
  const lines = (text: unknown, mark: string) =>
    typeof text === 'string' && text !== '' ? text.split('\n').map((line) => `${mark}${line}`) : [];
  const path = typeof args.path === 'string' ? args.path : '';
  const header = [`--- ${path}`, `+++ ${path}`];
  switch (args.command) {
    case 'create':
      return [...header, ...lines(args.file_text, '+')].join('\n');
    case 'str_replace':
      return [...header, ...lines(args.old_str, '-'), ...lines(args.new_str, '+')].join('\n');
    case 'insert':
      return [...header, `@@ after line ${String(args.insert_line)} @@`, ...lines(args.new_str, '+')].join('\n');
    default:
      return '';
  }
}

/**
 * Turns our events into the V0 events the OpenHands UI renders, keeping what it needs across
 * events: which action each observation answers (`cause` is the action's event id), and the
 * running cost, which the UI reads from `llm_metrics` on actions. Events that have no V0 form
 * (model calls, setup steps, condensations, confirmation decisions, notes to the model) give
 * nothing; a status change gives an `agent_state_changed` observation.
 */
export class V0EventTranslator {
  readonly #actions = new Map<string, ActionEvent>();
  /** Calls the user rejected: their observations are `user_rejected`, as OpenHands records a rejection. */
  readonly #rejected = new Set<string>();
  #metrics: Record<string, unknown> | null = null;
  #cachedTokens = 0;

  translate(event: ConversationEvent): V0Event[] {
    switch (event.kind) {
      case 'message':
        return this.#message(event);
      case 'action':
        this.#actions.set(event.tool_call_id, event);
        return [this.#action(event)];
      case 'observation':
        return this.#observation(event);
      case 'status':
        return [agentStateChanged(event.id, event.timestamp, agentStateOf(event.execution_status), event.reason ?? '')];
      case 'error':
        return [
          {
            id: event.id,
            timestamp: event.timestamp,
            source: 'agent',
            message: event.message,
            observation: 'error',
            content: event.message,
            cause: null,
            extras: { error_id: event.code },
          },
        ];
      case 'confirmation':
        if (!event.accept) for (const id of event.tool_call_ids) this.#rejected.add(id);
        return [];
      case 'llm_call':
        this.#cachedTokens += event.cached_prompt_tokens;
        if (event.accumulated) {
          // Every field the UI's cost dialog reads. The context window is not known here: 0, as
          // OpenHands reports for a model whose window it does not know.
          this.#metrics = {
            accumulated_cost: event.accumulated.cost_usd ?? 0,
            max_budget_per_task: null,
            accumulated_token_usage: {
              prompt_tokens: event.accumulated.prompt_tokens,
              completion_tokens: event.accumulated.completion_tokens,
              cache_read_tokens: this.#cachedTokens,
              cache_write_tokens: 0,
              context_window: 0,
              per_turn_token: event.prompt_tokens + event.completion_tokens,
            },
          };
        }
        return [];
      case 'setup':
      case 'condensation':
        return [];
      default:
        // A new kind: say here what the UI is shown of it.
        return event satisfies never;
    }
  }

  #message(event: Extract<ConversationEvent, { kind: 'message' }>): V0Event[] {
    if (event.source === 'environment') return [];
    const common = { id: event.id, timestamp: event.timestamp, message: event.text, action: 'message' };
    return event.source === 'user'
      ? [{ ...common, source: 'user', args: { content: event.text, image_urls: event.image_urls, file_urls: [] } }]
      : [
          {
            ...common,
            source: 'agent',
            args: {
              content: event.text,
              thought: '',
              image_urls: event.image_urls,
              file_urls: [],
              wait_for_response: true,
            },
            ...this.#withMetrics(),
          },
        ];
  }

  #withMetrics(): Record<string, unknown> {
    return this.#metrics ? { llm_metrics: this.#metrics } : {};
  }

  #action(event: ActionEvent): V0Event {
    const args = event.arguments ?? {};
    const thought = event.thought ?? '';
    const risk = RISK[event.security_risk ?? 'unknown'];
    const confirmation = {
      security_risk: risk,
      confirmation_state: event.requires_confirmation ? 'awaiting_confirmation' : 'confirmed',
    };
    const common = {
      id: event.id,
      timestamp: event.timestamp,
      source: 'agent' as const,
      ...this.#withMetrics(),
      tool_call_metadata: { tool_call_id: event.tool_call_id, function_name: event.tool_name },
    };
    const text = (value: unknown) => (typeof value === 'string' ? value : '');
    switch (event.tool_name) {
      case 'execute_bash':
        return {
          ...common,
          action: 'run',
          message: `Running command: ${text(args.command)}`,
          args: {
            command: text(args.command),
            is_input: args.is_input === true,
            thought,
            blocking: false,
            hidden: false,
            ...confirmation,
          },
        };
      case 'str_replace_editor':
        if (args.command === 'view') {
          return {
            ...common,
            action: 'read',
            message: `Reading file: ${text(args.path)}`,
            args: {
              path: text(args.path),
              view_range: args.view_range ?? null,
              thought,
              impl_source: 'oh_aci',
              ...confirmation,
            },
          };
        }
        return {
          ...common,
          action: 'edit',
          message: `Editing file: ${text(args.path)}`,
          args: {
            path: text(args.path),
            command: text(args.command),
            file_text: args.file_text ?? null,
            old_str: args.old_str ?? null,
            new_str: args.new_str ?? null,
            insert_line: args.insert_line ?? null,
            thought,
            impl_source: 'oh_aci',
            ...confirmation,
          },
        };
      case 'think':
        return { ...common, action: 'think', message: text(args.thought), args: { thought: text(args.thought) } };
      case 'finish':
        return {
          ...common,
          action: 'finish',
          message: text(args.message),
          args: { final_thought: text(args.message), outputs: {}, thought },
        };
      default:
        return {
          ...common,
          action: 'call_tool_mcp',
          message: `Calling ${event.tool_name}`,
          args: { name: event.tool_name, arguments: args, thought, ...confirmation },
        };
    }
  }

  #observation(event: ObservationEvent): V0Event[] {
    const action = this.#actions.get(event.tool_call_id);
    const common = {
      id: event.id,
      timestamp: event.timestamp,
      source: 'agent' as const,
      cause: action?.id ?? null,
      content: event.content,
      success: !event.is_error,
    };
    const args = action?.arguments ?? {};
    const path =
      typeof event.details.path === 'string' ? event.details.path : typeof args.path === 'string' ? args.path : '';
    if (event.tool_name === 'finish') return [];
    if (this.#rejected.has(event.tool_call_id))
      return [{ ...common, message: event.content, observation: 'user_rejected', extras: {} }];
    if (event.tool_name === 'think')
      return [
        {
          ...common,
          message: '',
          observation: 'think',
          extras: { thought: typeof args.thought === 'string' ? args.thought : '' },
        },
      ];
    if (event.tool_name === 'execute_bash') {
      const command = typeof args.command === 'string' ? args.command : '';
      const exitCode = event.exit_code ?? -1;
      return [
        {
          ...common,
          message: `Command \`${command}\` executed with exit code ${exitCode}.`,
          observation: 'run',
          extras: {
            command,
            hidden: false,
            metadata: {
              exit_code: exitCode,
              pid: -1,
              username: null,
              hostname: null,
              working_dir: event.details.cwd ?? null,
              py_interpreter_path: null,
              prefix: '',
              suffix: '',
            },
          },
        },
      ];
    }
    if (event.is_error) return [{ ...common, message: event.content, observation: 'error', extras: { error_id: '' } }];
    if (event.tool_name === 'str_replace_editor') {
      return args.command === 'view'
        ? [
            {
              ...common,
              message: `I read the file ${path}.`,
              observation: 'read',
              extras: { path, impl_source: 'oh_aci' },
            },
          ]
        : [
            {
              ...common,
              message: `I edited the file ${path}.`,
              observation: 'edit',
              extras: { path, diff: editDiff(args), impl_source: 'oh_aci' },
            },
          ];
    }
    return [
      { ...common, message: event.content, observation: 'mcp', extras: { name: event.tool_name, arguments: args } },
    ];
  }
}
