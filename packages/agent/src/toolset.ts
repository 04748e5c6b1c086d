import type { LlmToolCall, LlmToolDefinition } from '@acs/core/ports';
import { executeBashTool } from './bash-tool.js';
import { finishTool, thinkTool } from './builtin-tools.js';
import { strReplaceEditorTool } from './editor-tool.js';
import { SECURITY_RISK_ARGUMENT, SECURITY_RISK_PARAMETER } from './security.js';
import { failure, type AgentTool, type ToolContext, type ToolOutcome } from './tool.js';

/** The tools every conversation has, with OpenHands' CodeAct names and parameters. */
export const BUILTIN_TOOLS: readonly AgentTool[] = [
  executeBashTool,
  strReplaceEditorTool,
  thinkTool,
  finishTool,
] as AgentTool[];

/** A tool call's arguments parsed as far as they go: a JSON object, or null with why not. */
export function parseToolArguments(raw: string): { value: Record<string, unknown> | null; error: string | null } {
  const text = raw.trim() === '' ? '{}' : raw;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    try {
      // Models sometimes put raw newlines or tabs inside JSON strings.
      parsed = JSON.parse(
        // eslint-disable-next-line no-control-regex -- matching control characters is the point
        text.replace(/[\u0000-\u001f]/g, (c) => (c === '\n' ? '\\n' : c === '\t' ? '\\t' : c === '\r' ? '\\r' : '')),
      );
    } catch (error) {
      return { value: null, error: `the arguments are not valid JSON (${(error as Error).message})` };
    }
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    return { value: null, error: 'the arguments must be a JSON object' };
  // null means "not given" for every parameter of ours.
  const value = Object.fromEntries(Object.entries(parsed as Record<string, unknown>).filter(([, v]) => v !== null));
  return { value, error: null };
}

export class Toolset {
  readonly #tools: Map<string, AgentTool>;
  /**
   * What the model is offered. Our tools that act (not think or finish) take an optional
   * `security_risk` argument, always, so the schema does not change with the settings; MCP
   * tools keep their server's schema as it is.
   */
  readonly definitions: readonly LlmToolDefinition[];

  /** With `workingDir`, the conversation's: tools that say where files are give examples in it (`AgentTool.definitionIn`). */
  constructor(tools: readonly AgentTool[] = BUILTIN_TOOLS, options: { workingDir?: string } = {}) {
    const { workingDir } = options;
    this.#tools = new Map(tools.map((t) => [t.definition.name, t]));
    this.definitions = [...this.#tools.values()].map((t) => {
      const definition = workingDir !== undefined && t.definitionIn ? t.definitionIn(workingDir) : t.definition;
      return ratesRisk(t) ? withRiskParameter(definition) : definition;
    });
  }

  /** The tool of that name, if there is one. */
  get(name: string): AgentTool | undefined {
    return this.#tools.get(name);
  }

  /**
   * Runs one call. An unknown tool or arguments that do not fit come back as an error
   * observation that says what was wrong, so the model can correct itself.
   */
  async run(
    call: LlmToolCall,
    args: Record<string, unknown> | null,
    argsError: string | null,
    context: ToolContext,
  ): Promise<ToolOutcome> {
    const tool = this.#tools.get(call.name);
    if (!tool) {
      return failure(
        `There is no tool named ${JSON.stringify(call.name)}. The tools are: ${[...this.#tools.keys()].join(', ')}.`,
        {
          details: { invalid_call: true },
        },
      );
    }
    if (args === null) return failure(invalidArgumentsResult(call, argsError), { details: { invalid_call: true } });
    const parsed = tool.arguments.safeParse(ratesRisk(tool) ? withoutRisk(args) : args);
    if (!parsed.success) {
      const problems = parsed.error.issues
        .map((i) => `${i.path.length > 0 ? i.path.join('.') : 'arguments'}: ${i.message}`)
        .join('; ');
      return failure(
        `The call to ${call.name} was not run: ${problems}. Check the tool's parameters and call it again.`,
        {
          details: { invalid_call: true },
        },
      );
    }
    try {
      return await tool.run(parsed.data, context);
    } catch (error) {
      return failure(`${call.name} failed unexpectedly: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}

/** Characters of a call's raw arguments quoted back to the model (half from the start, half from the end). */
const MAX_QUOTED_ARGUMENTS_CHARS = 2_000;

/**
 * The result of a call whose arguments are not a JSON object: why, and the text the model sent,
 * since the history shows that call with `{}` in place of it (see `argumentsForHistory`).
 */
function invalidArgumentsResult(call: LlmToolCall, why: string | null): string {
  return [
    `The call to ${call.name} was not run: ${why ?? 'no arguments'}. The arguments you sent were:`,
    quoted(call.arguments),
    'Send the arguments as one JSON object with the tool’s parameters.',
  ].join('\n');
}

function quoted(text: string): string {
  if (text.length <= MAX_QUOTED_ARGUMENTS_CHARS) return text;
  const half = MAX_QUOTED_ARGUMENTS_CHARS / 2;
  return `${text.slice(0, half)}\n[… ${text.length - MAX_QUOTED_ARGUMENTS_CHARS} characters left out …]\n${text.slice(-half)}`;
}

const ratesRisk = (tool: AgentTool): boolean =>
  !tool.mcp && tool.definition.name !== 'think' && tool.definition.name !== 'finish';

function withRiskParameter(definition: LlmToolDefinition): LlmToolDefinition {
  const properties = (definition.parameters.properties ?? {}) as Record<string, unknown>;
  return {
    ...definition,
    parameters: {
      ...definition.parameters,
      properties: { ...properties, [SECURITY_RISK_ARGUMENT]: SECURITY_RISK_PARAMETER },
    },
  };
}

function withoutRisk(args: Record<string, unknown>): Record<string, unknown> {
  if (!Object.hasOwn(args, SECURITY_RISK_ARGUMENT)) return args;
  const { [SECURITY_RISK_ARGUMENT]: _rating, ...rest } = args;
  return rest;
}
