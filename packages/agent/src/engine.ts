import {
  nextExecutionStatus,
  parseReplayTrajectory,
  storeUnavailable,
  type ActionEvent,
  type AgentHost,
  type AgentPort,
  type ConfirmationDecision,
  type ConfirmationEvent,
  type ConfirmationFailure,
  type ConversationErrorCode,
  type ConversationEvent,
  type ConversationEventDraft,
  type ConversationMetrics,
  type ConversationRecord,
  type DomainError,
  type ExecutionEvent,
  type ExecutionStatus,
  type LlmCredentials,
  type LlmError,
  type LlmResponse,
  type LlmToolCall,
  type SandboxRuntimeError,
  type SandboxShell,
  type StoredSettings,
} from '@acs/core';
import { errAsync, ok, ResultAsync, type Result } from 'neverthrow';
import { hasMcpServers, mergeMcpConfigs, openMcpSession, planMcpServers, type McpSession } from './mcp-session.js';
import { DEFAULT_CREDENTIAL_DIR, prepareRepository, type WorkspaceOptions } from './workspace-setup.js';
import { condensedView, planCondensation, summaryRequest, type CondenserOptions } from './condenser.js';
import { projectMessages, systemPrompt } from './prompt.js';
import { nextReplayStep, replayCallId, replayEndIndex } from './replay.js';
import { assessAction, needsConfirmation, securityPolicyOf, SECURITY_RISK_GUIDANCE, type SecurityPolicy } from './security.js';
import { DEFAULT_TRUSTED_HOSTS, type RuleContext } from './security/risk.js';
import { detectStuck } from './stuck.js';
import type { AgentTool, ToolContext, ToolOutcome } from './tool.js';
import { parseToolArguments, Toolset, BUILTIN_TOOLS } from './toolset.js';

export const DEFAULT_MAX_ITERATIONS = 100;

export interface AgentEngineOptions {
  /** Steps per user message when the user's `max_iterations` is unset. Default 100. */
  defaultMaxIterations?: number;
  /** The tools of every conversation. Default: execute_bash, str_replace_editor, think, finish. */
  tools?: readonly AgentTool[];
  /** Bounds of the default condenser (used when the user's `enable_default_condenser` is on). */
  condenser?: CondenserOptions;
  /** MCP time limits. connectTimeoutMs (default 30 s) bounds connecting and listing tools; callTimeoutMs (default 300 s) one call. */
  mcp?: { connectTimeoutMs?: number; callTimeoutMs?: number };
  /** What the rule-based security analyzer trusts: hosts the agent may contact, directories that hold secrets. Added to the defaults. */
  security?: { trustedHosts?: readonly string[]; secretPaths?: readonly string[] };
  /** Repository setup: clone and setup-script time limits, where credentials live in the sandbox. */
  workspace?: WorkspaceOptions;
}

/** What the engine is built from: the domain's side of the agent port, and its options. */
export interface AgentEngineDeps extends AgentHost {
  options?: AgentEngineOptions;
}

/**
 * Runs the agents. Each conversation has at most one loop at a time, an async task of its
 * own: LLM calls and tool runs are awaited I/O, so one slow call holds up neither other
 * conversations nor the HTTP server. Everything a step does is appended to the event log
 * before it is acted on; the log is the only state a restarted process needs.
 */
export type AgentEngine = AgentPort;

interface Runner {
  readonly userId: string;
  readonly conversationId: string;
  loop: Promise<void> | null;
  abort: AbortController;
  /** Why the loop is being stopped (words for the observations it leaves). */
  stopReason: 'paused' | 'shutting down';
  /** Set when something arrived while the loop ran; the loop looks again before it exits. */
  wakeRequested: boolean;
  shell: Promise<Result<SandboxShell, SandboxRuntimeError>> | null;
  readonly editHistory: Map<string, string[]>;
  events: ConversationEvent[];
  lastId: number;
  /** The last event id the agent has acted on (shown to the model, or stopped with an error after); null until read from the log. */
  handledUpTo: number | null;
  /** The conversation's MCP servers, connected for its sandbox; null until the first run that has servers. */
  mcp: { session: McpSession; fingerprint: string } | null;
  /** The last model call said the prompt was too long and a forced condensation followed: a second refusal is final. */
  forcedCondensation: boolean;
}

type StepEnd = 'continue' | 'stop';

const stoppedWhy = (r: Runner) => (r.stopReason === 'paused' ? 'paused' : 'stopped by a shutdown of the service');

const errorCodeOf = (e: LlmError): ConversationErrorCode =>
  e.code === 'cancelled' ? 'internal_error' : (`llm_${e.code}` as ConversationErrorCode);

/** How much the next call may cost: the last call's cost (calls grow with the history, so this is a lower bound). */
const lastKnownCost = (events: readonly ConversationEvent[]): number => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (e.kind === 'llm_call' && e.cost_usd !== null) return e.cost_usd;
  }
  return 0;
};

