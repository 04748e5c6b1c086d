import { openSandboxShell } from '@acs/core';
import type { ActionEvent, ConversationEventDraft, ConversationRecord, StoredSettings } from '@acs/core/schemas';
import type { AgentHost, LlmToolCall } from '@acs/core/ports';
import { ResultAsync } from 'neverthrow';
import { hasMcpServers, mergeMcpConfigs, openMcpSession, planMcpServers } from '../mcp-session.js';
import { DEFAULT_TRUSTED_HOSTS, type RuleContext } from '../security/risk.js';
import type { AgentTool, ToolContext, ToolOutcome } from '../tool.js';
import { parseToolArguments, Toolset } from '../toolset.js';
import { DEFAULT_CREDENTIAL_DIR } from '../workspace-setup.js';
import type { AgentEngineOptions } from './options.js';
import type { Recording } from './recording.js';
import { stoppedWhy, type Runner, type StepEnd } from './runner.js';

/** What running actions needs: the sandboxes and their runtime, the MCP connector, the engine's options and tools, and recording. */
export interface ActionsDeps {
  host: Pick<AgentHost, 'sandboxes' | 'runtime' | 'mcp'>;
  options: AgentEngineOptions;
  /** The tools every conversation has (the options' or the built-ins). */
  builtinTools: readonly AgentTool[];
  recording: Recording;
}

/** How a response's actions ended: all ran ('done'), one called finish, the run was stopped, or the sandbox went away. */
type ActionsOutcome = 'finished' | 'paused' | 'sandbox_lost' | 'done';

/**
 * Running a response's actions: the tool context, MCP connections, the security rules' context,
 * one observation per action (always, also when interrupted), and what follows them.
 */
export interface Actions {
  ruleContext: (workingDir: string) => RuleContext;
  /**
   * Connects the conversation's MCP servers (the user's, extended by the conversation's own) if
   * they are not connected for this sandbox yet. Each server that fails is reported in an event
   * and left out; the conversation goes on with the rest.
   */
  ensureMcp: (
    r: Runner,
    record: ConversationRecord,
    stored: StoredSettings | null,
    sandboxId: string,
    workingDir: string,
  ) => Promise<void>;
  /** Events for MCP servers lost since the last step: their tools are no longer offered. */
  reportLostMcp: (r: Runner) => Promise<void>;
  /** The conversation's tools (built-ins and connected MCP tools), described for its working directory. */
  toolsetOf: (r: Runner, workingDir: string) => Toolset;
  toolContext: (r: Runner, sandboxId: string, workingDir: string) => ToolContext;
  interruptedObservation: (a: ActionEvent, why: string) => ConversationEventDraft;
  /** Runs the actions of one model response (or one replayed action) in order. */
  runActions: (
    r: Runner,
    actions: ActionEvent[],
    calls: readonly LlmToolCall[],
    sandboxId: string,
    context: ToolContext,
    toolset: Toolset,
  ) => Promise<ActionsOutcome>;
  /** What the loop does after a response's actions ran. */
  afterActions: (r: Runner, outcome: ActionsOutcome, sandboxId: string) => Promise<StepEnd>;
}

export function createActions(deps: ActionsDeps): Actions {
  /** Each run's last toolset: describing the tools again every step was a tenth of a step's CPU (issue 27). */
  const toolsets = new WeakMap<Runner, { workingDir: string; tools: readonly AgentTool[]; toolset: Toolset }>();
  return {
    ruleContext: (workingDir) => ruleContext(deps, workingDir),
    ensureMcp: (r, record, stored, sandboxId, workingDir) => ensureMcp(deps, r, record, stored, sandboxId, workingDir),
    reportLostMcp: (r) => reportLostMcp(deps, r),
    toolsetOf: (r, workingDir) => toolsetOf(deps, toolsets, r, workingDir),
    toolContext: (r, sandboxId, workingDir) => toolContext(deps, r, sandboxId, workingDir),
    interruptedObservation: (a, why) => interruptedObservation(deps, a, why),
    runActions: (r, actions, calls, sandboxId, context, toolset) =>
      runActions(deps, r, actions, calls, sandboxId, context, toolset),
    afterActions: (r, outcome, sandboxId) => afterActions(deps, r, outcome, sandboxId),
  };
}

