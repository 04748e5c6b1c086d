import { ok, ResultAsync, type Result } from 'neverthrow';
import type { BackgroundTasks } from '../background.js';
import type { Clock } from '../clock.js';
import type { ConversationMetrics, ConversationRecord, ExecutionStatus } from '../conversation/schema.js';
import type { ConversationStore } from '../conversation/store.js';
import { storeUnavailable, type DomainError } from '../errors.js';
import type { EventLog } from '../events/log.js';
import type { ActionEvent, ConversationErrorCode, ConversationEvent, ConversationEventDraft, MessageEvent } from '../events/schema.js';
import type { LlmClient, LlmCredentials, LlmError, LlmToolCall } from '../llm/client.js';
import type { Logger } from '../logger.js';
import type { SandboxRuntime, SandboxRuntimeError } from '../sandbox/runtime.js';
import type { SandboxService } from '../sandbox/service.js';
import type { SandboxShell } from '../sandbox/shell.js';
import type { StoredSettings } from '../settings/schema.js';
import type { SettingsService } from '../settings/service.js';
import { nextExecutionStatus, type ExecutionEvent } from './execution-state.js';
import { projectMessages, systemPrompt } from './prompt.js';
import { nextReplayStep, parseReplayTrajectory, replayCallId, replayEndIndex } from './replay.js';
import { detectStuck } from './stuck.js';
import type { AgentTool, ToolContext, ToolOutcome } from './tool.js';
import { parseToolArguments, Toolset, BUILTIN_TOOLS } from './toolset.js';

export const DEFAULT_MAX_ITERATIONS = 100;

export interface AgentEngineOptions {
  /** Steps per user message when the user's `max_iterations` is unset. Default 100. */
  defaultMaxIterations?: number;
  /** The tools of every conversation. Default: execute_bash, str_replace_editor, think, finish. */
  tools?: readonly AgentTool[];
}

export interface AgentEngineDeps {
  conversations: ConversationStore;
  log: EventLog;
  sandboxes: SandboxService;
  runtime: SandboxRuntime;
  settings: SettingsService;
  llm: LlmClient;
  clock: Clock;
  logger: Logger;
  background: BackgroundTasks;
  options?: AgentEngineOptions;
}

export interface UserMessage {
  text: string;
  image_urls: readonly string[];
}

export interface RecoveryReport {
  /** Conversations found running in the log, now resumed (or waiting for their sandbox). */
  resumed: number;
  /** Tool calls a crash interrupted, now closed with an error observation. */
  interrupted_calls: number;
}

/**
 * Runs the agents. Each conversation has at most one loop at a time, an async task of its
 * own: LLM calls and tool runs are awaited I/O, so one slow call holds up neither other
 * conversations nor the HTTP server. Everything a step does is appended to the event log
 * before it is acted on; the log is the only state a restarted process needs.
 */