export function metricsOf(events: readonly ConversationEvent[], budget: number | null): ConversationMetrics {
  let cost = 0;
  let known = true;
  let prompt = 0;
  let completion = 0;
  for (const e of events) {
    if (e.kind !== 'llm_call') continue;
    prompt += e.prompt_tokens;
    completion += e.completion_tokens;
    if (e.cost_usd === null) known = false;
    else cost += e.cost_usd;
  }
  return {
    accumulated_cost: known ? Math.round(cost * 1e6) / 1e6 : null,
    max_budget_per_task: budget,
    prompt_tokens: prompt,
    completion_tokens: completion,
  };
}

/** Model calls that were agent steps (not summaries). */
const isAgentCall = (e: ConversationEvent): boolean => e.kind === 'llm_call' && e.purpose !== 'condenser';

/** The actions that wait for the user: asked to be confirmed, with no result yet. */
export function pendingConfirmation(events: readonly ConversationEvent[]): ActionEvent[] {
  const answered = new Set(events.flatMap((e) => (e.kind === 'observation' ? [e.tool_call_id] : [])));
  return events.filter((e): e is ActionEvent => e.kind === 'action' && e.requires_confirmation === true && !answered.has(e.tool_call_id));
}

/** The user's decision on those actions, if one was recorded after them. */
const decisionOn = (events: readonly ConversationEvent[], pending: readonly ActionEvent[]): ConfirmationEvent | null => {
  const ids = new Set(pending.map((a) => a.tool_call_id));
  const after = pending[pending.length - 1]?.id ?? 0;
  return (events.find((e): e is ConfirmationEvent => e.kind === 'confirmation' && e.id > after && e.tool_call_ids.some((id) => ids.has(id))) ?? null);
};

/** Index just after the last user message: the steps taken for it come after. */
const lastUserMessageIndex = (events: readonly ConversationEvent[]): number => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (e.kind === 'message' && e.source === 'user') return i;
  }
  return -1;
};

/** From a log alone: the last model call, replayed action or stopping error, the point up to which the agent has acted. */
const lastHandledId = (events: readonly ConversationEvent[]): number => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (isAgentCall(e) || (e.kind === 'error' && e.fatal)) return e.id;
    if ((e.kind === 'action' || (e.kind === 'message' && e.source === 'agent')) && e.replay_step !== undefined) return e.id;
  }
  return 0;
};

const credentialsOf = (record: ConversationRecord, settings: StoredSettings | null): LlmCredentials | null => {
  const model = record.llm_model ?? settings?.llm_model ?? null;
  if (!model) return null;
  return { model, api_key: settings?.llm_api_key ?? null, base_url: settings?.llm_base_url || null };
};