function ruleContext(deps: ActionsDeps, workingDir: string): RuleContext {
  return {
    workingDir,
    trustedHosts: [...DEFAULT_TRUSTED_HOSTS, ...(deps.options.security?.trustedHosts ?? [])],
    secretPaths: [DEFAULT_CREDENTIAL_DIR, ...(deps.options.security?.secretPaths ?? [])],
  };
}

const mcpFailed = (deps: ActionsDeps, what: string) => deps.recording.errorEvent('mcp_server_failed', what);

async function ensureMcp(
  deps: ActionsDeps,
  r: Runner,
  record: ConversationRecord,
  stored: StoredSettings | null,
  sandboxId: string,
  workingDir: string,
): Promise<void> {
  const { recording, host, options } = deps;
  const config = mergeMcpConfigs(stored?.mcp_config ?? null, record.launch.mcp_config);
  // Reused while the servers, the sandbox and every connection are as they were; else connected afresh.
  const fingerprint = `${sandboxId}\u0000${JSON.stringify(config)}`;
  if (r.mcp && r.mcp.fingerprint === fingerprint && r.mcp.session.healthy()) return;
  await r.closeMcp();
  if (!hasMcpServers(config)) return;
  if (!host.mcp) {
    await recording.append(r, [
      mcpFailed(
        deps,
        'MCP servers are configured, but this service was composed without an MCP connector, so their tools are not available.',
      ),
    ]);
    return;
  }
  const plans = planMcpServers(config, sandboxId, workingDir, host.runtime, options.mcp?.connectTimeoutMs);
  const session = await openMcpSession({
    connector: host.mcp,
    plans,
    signal: r.signal,
    ...(options.mcp?.callTimeoutMs !== undefined ? { callTimeoutMs: options.mcp.callTimeoutMs } : {}),
  });
  if (r.stopped) {
    await session.close();
    return;
  }
  r.connected({ session, fingerprint });
  await recording.append(
    r,
    session.failures.map((f) =>
      mcpFailed(
        deps,
        `The MCP server ${f.server} (${f.describe}) could not be used: ${f.reason}. Its tools are left out; the other tools work.`,
      ),
    ),
  );
}

async function reportLostMcp(deps: ActionsDeps, r: Runner): Promise<void> {
  const lost = r.mcp?.session.takeLost() ?? [];
  await deps.recording.append(
    r,
    lost.map((f) =>
      mcpFailed(
        deps,
        `The MCP server ${f.server} (${f.describe}) stopped: ${f.reason}. Its tools are no longer offered; the other tools work.`,
      ),
    ),
  );
}

function toolsetOf(
  deps: ActionsDeps,
  toolsets: WeakMap<Runner, { workingDir: string; tools: readonly AgentTool[]; toolset: Toolset }>,
  r: Runner,
  workingDir: string,
): Toolset {
  const tools = [...deps.builtinTools, ...(r.mcp?.session.tools() ?? [])];
  const last = toolsets.get(r);
  if (
    last &&
    last.workingDir === workingDir &&
    last.tools.length === tools.length &&
    last.tools.every((t, i) => t === tools[i])
  )
    return last.toolset;
  const toolset = new Toolset(tools, { workingDir });
  toolsets.set(r, { workingDir, tools, toolset });
  return toolset;
}

function toolContext(deps: ActionsDeps, r: Runner, sandboxId: string, workingDir: string): ToolContext {
  const { runtime } = deps.host;
  return {
    sandboxId,
    workingDir,
    runtime,
    editHistory: r.editHistory,
    signal: r.signal,
    shell: () => new ResultAsync(r.shell(async () => openSandboxShell(runtime, sandboxId, { cwd: workingDir }))),
    resetShell: () => r.closeShell(),
  };
}