export interface AgentEngine {
  /** Appends a user message; the agent picks it up (now, or when its sandbox is ready). */
  appendUserMessage(userId: string, conversationId: string, message: UserMessage): ResultAsync<MessageEvent, DomainError>;
  /** The conversation can run (its sandbox is up, or a message arrived): start its loop if there is work. */
  wake(userId: string, conversationId: string): void;
  /** Stops the agent between (or in the middle of) steps and waits for it; status paused if it was running. */
  pause(userId: string, conversationId: string, reason: string): Promise<void>;
  /** Stops the agent and forgets it (the conversation is being deleted). */
  forget(userId: string, conversationId: string): Promise<void>;
  /** After a restart: closes tool calls the crash cut short and resumes conversations that were running. */
  recover(): ResultAsync<RecoveryReport, DomainError>;
  /** How many agent loops are running now. */
  activeLoops(): number;
  /**
   * Stops every loop for a shutdown, leaving their status `running` so the next process's
   * `recover()` resumes them. Resolves when they have stopped.
   */
  shutdown(): Promise<void>;
}

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
    if (e.kind === 'llm_call' || (e.kind === 'error' && e.fatal)) return e.id;
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
  const toolset = new Toolset(deps.options?.tools ?? BUILTIN_TOOLS);
  const defaultMaxIterations = deps.options?.defaultMaxIterations ?? DEFAULT_MAX_ITERATIONS;
  const runners = new Map<string, Runner>();
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
      };
      runners.set(key, r);
    }
    return r;
  };

  /** Appends and keeps the runner's copy of the log complete and in order. */
  const append = async (r: Runner, drafts: ConversationEventDraft[]): Promise<ConversationEvent[]> => {
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

  const saveMetrics = async (r: Runner, budget: number | null) => {
    const metrics = metricsOf(r.events, budget);
    await conversations.update(r.userId, r.conversationId, (c): Result<ConversationRecord, never> => ok({ ...c, metrics, updated_at: now() }));
  };

  const fail = async (r: Runner, code: ConversationErrorCode, message: string) => {
    r.handledUpTo = r.lastId;
    await append(r, [{ kind: 'error', source: 'environment', timestamp: now(), code, message, fatal: true }]);
    await setStatus(r, 'fail', message);
  };

  const closeShell = async (r: Runner) => {
    const pending = r.shell;
    r.shell = null;
    if (!pending) return;
    const shell = await pending;
    if (shell.isOk()) await shell.value.close().catch(() => undefined);
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

  /** One model call and what follows from it. */
  const step = async (r: Runner, record: ConversationRecord, stored: StoredSettings | null, credentials: LlmCredentials, sandboxId: string, workingDir: string): Promise<StepEnd> => {
    await catchUp(r);
    if (r.abort.signal.aborted) return 'stop';

    const verdict = detectStuck(r.events);
    if (verdict.kind === 'stuck') {
      await append(r, [{ kind: 'error', source: 'environment', timestamp: now(), code: 'stuck', message: `The agent is stuck: ${verdict.reason}. Send a message to give it new directions.`, fatal: true }]);
      await setStatus(r, 'stuck', verdict.reason);
      return 'stop';
    }
    if (verdict.kind === 'nudge') {
      await append(r, [{ kind: 'message', source: 'environment', timestamp: now(), text: verdict.message, image_urls: [] }]);
    }

    const since = lastUserMessageIndex(r.events);
    const iterations = r.events.slice(since + 1).filter((e) => e.kind === 'llm_call').length;
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
            {
              kind: 'error',
              source: 'environment',
              timestamp: now(),
              code: 'budget_unenforceable',
              message: `max_budget_per_task is ${budget} USD, but the price of ${credentials.model} is unknown, so the budget cannot be enforced. Tokens are still counted.`,
              fatal: false,
            },
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

    const messages = [
      {
        role: 'system' as const,
        content: systemPrompt({
          workingDir,
          instructions: record.launch.conversation_instructions,
          startedAt: record.created_at,
          repository: record.workspace ? { name: record.workspace.repository, branch: record.workspace.branch, guidance: record.workspace.guidance } : null,
        }),
      },
      ...projectMessages(r.events, record.workspace?.guidance.knowledge ?? []),
    ];
    const seenUpTo = r.lastId;
    r.handledUpTo = seenUpTo;
    const response = await llm.complete({ credentials, messages, tools: toolset.definitions, signal: r.abort.signal });
    if (response.isErr()) {
      if (response.error.code === 'cancelled' || r.abort.signal.aborted) return 'stop';
      await fail(r, errorCodeOf(response.error), `The model call failed (${response.error.code}${response.error.status ? `, HTTP ${response.error.status}` : ''}): ${response.error.message}`);
      return 'stop';
    }
    const answer = response.value;
    const responseId = answer.id ?? `resp-${seenUpTo}-${r.events.length}`;
    const drafts: ConversationEventDraft[] = [
      {
        kind: 'llm_call',
        source: 'environment',
        timestamp: now(),
        response_id: responseId,
        model: answer.model,
        prompt_tokens: answer.usage.prompt_tokens,
        completion_tokens: answer.usage.completion_tokens,
        cached_prompt_tokens: answer.usage.cached_prompt_tokens,
        cost_usd: answer.usage.cost_usd,
        latency_ms: Math.round(answer.latency_ms),
        attempts: answer.attempts,
      },
    ];
    const usedIds = new Set<string>();
    for (const [i, call] of answer.tool_calls.entries()) {
      const parsed = parseToolArguments(call.arguments);
      // Tool call ids must be unique in the history; some servers reuse or omit them.
      let id = call.id || `call_${seenUpTo}_${i}`;
      if (usedIds.has(id) || r.events.some((e) => e.kind === 'action' && e.tool_call_id === id)) id = `${id}_${seenUpTo}_${i}`;
      usedIds.add(id);
      call.id = id;
      drafts.push({
        kind: 'action',
        source: 'agent',
        timestamp: now(),
        tool_call_id: id,
        tool_name: call.name,
        arguments: parsed.value,
        raw_arguments: call.arguments,
        thought: i === 0 ? (answer.content?.trim() || null) : null,
        response_id: responseId,
      });
    }
    if (answer.tool_calls.length === 0 && answer.content?.trim()) {
      drafts.push({ kind: 'message', source: 'agent', timestamp: now(), text: answer.content, image_urls: [] });
    }
    const appended = await append(r, drafts);
    await saveMetrics(r, budget);
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

    const actions = appended.filter((e): e is ActionEvent => e.kind === 'action');
    const outcome = await runActions(r, actions, answer.tool_calls, sandboxId, toolContext(r, sandboxId, workingDir));
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
      const outcome = await runActions(r, actions, [{ id, name: step.tool_name, arguments: raw }], sandboxId, context);
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

  /** One run: from "there is work" to finished, error, stuck or paused. */
  const runOnce = async (r: Runner): Promise<void> => {
    const found = await conversations.get(r.userId, r.conversationId);
    if (found.isErr()) throw new Error(`could not load the conversation: ${found.error.message}`);
    const record = found.value;
    if (!record || record.status !== 'RUNNING' || !record.sandbox_id) return;
    await catchUp(r);
    const wasRunning = record.execution_status === 'running' || record.execution_status === 'paused';
    if (!wasRunning && !hasUnseenMessage(r)) return;

    const sandboxId = record.sandbox_id;
    const live = await sandboxes.liveRecords(r.userId, [sandboxId]);
    const box = live.isOk() ? live.value.get(sandboxId) : undefined;
    if (!box || box.status !== 'RUNNING') {
      // It runs again when the conversation is started and its sandbox is up.
      await setStatus(r, 'pause', `the sandbox is ${box ? box.status : 'gone'}`);
      return;
    }
    const stored = await settings.loadWithSecrets(r.userId);
    const credentials = credentialsOf(record, stored.isOk() ? stored.value : null);
    await setStatus(r, 'run', hasUnseenMessage(r) ? 'a message from the user' : 'resumed');
    // The replay works where the model would (a repository's clone, when there is one).
    const replayDir = record.workspace?.repository_dir ?? box.spec.working_dir;
    if (record.launch.replay_json && (await replay(r, record.launch.replay_json, credentials, sandboxId, replayDir)) === 'stop') return;
    if (!credentials) {
      await fail(r, 'llm_not_configured', 'No model is configured: store llm_model (and llm_api_key) in the settings, then send a message.');
      return;
    }
    const storedSettings = stored.isOk() ? stored.value : null;
    while (!r.abort.signal.aborted) {
      // With a repository, the agent works in its clone.
      const end = await step(r, record, storedSettings, credentials, sandboxId, record.workspace?.repository_dir ?? box.spec.working_dir);
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
    appendUserMessage: (userId, conversationId, message) =>
      log
        .append(userId, conversationId, [{ kind: 'message', source: 'user', timestamp: now(), text: message.text, image_urls: [...message.image_urls] }])
        .map((events) => events[0] as MessageEvent),

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
      await Promise.all([...runners.values()].map((r) => closeShell(r)));
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
      await closeShell(r);
      await setStatus(r, 'pause', reason).catch((error: unknown) => logger.warn({ conversationId, err: String(error) }, 'could not record the pause'));
    },

    forget: async (userId, conversationId) => {
      const key = keyOf(userId, conversationId);
      const r = runners.get(key);
      if (!r) return;
      r.abort.abort();
      await r.loop;
      await closeShell(r);
      runners.delete(key);
    },

    recover: () =>
      conversations
        .listByExecutionStatus(['running'])
        .andThen((records) =>
          ResultAsync.fromPromise(
            (async () => {
              let interrupted = 0;
              for (const record of records) {
                const r = runnerFor(record.user_id, record.id);
                if (r.loop) continue;
                await catchUp(r);
                const answered = new Set(r.events.flatMap((e) => (e.kind === 'observation' ? [e.tool_call_id] : [])));
                const open = r.events.filter((e): e is ActionEvent => e.kind === 'action' && !answered.has(e.tool_call_id));
                if (open.length > 0) {
                  interrupted += open.length;
                  await append(r, [
                    ...open.map((a) =>
                      interruptedObservation(a, 'Interrupted: the service restarted while this call was running; it may or may not have completed. Check its effects before repeating it.'),
                    ),
                    {
                      kind: 'error',
                      source: 'environment',
                      timestamp: now(),
                      code: 'restart_interrupted',
                      message: `The service restarted while ${open.length} tool call(s) ran; they are recorded as interrupted and the agent goes on.`,
                      fatal: false,
                    },
                  ]);
                }
                engine.wake(record.user_id, record.id);
              }
              return { resumed: records.length, interrupted_calls: interrupted };
            })(),
            (error): DomainError => storeUnavailable('resume running conversations', error),
          ),
        ),

    activeLoops: () => [...runners.values()].filter((r) => r.loop !== null).length,
  };
  return engine;
}