export function createAgentEngine(deps: AgentEngineDeps): AgentEngine {
  const { conversations, log, sandboxes, runtime, settings, llm, clock, logger, background } = deps;
  const builtinTools = deps.options?.tools ?? BUILTIN_TOOLS;
  const defaultToolset = new Toolset(builtinTools);
  const defaultMaxIterations = deps.options?.defaultMaxIterations ?? DEFAULT_MAX_ITERATIONS;
  const runners = new Map<string, Runner>();
  /** The decision being recorded per conversation (respondToConfirmation runs one at a time). */
  const deciding = new Map<string, Promise<void>>();
  let shuttingDown = false;
  const keyOf = (userId: string, conversationId: string) => `${userId}\u0000${conversationId}`;

  const runnerFor = (userId: string, conversationId: string): Runner => {
    const key = keyOf(userId, conversationId);
    let r = runners.get(key);
    if (!r) {
      r = {
        userId,
        conversationId,
        loop: null,
        abort: new AbortController(),
        stopReason: 'paused',
        wakeRequested: false,
        shell: null,
        editHistory: new Map(),
        events: [],
        lastId: 0,
        handledUpTo: null,
        mcp: null,
        forcedCondensation: false,
      };
      runners.set(key, r);
    }
    return r;
  };

  /** Appends and keeps the runner's copy of the log complete and in order. */
  const append = async (r: Runner, drafts: ConversationEventDraft[]): Promise<ConversationEvent[]> => {
    if (drafts.length === 0) return [];
    const appended = await log.append(r.userId, r.conversationId, drafts);
    if (appended.isErr()) throw new Error(`could not append to the event log: ${appended.error.message}`);
    const events = appended.value;
    if (events.length > 0 && events[0]!.id === r.lastId + 1) {
      r.events.push(...events);
      r.lastId = events[events.length - 1]!.id;
    } else {
      await catchUp(r); // someone else appended in between (a user message): read it all in order
    }
    return events;
  };

  /** A user message the agent has not seen yet. */
  const hasUnseenMessage = (r: Runner): boolean => {
    r.handledUpTo ??= lastHandledId(r.events);
    const handled = r.handledUpTo;
    return r.events.some((e) => e.kind === 'message' && e.source === 'user' && e.id > handled);
  };

  /** Brings the runner's copy of the log up to date (messages may have been appended by requests). */
  const catchUp = async (r: Runner): Promise<void> => {
    const fresh = await log.readAll(r.userId, r.conversationId, r.lastId);
    if (fresh.isErr()) throw new Error(`could not read the event log: ${fresh.error.message}`);
    for (const e of fresh.value) {
      if (e.id <= r.lastId) continue;
      r.events.push(e);
      r.lastId = e.id;
    }
  };

  const now = () => clock.now();

  /** Moves the execution status (and records why); a move the state machine refuses is a defect. */
  const setStatus = async (
    r: Runner,
    event: ExecutionEvent,
    reason: string | null,
    extra: Partial<Pick<ConversationRecord, 'metrics'>> = {},
  ): Promise<ExecutionStatus | null> => {
    let changed: { from: ExecutionStatus | null; to: ExecutionStatus } | null = null;
    const updated = await conversations.update(r.userId, r.conversationId, (current): Result<ConversationRecord, never> => {
      const next = nextExecutionStatus(current.execution_status, event);
      if (next.isErr()) {
        logger.warn({ conversationId: r.conversationId, from: current.execution_status, event }, 'ignored an execution status change the state machine refuses');
        return ok(current);
      }
      if (next.value === current.execution_status && Object.keys(extra).length === 0) return ok(current);
      if (next.value !== current.execution_status) changed = { from: current.execution_status, to: next.value };
      return ok({ ...current, ...extra, execution_status: next.value, updated_at: now() });
    });
    if (updated.isErr()) throw new Error(`could not record the execution status: ${updated.error.message}`);
    const move = changed as { from: ExecutionStatus | null; to: ExecutionStatus } | null;
    if (move) await append(r, [{ kind: 'status', source: 'environment', timestamp: now(), execution_status: move.to, reason }]);
    return updated.value?.execution_status ?? null;
  };

  const saveMetrics = async (r: Runner, metrics: ConversationMetrics) => {
    await conversations.update(r.userId, r.conversationId, (c): Result<ConversationRecord, never> => ok({ ...c, metrics, updated_at: now() }));
  };

  /** An error event: fatal when the agent stops because of it, else a warning. */
  const errorEvent = (code: ConversationErrorCode, message: string, fatal = false): ConversationEventDraft => ({
    kind: 'error',
    source: 'environment',
    timestamp: now(),
    code,
    message,
    fatal,
  });

  const fail = async (r: Runner, code: ConversationErrorCode, message: string) => {
    r.handledUpTo = r.lastId;
    await append(r, [errorEvent(code, message, true)]);
    await setStatus(r, 'fail', message);
  };

  const closeShell = async (r: Runner) => {
    const pending = r.shell;
    r.shell = null;
    if (!pending) return;
    const shell = await pending;
    if (shell.isOk()) await shell.value.close().catch(() => undefined);
  };

  const closeMcp = async (r: Runner) => {
    const open = r.mcp;
    r.mcp = null;
    if (open) await open.session.close();
  };

  /** Closes what a conversation holds in its sandbox: the shell and the MCP connections (and their processes). */
  const release = async (r: Runner) => {
    await closeShell(r);
    await closeMcp(r);
  };

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

  const toolsetOf = (r: Runner): Toolset => (r.mcp ? new Toolset([...builtinTools, ...r.mcp.session.tools()]) : defaultToolset);

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
          const result = await runtime.openShell(sandboxId, { cwd: workingDir });
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

  const condenserOptions = (stored: StoredSettings | null): CondenserOptions => ({
    ...deps.options?.condenser,
    ...(stored?.condenser_max_size ? { maxEvents: stored.condenser_max_size } : {}),
  });

  /** The llm_call event of a response, with the conversation's totals after it (also what the record's metrics become). */
  const llmCallDraft = (
    r: Runner,
    answer: LlmResponse,
    responseId: string,
    purpose: 'agent' | 'condenser',
    budget: number | null,
  ): { event: ConversationEventDraft; metrics: ConversationMetrics } => {
    const draft = {
      kind: 'llm_call' as const,
      source: 'environment' as const,
      timestamp: now(),
      response_id: responseId,
      model: answer.model,
      prompt_tokens: answer.usage.prompt_tokens,
      completion_tokens: answer.usage.completion_tokens,
      cached_prompt_tokens: answer.usage.cached_prompt_tokens,
      cost_usd: answer.usage.cost_usd,
      latency_ms: Math.round(answer.latency_ms),
      attempts: answer.attempts,
      purpose,
    };
    const metrics = metricsOf([...r.events, { ...draft, id: r.lastId + 1 }], budget);
    const accumulated = { cost_usd: metrics.accumulated_cost, prompt_tokens: metrics.prompt_tokens, completion_tokens: metrics.completion_tokens };
    return { event: { ...draft, accumulated }, metrics };
  };

  /**
   * Summarises older events when the view is past the condenser's bounds (or, forced, because
   * the model said the prompt was too long). 'none' when nothing needed condensing.
   */
  const condense = async (r: Runner, credentials: LlmCredentials, stored: StoredSettings | null, force: boolean): Promise<'none' | 'condensed' | 'stop'> => {
    const options = condenserOptions(stored);
    const plan = planCondensation(r.events, options, force);
    if (!plan) return 'none';
    const response = await llm.complete({ credentials, messages: summaryRequest(plan, options), tools: [], signal: r.abort.signal });
    if (response.isErr()) {
      if (response.error.code === 'cancelled' || r.abort.signal.aborted) return 'stop';
      await fail(r, errorCodeOf(response.error), `Summarising older events to keep the prompt bounded failed (${response.error.code}): ${response.error.message}`);
      return 'stop';
    }
    const answer = response.value;
    const call = llmCallDraft(r, answer, answer.id ?? `condense-${r.lastId}`, 'condenser', stored?.max_budget_per_task ?? null);
    await append(r, [
      call.event,
      {
        kind: 'condensation',
        source: 'environment',
        timestamp: now(),
        summary: answer.content?.trim() || '(The summariser returned nothing; the earlier events are not available.)',
        kept_head_through: plan.keptHeadThrough,
        forgotten_through: plan.forgottenThrough,
        forgotten_events: plan.forgottenCount,
        reason: plan.reason,
      },
    ]);
    await saveMetrics(r, call.metrics);
    return 'condensed';
  };

  /** One model call and what follows from it. */
  const step = async (
    r: Runner,
    record: ConversationRecord,
    stored: StoredSettings | null,
    policy: SecurityPolicy,
    credentials: LlmCredentials,
    sandboxId: string,
    workingDir: string,
  ): Promise<StepEnd> => {
    await catchUp(r);
    if (r.abort.signal.aborted) return 'stop';
    await reportLostMcp(r);

    const verdict = detectStuck(r.events);
    if (verdict.kind === 'stuck') {
      await append(r, [errorEvent('stuck', `The agent is stuck: ${verdict.reason}. Send a message to give it new directions.`, true)]);
      await setStatus(r, 'stuck', verdict.reason);
      return 'stop';
    }
    if (verdict.kind === 'nudge') {
      await append(r, [{ kind: 'message', source: 'environment', timestamp: now(), text: verdict.message, image_urls: [] }]);
    }

    const since = lastUserMessageIndex(r.events);
    const iterations = r.events.slice(since + 1).filter(isAgentCall).length;
    const maxIterations = stored?.max_iterations ?? defaultMaxIterations;
    if (iterations >= maxIterations) {
      await fail(r, 'max_iterations_reached', `The agent took ${iterations} steps for the last message, the limit (max_iterations = ${maxIterations}). Send a message to let it continue.`);
      return 'stop';
    }

    const budget = stored?.max_budget_per_task ?? null;
    if (budget !== null) {
      const metrics = metricsOf(r.events, budget);
      if (metrics.accumulated_cost === null) {
        if (!r.events.some((e) => e.kind === 'error' && e.code === 'budget_unenforceable')) {
          await append(r, [
            errorEvent(
              'budget_unenforceable',
              `max_budget_per_task is ${budget} USD, but the price of ${credentials.model} is unknown, so the budget cannot be enforced. Tokens are still counted.`,
            ),
          ]);
        }
      } else if (metrics.accumulated_cost + lastKnownCost(r.events) > budget) {
        await fail(
          r,
          'budget_exceeded',
          `The conversation has cost ${metrics.accumulated_cost.toFixed(4)} USD; the next model call would likely take it past max_budget_per_task (${budget} USD), so the agent stopped.`,
        );
        return 'stop';
      }
    }

    const condenserOn = stored?.enable_default_condenser ?? true;
    if (condenserOn && (await condense(r, credentials, stored, false)) === 'stop') return 'stop';

    const toolset = toolsetOf(r);
    const messages = [
      {
        role: 'system' as const,
        content: systemPrompt({
          workingDir,
          instructions: record.launch.conversation_instructions,
          startedAt: record.created_at,
          repository: record.workspace ? { name: record.workspace.repository, branch: record.workspace.branch, guidance: record.workspace.guidance } : null,
          riskGuidance: policy.analyzer === 'llm' || policy.analyzer === 'ensemble' ? SECURITY_RISK_GUIDANCE : null,
        }),
      },
      ...projectMessages(condensedView(r.events).events, record.workspace?.guidance.knowledge ?? []),
    ];
    const seenUpTo = r.lastId;
    r.handledUpTo = seenUpTo;
    const response = await llm.complete({ credentials, messages, tools: toolset.definitions, signal: r.abort.signal });
    if (response.isErr()) {
      if (response.error.code === 'cancelled' || r.abort.signal.aborted) return 'stop';
      // Too long for the model: condense harder and try again, once per step.
      if (response.error.code === 'context_too_long' && condenserOn && !r.forcedCondensation) {
        r.forcedCondensation = true;
        const condensed = await condense(r, credentials, stored, true);
        if (condensed === 'stop') return 'stop';
        if (condensed === 'condensed') return 'continue';
      }
      await fail(r, errorCodeOf(response.error), `The model call failed (${response.error.code}${response.error.status ? `, HTTP ${response.error.status}` : ''}): ${response.error.message}`);
      return 'stop';
    }
    r.forcedCondensation = false;
    const answer = response.value;
    const responseId = answer.id ?? `resp-${seenUpTo}-${r.events.length}`;
    const call = llmCallDraft(r, answer, responseId, 'agent', budget);
    const drafts: ConversationEventDraft[] = [call.event];
    const rules = ruleContext(workingDir);
    const actionDrafts: Extract<ConversationEventDraft, { kind: 'action' }>[] = [];
    const usedIds = new Set<string>();
    for (const [i, call] of answer.tool_calls.entries()) {
      const parsed = parseToolArguments(call.arguments);
      // Tool call ids must be unique in the history; some servers reuse or omit them.
      let id = call.id || `call_${seenUpTo}_${i}`;
      if (usedIds.has(id) || r.events.some((e) => e.kind === 'action' && e.tool_call_id === id)) id = `${id}_${seenUpTo}_${i}`;
      usedIds.add(id);
      call.id = id;
      const mcp = toolset.get(call.name)?.mcp;
      const assessment = assessAction(policy, { tool_name: call.name, arguments: parsed.value, ...(mcp ? { mcp } : {}) }, rules);
      actionDrafts.push({
        kind: 'action',
        source: 'agent',
        timestamp: now(),
        tool_call_id: id,
        tool_name: call.name,
        arguments: parsed.value,
        raw_arguments: call.arguments,
        thought: i === 0 ? (answer.content?.trim() || null) : null,
        response_id: responseId,
        ...(assessment ? { security_risk: assessment.risk, risk_reasons: assessment.reasons } : {}),
      });
    }
    const confirm = needsConfirmation(policy, actionDrafts.map((a) => ({ tool_name: a.tool_name, risk: a.security_risk ?? null })));
    drafts.push(...actionDrafts.map((a) => (confirm ? { ...a, requires_confirmation: true } : a)));
    if (answer.tool_calls.length === 0 && answer.content?.trim()) {
      drafts.push({ kind: 'message', source: 'agent', timestamp: now(), text: answer.content, image_urls: [] });
    }
    const appended = await append(r, drafts);
    await saveMetrics(r, call.metrics);
    sandboxes.touch(sandboxId);

    if (answer.tool_calls.length === 0) {
      if (answer.content?.trim()) {
        await setStatus(r, 'finish', 'the agent replied and waits for the user');
        return 'stop';
      }
      await append(r, [
        {
          kind: 'message',
          source: 'environment',
          timestamp: now(),
          text: 'Your last answer was empty. Call a tool to continue the work, or call finish with a message for the user.',
          image_urls: [],
        },
      ]);
      return 'continue';
    }

    if (confirm) {
      const risky = actionDrafts.filter((a) => a.security_risk === 'high' || a.security_risk === 'unknown').length;
      await setStatus(
        r,
        'await_confirmation',
        `${actionDrafts.length} action(s) wait for the user to accept or reject them${policy.confirm === 'risky' ? ` (${risky} rated high or unknown risk)` : ''}`,
      );
      return 'stop';
    }

    const actions = appended.filter((e): e is ActionEvent => e.kind === 'action');
    return afterActions(r, await runActions(r, actions, answer.tool_calls, sandboxId, toolContext(r, sandboxId, workingDir), toolset), sandboxId);
  };

  /** What the loop does after a response's actions ran. */
  const afterActions = async (r: Runner, outcome: Awaited<ReturnType<typeof runActions>>, sandboxId: string): Promise<StepEnd> => {
    sandboxes.touch(sandboxId);
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

  /**
   * Actions that waited for confirmation, now decided: accepted ones run ('continue' when the
   * agent goes on), rejected ones get an observation and the agent waits for the user ('stop').
   * A message sent instead of a decision counts as a rejection, and the agent answers it.
   */
  const settlePending = async (
    r: Runner,
    pending: ActionEvent[],
    decision: ConfirmationEvent | null,
    sandboxId: string,
    workingDir: string,
  ): Promise<StepEnd> => {
    if (decision?.accept) {
      const calls = pending.map((a) => ({ id: a.tool_call_id, name: a.tool_name, arguments: a.raw_arguments }));
      const outcome = await runActions(r, pending, calls, sandboxId, toolContext(r, sandboxId, workingDir), toolsetOf(r));
      return afterActions(r, outcome, sandboxId);
    }
    const why = decision
      ? `Rejected by the user: this call was not run.${decision.reason?.trim() ? ` The user said: ${decision.reason.trim()}` : ''} Do not run it again unless the user asks for it.`
      : 'Not run: the user sent a new message instead of confirming this call. Read the message before doing anything else.';
    await append(r, pending.map((a) => ({ ...interruptedObservation(a, why), details: { rejected: true } })));
    return decision ? 'stop' : 'continue';
  };

  /**
   * A `replay_json` conversation: runs the trajectory's remaining steps (the log shows which ran,
   * by `replay_step`) instead of calling the model, each tool call exactly as a model's call would
   * run, with no llm_call event (so no cost). 'stop' when the run ends here (the trajectory
   * finished, the agent was paused, or there is no model to go on with); 'continue' when the
   * model takes over.
   */
  const replay = async (r: Runner, json: string, credentials: LlmCredentials | null, sandboxId: string, workingDir: string): Promise<StepEnd> => {
    const plan = parseReplayTrajectory(json);
    if (plan.isErr()) {
      await fail(r, 'internal_error', `The stored replay_json cannot be replayed: ${plan.error.type === 'ValidationFailed' ? plan.error.message : plan.error.type}`);
      return 'stop';
    }
    const { steps } = plan.value;
    const context = toolContext(r, sandboxId, workingDir);
    for (let n = nextReplayStep(r.events); n < steps.length; n++) {
      await catchUp(r);
      if (r.abort.signal.aborted) return 'stop';
      const step = steps[n]!;
      if (step.kind === 'message') {
        await append(r, [{ kind: 'message', source: step.source, timestamp: now(), text: step.text, image_urls: step.image_urls, replay_step: n }]);
        continue;
      }
      const id = replayCallId(step);
      const raw = JSON.stringify(step.arguments);
      const appended = await append(r, [
        { kind: 'action', source: 'agent', timestamp: now(), tool_call_id: id, tool_name: step.tool_name, arguments: step.arguments, raw_arguments: raw, thought: step.thought, response_id: id, replay_step: n },
      ]);
      const actions = appended.filter((e): e is ActionEvent => e.kind === 'action');
      const outcome = await runActions(r, actions, [{ id, name: step.tool_name, arguments: raw }], sandboxId, context, defaultToolset);
      sandboxes.touch(sandboxId);
      if (outcome === 'paused') return 'stop';
      if (outcome === 'sandbox_lost') {
        await fail(r, 'sandbox_unavailable', `The sandbox ${sandboxId} stopped answering during the replay, so it cannot go on. Start the conversation again.`);
        return 'stop';
      }
      if (outcome === 'finished') {
        r.handledUpTo = r.lastId;
        await setStatus(r, 'finish', 'the replayed trajectory called finish');
        return 'stop';
      }
    }
    // The user wrote after the replay: the model answers (or the usual error says that none is configured).
    const end = replayEndIndex(r.events);
    if (r.events.slice(end + 1).some((e) => e.kind === 'message' && e.source === 'user')) return 'continue';
    const last = steps.at(-1);
    // Ending on the agent's message: it waits for the user, as a model's reply without tools does.
    const awaitsUser = last?.kind === 'message' && last.source === 'agent';
    if (credentials && !awaitsUser && !plan.value.endsWithFinish) return 'continue';
    r.handledUpTo = r.lastId;
    await setStatus(
      r,
      'finish',
      plan.value.endsWithFinish
        ? 'the replayed trajectory called finish'
        : awaitsUser
          ? 'the replayed trajectory ended with a message from the agent, which waits for the user'
          : 'the trajectory was replayed; no model is configured, so the agent stops here',
    );
    return 'stop';
  };

  /** One run: from "there is work" to finished, error, stuck, paused or waiting for confirmation. */
  const runOnce = async (r: Runner): Promise<void> => {
    const found = await conversations.get(r.userId, r.conversationId);
    if (found.isErr()) throw new Error(`could not load the conversation: ${found.error.message}`);
    const record = found.value;
    if (!record || record.status !== 'RUNNING' || !record.sandbox_id) return;
    r.forcedCondensation = false;
    await catchUp(r);
    const pending = pendingConfirmation(r.events);
    const decision = pending.length > 0 ? decisionOn(r.events, pending) : null;
    const wasRunning = record.execution_status === 'running' || record.execution_status === 'paused';
    if (!wasRunning && !decision && !hasUnseenMessage(r)) return;

    const sandboxId = record.sandbox_id;
    const live = await sandboxes.liveRecords(r.userId, [sandboxId]);
    const box = live.isOk() ? live.value.get(sandboxId) : undefined;
    if (!box || box.status !== 'RUNNING') {
      // It runs again when the conversation is started and its sandbox is up.
      await setStatus(r, 'pause', `the sandbox is ${box ? box.status : 'gone'}`);
      return;
    }
    const stored = await settings.loadWithSecrets(r.userId);
    const storedSettings = stored.isOk() ? stored.value : null;
    const credentials = credentialsOf(record, storedSettings);
    // With a repository, the agent works in its clone (and a replay runs where the model would).
    const workingDir = record.workspace?.repository_dir ?? box.spec.working_dir;

    if (pending.length > 0 && !decision && !hasUnseenMessage(r)) {
      // Still undecided (the conversation was paused or restarted while it waited): wait again.
      if (record.execution_status !== 'waiting_for_confirmation') {
        await setStatus(r, 'run', 'resumed');
        await setStatus(r, 'await_confirmation', `${pending.length} action(s) still wait for the user to accept or reject them`);
      }
      return;
    }
    if (pending.length > 0 && decision && !decision.accept) {
      await settlePending(r, pending, decision, sandboxId, workingDir);
      // Handled up to the rejected response: a message sent around the rejection still gets a run.
      r.handledUpTo = pending[pending.length - 1]!.id;
      await setStatus(r, record.execution_status === 'waiting_for_confirmation' ? 'reject' : 'pause', 'the user rejected the actions; the agent waits for a message');
      return;
    }

    await setStatus(r, 'run', decision?.accept ? 'the user accepted the actions' : hasUnseenMessage(r) ? 'a message from the user' : 'resumed');
    if (record.launch.replay_json && (await replay(r, record.launch.replay_json, credentials, sandboxId, workingDir)) === 'stop') return;
    if (!credentials) {
      await fail(r, 'llm_not_configured', 'No model is configured: store llm_model (and llm_api_key) in the settings, then send a message.');
      return;
    }
    await ensureMcp(r, record, storedSettings, sandboxId, workingDir);
    if (pending.length > 0 && (await settlePending(r, pending, decision, sandboxId, workingDir)) === 'stop') return;
    const policy = securityPolicyOf(storedSettings);
    while (!r.abort.signal.aborted) {
      const end = await step(r, record, storedSettings, policy, credentials, sandboxId, workingDir);
      if (end === 'stop') break;
    }
  };

  const loop = async (r: Runner): Promise<void> => {
    try {
      do {
        r.wakeRequested = false;
        if (r.abort.signal.aborted) break;
        const handledBefore = r.handledUpTo;
        await runOnce(r);
        // A message the model has not seen (it arrived during the last call) gets another run,
        // provided this run got somewhere (so a run that cannot start does not spin).
        if (!r.abort.signal.aborted && r.handledUpTo !== handledBefore) {
          await catchUp(r);
          if (hasUnseenMessage(r)) r.wakeRequested = true;
        }
      } while (r.wakeRequested && !r.abort.signal.aborted);
    } catch (error) {
      logger.error({ conversationId: r.conversationId, err: error instanceof Error ? error.message : String(error) }, 'agent loop failed');
      await fail(r, 'internal_error', `The agent stopped on an internal error: ${error instanceof Error ? error.message : String(error)}`).catch(() => undefined);
    }
  };

  const engine: AgentEngine = {
    prepareWorkspace: (request) =>
      prepareRepository({ ...request, runtime, clock, ...(deps.options?.workspace ? { options: deps.options.workspace } : {}) }),

    wake: (userId, conversationId) => {
      if (background.closed || shuttingDown) return;
      const r = runnerFor(userId, conversationId);
      if (r.loop) {
        r.wakeRequested = true;
        return;
      }
      if (r.abort.signal.aborted) {
        r.abort = new AbortController();
        r.stopReason = 'paused';
      }
      // r.loop is set before anything awaits, so a second wake cannot start a second loop.
      const running: Promise<void> = Promise.resolve()
        .then(() => loop(r))
        .finally(() => {
          r.loop = null;
          if (r.wakeRequested && !r.abort.signal.aborted) {
            // A wake that came in while the loop was ending: run again.
            r.wakeRequested = false;
            engine.wake(userId, conversationId);
            return;
          }
          // An agent at rest keeps no copy of its log (it is read again on the next run); the shell stays open.
          r.events = [];
          r.lastId = 0;
          r.handledUpTo = null;
        });
      r.loop = running;
      background.spawn(`agent ${conversationId}`, () => running);
    },

    shutdown: async () => {
      shuttingDown = true;
      const running = [...runners.values()].filter((r) => r.loop !== null);
      for (const r of running) {
        r.stopReason = 'shutting down';
        r.abort.abort();
      }
      await Promise.all(running.map((r) => r.loop ?? Promise.resolve()));
      await Promise.all([...runners.values()].map((r) => release(r)));
    },

    pause: async (userId, conversationId, reason) => {
      const r = runners.get(keyOf(userId, conversationId));
      if (!r) {
        // Not running in this process: only a record left "running" by a crash needs changing.
        const record = await conversations.get(userId, conversationId);
        if (record.isOk() && record.value?.execution_status === 'running') {
          await setStatus(runnerFor(userId, conversationId), 'pause', reason).catch(() => undefined);
        }
        return;
      }
      r.stopReason = 'paused';
      r.abort.abort();
      await r.loop;
      await release(r);
      await setStatus(r, 'pause', reason).catch((error: unknown) => logger.warn({ conversationId, err: String(error) }, 'could not record the pause'));
    },

    forget: async (userId, conversationId) => {
      const key = keyOf(userId, conversationId);
      const r = runners.get(key);
      if (!r) return;
      r.abort.abort();
      await r.loop;
      await release(r);
      runners.delete(key);
    },

    recover: () =>
      conversations
        .listByExecutionStatus(['running', 'waiting_for_confirmation'])
        .andThen((records) =>
          ResultAsync.fromPromise(
            (async () => {
              let interrupted = 0;
              for (const record of records) {
                const r = runnerFor(record.user_id, record.id);
                if (r.loop) continue;
                await catchUp(r);
                // Waiting for the user: nothing was cut short; a decision recorded just before the stop is acted on now.
                if (record.execution_status === 'waiting_for_confirmation') {
                  engine.wake(record.user_id, record.id);
                  continue;
                }
                const answered = new Set(r.events.flatMap((e) => (e.kind === 'observation' ? [e.tool_call_id] : [])));
                // Actions still waiting for the user never started: they wait again rather than count as interrupted.
                const awaiting = pendingConfirmation(r.events);
                const undecided = new Set(decisionOn(r.events, awaiting) ? [] : awaiting.map((a) => a.tool_call_id));
                const open = r.events.filter((e): e is ActionEvent => e.kind === 'action' && !answered.has(e.tool_call_id) && !undecided.has(e.tool_call_id));
                if (open.length > 0) {
                  interrupted += open.length;
                  await append(r, [
                    ...open.map((a) =>
                      interruptedObservation(a, 'Interrupted: the service restarted while this call was running; it may or may not have completed. Check its effects before repeating it.'),
                    ),
                    errorEvent('restart_interrupted', `The service restarted while ${open.length} tool call(s) ran; they are recorded as interrupted and the agent goes on.`),
                  ]);
                }
                engine.wake(record.user_id, record.id);
              }
              return { resumed: records.length, interrupted_calls: interrupted };
            })(),
            (error): DomainError => storeUnavailable('resume running conversations', error),
          ),
        ),

    respondToConfirmation: (userId, conversationId, decision) => {
      // One decision at a time per conversation, so two answers cannot both pass the check.
      const key = keyOf(userId, conversationId);
      const previous = deciding.get(key) ?? Promise.resolve();
      const result = previous.then(() => decide(userId, conversationId, decision));
      const settled = result.then(() => undefined);
      deciding.set(key, settled);
      void settled.then(() => {
        if (deciding.get(key) === settled) deciding.delete(key);
      });
      return new ResultAsync(result);
    },

    activeLoops: () => [...runners.values()].filter((r) => r.loop !== null).length,
  };

  function decide(userId: string, conversationId: string, decision: ConfirmationDecision): ResultAsync<ConfirmationEvent, ConfirmationFailure> {
    return conversations
        .get(userId, conversationId)
        .andThen((record) => {
          if (!record) return errAsync<ConversationEvent[], ConfirmationFailure>({ type: 'ConversationNotFound', conversationId });
          return log.readAll(userId, conversationId, 0).andThen((events) => {
            const pending = pendingConfirmation(events);
            if (pending.length === 0 || decisionOn(events, pending) !== null) {
              return errAsync<ConversationEvent[], ConfirmationFailure>({ type: 'ConfirmationNotPending', conversationId, executionStatus: record.execution_status });
            }
            return log.append(userId, conversationId, [
              {
                kind: 'confirmation',
                source: 'user',
                timestamp: now(),
                accept: decision.accept,
                reason: decision.reason?.trim() || null,
                tool_call_ids: pending.map((a) => a.tool_call_id),
              },
            ]);
          });
        })
        .map((appended) => {
          engine.wake(userId, conversationId);
          return appended[0] as ConfirmationEvent;
        });
  }
  return engine;
}