/** Resolves with the tool's outcome, or with null as soon as the conversation is stopped. */
function runUnlessStopped(r: Runner, work: Promise<ToolOutcome>): Promise<ToolOutcome | null> {
  if (r.stopped) return Promise.resolve(null);
  const signal = r.signal;
  return new Promise((resolve) => {
    const onAbort = () => resolve(null);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        resolve({
          content: `the tool failed unexpectedly: ${String(error)}`,
          is_error: true,
          exit_code: null,
          details: {},
        });
      },
    );
  });
}

function interruptedObservation(deps: ActionsDeps, a: ActionEvent, why: string): ConversationEventDraft {
  return {
    kind: 'observation',
    source: 'environment',
    timestamp: deps.recording.now(),
    tool_call_id: a.tool_call_id,
    tool_name: a.tool_name,
    content: why,
    is_error: true,
    exit_code: null,
    details: { interrupted: true },
  };
}

function observationOf(deps: ActionsDeps, action: ActionEvent, result: ToolOutcome): ConversationEventDraft {
  return {
    kind: 'observation',
    source: 'environment',
    timestamp: deps.recording.now(),
    tool_call_id: action.tool_call_id,
    tool_name: action.tool_name,
    content: result.content,
    is_error: result.is_error,
    exit_code: result.exit_code,
    details: result.details,
  };
}

async function runActions(
  deps: ActionsDeps,
  r: Runner,
  actions: ActionEvent[],
  calls: readonly LlmToolCall[],
  sandboxId: string,
  context: ToolContext,
  toolset: Toolset,
): Promise<ActionsOutcome> {
  const { append } = deps.recording;
  const closeRest = (from: number, why: (i: number) => string) =>
    append(
      r,
      actions.slice(from).map((a, i) => interruptedObservation(deps, a, why(i))),
    );
  let finished = false;
  for (const [index, action] of actions.entries()) {
    if (r.stopped) {
      await closeRest(index, () => `Not run: the conversation was ${stoppedWhy(r)} before this call started.`);
      return 'paused';
    }
    if (finished) {
      await append(r, [
        interruptedObservation(deps, action, 'Not run: finish was called earlier in the same response.'),
      ]);
      continue;
    }
    const call = calls[index]!;
    const work = toolset.run(
      call,
      action.arguments,
      action.arguments === null ? parseToolArguments(action.raw_arguments).error : null,
      context,
    );
    const result = await runUnlessStopped(r, work);
    if (result === null) {
      // Stop waiting; the command may go on in the sandbox, so say so.
      await closeRest(index, (i) =>
        i === 0
          ? `Interrupted: the conversation was ${stoppedWhy(r)} while this call was running; it may or may not have completed.`
          : `Not run: the conversation was ${stoppedWhy(r)}.`,
      );
      return 'paused';
    }
    await append(r, [observationOf(deps, action, result)]);
    if (result.sandboxFailure && !(await sandboxRunning(deps, r, sandboxId))) {
      await closeRest(index + 1, () => 'Not run: the sandbox is gone.');
      return 'sandbox_lost';
    }
    if (result.finished) finished = true;
  }
  return finished ? 'finished' : 'done';
}

async function sandboxRunning(deps: ActionsDeps, r: Runner, sandboxId: string): Promise<boolean> {
  const live = await deps.host.sandboxes.liveRecords(r.userId, [sandboxId]);
  return live.isOk() && live.value.get(sandboxId)?.status === 'RUNNING';
}

async function afterActions(
  deps: ActionsDeps,
  r: Runner,
  outcome: ActionsOutcome,
  sandboxId: string,
): Promise<StepEnd> {
  deps.host.sandboxes.touch(r.userId, sandboxId);
  if (outcome === 'paused') return 'stop';
  if (outcome === 'sandbox_lost') {
    return deps.recording.fail(
      r,
      'sandbox_unavailable',
      `The sandbox ${sandboxId} stopped answering, so the agent cannot go on. Start the conversation again.`,
    );
  }
  if (outcome === 'finished') {
    await deps.recording.setStatus(r, 'finish', 'the agent called finish');
    return 'stop';
  }
  return 'continue';
}
