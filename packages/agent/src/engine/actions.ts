import { openSandboxShell } from '@acs/core';
import type { ActionEvent, ConversationEventDraft, ConversationRecord, StoredSettings } from '@acs/core/schemas';
import type { LlmToolCall, SandboxRuntimeError, SandboxShell } from '@acs/core/ports';
import { ResultAsync, type Result } from 'neverthrow';
import { hasMcpServers, mergeMcpConfigs, openMcpSession, planMcpServers } from '../mcp-session.js';
import { DEFAULT_TRUSTED_HOSTS, type RuleContext } from '../security/risk.js';
import type { AgentTool, ToolContext, ToolOutcome } from '../tool.js';
import { parseToolArguments, Toolset } from '../toolset.js';
import { DEFAULT_CREDENTIAL_DIR } from '../workspace-setup.js';
import type { EngineBase } from './base.js';
import type { Recording } from './recording.js';
import { stoppedWhy, type Runner, type StepEnd } from './runner.js';

/**
 * Running a response's actions: the tool context, MCP connections, the security rules' context,
 * one observation per action (always, also when interrupted), and what follows them.
 */
export function createActions(kit: EngineBase & Recording) {
  const { deps, sandboxes, runtime, builtinTools, append, now, setStatus, errorEvent, fail, closeShell, closeMcp } = kit;

  const ruleContext = (workingDir: string): RuleContext => ({
    workingDir,
    trustedHosts: [...DEFAULT_TRUSTED_HOSTS, ...(deps.options?.security?.trustedHosts ?? [])],
    secretPaths: [DEFAULT_CREDENTIAL_DIR, ...(deps.options?.security?.secretPaths ?? [])],
  });

  /**
   * Connects the conversation's MCP servers (the user's, extended by the conversation's own) if
   * they are not connected for this sandbox yet. Each server that fails is reported in an event
   * and left out; the conversation goes on with the rest.
   */
  const ensureMcp = async (r: Runner, record: ConversationRecord, stored: StoredSettings | null, sandboxId: string, workingDir: string): Promise<void> => {
    const config = mergeMcpConfigs(stored?.mcp_config ?? null, record.launch.mcp_config);
    // Reused while the servers, the sandbox and every connection are as they were; else connected afresh.
    const fingerprint = `${sandboxId}\u0000${JSON.stringify(config)}`;
    if (r.mcp && r.mcp.fingerprint === fingerprint && r.mcp.session.healthy()) return;
    await closeMcp(r);
    if (!hasMcpServers(config)) return;
    if (!deps.mcp) {
      await append(r, [
        errorEvent('mcp_server_failed', 'MCP servers are configured, but this service was composed without an MCP connector, so their tools are not available.'),
      ]);
      return;
    }
    const plans = planMcpServers(config, sandboxId, workingDir, runtime, deps.options?.mcp?.connectTimeoutMs);
    const session = await openMcpSession({
      connector: deps.mcp,
      plans,
      signal: r.abort.signal,
      ...(deps.options?.mcp?.callTimeoutMs !== undefined ? { callTimeoutMs: deps.options.mcp.callTimeoutMs } : {}),
    });
    if (r.abort.signal.aborted) {
      await session.close();
      return;
    }
    r.mcp = { session, fingerprint };
    await append(
      r,
      session.failures.map((f) =>
        errorEvent('mcp_server_failed', `The MCP server ${f.server} (${f.describe}) could not be used: ${f.reason}. Its tools are left out; the other tools work.`),
      ),
    );
  };

  /** Events for MCP servers lost since the last step: their tools are no longer offered. */
  const reportLostMcp = async (r: Runner) => {
    const lost = r.mcp?.session.takeLost() ?? [];
    await append(
      r,
      lost.map((f) => errorEvent('mcp_server_failed', `The MCP server ${f.server} (${f.describe}) stopped: ${f.reason}. Its tools are no longer offered; the other tools work.`)),
    );
  };

  /** Each run's last toolset: describing the tools again every step was a tenth of a step's CPU (issue 27). */
  const toolsets = new WeakMap<Runner, { workingDir: string; tools: readonly AgentTool[]; toolset: Toolset }>();

  /** The conversation's tools (built-ins and connected MCP tools), described for its working directory. */
  const toolsetOf = (r: Runner, workingDir: string): Toolset => {
    const tools = [...builtinTools, ...(r.mcp?.session.tools() ?? [])];
    const last = toolsets.get(r);
    if (last && last.workingDir === workingDir && last.tools.length === tools.length && last.tools.every((t, i) => t === tools[i])) return last.toolset;
    const toolset = new Toolset(tools, { workingDir });
    toolsets.set(r, { workingDir, tools, toolset });
    return toolset;
  };

  const toolContext = (r: Runner, sandboxId: string, workingDir: string): ToolContext => ({
    sandboxId,
    workingDir,
    runtime,
    editHistory: r.editHistory,
    signal: r.abort.signal,
    shell: () => {
      const opened: Promise<Result<SandboxShell, SandboxRuntimeError>> =
        r.shell ??
        (r.shell = (async () => {
          const result = await openSandboxShell(runtime, sandboxId, { cwd: workingDir });
          if (result.isErr()) r.shell = null;
          return result;
        })());
      return new ResultAsync(opened);
    },
    resetShell: () => closeShell(r),
  });

  /** Resolves with the tool's outcome, or with null as soon as the conversation is paused. */
  const runUnlessAborted = (r: Runner, work: Promise<ToolOutcome>): Promise<ToolOutcome | null> => {
    if (r.abort.signal.aborted) return Promise.resolve(null);
    return new Promise((resolve) => {
      const onAbort = () => resolve(null);
      r.abort.signal.addEventListener('abort', onAbort, { once: true });
      work.then(
        (value) => {
          r.abort.signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (error: unknown) => {
          r.abort.signal.removeEventListener('abort', onAbort);
          resolve({ content: `the tool failed unexpectedly: ${String(error)}`, is_error: true, exit_code: null, details: {} });
        },
      );
    });
  };

  const interruptedObservation = (a: ActionEvent, why: string): ConversationEventDraft => ({
    kind: 'observation',
    source: 'environment',
    timestamp: now(),
    tool_call_id: a.tool_call_id,
    tool_name: a.tool_name,
    content: why,
    is_error: true,
    exit_code: null,
    details: { interrupted: true },
  });

  /** Runs the actions of one model response (or one replayed action) in order; returns whether the agent called finish. */
  const runActions = async (
    r: Runner,
    actions: ActionEvent[],
    calls: readonly LlmToolCall[],
    sandboxId: string,
    context: ToolContext,
    toolset: Toolset,
  ): Promise<'finished' | 'paused' | 'sandbox_lost' | 'done'> => {
    let finished = false;
    for (const [index, action] of actions.entries()) {
      if (r.abort.signal.aborted) {
        await append(r, actions.slice(index).map((a) => interruptedObservation(a, `Not run: the conversation was ${stoppedWhy(r)} before this call started.`)));
        return 'paused';
      }
      if (finished) {
        await append(r, [interruptedObservation(action, 'Not run: finish was called earlier in the same response.')]);
        continue;
      }
      const call = calls[index]!;
      const work = toolset.run(call, action.arguments, action.arguments === null ? parseToolArguments(action.raw_arguments).error : null, context);
      const result = await runUnlessAborted(r, work);
      if (result === null) {
        // Stop waiting; the command may go on in the sandbox, so say so.
        await append(r, actions.slice(index).map((a, i) =>
          interruptedObservation(
            a,
            i === 0
              ? `Interrupted: the conversation was ${stoppedWhy(r)} while this call was running; it may or may not have completed.`
              : `Not run: the conversation was ${stoppedWhy(r)}.`,
          ),
        ));
        return 'paused';
      }
      await append(r, [
        {
          kind: 'observation',
          source: 'environment',
          timestamp: now(),
          tool_call_id: action.tool_call_id,
          tool_name: action.tool_name,
          content: result.content,
          is_error: result.is_error,
          exit_code: result.exit_code,
          details: result.details,
        },
      ]);
      if (result.sandboxFailure) {
        const live = await sandboxes.liveRecords(r.userId, [sandboxId]);
        const box = live.isOk() ? live.value.get(sandboxId) : undefined;
        if (!box || box.status !== 'RUNNING') {
          await append(r, actions.slice(index + 1).map((a) => interruptedObservation(a, 'Not run: the sandbox is gone.')));
          return 'sandbox_lost';
        }
      }
      if (result.finished) finished = true;
    }
    return finished ? 'finished' : 'done';
  };

  /** What the loop does after a response's actions ran. */
  const afterActions = async (r: Runner, outcome: Awaited<ReturnType<typeof runActions>>, sandboxId: string): Promise<StepEnd> => {
    sandboxes.touch(r.userId, sandboxId);
    if (outcome === 'paused') return 'stop';
    if (outcome === 'sandbox_lost') {
      await fail(r, 'sandbox_unavailable', `The sandbox ${sandboxId} stopped answering, so the agent cannot go on. Start the conversation again.`);
      return 'stop';
    }
    if (outcome === 'finished') {
      await setStatus(r, 'finish', 'the agent called finish');
      return 'stop';
    }
    return 'continue';
  };

  return { ruleContext, ensureMcp, reportLostMcp, toolsetOf, toolContext, runUnlessAborted, interruptedObservation, runActions, afterActions };
}

export type Actions = ReturnType<typeof createActions>;
